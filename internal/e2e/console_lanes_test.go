package test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestConsoleLanes walks the queue page's Lanes panel (keys.md §5) in a
// real browser: a lane held by its own 429 listed with its release time and
// reason, the busiest lanes by jobs waiting and in flight, a lane's jobs
// (GET .../jobs?flowKey=) a click away, the job page's flow key, and a held
// lane resumed after a confirmation: its probe succeeds and the lane drains
// while the other lanes stay at their own limits.
func TestConsoleLanes(t *testing.T) {
	b := newBrowser(t)
	rs := Redis(t)

	// tenant-a's first delivery is rate limited for a minute; every other
	// answer is a success.
	var mu sync.Mutex
	limited := false
	hook := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		if dl.Header.Get("x-simpleq-flow-key") == "tenant-a" && !limited {
			limited = true
			return Reply{Status: 429, RetryAfter: "60"}
		}
		if dl.Header.Get("x-simpleq-flow-key") != "tenant-a" {
			return Reply{Status: 200, Delay: 40 * time.Second} // b's and c's stay in flight for the test
		}
		return Reply{Status: 200}
	})
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf(`auth:
  apiKeys: [%s]
queues:
  tenants:
    webhookUrl: %s
    signingSecret: whsec_test
    concurrency: 10
`, consoleKey, hook.URL)})

	// tenant-b and tenant-c may have one delivery in flight (overrides), and
	// their webhook is slow, so their backlogs wait in their lanes: 7 and 2.
	for _, fk := range []string{"tenant-b", "tenant-c"} {
		r := d.Do("PUT", "/v1/queues/tenants/keys/"+fk, `{"concurrency":1}`, authed()...)
		require.Equal(t, 200, r.Status, string(r.Body))
	}
	publish := func(fk string, n int) []string {
		var ids []string
		for i := 0; i < n; i++ {
			r := d.Do("POST", "/v1/queues/tenants/jobs", fmt.Sprintf(`{"payload":{"n":%d},"flowKey":%q}`, i, fk), authed()...)
			require.Equal(t, 201, r.Status, string(r.Body))
			ids = append(ids, r.JSON(t)["id"].(string))
		}
		return ids
	}
	bIDs := publish("tenant-b", 8)
	publish("tenant-c", 3)
	aIDs := publish("tenant-a", 3)
	require.Eventually(t, func() bool {
		r := d.Do("GET", "/v1/queues/tenants/keys/tenant-a", nil, authed()...)
		return r.Status == 200 && r.JSON(t)["hold"].(map[string]any)["state"] == "held"
	}, 10*time.Second, 20*time.Millisecond, "lane tenant-a never held")
	inFlight := func(fk string) bool {
		r := d.Do("GET", "/v1/queues/tenants/keys/"+fk, nil, authed()...)
		return r.Status == 200 && r.JSON(t)["counts"].(map[string]any)["processing"] == float64(1)
	}
	require.Eventually(t, func() bool { return inFlight("tenant-b") && inFlight("tenant-c") }, 10*time.Second, 20*time.Millisecond,
		"one delivery in flight in each of b and c")

	b.navigate(d.URL + "/console/")
	b.waitFor(`document.querySelector('#login-form')`, 10*time.Second, "the login form")
	b.do(chromedp.SendKeys(chromedp.CSS("#api-key"), consoleKey), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitFor(`document.querySelector('#queues tr[data-queue="tenants"]')`, 10*time.Second, "the queue list")

	// The queue page: tenant-a held, with its release and reason; the
	// busiest lanes b (7 waiting) then c (2).
	b.navigate(d.URL + "/console/#/queues/tenants")
	b.waitFor(`document.querySelector('#lanes')?.dataset.ready === '1' && !document.querySelector('#lanes').hidden`, 10*time.Second, "the lanes panel")
	b.waitFor(`document.querySelector('#lanes-held tr[data-key="tenant-a"]')`, 10*time.Second, "the held lane")
	held := b.text(`#lanes-held tr[data-key="tenant-a"]`)
	require.Contains(t, held, "held")
	require.Contains(t, held, "429")
	require.Regexp(t, `\d{2}:\d{2}:\d{2}`, held, "the release time")
	b.waitFor(`document.querySelectorAll('#lanes-busy tbody tr').length === 2`, 10*time.Second, "two busy lanes")
	require.Equal(t, []string{"tenant-b", "tenant-c"},
		evalJS[[]string](b, `[...document.querySelectorAll('#lanes-busy tbody tr')].map(tr => tr.dataset.key)`))
	require.Contains(t, b.text(`#lanes-busy tr[data-key="tenant-b"]`), "7")
	require.Contains(t, b.text("#lanes-summary"), "1 held")
	evalJS[bool](b, `(document.querySelector('#lanes').scrollIntoView(), true)`)
	b.screenshot("console-lanes")

	// A lane's jobs: tenant-b's 7 waiting jobs, each with its flow key.
	b.click(`#lanes-busy a.lane-key[data-key="tenant-b"]`)
	b.waitFor(`document.querySelectorAll('#jobs tbody tr').length === 7`, 10*time.Second, "lane tenant-b's pending jobs")
	require.Equal(t, "tenant-b", b.text("#lane-key"))
	require.Equal(t, 7, evalJS[int](b, `[...document.querySelectorAll('#jobs tbody tr')].filter(tr => tr.innerText.includes('tenant-b')).length`))
	b.waitText("#jobs-total", "7 jobs", 10*time.Second)
	require.Equal(t, bIDs[1], evalJS[string](b, `document.querySelector('#jobs tbody tr').dataset.key`), "the lane's delivery order")

	// The job page shows its flow key.
	b.navigate(d.URL + "/console/#/jobs/" + bIDs[1])
	b.waitText("#job-status", "pending", 10*time.Second)
	require.Contains(t, b.text(".details"), "Flow key")
	require.Contains(t, b.text(".details"), "tenant-b")

	// Resume tenant-a: the second click confirms; the probe succeeds and
	// the lane's jobs are delivered, the lane leaves the held list.
	b.navigate(d.URL + "/console/#/queues/tenants")
	sel := `#lanes-held button.resume-lane[data-key="tenant-a"]`
	b.waitFor(fmt.Sprintf(`document.querySelector(%q)`, sel), 10*time.Second, "the resume button")
	b.click(sel)
	b.waitText(sel, "Confirm", 5*time.Second)
	b.click(sel)
	for _, id := range aIDs {
		waitStatusAuthed(t, d, id, "completed", 15*time.Second)
	}
	b.waitFor(`!document.querySelector('#lanes-held tr[data-key="tenant-a"]')`, 10*time.Second, "tenant-a no longer held")
	r := d.Do("GET", "/v1/queues/tenants/keys/tenant-b", nil, authed()...)
	require.EqualValues(t, 1, r.JSON(t)["counts"].(map[string]any)["processing"], "the other lanes keep to their limits")

	require.Empty(t, b.pageErrors(), "no JavaScript errors or CSP violations")
}
