package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
)

// cancelUsage is `simpleqd cancel`'s usage line: one job by id, or a
// queue's jobs in bulk (control.md §1).
const cancelUsage = "cancel (ID | --queue Q (--status S[,S] | --created-before T | --all)) [--reason R]"

// bulkCancelledJSON is the bulk cancel answer.
type bulkCancelledJSON struct {
	Cancelled int  `json:"cancelled"`
	Done      bool `json:"done"`
}

// cancelCmd cancels one job (POST /v1/jobs/{id}/cancel) or, with --queue,
// a queue's jobs in bulk, calling again while the API answers done: false.
func cancelCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	reason := fs.String("reason", "", "why, written into lastError as \"cancelled: <reason>\" (≤ 500 characters)")
	queue := fs.String("queue", "", "cancel this queue's jobs in bulk (with --status, --created-before or --all)")
	status := fs.StringSlice("status", nil, "bulk: only jobs in these statuses (pending, processing, awaiting_ack)")
	before := fs.String("created-before", "", "bulk: only jobs created before this time (ISO-8601)")
	all := fs.Bool("all", false, "bulk: every job of the queue that is not completed or dead")
	return func(ctx context.Context, c *call) error {
		if *queue == "" {
			if len(c.args) != 1 {
				return usagef("give one job ID, or --queue Q with a filter")
			}
			if len(*status) > 0 || *before != "" || *all {
				return usagef("--status, --created-before and --all need --queue")
			}
			body := []byte("{}")
			if *reason != "" {
				body, _ = json.Marshal(map[string]string{"reason": *reason})
			}
			var job struct {
				ID         string  `json:"id"`
				Status     string  `json:"status"`
				DeadReason *string `json:"deadReason"`
			}
			raw, _, err := c.api.post(ctx, "/v1/jobs/"+url.PathEscape(c.args[0])+"/cancel", body, &job)
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(raw)
			}
			fmt.Fprintf(c.env.Stdout, "cancelled %s: now %s (cancelled)\n", job.ID, job.Status)
			return nil
		}
		if len(c.args) > 0 {
			return usagef("give a job ID or --queue, not both")
		}
		req := map[string]any{}
		if len(*status) > 0 {
			req["status"] = *status
		}
		if *before != "" {
			req["createdBefore"] = *before
		}
		if *all {
			req["all"] = true
		}
		if len(req) == 0 {
			return usagef("--queue needs --status, --created-before or --all")
		}
		if *reason != "" {
			req["reason"] = *reason
		}
		body, _ := json.Marshal(req)
		total, done := 0, false
		var raw []byte
		for round := 0; round < 10000; round++ { // each call works ~9 s
			var out bulkCancelledJSON
			r, _, err := c.api.post(ctx, "/v1/queues/"+url.PathEscape(*queue)+"/cancel", body, &out)
			if err != nil {
				if total > 0 {
					fmt.Fprintf(c.env.Stderr, "simpleqd cancel: %d job(s) were cancelled before this error\n", total)
				}
				return err
			}
			total += out.Cancelled
			raw, done = r, out.Done
			if out.Done {
				break
			}
			if !c.json {
				fmt.Fprintf(c.env.Stderr, "cancelled %d so far; going on…\n", total)
			}
		}
		if c.json {
			raw, _ = json.Marshal(bulkCancelledJSON{Cancelled: total, Done: done})
			return c.printRaw(raw)
		}
		what := "job(s)"
		if len(*status) > 0 {
			what = strings.Join(*status, "/") + " job(s)"
		}
		fmt.Fprintf(c.env.Stdout, "cancelled %d %s of %s\n", total, what, *queue)
		return nil
	}
}
