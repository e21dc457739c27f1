package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The lanes of a queue (flow keys, keys.md §5): "simpleqd keys ACTION
// QUEUE [KEY]", one API call per action, like "simpleqd schedule".

// keyJSON is the API's Key.
type keyJSON struct {
	FlowKey string `json:"flowKey"`
	Counts  struct {
		Pending     int64 `json:"pending"`
		Processing  int64 `json:"processing"`
		AwaitingAck int64 `json:"awaitingAck"`
	} `json:"counts"`
	Hold struct {
		State      string     `json:"state"`
		Until      *time.Time `json:"until"`
		ProbeJobID *string    `json:"probeJobId"`
		Reason     *string    `json:"reason"`
	} `json:"hold"`
	Concurrency  int `json:"concurrency"`
	RateLimitMax int `json:"rateLimitMax"`
	Weight       int `json:"weight"`
}

type keysPageJSON struct {
	Keys       []keyJSON `json:"keys"`
	NextCursor *string   `json:"nextCursor"`
}

// keysUsage is the keys command's usage line.
const keysUsage = "keys (list QUEUE [--state held|probing|active] [--limit N] [--cursor C] | get QUEUE KEY" +
	" | set QUEUE KEY [--concurrency N] [--rate-limit-max N] [--weight N] | delete QUEUE KEY | resume QUEUE KEY)"

// keyStates are the states "keys list --state" takes.
var keyStates = []string{"held", "probing", "active"}

// keysCmd is "simpleqd keys ACTION QUEUE [KEY]".
func keysCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	state := fs.String("state", "", "list: only held, probing or active lanes (default: every lane)")
	limit := fs.Int("limit", 100, "list: lanes per page (1-1000)")
	cursor := fs.String("cursor", "", "list: the cursor a previous page printed, for the next page")
	conc := fs.Int("concurrency", 0, "set: the lane's cap on deliveries in flight or awaiting ack (0: none)")
	rate := fs.Int("rate-limit-max", 0, "set: the lane's deliveries started per the queue's flowKeys.rateLimitWindow (0: none)")
	weight := fs.Int("weight", 1, "set: the lane's share in the round-robin, 1-100")
	listFlags := []string{"state", "limit", "cursor"}
	setFlags := []string{"concurrency", "rate-limit-max", "weight"}
	return func(ctx context.Context, c *call) error {
		action, rest := c.args[0], c.args[1:]
		want := map[string]int{"list": 1, "get": 2, "set": 2, "delete": 2, "resume": 2}
		n, ok := want[action]
		switch {
		case !ok:
			return usagef("unknown action %q (list, get, set, delete or resume)", action)
		case len(rest) != n && n == 1:
			return usagef("list needs one queue")
		case len(rest) != n:
			return usagef("%s needs a queue and a flow key", action)
		}
		for _, f := range listFlags {
			if action != "list" && flagGiven(fs, f) {
				return usagef("--%s is for list only", f)
			}
		}
		for _, f := range setFlags {
			if action != "set" && flagGiven(fs, f) {
				return usagef("--%s is for set only", f)
			}
		}
		queue := url.PathEscape(rest[0])
		if action == "list" {
			return c.listKeys(ctx, rest[0], *state, *limit, *cursor)
		}
		fk := rest[1]
		if fk == "" || len(fk) > 255 {
			return usagef("a flow key is 1-255 bytes (got %d)", len(fk))
		}
		path := "/v1/queues/" + queue + "/keys/" + url.PathEscape(fk)
		var k keyJSON
		var raw []byte
		var err error
		switch action {
		case "get":
			raw, err = c.api.get(ctx, path, nil, &k)
		case "set":
			// PUT replaces the whole override: what is not given goes
			// back to the queue's flowKeys settings.
			body := map[string]int{}
			for _, m := range []struct {
				flag, member string
				v            *int
			}{{"concurrency", "concurrency", conc}, {"rate-limit-max", "rateLimitMax", rate}, {"weight", "weight", weight}} {
				if flagGiven(fs, m.flag) {
					body[m.member] = *m.v
				}
			}
			switch {
			case len(body) == 0:
				return usagef("set needs --concurrency, --rate-limit-max or --weight (delete removes the override)")
			case flagGiven(fs, "concurrency") && *conc < 0:
				return usagef("--concurrency must be ≥ 0 (got %d)", *conc)
			case flagGiven(fs, "rate-limit-max") && *rate < 0:
				return usagef("--rate-limit-max must be ≥ 0 (got %d)", *rate)
			case flagGiven(fs, "weight") && (*weight < 1 || *weight > 100):
				return usagef("--weight must be 1-100 (got %d)", *weight)
			}
			b, _ := json.Marshal(body)
			raw, _, err = c.api.do(ctx, http.MethodPut, path, nil, b)
			if err == nil {
				err = decodeInto(raw, &k)
			}
		case "delete":
			if _, _, err := c.api.do(ctx, http.MethodDelete, path, nil, []byte("{}")); err != nil {
				return err
			}
			if !c.json {
				fmt.Fprintf(c.env.Stdout, "removed the override of lane %s on %s: it follows the queue's flowKeys settings\n", fk, rest[0])
			}
			return nil
		case "resume":
			raw, _, err = c.api.post(ctx, path+"/resume", []byte("{}"), &k)
		}
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		switch action {
		case "set":
			fmt.Fprintf(c.env.Stdout, "set the override of lane %s on %s (values not given follow the queue's settings)\n", fk, rest[0])
		case "resume":
			fmt.Fprintf(c.env.Stdout, "resumed lane %s on %s: now %s\n", fk, rest[0], laneState(k, c.env.Now()))
			return nil
		}
		return renderKey(c.env.Stdout, rest[0], k, c.env.Now())
	}
}

