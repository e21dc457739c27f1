package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// The web console's end-to-end tests drive Debian's headless Chromium over
// the DevTools protocol (chromedp), against a real daemon on a real Redis.
// scripts/test installs the chromium package; in CI (CI set) a missing
// browser fails the test, elsewhere it skips.
//
// Screenshots are taken at each step. They go to a temporary directory, or,
// with SIMPLEQD_UPDATE_SCREENSHOTS=1, to docs/screenshots (the README's
// images): a normal test run never rewrites files in the repository.

const consoleKey = "sk_console_e2e"

// chromiumPath finds the browser, or skips (fails in CI) without one.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found: scripts/test installs Debian's chromium package (apt-get install chromium)")
	}
	t.Skip("chromium not installed (apt-get install chromium); the console's browser test needs it")
	return ""
}

// browser is one headless Chromium tab with helpers that wait on the DOM.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string // screenshots
	born time.Time
	mu   sync.Mutex
	errs []string // JavaScript exceptions, console errors, CSP violations
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath(t)
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root in CI; the page is our own
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-device-scale-factor", "1"),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, dir: t.TempDir(), born: time.Now()}
	if os.Getenv("SIMPLEQD_UPDATE_SCREENSHOTS") != "" {
		_, file, _, _ := runtime.Caller(0)
		b.dir = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(file))), "docs", "screenshots")
		require.NoError(t, os.MkdirAll(b.dir, 0o755))
	}
	// The first Run starts the browser; it must not carry a timeout.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.EmulateViewport(1280, 760)))
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError {
				msg = "console.error"
			}
		case *log.EventEntryAdded:
			// Failed requests (the expected 401s) are "network" entries.
			if e.Entry.Level == log.EntryLevelError && e.Entry.Source != log.EntrySourceNetwork {
				msg = fmt.Sprintf("%s: %s", e.Entry.Source, e.Entry.Text)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errs = append(b.errs, msg)
			b.mu.Unlock()
		}
	}))
	return b
}

// do runs steps with a time limit.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail("browser step failed: %v", err)
	}
}

func evalJS[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.fail("evaluate %s: %v", js, err)
	}
	return v
}

// text is the rendered text of the first element matching sel ("" if none).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? '')`, sel))
}

// waitFor waits until a JavaScript condition is true. The page itself
// waits: it checks the condition on every change of the document (and every
// 50 ms, for conditions on state outside it) and answers once it holds or
// the time is up. A navigation under the wait ends the page's part; the
// wait goes on in the new page.
func (b *browser) waitFor(cond string, within time.Duration, what string) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			b.fail("timed out after %s waiting for %s (%s)", within, what, cond)
		}
		js := fmt.Sprintf(`new Promise((resolve, reject) => {
  const check = () => !!(%s);
  let obs, iv, to;
  const settle = (f, v) => { obs && obs.disconnect(); clearInterval(iv); clearTimeout(to); f(v); };
  const test = () => { try { if (check()) settle(resolve, true); } catch (e) { settle(reject, e); } };
  obs = new MutationObserver(test);
  obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  iv = setInterval(test, 50);
  to = setTimeout(() => settle(resolve, false), %d);
  test();
})`, cond, left.Milliseconds())
		ctx, cancel := context.WithTimeout(b.ctx, left+5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
		cancel()
		switch {
		case err == nil && ok:
			return
		case err == nil:
			b.fail("timed out after %s waiting for %s (%s)", within, what, cond)
		case !strings.Contains(err.Error(), "context") && !strings.Contains(err.Error(), "navigat"):
			b.fail("evaluate %s: %v", cond, err)
		}
		// The page navigated under the wait: wait in the new one.
	}
}

// waitText waits until sel's text contains want.
func (b *browser) waitText(sel, want string, within time.Duration) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? '').includes(%q)`, sel, want), within,
		fmt.Sprintf("%q in %s", want, sel))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

func (b *browser) navigate(url string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url))
}

// screenshot saves the viewport as name.png and checks it is a real image.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	// Toasts would cover the page; two animation frames let layout settle.
	evalJS[bool](b, `(document.getElementById('toasts').replaceChildren(), true)`)
	ctxF, cancelF := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancelF()
	if _, err := chromedp.Run(ctxF, chromedp.Evaluate[bool](
		`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		b.fail("waiting for two frames: %v", err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	require.Greater(b.t, len(png), 5000, "screenshot %s is suspiciously small", name)
	require.Equal(b.t, "\x89PNG", string(png[:4]))
	path := filepath.Join(b.dir, name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("%5.1fs screenshot %s", time.Since(b.born).Seconds(), path)
}

// fail reports what the page showed, with a screenshot, then fails.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`)); err == nil {
		b.t.Logf("page text:\n%s", body)
	}
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
		path := filepath.Join(b.t.TempDir(), "failure.png")
		if os.WriteFile(path, png, 0o644) == nil {
			b.t.Logf("failure screenshot: %s", path)
		}
	}
	b.t.Fatalf(format, args...)
}

