package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simpleq/simpleqd/client"
)

// maxReplayIDs is the API's limit on ids per replay call; longer lists are
// sent in several calls.
const maxReplayIDs = 1000

func flagGiven(fs *pflag.FlagSet, name string) bool { return fs.Changed(name) }

func publishCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	payload := fs.String("payload", "", "the job's payload: a JSON object (default {})")
	payloadFile := fs.String("payload-file", "", "read the payload from FILE (- for stdin)")
	key := fs.String("idempotency-key", "", "publish at most once per key on this queue")
	delay := fs.String("delay", "", "seconds before the first delivery (0-86400, fractions allowed)")
	priority := fs.Int("priority", 0, "0-9: due jobs go highest priority first (simpleqd)")
	replaceKey := fs.String("replace-key", "", "replace the payload of this key's job while it was never delivered (simpleqd)")
	flowKey := fs.String("flow-key", "", "the job's lane: its own limits, hold and probe inside the queue (simpleqd, docs/flow-keys.md)")
	return func(ctx context.Context, c *call) error {
		var raw []byte
		switch {
		case flagGiven(fs, "payload") && flagGiven(fs, "payload-file"):
			return usagef("give --payload or --payload-file, not both")
		case flagGiven(fs, "payload-file"):
			var err error
			if *payloadFile == "-" {
				raw, err = io.ReadAll(c.env.Stdin)
			} else {
				raw, err = os.ReadFile(*payloadFile)
			}
			if err != nil {
				return usagef("--payload-file: %v", err)
			}
		case flagGiven(fs, "payload"):
			raw = []byte(*payload)
		default:
			raw = []byte("{}")
		}
		raw = bytes.TrimSpace(raw)
		if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
			return usagef("the payload must be a JSON object, like {\"to\":\"a@b.com\"}")
		}
		// The payload's bytes are sent as given, not decoded and re-encoded,
		// so key order and big numbers reach the webhook unchanged.
		var body bytes.Buffer
		body.WriteString(`{"payload":`)
		body.Write(raw)
		if flagGiven(fs, "idempotency-key") {
			k, _ := json.Marshal(*key)
			body.WriteString(`,"idempotencyKey":`)
			body.Write(k)
		}
		if flagGiven(fs, "delay") {
			d, err := strconv.ParseFloat(*delay, 64)
			if err != nil || math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
				return usagef("--delay must be a number of seconds ≥ 0 (got %q)", *delay)
			}
			body.WriteString(`,"delay":` + strconv.FormatFloat(d, 'f', -1, 64))
		}
		if flagGiven(fs, "priority") {
			if *priority < 0 || *priority > 9 {
				return usagef("--priority must be 0-9 (got %d)", *priority)
			}
			body.WriteString(`,"priority":` + strconv.Itoa(*priority))
		}
		if flagGiven(fs, "replace-key") {
			k, _ := json.Marshal(*replaceKey)
			body.WriteString(`,"replaceKey":`)
			body.Write(k)
		}
		if flagGiven(fs, "flow-key") {
			if *flowKey == "" || len(*flowKey) > 255 {
				return usagef("--flow-key must be 1-255 bytes (got %d)", len(*flowKey))
			}
			k, _ := json.Marshal(*flowKey)
			body.WriteString(`,"flowKey":`)
			body.Write(k)
		}
		body.WriteString("}")

		queue := c.args[0]
		var out publishedJSON
		rawOut, status, err := c.api.post(ctx, "/v1/queues/"+url.PathEscape(queue)+"/jobs", body.Bytes(), &out)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(rawOut)
		}
		if status == 201 {
			fmt.Fprintf(c.env.Stdout, "published %s to %s (%s)\n", out.ID, queue, out.Status)
		} else if out.Replaced {
			fmt.Fprintf(c.env.Stdout, "replaced the payload of %s (%s, never delivered); nothing new stored\n", out.ID, out.Status)
		} else {
			fmt.Fprintf(c.env.Stdout, "%s already published with this idempotency key (%s); nothing new stored\n", out.ID, out.Status)
		}
		return nil
	}
}

func jobCmd(*pflag.FlagSet) func(context.Context, *call) error {
	return func(ctx context.Context, c *call) error {
		var j client.Job
		raw, err := c.api.get(ctx, "/v1/jobs/"+url.PathEscape(c.args[0]), nil, &j)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderJob(c.env.Stdout, j)
	}
}

func queuesCmd(*pflag.FlagSet) func(context.Context, *call) error {
	return func(ctx context.Context, c *call) error {
		var qs queuesJSON
		raw, err := c.api.get(ctx, "/v1/queues", nil, &qs)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderQueues(c.env.Stdout, qs.Queues, c.env.Now())
	}
}

