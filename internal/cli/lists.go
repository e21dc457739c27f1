package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/simpleq/simpleqd/client"
)

// The job list and statistics commands (GET /v1/queues/{queue}/jobs and
// /stats). The queue is the positional argument, as in every other command,
// or --queue.

// listStatuses are the statuses GET .../jobs lists.
var listStatuses = []string{"pending", "processing", "awaiting_ack", "completed", "dead"}

type jobsPageJSON struct {
	Jobs       []client.Job `json:"jobs"`
	NextCursor *string      `json:"nextCursor"`
}

// statsJSON is the part of GET .../stats the table shows.
type statsJSON struct {
	Queue   string            `json:"queue"`
	Since   string            `json:"since"`
	Until   string            `json:"until"`
	Totals  statsCountsJSON   `json:"totals"`
	Buckets []statsBucketJSON `json:"buckets"`
	Holds   []struct {
		From  string `json:"from"`
		Until string `json:"until"`
	} `json:"holds"`
}

type statsCountsJSON struct {
	Deliveries struct {
		Success  int64 `json:"success"`
		Failed   int64 `json:"failed"`
		Lost     int64 `json:"lost"`
		Deferred int64 `json:"deferred"`
	} `json:"deliveries"`
	HTTP429     int64   `json:"http429"`
	Started     int64   `json:"started"`
	Probes      int64   `json:"probes"`
	Holds       int64   `json:"holds"`
	Dead        int64   `json:"dead"`
	HeldSeconds float64 `json:"heldSeconds"`
}

type statsBucketJSON struct {
	Start string `json:"start"`
	statsCountsJSON
}

// queueArg is the queue named by the positional argument or --queue (not both).
func queueArg(c *call, flag string) (string, error) {
	switch {
	case len(c.args) == 1 && flag != "" && flag != c.args[0]:
		return "", usagef("give the queue once: as an argument or as --queue")
	case len(c.args) == 1:
		return c.args[0], nil
	case flag != "":
		return flag, nil
	}
	return "", usagef("missing queue (an argument or --queue)")
}

func jobsCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	queue := fs.String("queue", "", "the queue (or give it as the argument)")
	status := fs.String("status", "", "pending | processing | awaiting_ack | completed | dead (required)")
	limit := fs.Int("limit", 100, "jobs per page (1-1000)")
	cursor := fs.String("cursor", "", "the cursor a previous page printed, for the next page")
	return func(ctx context.Context, c *call) error {
		name, err := queueArg(c, *queue)
		if err != nil {
			return err
		}
		ok := false
		for _, s := range listStatuses {
			ok = ok || s == *status
		}
		if !ok {
			return usagef("--status must be one of %s (got %q)", strings.Join(listStatuses, ", "), *status)
		}
		if *limit < 1 || *limit > 1000 {
			return usagef("--limit must be between 1 and 1000 (got %d)", *limit)
		}
		q := url.Values{"status": {*status}, "limit": {strconv.Itoa(*limit)}}
		if *cursor != "" {
			q.Set("cursor", *cursor)
		}
		var page jobsPageJSON
		raw, err := c.api.get(ctx, "/v1/queues/"+url.PathEscape(name)+"/jobs", q, &page)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderJobs(c.env.Stdout, name, *status, page, *limit)
	}
}

func renderJobs(w io.Writer, queue, status string, page jobsPageJSON, limit int) error {
	if len(page.Jobs) == 0 {
		fmt.Fprintf(w, "no %s jobs in %s on this page\n", status, queue)
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "ID\tSTATUS\tPRIORITY\tATTEMPTS\tDEFERS\tCREATED\tSCHEDULED\tLAST ERROR")
		for _, j := range page.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%d\t%s\t%s\t%s\n", j.ID, j.Status, j.Priority, j.Attempts, j.MaxAttempts,
				j.DeferCount, stamp(&j.CreatedAt), stamp(&j.ScheduledFor), oneLine(dash(j.LastError), 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if page.NextCursor != nil {
		// A page can be short (or empty) while more follow: the list skips
		// jobs of other statuses within a bounded scan.
		_, err := fmt.Fprintf(w, "\nmore: simpleqd jobs %s --status %s --limit %d --cursor %s\n", queue, status, limit, *page.NextCursor)
		return err
	}
	return nil
}

func statsCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	queue := fs.String("queue", "", "the queue (or give it as the argument)")
	since := fs.String("since", "", "start, ISO-8601 (default: an hour before --until)")
	until := fs.String("until", "", "end, ISO-8601 (default: now)")
	return func(ctx context.Context, c *call) error {
		name, err := queueArg(c, *queue)
		if err != nil {
			return err
		}
		q := url.Values{}
		if *since != "" {
			q.Set("since", *since)
		}
		if *until != "" {
			q.Set("until", *until)
		}
		var st statsJSON
		raw, err := c.api.get(ctx, "/v1/queues/"+url.PathEscape(name)+"/stats", q, &st)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		return renderStats(c.env.Stdout, st)
	}
}

// renderStats prints the totals and the minutes that saw anything.
func renderStats(w io.Writer, st statsJSON) error {
	t := st.Totals
	fmt.Fprintf(w, "%s from %s to %s (fleet-wide, per minute)\n", st.Queue, st.Since, st.Until)
	fmt.Fprintf(w, "deliveries: %d started, %d succeeded, %d failed, %d lost, %d deferred (%d HTTP 429)\n",
		t.Started, t.Deliveries.Success, t.Deliveries.Failed, t.Deliveries.Lost, t.Deliveries.Deferred, t.HTTP429)
	fmt.Fprintf(w, "holds: %d asked, held %.1fs; probes: %d; dead: %d\n", t.Holds, t.HeldSeconds, t.Probes, t.Dead)
	busy := 0
	tw := newTable(w)
	for _, b := range st.Buckets {
		if b.Started+b.Deliveries.Success+b.Deliveries.Failed+b.Deliveries.Lost+b.Deliveries.Deferred+b.Holds+b.Dead == 0 && b.HeldSeconds == 0 {
			continue
		}
		if busy == 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(tw, "MINUTE\tSTARTED\tSUCCESS\tFAILED\tLOST\tDEFERRED\t429\tHOLDS\tHELD\tPROBES\tDEAD")
		}
		busy++
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%d\t%d\n", b.Start, b.Started, b.Deliveries.Success,
			b.Deliveries.Failed, b.Deliveries.Lost, b.Deliveries.Deferred, b.HTTP429, b.Holds, b.HeldSeconds, b.Probes, b.Dead)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range st.Holds {
		fmt.Fprintf(w, "hold asked: %s to %s\n", h.From, h.Until)
	}
	return nil
}
