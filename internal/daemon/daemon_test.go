package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

const key = "sk_daemon_test"

// startDaemon runs a daemon on the embedded store with one queue pointing at
// webhook, and returns its base URL.
func startDaemon(t *testing.T, webhook string, maxAttempts int) string {
	t.Helper()
	return startDaemonWith(t, webhook, maxAttempts, nil)
}

// startDaemonWith is startDaemon with a last change to the configuration.
func startDaemonWith(t *testing.T, webhook string, maxAttempts int, mod func(*config.Config)) string {
	t.Helper()
	_, base := launch(t, webhook, maxAttempts, mod)
	return base
}

// launch is startDaemonWith, also returning the Daemon.
func launch(t *testing.T, webhook string, maxAttempts int, mod func(*config.Config)) (*Daemon, string) {
	t.Helper()
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = time.Second
	cfg.Auth.APIKeys = []string{key}
	s := cfg.Defaults
	s.MaxAttempts = maxAttempts
	s.Timeout = 2 * time.Second
	s.Backoff = config.Backoff{Type: "fixed", Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}
	cfg.Queues = map[string]config.Queue{"emails": {Name: "emails", WebhookURL: webhook, SigningSecret: "s", QueueSettings: s}}
	if mod != nil {
		mod(cfg)
	}
	d, err := New(cfg, zap.NewNop())
	require.NoError(t, err)
	addr, err := d.Listen()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	base := "http://" + addr.String()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	return d, base
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // even without a body, as every client does
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics") // no key: api.md says /metrics needs none
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestMetricsWiring(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	base := startDaemon(t, hook.URL, 3)

	text := scrape(t, base)
	require.Contains(t, text, `simpleqd_deliveries_total{outcome="success",queue="emails"} 0`, "series exist before the first event")
	require.Contains(t, text, `simpleqd_queue_hold_state{queue="emails",state="open"} 1`)

	code, body := call(t, http.MethodPost, base+"/v1/queues/emails/jobs", `{"payload":{"n":1}}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/jobs", `{"payload":{"n":2},"idempotencyKey":"k"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/jobs", `{"payload":{"n":2},"idempotencyKey":"k"}`)
	require.Equal(t, http.StatusOK, code, body)

	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, base), `simpleqd_deliveries_total{outcome="success",queue="emails"} 2`)
	}, 10*time.Second, 20*time.Millisecond)
	// The gauges come from a status read up to a second old (metrics'
	// StatusCacheTTL): wait for one made after the deliveries.
	require.Eventually(t, func() bool {
		text = scrape(t, base)
		return strings.Contains(text, `simpleqd_jobs{queue="emails",status="pending"} 0`) &&
			strings.Contains(text, `simpleqd_jobs{queue="emails",status="processing"} 0`)
	}, 10*time.Second, 50*time.Millisecond)
	require.Contains(t, text, `simpleqd_jobs_published_total{queue="emails"} 2`, "an idempotent repeat is not a publish")
	require.Contains(t, text, `simpleqd_publish_to_delivery_seconds_count{queue="emails"} 2`)
	require.Contains(t, text, `simpleqd_delivery_duration_seconds_count{queue="emails"} 2`)
	require.Contains(t, text, `simpleqd_jobs{queue="emails",status="pending"} 0`)
	require.Contains(t, text, `simpleqd_queue_status_up 1`)
	// Every script call is timed: the publishes, and the settles that
	// recorded the deliveries (the store wired to the daemon's metrics).
	for _, script := range []string{"publish", "settle"} {
		m := regexp.MustCompile(`(?m)^simpleqd_redis_script_duration_seconds_count\{script="` + script + `"\} (\d+)$`).FindStringSubmatch(text)
		require.NotNil(t, m, "no timings of %s calls", script)
		n, _ := strconv.Atoi(m[1])
		require.GreaterOrEqual(t, n, 1, "%s calls timed", script)
	}
	require.Contains(t, text, `simpleqd_redis_script_errors_total{script="settle"} 0`)

	// Every other path is still the API's (JSON 404 for an unknown one).
	code, _ = call(t, http.MethodGet, base+"/v1/nope", "")
	require.Equal(t, http.StatusNotFound, code)
}

