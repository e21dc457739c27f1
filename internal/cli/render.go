package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/simpleq/simpleqd/client"
	"github.com/simpleq/simpleqd/internal/wiretime"
)

// payloadPreview bounds how much of a payload "job" prints; --json shows all.
const payloadPreview = 300

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// stamp renders t in the API's time format, so tables print times exactly as
// the API sends them; "-" for an absent time.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return wiretime.Format(*t)
}

// dash shows an absent value.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps table cells on one line and bounded.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return s
}

// relative renders a time as "in 4.2s" / "3s ago" from now.
func relative(t time.Time, now time.Time) string {
	d := t.Sub(now).Round(100 * time.Millisecond)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

// holdText summarises a queue's delivery state in one phrase.
func holdText(q client.Queue, now time.Time) string {
	h := q.Hold
	switch h.State {
	case "held":
		s := "held"
		if strings.HasPrefix(h.Reason, "breaker:") {
			s = "held by breaker"
		}
		if h.Until != nil {
			s += " until " + stamp(h.Until) + " (" + relative(*h.Until, now) + ")"
		}
		return s
	case "probing":
		if h.ProbeJobID != "" {
			return "probing with " + h.ProbeJobID
		}
		return "probing (next ready job is the probe)"
	case "paused":
		if h.Reason != "" {
			return "paused (" + oneLine(h.Reason, 60) + ")"
		}
		return "paused"
	case "":
		return "open"
	default:
		return string(h.State)
	}
}

func rateText(q client.Queue) string {
	if q.RateLimitMax <= 0 {
		return "none"
	}
	return fmt.Sprintf("%d per %s", q.RateLimitMax, q.RateLimitWindow)
}

func renderQueues(w io.Writer, qs []client.Queue, now time.Time) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(w, "no queues configured")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tMODE\tPENDING\tPROCESSING\tAWAITING ACK\tDEAD\tCONCURRENCY\tRATE LIMIT\tSTATE")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", q.Name, q.Mode, q.Counts.Pending, q.Counts.Processing,
			q.Counts.AwaitingAck, q.Counts.Dead, q.Concurrency, rateText(q), holdText(q, now))
	}
	return tw.Flush()
}

func renderQueue(w io.Writer, q client.Queue, now time.Time) error {
	tw := newTable(w)
	rows := [][2]string{
		{"name", q.Name},
		{"state", holdText(q, now)},
	}
	if q.Hold.Reason != "" && q.Hold.State != client.HoldPaused {
		rows = append(rows, [2]string{"hold reason", q.Hold.Reason})
	}
	rows = append(rows,
		[2]string{"mode", string(q.Mode)},
		[2]string{"webhookUrl", q.WebhookURL},
		[2]string{"concurrency", strconv.Itoa(q.Concurrency)},
		[2]string{"rate limit", rateText(q)},
		[2]string{"maxAttempts", strconv.Itoa(q.MaxAttempts)},
		[2]string{"maxDefers", strconv.Itoa(q.MaxDefers)},
		[2]string{"pending", strconv.FormatInt(q.Counts.Pending, 10)},
		[2]string{"processing", strconv.FormatInt(q.Counts.Processing, 10)},
		[2]string{"awaiting ack", strconv.FormatInt(q.Counts.AwaitingAck, 10)},
		[2]string{"dead", strconv.FormatInt(q.Counts.Dead, 10)},
	)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

func renderJob(w io.Writer, j client.Job) error {
	tw := newTable(w)
	payload := string(j.Payload)
	if n := len(payload); n > payloadPreview {
		payload = oneLine(payload, payloadPreview) + fmt.Sprintf(" (%d bytes; --json prints all)", n)
	}
	rows := [][2]string{
		{"id", j.ID},
		{"queue", j.Queue},
		{"status", string(j.Status)},
		{"attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts)},
		{"defers", strconv.Itoa(j.DeferCount)},
		{"idempotencyKey", dash(j.IdempotencyKey)},
		{"priority", strconv.Itoa(j.Priority)},
		{"flowKey", dash(j.FlowKey)},
		{"replaceKey", dash(j.ReplaceKey)},
		{"scheduleId", dash(j.ScheduleID)},
		{"createdAt", stamp(&j.CreatedAt)},
		{"scheduledFor", stamp(&j.ScheduledFor)},
		{"expiresAt", stamp(&j.ExpiresAt)},
		{"completedAt", stamp(j.CompletedAt)},
		{"lastError", oneLine(dash(j.LastError), 200)},
		{"deadReason", dash(j.DeadReason)},
		{"payload", payload},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.History) == 0 {
		_, err := fmt.Fprintln(w, "\nno deliveries yet")
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "ATTEMPT\tSTATUS\tCODE\tPROBE\tRETRY AFTER\tTIME\tDETAIL")
	for _, a := range j.History {
		code := "-"
		if a.WebhookStatusCode != 0 {
			code = strconv.Itoa(a.WebhookStatusCode)
		}
		probe := ""
		if a.Probe {
			probe = "yes"
		}
		ra := "-"
		if a.Status == client.AttemptDeferred {
			ra = a.RetryAfter.String()
			if a.Scope != "" {
				ra += " (" + string(a.Scope) + ")"
			}
		}
		detail := dash(a.Error)
		if a.Reason != "" {
			detail = a.Reason
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.Status, code, probe, ra, stamp(&a.Timestamp), oneLine(detail, 80))
	}
	return tw.Flush()
}

func renderDead(w io.Writer, queue string, page deadPageJSON, limit int) error {
	if len(page.Jobs) == 0 {
		_, err := fmt.Fprintf(w, "no dead jobs in %s\n", queue)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tREASON\tATTEMPTS\tDEFERS\tCREATED\tDIED\tLAST ERROR")
	for _, j := range page.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.ID, dash(j.DeadReason), j.Attempts, j.DeferCount,
			stamp(&j.CreatedAt), stamp(j.CompletedAt), oneLine(dash(j.LastError), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != nil {
		fmt.Fprintf(w, "\nmore: simpleqd dead %s --limit %d --cursor %s\n", queue, limit, *page.NextCursor)
	}
	return nil
}
