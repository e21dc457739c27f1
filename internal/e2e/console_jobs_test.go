package test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestConsoleJobListsCancelAndCharts walks the console's job lists and
// statistics in a real browser: a paused queue's backlog listed by status
// in delivery order (priority first) with paging, the priority, flow key and
// replace key of a job, cancel of one job and of every pending job after a
// confirmation that names how many, and the queue page's charts of the last
// hour (deliveries, 429s, a hold period) drawn from GET .../stats.
func TestConsoleJobListsCancelAndCharts(t *testing.T) {
	b := newBrowser(t)
	rs := Redis(t)

	// emails: the first delivery is rate-limited (429, Retry-After 1 s),
	// then every delivery succeeds.
	var mu sync.Mutex
	limited := false
	emails := NewWebhook(t, func(Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		if !limited {
			limited = true
			return Reply{Status: 429, RetryAfter: "1"}
		}
		return Reply{Status: 200}
	})
	backlog := NewWebhook(t, nil)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf(`auth:
  apiKeys: [%s]
queues:
  emails:
    webhookUrl: %s
    signingSecret: whsec_test
  backlog:
    webhookUrl: %s
    signingSecret: whsec_test
`, consoleKey, emails.URL, backlog.URL)})

	// The backlog queue is paused: 60 jobs wait, the last one with priority 9.
	r := d.Do("POST", "/v1/queues/backlog/pause", `{"reason":"downstream migration"}`, authed()...)
	require.Equal(t, 200, r.Status, string(r.Body))
	var ids []string
	for i := 0; i < 59; i++ {
		ids = append(ids, publishAuthed(t, d, "backlog", fmt.Sprintf(`{"n":%d}`, i)))
	}
	r = d.Do("POST", "/v1/queues/backlog/jobs", `{"payload":{"urgent":true},"priority":9,"replaceKey":"latest-state"}`, authed()...)
	require.Equal(t, 201, r.Status, string(r.Body))
	urgent := r.JSON(t)["id"].(string)

	// emails: a hold and its probe, then deliveries.
	for i := 0; i < 5; i++ {
		id := publishAuthed(t, d, "emails", fmt.Sprintf(`{"to":"user%d@example.com"}`, i))
		ids = append(ids, id)
	}
	for _, id := range ids[59:] {
		waitStatusAuthed(t, d, id, "completed", 15*time.Second)
	}

	b.navigate(d.URL + "/console/")
	b.waitFor(`document.querySelector('#login-form')`, 10*time.Second, "the login form")
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), consoleKey), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitText(`#queues tr[data-queue="backlog"]`, "paused", 10*time.Second)

	// The pending list: delivery order puts the priority-9 job first; 50 a page.
	b.navigate(d.URL + "/console/#/queues/backlog/jobs/pending")
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 50`, 10*time.Second, "a first page of 50")
	require.Equal(t, urgent, evalJS[string](b, `document.querySelector('#jobs tbody tr').dataset.key`))
	firstRow := b.text(`#jobs tbody tr`)
	require.Contains(t, firstRow, "9")
	require.Contains(t, firstRow, "latest-state")
	b.waitText("#jobs-total", "60 jobs", 10*time.Second)
	b.waitText(`#status-tabs [data-status="pending"]`, "Pending (60)", 10*time.Second)
	b.screenshot("console-jobs")
	b.click("#jobs-next")
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 10`, 10*time.Second, "a second page of 10")
	require.Contains(t, b.text("#jobs-page"), "page 2")
	require.True(t, evalJS[bool](b, `document.querySelector('#jobs-next').hidden`), "the last page")
	b.click("#jobs-first")
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 50`, 10*time.Second, "the first page again")

	// The job page shows priority and replace key.
	b.navigate(d.URL + "/console/#/jobs/" + urgent)
	b.waitText("#job-status", "pending", 10*time.Second)
	require.Contains(t, b.text(".details"), "Priority")
	require.Contains(t, b.text(".details"), "latest-state")

	// Cancel one job from its row: the second click confirms.
	b.navigate(d.URL + "/console/#/queues/backlog/jobs/pending")
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 50`, 10*time.Second, "the first page")
	b.click(fmt.Sprintf(`#jobs button.cancel[data-job=%q]`, urgent))
	b.waitText(fmt.Sprintf(`#jobs button.cancel[data-job=%q]`, urgent), "Confirm", 5*time.Second)
	b.click(fmt.Sprintf(`#jobs button.cancel[data-job=%q]`, urgent))
	job := waitStatusAuthed(t, d, urgent, "dead", 10*time.Second)
	require.Equal(t, "cancelled", job["deadReason"])
	b.waitText("#jobs-total", "59 jobs", 10*time.Second)

	// Cancel all pending: the confirmation says how many.
	b.click("#cancel-all")
	b.waitText("#cancel-all", "Click again to cancel 59 pending jobs", 5*time.Second)
	b.screenshot("console-cancel-confirm")
	b.click("#cancel-all")
	b.waitFor(`!document.querySelector('#jobs-empty').hidden`, 15*time.Second, "an empty pending list")
	for _, id := range ids[:59] {
		require.Equal(t, "dead", getJobAuthed(t, d, id)["status"])
	}
	b.navigate(d.URL + "/console/#/queues/backlog/jobs/dead")
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 50`, 10*time.Second, "the cancelled jobs, dead")
	require.Contains(t, b.text("#jobs"), "cancelled")

	// The queue page of emails: the last hour's charts, fleet-wide.
	b.navigate(d.URL + "/console/#/queues/emails")
	b.waitFor(`document.querySelector('#charts')?.dataset.ready === '1'`, 15*time.Second, "the charts")
	require.Equal(t, "6", evalJS[string](b, `document.querySelector('#charts').dataset.started`), "5 jobs, one redelivered after the 429")
	require.Equal(t, "1", evalJS[string](b, `document.querySelector('#charts').dataset.http429`))
	require.Equal(t, "1", evalJS[string](b, `document.querySelector('#charts').dataset.holds`))
	require.Positive(t, evalJS[int](b, `document.querySelectorAll('#chart-deliveries rect.bar.success').length`))
	require.Positive(t, evalJS[int](b, `document.querySelectorAll('#chart-429 rect.bar.r429').length`))
	require.Equal(t, 1, evalJS[int](b, `document.querySelectorAll('#chart-holds rect.held-span').length`))
	summary := b.text("#stats-summary")
	require.True(t, strings.Contains(summary, "6 deliveries started") && strings.Contains(summary, "5 succeeded"), summary)
	evalJS[bool](b, `(document.querySelector('#charts').scrollIntoView(), true)`)
	b.screenshot("console-charts")

	require.Empty(t, b.pageErrors(), "no JavaScript errors or CSP violations")
}

func getJobAuthed(t *testing.T, d *Daemon, id string) map[string]any {
	t.Helper()
	r := d.Do("GET", "/v1/jobs/"+id, nil, authed()...)
	require.Equal(t, 200, r.Status, string(r.Body))
	return r.JSON(t)
}