func TestAdminWiring(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	fail.Store(true)
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()
	base := startDaemon(t, hook.URL, 1)

	ids := map[string]bool{}
	for i := 0; i < 3; i++ {
		code, body := call(t, http.MethodPost, base+"/v1/queues/emails/jobs", `{"payload":{}}`)
		require.Equal(t, http.StatusCreated, code, body)
		var p struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		ids[p.ID] = true
	}
	type page struct {
		Jobs []struct {
			ID, Status string
			DeadReason *string
		}
		NextCursor *string
	}
	var got []string
	require.Eventually(t, func() bool {
		got = got[:0]
		cursor := ""
		for {
			code, body := call(t, http.MethodGet, base+"/v1/queues/emails/dead?limit=2&cursor="+cursor, "")
			require.Equal(t, http.StatusOK, code, body)
			var p page
			require.NoError(t, json.Unmarshal([]byte(body), &p))
			for _, j := range p.Jobs {
				require.Equal(t, "dead", j.Status)
				require.Equal(t, "max_attempts_exhausted", *j.DeadReason)
				got = append(got, j.ID)
			}
			if p.NextCursor == nil {
				return len(got) == 3
			}
			cursor = *p.NextCursor
		}
	}, 10*time.Second, 20*time.Millisecond)
	for _, id := range got {
		require.True(t, ids[id])
	}
	require.Contains(t, scrape(t, base), `simpleqd_jobs_dead_total{queue="emails",reason="max_attempts_exhausted"} 3`)

	code, body := call(t, http.MethodGet, base+"/v1/queues/emails/dead?cursor=bogus", "")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"cursor"`)

	// Pause, replay one job: it waits, undelivered, until resume.
	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/pause", `{"reason":"maintenance"}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"hold":{"state":"paused","until":null,"probeJobId":null,"reason":"maintenance"}`)
	fail.Store(false)
	before := hits.Load()
	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/dead/replay", `{"ids":["`+got[0]+`","`+got[0]+`"]}`)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"replayed":1}`, body)
	require.Never(t, func() bool { return hits.Load() != before }, 100*time.Millisecond, 5*time.Millisecond,
		"nothing is delivered while paused")
	code, body = call(t, http.MethodGet, base+"/v1/queues/emails", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"counts":{"pending":1,"processing":0,"awaitingAck":0,"dead":2,"heldKeys":0}`)

	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/resume", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"state":"open"`)
	code, body = call(t, http.MethodPost, base+"/v1/queues/emails/dead/replay", `{"all":true}`)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"replayed":2}`, body)
	require.Eventually(t, func() bool {
		_, body := call(t, http.MethodGet, base+"/v1/queues/emails", "")
		return strings.Contains(body, `"counts":{"pending":0,"processing":0,"awaitingAck":0,"dead":0,"heldKeys":0}`)
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, base), `simpleqd_deliveries_total{outcome="success",queue="emails"} 3`)
	}, 10*time.Second, 20*time.Millisecond)
}

// TestRouting checks the listener's split: API paths go straight to the API's
// handler, everything else through the mux of /metrics and the console, and
// an unclean path is still redirected to its clean form whichever side it
// starts on.
func TestRouting(t *testing.T) {
	t.Parallel()
	base := startDaemon(t, "http://127.0.0.1:1/hook", 3)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, withKey bool) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if withKey {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, string(b)
	}

	code, h, body := get("/metrics", false)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, h.Get("Content-Type"), "text/plain")
	require.Contains(t, body, "simpleqd_queue_status_up")

	code, h, _ = get("/console/", false)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, h.Get("Content-Type"), "text/html")

	code, _, _ = get("/healthz", false)
	require.Equal(t, http.StatusOK, code)

	code, h, body = get("/v1/nope", true)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.JSONEq(t, `{"error":"Not found"}`, body)

	code, _, body = get("/v1/queues", false)
	require.Equal(t, http.StatusUnauthorized, code, "API paths keep the API's key check: %s", body)

	code, h, _ = get("/v1/../metrics", false)
	require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, code)
	require.Equal(t, "/metrics", h.Get("Location"))

	code, h, _ = get("/console/../v1/nope", false)
	require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, code)
	require.Equal(t, "/v1/nope", h.Get("Location"))
}

// TestKeylessRefusesBrowserAttacks replays review finding 6 against a real
// listener (fastserve fills in r.Host and the headers): a daemon without
// API keys, on loopback, refuses a cross-site text/plain pause and resume
// (CSRF) and a read under a foreign Host (DNS rebinding), and still serves
// its own clients and the console's same-origin calls.
func TestKeylessRefusesBrowserAttacks(t *testing.T) {
	t.Parallel()
	base := startDaemonWith(t, "http://127.0.0.1:1/hook", 3, func(c *config.Config) { c.Auth.APIKeys = nil })
	addr := strings.TrimPrefix(base, "http://")
	send := func(method, path, host, origin, ct string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(""))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/queues/emails/pause", "/v1/queues/emails/resume"} {
		code, body := send(http.MethodPost, path, "", "https://evil.example", "text/plain")
		require.Equal(t, http.StatusForbidden, code, body)
		require.JSONEq(t, `{"error":"forbidden"}`, body)
		code, body = send(http.MethodPost, path, "", "", "text/plain")
		require.Equal(t, http.StatusUnsupportedMediaType, code, body)
		require.JSONEq(t, `{"error":"Content-Type must be application/json"}`, body)
	}
	code, body := send(http.MethodGet, "/v1/queues", "evil.example:26392", "http://evil.example:26392", "")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = send(http.MethodGet, "/v1/queues/emails", "", "", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"state":"open"`, "nothing above paused the queue")

	// The console's own calls: same origin, JSON.
	code, body = send(http.MethodPost, "/v1/queues/emails/pause", "", "http://"+addr, "application/json")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"state":"paused"`)
	code, body = send(http.MethodPost, "/v1/queues/emails/resume", "localhost:"+addr[strings.LastIndex(addr, ":")+1:], "", "application/json")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"state":"open"`)
	// Probes and /metrics answer under any name.
	code, _ = send(http.MethodGet, "/metrics", "evil.example", "", "")
	require.Equal(t, http.StatusOK, code)
}