func queueCmd(*pflag.FlagSet) func(context.Context, *call) error {
	return func(ctx context.Context, c *call) error {
		var q client.Queue
		raw, err := c.api.get(ctx, "/v1/queues/"+url.PathEscape(c.args[0]), nil, &q)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderQueue(c.env.Stdout, q, c.env.Now())
	}
}

func deadCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	limit := fs.Int("limit", 50, "jobs per page (1-1000)")
	cursor := fs.String("cursor", "", "the cursor a previous page printed, for the next page")
	return func(ctx context.Context, c *call) error {
		if *limit < 1 || *limit > 1000 {
			return usagef("--limit must be between 1 and 1000 (got %d)", *limit)
		}
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		if *cursor != "" {
			q.Set("cursor", *cursor)
		}
		queue := c.args[0]
		var page deadPageJSON
		raw, err := c.api.get(ctx, "/v1/queues/"+url.PathEscape(queue)+"/dead", q, &page)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderDead(c.env.Stdout, queue, page, *limit)
	}
}

func replayCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	all := fs.Bool("all", false, "replay every dead job of the queue")
	return func(ctx context.Context, c *call) error {
		queue, ids := c.args[0], c.args[1:]
		switch {
		case *all && len(ids) > 0:
			return usagef("give --all or job ids, not both")
		case !*all && len(ids) == 0:
			return usagef("give --all or at least one job id")
		}
		path := "/v1/queues/" + url.PathEscape(queue) + "/dead/replay"
		if *all {
			var out replayedJSON
			raw, _, err := c.api.post(ctx, path, []byte(`{"all":true}`), &out)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(raw)
			}
			fmt.Fprintf(c.env.Stdout, "replayed %d dead job(s) of %s\n", out.Replayed, queue)
			return nil
		}
		// The API takes at most maxReplayIDs ids per call; a longer list is
		// sent in chunks and the counts are added up.
		total := 0
		var raw []byte
		for start := 0; start < len(ids); start += maxReplayIDs {
			chunk := ids[start:min(start+maxReplayIDs, len(ids))]
			body, _ := json.Marshal(map[string][]string{"ids": chunk})
			var out replayedJSON
			r, _, err := c.api.post(ctx, path, body, &out)
			if err != nil {
				if total > 0 {
					fmt.Fprintf(c.env.Stderr, "simpleqd replay: %d job(s) were replayed before this error\n", total)
				}
				return err
			}
			total += out.Replayed
			raw = r
		}
		if c.json {
			if len(ids) > maxReplayIDs {
				raw, _ = json.Marshal(replayedJSON{Replayed: total})
			}
			return c.printRaw(raw)
		}
		fmt.Fprintf(c.env.Stdout, "replayed %d of %d job(s) of %s", total, len(ids), queue)
		if skipped := len(ids) - total; skipped > 0 {
			fmt.Fprintf(c.env.Stdout, " (%d skipped: not dead jobs of this queue)", skipped)
		}
		fmt.Fprintln(c.env.Stdout)
		return nil
	}
}

func pauseCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	reason := fs.String("reason", "", "why, shown in the queue's hold state (≤ 500 characters)")
	return func(ctx context.Context, c *call) error {
		body := []byte("{}")
		if *reason != "" {
			body, _ = json.Marshal(map[string]string{"reason": *reason})
		}
		return c.control(ctx, "pause", body)
	}
}

func resumeCmd(*pflag.FlagSet) func(context.Context, *call) error {
	return func(ctx context.Context, c *call) error {
		return c.control(ctx, "resume", []byte("{}"))
	}
}

// control posts pause or resume and prints the queue's new hold state.
func (c *call) control(ctx context.Context, action string, body []byte) error {
	queue := c.args[0]
	var q client.Queue
	raw, _, err := c.api.post(ctx, "/v1/queues/"+url.PathEscape(queue)+"/"+action, body, &q)
	if err != nil {
		return err
	}
	if c.json {
		return c.printRaw(raw)
	}
	verb := map[string]string{"pause": "paused", "resume": "resumed"}[action]
	fmt.Fprintf(c.env.Stdout, "%s %s: now %s\n", verb, queue, holdText(q, c.env.Now()))
	return nil
}

// printRaw writes the API's JSON as it came, ending in exactly one newline.
func (c *call) printRaw(raw []byte) error {
	s := strings.TrimRight(string(raw), "\n")
	_, err := fmt.Fprintln(c.env.Stdout, s)
	return err
}
