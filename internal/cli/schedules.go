package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
)

// scheduleJSON is the API's Schedule (runtime.md §4).
type scheduleJSON struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Cron      string          `json:"cron"`
	Timezone  string          `json:"timezone"`
	Payload   json.RawMessage `json:"payload"`
	FlowKey   *string         `json:"flowKey"`
	Priority  int             `json:"priority"`
	Paused    bool            `json:"paused"`
	NextRunAt time.Time       `json:"nextRunAt"`
	LastRunAt *time.Time      `json:"lastRunAt"`
	LastJobID *string         `json:"lastJobId"`
	Source    string          `json:"source"`
}

// scheduleUsage is the schedule command's usage line.
const scheduleUsage = "schedule (create QUEUE --cron C [--timezone TZ] [--payload JSON | --payload-file FILE] [--id ID] [--flow-key K] [--priority N]" +
	" | list [QUEUE] | get ID | delete ID | pause ID | resume ID)"

// scheduleCmd is "simpleqd schedule ACTION ...": the schedules of
// /v1/schedules, one action per API call.
func scheduleCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	cron := fs.String("cron", "", "create: five fields, six with seconds first, or @every <duration>")
	tz := fs.String("timezone", "", "create: an IANA time zone (default UTC)")
	payload := fs.String("payload", "", "create: every job's payload, a JSON object (default {})")
	payloadFile := fs.String("payload-file", "", "create: read the payload from FILE (- for stdin)")
	id := fs.String("id", "", "create: the schedule's id (default: a new one); an existing API schedule's id replaces it")
	flowKey := fs.String("flow-key", "", "create: stored with the schedule, for the jobs once flow keys exist")
	priority := fs.Int("priority", 0, "create: 0-9, stored with the schedule")
	return func(ctx context.Context, c *call) error {
		action, rest := c.args[0], c.args[1:]
		want := map[string]int{"create": 1, "get": 1, "delete": 1, "pause": 1, "resume": 1}
		if action == "list" {
			if len(rest) > 1 {
				return usagef("list takes at most one queue")
			}
		} else if n, ok := want[action]; !ok {
			return usagef("unknown action %q (create, list, get, delete, pause or resume)", action)
		} else if len(rest) != n {
			return usagef("%s needs one %s", action, map[bool]string{true: "queue", false: "schedule id"}[action == "create"])
		}
		for _, f := range []string{"cron", "timezone", "payload", "payload-file", "id", "flow-key", "priority"} {
			if action != "create" && flagGiven(fs, f) {
				return usagef("--%s is for create only", f)
			}
		}
		switch action {
		case "create":
			if *cron == "" {
				return usagef("create needs --cron")
			}
			raw, err := readPayload(fs, *payload, *payloadFile, c.env.Stdin)
			if err != nil {
				return err
			}
			var body bytes.Buffer
			head := map[string]any{"queue": rest[0], "cron": *cron}
			if *tz != "" {
				head["timezone"] = *tz
			}
			if *id != "" {
				head["id"] = *id
			}
			if *flowKey != "" {
				head["flowKey"] = *flowKey
			}
			if flagGiven(fs, "priority") {
				head["priority"] = *priority
			}
			h, _ := json.Marshal(head)
			// The payload's bytes go as given: key order and big numbers survive.
			body.Write(h[:len(h)-1])
			body.WriteString(`,"payload":`)
			body.Write(raw)
			body.WriteByte('}')
			var sc scheduleJSON
			out, status, err := c.api.post(ctx, "/v1/schedules", body.Bytes(), &sc)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(out)
			}
			verb := "created"
			if status == http.StatusOK {
				verb = "replaced"
			}
			fmt.Fprintf(c.env.Stdout, "%s schedule %s on %s: next run %s\n", verb, sc.ID, sc.Queue, stamp(&sc.NextRunAt))
			return nil
		case "list":
			var q url.Values
			if len(rest) == 1 {
				q = url.Values{"queue": {rest[0]}}
			}
			var list struct {
				Schedules []scheduleJSON `json:"schedules"`
			}
			out, err := c.api.get(ctx, "/v1/schedules", q, &list)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(out)
			}
			return renderSchedules(c.env.Stdout, list.Schedules)
		case "get":
			var sc scheduleJSON
			out, err := c.api.get(ctx, "/v1/schedules/"+url.PathEscape(rest[0]), nil, &sc)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(out)
			}
			return renderSchedules(c.env.Stdout, []scheduleJSON{sc})
		case "delete":
			if _, _, err := c.api.do(ctx, http.MethodDelete, "/v1/schedules/"+url.PathEscape(rest[0]), nil, []byte("{}")); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.env.Stdout, "deleted schedule %s\n", rest[0])
			}
			return nil
		default: // pause, resume
			var sc scheduleJSON
			out, _, err := c.api.post(ctx, "/v1/schedules/"+url.PathEscape(rest[0])+"/"+action, []byte("{}"), &sc)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(out)
			}
			state := "running, next run " + stamp(&sc.NextRunAt)
			if sc.Paused {
				state = "paused"
			}
			fmt.Fprintf(c.env.Stdout, "%sd schedule %s: now %s\n", action, sc.ID, state)
			return nil
		}
	}
}

// readPayload reads --payload or --payload-file (default {}), which must be
// a JSON object.
func readPayload(fs *pflag.FlagSet, payload, file string, stdin io.Reader) ([]byte, error) {
	var raw []byte
	switch {
	case flagGiven(fs, "payload") && flagGiven(fs, "payload-file"):
		return nil, usagef("give --payload or --payload-file, not both")
	case flagGiven(fs, "payload-file"):
		var err error
		if file == "-" {
			raw, err = io.ReadAll(stdin)
		} else {
			raw, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, usagef("--payload-file: %v", err)
		}
	case flagGiven(fs, "payload"):
		raw = []byte(payload)
	default:
		raw = []byte("{}")
	}
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
		return nil, usagef("the payload must be a JSON object, like {\"to\":\"a@b.com\"}")
	}
	return raw, nil
}

// renderSchedules prints one line per schedule.
func renderSchedules(w io.Writer, list []scheduleJSON) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tQUEUE\tCRON\tTIMEZONE\tSTATE\tNEXT RUN\tLAST RUN\tLAST JOB\tSOURCE")
	for _, sc := range list {
		state := "running"
		if sc.Paused {
			state = "paused"
		}
		job := "-"
		if sc.LastJobID != nil {
			job = *sc.LastJobID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.ID, sc.Queue, sc.Cron, sc.Timezone, state,
			stamp(&sc.NextRunAt), stamp(sc.LastRunAt), job, sc.Source)
	}
	return tw.Flush()
}