// pageErrors returns the JavaScript errors and CSP violations seen so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// authed adds the test key to an API call.
func authed() []string { return []string{"Authorization", "Bearer " + consoleKey} }

func publishAuthed(t *testing.T, d *Daemon, queue string, payload string) string {
	t.Helper()
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs", `{"payload":`+payload+`}`, authed()...)
	require.Equal(t, 201, r.Status, string(r.Body))
	return r.JSON(t)["id"].(string)
}

// TestConsoleEndToEnd walks an operator through the console in a real
// browser: log in with an API key, watch a queue get held by a 429 and
// reopen through its probe, read the timeline and a job's history, replay a
// dead job, pause and resume a queue, and get sent back to the login form
// when the key stops working.
func TestConsoleEndToEnd(t *testing.T) {
	b := newBrowser(t) // first: skip early when there is no browser
	rs := Redis(t)

	// emails: the first deliveries are rate-limited (429, Retry-After 3 s);
	// the probe after the hold is slow (so "probing" is visible), then 200.
	var mu sync.Mutex
	var firstLimited time.Time
	var probeID string
	emails := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		switch {
		case firstLimited.IsZero():
			firstLimited = now
			return Reply{Status: 429, RetryAfter: "3"}
		case now.Sub(firstLimited) < time.Second: // same round, in flight together
			return Reply{Status: 429, RetryAfter: "3"}
		case probeID == "":
			probeID = dl.JobID
			return Reply{Status: 200, Delay: 3 * time.Second}
		}
		return Reply{Status: 200}
	})
	// reports: always fails, one attempt: every job goes dead.
	reports := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "template renderer crashed"} })

	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf(`auth:
  apiKeys: [%s]
defaults:
  backoff: {type: fixed, base: 100ms}
queues:
  emails:
    webhookUrl: %s
    signingSecret: whsec_test
    concurrency: 2
    rateLimitMax: 50
    rateLimitWindow: 1s
  reports:
    webhookUrl: %s
    signingSecret: whsec_test
    maxAttempts: 1
`, consoleKey, emails.URL, reports.URL)})

	// The assets load without a key; the API does not answer without one.
	require.Equal(t, 401, d.Do("GET", "/v1/queues", nil).Status)
	require.Equal(t, 200, d.Do("GET", "/console/js/app.js", nil).Status)

	// /console redirects to /console/, which shows the login form.
	b.navigate(d.URL + "/console")
	require.True(t, strings.HasSuffix(evalJS[string](b, "location.href"), "/console/"))
	b.waitFor(`document.querySelector('#login-form')`, 10*time.Second, "the login form")
	require.Empty(t, b.text("#queues"), "no data before logging in")

	// A wrong key is refused in the form.
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), "sk_wrong"), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitText("#login-error", "not accepted", 10*time.Second)
	require.Empty(t, evalJS[string](b, `sessionStorage.getItem('simpleqd.apiKey') ?? ''`))

	// The right key signs in; the queue list shows both queues, open.
	evalJS[bool](b, `(document.querySelector('#api-key').value = '', true)`)
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), consoleKey), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitText(`#queues tr[data-queue="emails"]`, "open", 10*time.Second)
	b.waitText(`#queues tr[data-queue="reports"]`, "open", 10*time.Second)
	require.Equal(t, consoleKey, evalJS[string](b, `sessionStorage.getItem('simpleqd.apiKey')`))
	require.False(t, evalJS[bool](b, `document.querySelector('#logout').hidden`), "signed in with a key: sign-out shown")

	// Three reports jobs die (HTTP 500, maxAttempts 1).
	var deadIDs []string
	for i := 1; i <= 3; i++ {
		deadIDs = append(deadIDs, publishAuthed(t, d, "reports", fmt.Sprintf(`{"report":"weekly-%d","format":"pdf"}`, i)))
	}
	for _, id := range deadIDs {
		waitStatusAuthed(t, d, id, "dead", 10*time.Second)
	}
	b.waitText(`#queues tr[data-queue="reports"] .dead-count`, "3", 10*time.Second)

	// Publishing to emails: the 429 holds the queue; the list shows "held"
	// with a live countdown.
	var emailIDs []string
	for i := 1; i <= 6; i++ {
		emailIDs = append(emailIDs, publishAuthed(t, d, "emails",
			fmt.Sprintf(`{"to":"user%d@example.com","template":"welcome","orderId":1234567890123456789%d}`, i, i)))
	}
	b.waitFor(`document.querySelector('#queues tr[data-queue="emails"] .hold')?.dataset.state === 'held'`, 10*time.Second, "emails held")
	require.Contains(t, b.text(`#queues tr[data-queue="emails"]`), "releases in")
	countdown := b.text(`#queues tr[data-queue="emails"] .countdown`)
	require.Regexp(t, `^(\d\.\ds|\d+ms|releasing…)$`, countdown)
	b.screenshot("console-queues")

	// The hold ends with one probe: "probing" names the probe's job.
	b.waitFor(`document.querySelector('#queues tr[data-queue="emails"] .hold')?.dataset.state === 'probing'`, 10*time.Second, "emails probing")
	mu.Lock()
	probe := probeID
	mu.Unlock()
	require.NotEmpty(t, probe)
	// The list may first show "probing" from a poll taken between the
	// release and the probe's claim; its next poll names the probe.
	b.waitFor(`(document.querySelector('#queues tr[data-queue="emails"] .probe-job')?.title ?? '') !== ''`, 10*time.Second, "probe named")
	require.Equal(t, probe, evalJS[string](b, `document.querySelector('#queues tr[data-queue="emails"] .probe-job')?.title ?? ''`))
	require.Contains(t, emailIDs, probe)

	// The probe succeeds: open again, and every job is delivered.
	b.waitFor(`document.querySelector('#queues tr[data-queue="emails"] .hold')?.dataset.state === 'open'`, 15*time.Second, "emails reopened")
	for _, id := range emailIDs {
		waitStatusAuthed(t, d, id, "completed", 15*time.Second)
	}

	// The queue page: counts and the timeline of the hold, the probe and the
	// reopening, as this daemon recorded them.
	b.click(`#queues tr[data-queue="emails"] a.queue-name`)
	b.waitFor(`location.hash === '#/queues/emails'`, 5*time.Second, "the queue page")
	b.waitFor(`document.querySelector('#timeline tr[data-kind="reopen"]')`, 10*time.Second, "the reopen event")
	timeline := b.text("#timeline")
	for _, want := range []string{"backpressure", "queue held", "probe sent", "probe delivered", "queue reopened", "HTTP 429", "Retry-After 3.0s"} {
		require.Contains(t, timeline, want)
	}
	require.Contains(t, b.text(".queue-state"), "open")
	b.screenshot("console-queue")

	// The probe job's page, opened by id from the top bar: its history shows
	// the defer and the probe, and the payload as published, big integer included.
	b.do(chromedp.SendKeys(chromedp.CSS("#find-job input"), probe+kb.Enter))
	b.waitFor(fmt.Sprintf(`location.hash === %q`, "#/jobs/"+probe), 5*time.Second, "the job page")
	b.waitText("#job-status", "completed", 10*time.Second)
	history := b.text("#history")
	require.Contains(t, history, "deferred")
	require.Contains(t, history, "probe")
	require.Contains(t, history, "success")
	require.Contains(t, b.text("#payload"), "12345678901234567891", "the payload is shown exactly as published")
	b.screenshot("console-job")

	// The dead-letter list, via the queue list's dead count.
	b.navigate(d.URL + "/console/#/")
	b.click(`#queues tr[data-queue="reports"] .dead-count`)
	b.waitFor(`document.querySelectorAll('#dead tbody tr').length === 3`, 10*time.Second, "three dead jobs")
	require.Contains(t, b.text("#dead"), "max_attempts_exhausted")
	require.Contains(t, b.text("#dead"), "template renderer crashed")
	require.Contains(t, b.text("#replay-all"), "Replay all (3)")
	b.screenshot("console-dead")

	// The downstream is fixed; replay one job: it leaves the list and completes.
	reports.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	replayed := deadIDs[1]
	b.click(fmt.Sprintf(`#dead button.replay[data-job=%q]`, replayed))
	b.waitFor(fmt.Sprintf(`!document.querySelector('#dead tr[data-key=%q]') && document.querySelectorAll('#dead tbody tr').length === 2`, replayed),
		10*time.Second, "the replayed job to leave the list")
	b.waitText("#dead-total", "2 jobs", 10*time.Second)
	job := waitStatusAuthed(t, d, replayed, "completed", 10*time.Second)
	require.Len(t, job["history"], 2, "a replayed job keeps its history")

	// Replay all takes a second click to confirm.
	b.click("#replay-all")
	b.waitText("#replay-all", "Click again", 5*time.Second)
	b.click("#replay-all")
	b.waitFor(`!document.querySelector('#dead-empty').hidden`, 10*time.Second, "an empty dead list")
	for _, id := range []string{deadIDs[0], deadIDs[2]} {
		waitStatusAuthed(t, d, id, "completed", 10*time.Second)
	}

	// Pause and resume from the queue page.
	b.navigate(d.URL + "/console/#/queues/reports")
	b.waitText(".queue-state", "open", 10*time.Second)
	b.do(chromedp.SendKeys(chromedp.CSS("input.reason"), "deploying the renderer"))
	b.click("#pause")
	b.waitFor(`document.querySelector('.queue-state .hold')?.dataset.state === 'paused'`, 10*time.Second, "paused")
	require.Contains(t, b.text(".queue-state"), "deploying the renderer")
	require.Equal(t, "paused", holdState(t, d, "reports"))
	b.waitFor(`document.querySelector('#timeline tr[data-kind="pause"]')`, 10*time.Second, "the pause event")
	require.True(t, evalJS[bool](b, `document.querySelector('#pause').disabled`))
	b.screenshot("console-paused")
	b.click("#resume")
	b.waitFor(`document.querySelector('.queue-state .hold')?.dataset.state === 'open'`, 10*time.Second, "resumed")
	require.Equal(t, "open", holdState(t, d, "reports"))
	b.waitFor(`document.querySelector('#timeline tr[data-kind="resume"]')`, 10*time.Second, "the resume event")
	require.Contains(t, b.text("#timeline"), "replayed")

	// A key that stops working (here: a wrong one in the tab) sends the
	// console back to the login form on the next 401.
	evalJS[bool](b, `(sessionStorage.setItem('simpleqd.apiKey', 'sk_revoked'), location.reload(), true)`)
	b.waitText("#login-error", "not accepted", 10*time.Second)
	require.Empty(t, evalJS[string](b, `sessionStorage.getItem('simpleqd.apiKey') ?? ''`))

	require.Empty(t, b.pageErrors(), "no JavaScript errors or CSP violations")
}

