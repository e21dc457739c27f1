package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The console's schedules view in headless Chromium: every schedule with its
// next and last run and its last job; pause and resume from the page; the
// file's schedules marked; one queue's schedules under the queue.
func TestConsoleSchedules(t *testing.T) {
	b := newBrowser(t) // first: skip early when there is no browser
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf(`auth:
  apiKeys: [%s]
queues:
  reports:
    webhookUrl: %s
    signingSecret: whsec_test
  emails:
    webhookUrl: %s
    signingSecret: whsec_test
schedules:
  - id: yearly
    queue: emails
    cron: "0 0 1 1 *"
    timezone: Europe/Paris
    payload: {}
`, consoleKey, hook.URL, hook.URL)})
	r := d.Do("POST", "/v1/schedules", map[string]any{"id": "tick", "queue": "reports", "cron": "@every 1s", "payload": map[string]any{}}, authed()...)
	require.Equal(t, 201, r.Status, string(r.Body))

	b.navigate(d.URL + "/console/")
	b.waitFor(`document.querySelector('#login-form')`, 10*time.Second, "the login form")
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), consoleKey), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor(`!!document.querySelector('#queues tr[data-queue="reports"]')`, 10*time.Second, "the queue list")
	b.click("#nav-schedules")
	b.waitFor(`location.hash === '#/schedules'`, 5*time.Second, "the schedules page")
	row := `#schedules tr[data-schedule="tick"]`
	b.waitText(row, "running", 10*time.Second)
	b.waitText(row, "@every 1s", time.Second)
	b.waitText(`#schedules tr[data-schedule="yearly"]`, "file", 5*time.Second)
	b.waitText(`#schedules tr[data-schedule="yearly"]`, "Europe/Paris", time.Second)
	// The tick fires: its last job is a link to the job.
	b.waitFor(`!!document.querySelector('#schedules tr[data-schedule="tick"] a[href^="#/jobs/job_"]')`, 10*time.Second, "the last job link")

	b.click(row + " button.pause")
	b.waitText(row, "paused", 5*time.Second)
	b.waitText("#toasts", "Paused tick", 5*time.Second)
	got := d.Do("GET", "/v1/schedules/tick", nil, authed()...).JSON(t)
	require.Equal(t, true, got["paused"])
	b.click(row + " button.resume")
	b.waitText(row, "running", 5*time.Second)
	got = d.Do("GET", "/v1/schedules/tick", nil, authed()...).JSON(t)
	require.Equal(t, false, got["paused"])

	// One queue's schedules.
	b.navigate(d.URL + "/console/#/queues/emails/schedules")
	b.waitText("main h1", "Schedules of emails", 5*time.Second)
	b.waitFor(`!!document.querySelector('#schedules tr[data-schedule="yearly"]') && !document.querySelector('#schedules tr[data-schedule="tick"]')`,
		5*time.Second, "only the queue's schedules")
	b.screenshot("schedules")
	require.Empty(t, b.pageErrors())
}
