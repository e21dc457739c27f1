package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The console's queue administration in headless Chromium: create a queue
// through the form (a bad webhookUrl first, whose 400 fieldErrors message
// shows next to the field), see it listed, change its concurrency, and
// delete it through the confirmation, which names the jobs a purge
// removes. The file's queue has no settings link; the secret is never
// shown, only its hint.
func TestConsoleQueueAdmin(t *testing.T) {
	b := newBrowser(t) // first: skip early when there is no browser
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf("auth:\n  apiKeys: [%s]\nwebhooks:\n  allowPrivateNetworks: true\n", consoleKey) +
		QueueYAML("filed", hook.URL)})
	const secret = "whsec_console_queue_secret_7a1e"

	b.navigate(d.URL + "/console/")
	b.waitFor(`document.querySelector('#login-form')`, 10*time.Second, "the login form")
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), consoleKey), chromedp.Click(chromedp.CSS("#login-form button")))
	filed := `#queues tr[data-queue="filed"]`
	b.waitText(filed, "file", 10*time.Second)
	require.False(t, evalJS[bool](b, `!!document.querySelector('#queues tr[data-queue="filed"] a.queue-settings')`), "a file queue has no settings link")

	// Create: a bad webhookUrl first.
	b.click("#new-queue")
	b.waitFor(`!!document.querySelector('#queue-form #qf-name')`, 5*time.Second, "the new queue form")
	require.Equal(t, "password", evalJS[string](b, `document.querySelector('#qf-signingSecret').type`))
	b.do(
		chromedp.SendKeys(chromedp.CSS("#qf-name"), "acme-emails"),
		chromedp.SendKeys(chromedp.CSS("#qf-webhookUrl"), "not a url"),
		chromedp.SendKeys(chromedp.CSS("#qf-signingSecret"), secret),
		chromedp.SendKeys(chromedp.CSS("#qf-concurrency"), "2"),
	)
	b.click("#queue-save")
	b.waitText("#qf-webhookUrl-error", "must be an absolute http:// or https:// URL", 5*time.Second)
	require.Equal(t, "true", evalJS[string](b, `document.querySelector('#qf-webhookUrl').getAttribute('aria-invalid')`))
	require.Equal(t, 404, d.Do("GET", "/v1/queues/acme-emails", nil, authed()...).Status, "nothing created")
	b.screenshot("console-queue-form")

	b.do(chromedp.SetValue(chromedp.CSS("#qf-webhookUrl"), hook.URL))
	b.click("#queue-save")
	b.waitFor(`location.hash === '#/queues/acme-emails'`, 5*time.Second, "the new queue's page")
	b.waitText("#toasts", "Created acme-emails", 5*time.Second)
	got := d.Do("GET", "/v1/queues/acme-emails", nil, authed()...).JSON(t)
	require.Equal(t, "api", got["source"])
	require.EqualValues(t, 2, got["concurrency"])
	require.Equal(t, secret[len(secret)-4:], got["signingSecretHint"])

	// Listed, with a settings link.
	b.click("#nav-queues")
	row := `#queues tr[data-queue="acme-emails"]`
	b.waitFor(`!!document.querySelector('#queues tr[data-queue="acme-emails"] a.queue-settings')`, 10*time.Second, "the new queue listed")

	// Edit its concurrency.
	b.click(row + " a.queue-settings")
	b.waitFor(`document.querySelector('#qf-concurrency')?.value === '2'`, 5*time.Second, "the settings filled in")
	require.Equal(t, "", evalJS[string](b, `document.querySelector('#qf-signingSecret').value`), "the secret is never filled in")
	b.waitText("#secret-hint", "…"+secret[len(secret)-4:], time.Second)
	require.NotContains(t, evalJS[string](b, `document.body.innerText`), secret)
	b.do(chromedp.SetValue(chromedp.CSS("#qf-concurrency"), "5"))
	b.click("#queue-save")
	b.waitText("#toasts", "Saved acme-emails: concurrency changed", 5*time.Second)
	got = d.Do("GET", "/v1/queues/acme-emails", nil, authed()...).JSON(t)
	require.EqualValues(t, 5, got["concurrency"])
	require.Equal(t, hook.URL, got["webhookUrl"])

	// Jobs waiting: the confirmation says a purge removes them.
	require.Equal(t, 200, d.Do("POST", "/v1/queues/acme-emails/pause", map[string]any{}, authed()...).Status)
	publishAuthed(t, d, "acme-emails", `{"n":1}`)
	publishAuthed(t, d, "acme-emails", `{"n":2}`)
	b.waitFor(`!!document.querySelector('#queue-delete-start')`, 5*time.Second, "the delete button")
	b.click("#queue-delete-start")
	b.waitText("#queue-delete-confirm", "still has 2 jobs", 5*time.Second)
	b.waitText("#queue-delete-confirm", "removes those 2 jobs (never delivered)", time.Second)
	b.waitText("#queue-delete-button", "purge 2 jobs", time.Second)
	evalJS[bool](b, `(document.querySelector('#queue-delete-confirm').scrollIntoView({block: 'end'}), true)`)
	b.screenshot("console-queue-delete")
	b.click("#queue-delete-button")
	b.waitFor(`location.hash === '#/'`, 5*time.Second, "back to the queue list")
	b.waitText("#toasts", "Deleted acme-emails and its 2 jobs", 5*time.Second)
	require.Equal(t, 404, d.Do("GET", "/v1/queues/acme-emails", nil, authed()...).Status)
	b.waitFor(`!document.querySelector('#queues tr[data-queue="acme-emails"]') && !!document.querySelector('#queues tr[data-queue="filed"]')`,
		5*time.Second, "the queue gone from the list")

	// A file queue's settings page only says where to change it.
	b.navigate(d.URL + "/console/#/queues/filed/settings")
	b.waitText("#queue-form-missing", "declared in the configuration file", 5*time.Second)
	require.Empty(t, b.pageErrors())
}