// TestConsoleWithoutAPIKeys: a loopback daemon without keys needs no login.
func TestConsoleWithoutAPIKeys(t *testing.T) {
	b := newBrowser(t)
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: QueueYAML("emails", hook.URL)})
	b.navigate(d.URL + "/console/")
	b.waitText(`#queues tr[data-queue="emails"]`, "open", 10*time.Second)
	require.Nil(t, evalJS[any](b, `document.querySelector('#login-form')`))
	require.True(t, evalJS[bool](b, `document.querySelector('#logout').hidden`), "no key: nothing to sign out of")
	id := d.Publish("emails", map[string]any{"hello": "world"})
	d.WaitStatus(id, "completed", 10*time.Second)
	b.navigate(d.URL + "/console/#/jobs/" + id)
	b.waitText("#job-status", "completed", 10*time.Second)
	b.navigate(d.URL + "/console/#/queues/nope")
	b.waitText("main", `No queue named "nope"`, 10*time.Second)
	require.Empty(t, b.pageErrors())
}

// waitStatusAuthed is Daemon.WaitStatus for a daemon with API keys.
func waitStatusAuthed(t *testing.T, d *Daemon, id, status string, within time.Duration) map[string]any {
	t.Helper()
	var last map[string]any
	require.Eventually(t, func() bool {
		r := d.Do("GET", "/v1/jobs/"+id, nil, authed()...)
		if r.Status != 200 {
			return false
		}
		last = nil
		_ = json.Unmarshal(r.Body, &last)
		return last["status"] == status
	}, within, 20*time.Millisecond, "job %s never reached %s", id, status)
	return last
}

func holdState(t *testing.T, d *Daemon, queue string) string {
	t.Helper()
	r := d.Do("GET", "/v1/queues/"+queue, nil, authed()...)
	require.Equal(t, 200, r.Status, string(r.Body))
	return r.JSON(t)["hold"].(map[string]any)["state"].(string)
}