// listKeys is "keys list QUEUE": one page of lanes.
func (c *call) listKeys(ctx context.Context, queue, state string, limit int, cursor string) error {
	if state != "" && !contains(keyStates, state) {
		return usagef("--state must be one of %s (got %q)", strings.Join(keyStates, ", "), state)
	}
	if limit < 1 || limit > 1000 {
		return usagef("--limit must be between 1 and 1000 (got %d)", limit)
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if state != "" {
		q.Set("state", state)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var page keysPageJSON
	raw, err := c.api.get(ctx, "/v1/queues/"+url.PathEscape(queue)+"/keys", q, &page)
	if err != nil {
		return err
	}
	if c.json {
		return c.printRaw(raw)
	}
	return renderKeys(c.env.Stdout, queue, state, page, limit, c.env.Now())
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// laneState summarises a lane's hold in one phrase, as holdText does a
// queue's.
func laneState(k keyJSON, now time.Time) string {
	switch k.Hold.State {
	case "held":
		s := "held"
		if k.Hold.Until != nil {
			s += " until " + stamp(k.Hold.Until) + " (" + relative(*k.Hold.Until, now) + ")"
		}
		return s
	case "probing":
		if k.Hold.ProbeJobID != nil {
			return "probing with " + *k.Hold.ProbeJobID
		}
		return "probing (the lane's next ready job is the probe)"
	case "":
		return "open"
	}
	return k.Hold.State
}

// limitText shows a lane's cap (0: none).
func limitText(n int) string {
	if n <= 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func renderKeys(w io.Writer, queue, state string, page keysPageJSON, limit int, now time.Time) error {
	if len(page.Keys) == 0 {
		what := "lanes"
		if state != "" {
			what = state + " lanes"
		}
		fmt.Fprintf(w, "no %s in %s on this page\n", what, queue)
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "FLOW KEY\tPENDING\tPROCESSING\tAWAITING ACK\tCONCURRENCY\tRATE LIMIT\tWEIGHT\tSTATE")
		for _, k := range page.Keys {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\n", oneLine(k.FlowKey, 60), k.Counts.Pending, k.Counts.Processing,
				k.Counts.AwaitingAck, limitText(k.Concurrency), limitText(k.RateLimitMax), k.Weight, laneState(k, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if page.NextCursor != nil {
		more := fmt.Sprintf("simpleqd keys list %s", queue)
		if state != "" {
			more += " --state " + state
		}
		_, err := fmt.Fprintf(w, "\nmore: %s --limit %d --cursor %s\n", more, limit, *page.NextCursor)
		return err
	}
	return nil
}

func renderKey(w io.Writer, queue string, k keyJSON, now time.Time) error {
	tw := newTable(w)
	rows := [][2]string{
		{"flowKey", k.FlowKey},
		{"queue", queue},
		{"state", laneState(k, now)},
	}
	if k.Hold.Reason != nil {
		rows = append(rows, [2]string{"hold reason", oneLine(*k.Hold.Reason, 200)})
	}
	rows = append(rows,
		[2]string{"pending", strconv.FormatInt(k.Counts.Pending, 10)},
		[2]string{"processing", strconv.FormatInt(k.Counts.Processing, 10)},
		[2]string{"awaiting ack", strconv.FormatInt(k.Counts.AwaitingAck, 10)},
		[2]string{"concurrency", limitText(k.Concurrency)},
		[2]string{"rateLimitMax", limitText(k.RateLimitMax)},
		[2]string{"weight", strconv.Itoa(k.Weight)},
	)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}