// TestConcurrentScrapesInspectOnce (review finding 10): /metrics needs no
// key, and each status read runs the inspect script once per queue, so many
// scrapes at once must share one read, cached for a second, and the ones
// past the in-flight bound get a 503 rather than queueing work. Counted by
// the store's own script timing (simpleqd_redis_script_duration_seconds).
func TestConcurrentScrapesInspectOnce(t *testing.T) {
	t.Parallel()
	d, base := launch(t, "http://127.0.0.1:1/hook", 3, func(c *config.Config) {
		s := c.Queues["emails"].QueueSettings
		for _, name := range []string{"q2", "q3"} {
			c.Queues[name] = config.Queue{Name: name, WebhookURL: "http://127.0.0.1:1/hook", SigningSecret: "s", QueueSettings: s}
		}
	})
	inspects := func() uint64 {
		mfs, err := d.metrics.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "simpleqd_redis_script_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "script" && l.GetValue() == "inspect" {
						return m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		t.Fatal("no inspect timings")
		return 0
	}
	// Nothing but a status read runs inspect (the API's queue views do too,
	// but none is asked for here), so the count starts at 0, and it is read
	// below right after the scrapes, within the read's cache window.
	const n = 32
	var wg sync.WaitGroup
	var ok, shed atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusServiceUnavailable:
				shed.Add(1)
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, ok.Load())
	require.Equal(t, int64(n), ok.Load()+shed.Load())
	// One read (three inspects, one per queue) serves them all while it is
	// fresh; a machine stalled past the second may add one more read.
	got := inspects()
	require.GreaterOrEqual(t, got, uint64(3))
	require.LessOrEqual(t, got, uint64(2*3), "%d scrapes ran %d inspect scripts", n, got)
}

// TestDeadPageBoundedInBytes (review finding 11), through the API: with
// payloads near http.maxPayloadBytes, GET …/dead?limit=1000 answers fewer
// jobs than asked, within the store's byte bound, and a nextCursor that
// pages on to the rest; the answer keeps api.md's {jobs, nextCursor} shape.
func TestDeadPageBoundedInBytes(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer hook.Close()
	base := startDaemon(t, hook.URL, 1)
	const jobs = 6
	payload := `{"payload":{"x":"` + strings.Repeat("a", 1<<20-64) + `"}}`
	for range jobs {
		code, body := call(t, http.MethodPost, base+"/v1/queues/emails/jobs", payload)
		require.Equal(t, http.StatusCreated, code, body)
	}
	require.Eventually(t, func() bool {
		_, body := call(t, http.MethodGet, base+"/v1/queues/emails", "")
		return strings.Contains(body, `"dead":6`)
	}, 20*time.Second, 50*time.Millisecond)

	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, jobs, "paging does not end")
		url := base + "/v1/queues/emails/dead?limit=1000"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		code, body := call(t, http.MethodGet, url, "")
		require.Equal(t, http.StatusOK, code, body[:min(len(body), 200)])
		require.LessOrEqual(t, len(body), store.MaxDeadPageBytes+64<<10, "the page is bounded in bytes")
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			NextCursor *string `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		require.NotEmpty(t, page.Jobs)
		require.Less(t, len(page.Jobs), jobs, "six 1 MiB jobs do not fit one page")
		for _, j := range page.Jobs {
			seen = append(seen, j.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Len(t, seen, jobs)
	uniq := map[string]bool{}
	for _, id := range seen {
		uniq[id] = true
	}
	require.Len(t, uniq, jobs, "every dead job once")
}
