package test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Security tests of a real daemon (issue #8): nothing secret in the logs,
// slow clients cut off, webhook answers read only up to a limit, environment
// proxies ignored.

// TestReliabilitySecretsNeverLogged runs a daemon at debug level through
// publish, delivery, failure, dead-lettering, backpressure, ack-mode
// callbacks, replay, reads, a refused key, refused bodies and a live reload
// that changes the API key and the signing secret. Distinctive payload,
// idempotency key, API keys and signing secrets appear nowhere in its log.
func TestReliabilitySecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const (
		payloadMark = "PAYLOAD_MARKER_91b2e4"
		idemMark    = "IDEMKEY_MARKER_55aa"
		key1        = "sk_APIKEY_MARKER_7f3a9c"
		key2        = "sk_NEWKEY_MARKER_3d1e"
		wrongKey    = "sk_WRONGKEY_MARKER_77ab"
		secret1     = "whsec_SECRET_MARKER_c0ffee"
		secret2     = "whsec_NEWSECRET_MARKER_9e8d"
	)
	rs := Redis(t)
	var busy atomic.Int32
	hook := NewWebhook(t, func(dl Delivery) Reply {
		env := dl.Envelope()
		p, _ := env["payload"].(map[string]any)
		switch p["mode"] {
		case "fail":
			return Reply{Status: 500, Body: "boom"}
		case "busy":
			if busy.Add(1) == 1 {
				return Reply{Status: 429, RetryAfter: "0.1"}
			}
		}
		return Reply{Status: 200}
	})
	yaml := func(key, secret string) string {
		return fmt.Sprintf(`auth:
  apiKeys: [%s]
defaults:
  maxAttempts: 2
  backoff: {type: fixed, base: 20ms}
queues:
  sec:
    webhookUrl: %s
    signingSecret: %s
  seca:
    webhookUrl: %s
    signingSecret: %s
    mode: ack
`, key, hook.URL, secret, hook.URL, secret)
	}
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "debug", YAML: yaml(key1, secret1)})
	key := key1
	auth := func() []string { return []string{"Authorization", "Bearer " + key} }
	publish := func(queue, mode string, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"payload": map[string]any{"marker": payloadMark, "mode": mode}}
		for k, v := range extra {
			body[k] = v
		}
		r := d.Do("POST", "/v1/queues/"+queue+"/jobs", body, auth()...)
		require.Equal(t, 201, r.Status, string(r.Body))
		return r.JSON(t)["id"].(string)
	}
	get := func(path string) Response {
		t.Helper()
		r := d.Do("GET", path, nil, auth()...)
		require.Equal(t, 200, r.Status, string(r.Body))
		return r
	}
	waitStatus := func(id, status string) {
		t.Helper()
		require.Eventually(t, func() bool { return get("/v1/jobs/" + id).JSON(t)["status"] == status },
			10*time.Second, 20*time.Millisecond, "job %s never %s", id, status)
	}

	ok := publish("sec", "ok", map[string]any{"idempotencyKey": idemMark})
	require.Equal(t, 200, d.Do("POST", "/v1/queues/sec/jobs", map[string]any{"payload": map[string]any{"marker": payloadMark}, "idempotencyKey": idemMark}, auth()...).Status)
	failing := publish("sec", "fail", nil)
	busyID := publish("sec", "busy", nil)
	waitStatus(ok, "completed")
	waitStatus(failing, "dead")
	waitStatus(busyID, "completed")

	acked := publish("seca", "ok", nil)
	nacked := publish("seca", "ok", nil)
	deferred := publish("seca", "ok", nil)
	for _, id := range []string{acked, nacked, deferred} {
		waitStatus(id, "awaiting_ack")
	}
	require.Equal(t, 200, d.Do("POST", "/v1/jobs/"+acked+"/ack", map[string]any{}, auth()...).Status)
	require.Equal(t, 200, d.Do("POST", "/v1/jobs/"+nacked+"/nack", map[string]any{"retryable": false}, auth()...).Status)
	require.Equal(t, 200, d.Do("POST", "/v1/jobs/"+deferred+"/defer", map[string]any{"retryAfter": 0.1, "scope": "job"}, auth()...).Status)
	waitStatus(deferred, "awaiting_ack")
	require.Equal(t, 200, d.Do("POST", "/v1/jobs/"+deferred+"/ack", nil, auth()...).Status)
	require.Equal(t, 409, d.Do("POST", "/v1/jobs/"+acked+"/nack", map[string]any{}, auth()...).Status)
	waitStatus(nacked, "dead")

	get("/v1/queues/sec/dead")
	get("/v1/queues")
	r := d.Do("POST", "/v1/queues/sec/dead/replay", map[string]any{"ids": []string{failing}}, auth()...)
	require.Equal(t, 200, r.Status, string(r.Body))
	waitStatus(failing, "dead")

	// Refused: a wrong key, bodies that carry the payload marker but are invalid.
	require.Equal(t, 401, d.Do("GET", "/v1/queues", nil, "Authorization", "Bearer "+wrongKey).Status)
	require.Equal(t, 401, d.Do("POST", "/v1/queues/sec/jobs", map[string]any{"payload": map[string]any{"marker": payloadMark}}, "Authorization", "Bearer "+wrongKey).Status)
	require.Equal(t, 400, d.Do("POST", "/v1/queues/sec/jobs", `{"payload":"`+payloadMark+`"}`, auth()...).Status)
	require.Equal(t, 400, d.Do("POST", "/v1/queues/sec/jobs", `{"payload":{"m":"`+payloadMark+`"`, auth()...).Status)

	// A live reload to a new key and secret.
	require.NoError(t, os.WriteFile(d.Config, []byte(fmt.Sprintf("redis:\n  addr: %q\nhttp:\n  listen: %s\nlog:\n  level: debug\n%s",
		rs.Addr, strings.TrimPrefix(d.URL, "http://"), yaml(key2, secret2))), 0o600))
	d.Signal(syscall.SIGHUP)
	key = key2
	require.Eventually(t, func() bool { return d.Do("GET", "/v1/queues", nil, auth()...).Status == 200 }, 10*time.Second, 50*time.Millisecond)
	after := publish("sec", "ok", nil)
	waitStatus(after, "completed")

	// The flow really carried the markers: the webhook saw the payload,
	// signed with each secret in turn.
	sawOld, sawNew := false, false
	for _, dl := range hook.Deliveries() {
		require.Contains(t, string(dl.Body), payloadMark)
		sig := dl.Header.Get("X-Simpleq-Signature")
		sawOld = sawOld || sig == coreHMAC(secret1, dl.Body)
		sawNew = sawNew || sig == coreHMAC(secret2, dl.Body)
	}
	require.True(t, sawOld && sawNew, "deliveries were signed with both secrets")

	require.Eventually(t, func() bool {
		log := d.Log()
		for _, want := range []string{"job dead-lettered", "backpressure", "http request", "reload"} {
			if !strings.Contains(log, want) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "the last log lines")
	log := d.Log()
	for _, want := range []string{"job dead-lettered", "backpressure", "http request", "reload"} {
		require.Contains(t, log, want, "the log covers the flow (debug level)")
	}
	for _, secret := range []string{payloadMark, idemMark, key1, key2, wrongKey, secret1, secret2} {
		if i := strings.Index(log, secret); i >= 0 {
			lo, hi := max(0, i-300), min(len(log), i+200)
			t.Fatalf("%s appears in the daemon log:\n…%s…", secret, log[lo:hi])
		}
	}
	t.Logf("RELIABILITY secrets: %d log bytes at debug level, %d deliveries; payload, idempotency key, 3 API keys and 2 signing secrets absent",
		len(log), hook.Count())
}

// TestReliabilitySlowlorisCutOff: a client that sends its request headers a
// line at a time, never finishing them, is disconnected within the server's
// ReadHeaderTimeout (5 s), and the daemon keeps serving others meanwhile.
func TestReliabilitySlowlorisCutOff(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: QueueYAML("sl", hook.URL)})
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	conns := make([]net.Conn, 5)
	closed := make(chan time.Duration, len(conns))
	start := time.Now()
	for i := range conns {
		c, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "POST /v1/queues/sl/jobs HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		conns[i] = c
		go func() {
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					closed <- time.Since(start)
					return
				}
			}
		}()
	}
	stopTrickle := make(chan struct{})
	var trickled atomic.Int32
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
			}
			for _, c := range conns {
				_, _ = fmt.Fprintf(c, "X-Slow-%d: y\r\n", n)
			}
			trickled.Add(1)
		}
	}()
	defer close(stopTrickle)
	// Others are served meanwhile (a second into the trickle).
	require.Eventually(t, func() bool { return trickled.Load() >= 4 }, 10*time.Second, 10*time.Millisecond)
	id := d.Publish("sl", map[string]any{"x": 1})
	d.WaitStatus(id, "completed", 5*time.Second)
	for range conns {
		select {
		case took := <-closed:
			require.GreaterOrEqual(t, took, 4*time.Second, "closed before the header timeout: something else cut it")
			require.Less(t, took, 7*time.Second, "the header timeout did not cut the slow client")
		case <-time.After(10 * time.Second):
			t.Fatal("a slowloris connection was never closed")
		}
	}
	t.Logf("RELIABILITY slowloris: %d trickling connections cut after ~%s", len(conns), time.Since(start).Round(100*time.Millisecond))
}

// TestReliabilityHugeWebhookBody: a webhook that answers with an endless body
// costs one bounded read: the delivery is recorded at once (not after the
// 10 s timeout), lastError holds a short snippet, and the connection is
// dropped instead of drained.
func TestReliabilityHugeWebhookBody(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var written atomic.Int64
	var finished atomic.Int32
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer finished.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		code := 200
		if strings.HasSuffix(r.URL.Path, "/fail") {
			code = 500
		}
		w.WriteHeader(code)
		for i := 0; i < 1<<15; i++ { // up to 1 GiB
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil || r.Context().Err() != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	yaml := fmt.Sprintf(`defaults:
  timeout: 10s
  maxAttempts: 1
queues:
  bigok:
    webhookUrl: %s/ok
    signingSecret: s
  bigfail:
    webhookUrl: %s/fail
    signingSecret: s
`, srv.URL, srv.URL)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: yaml})
	start := time.Now()
	okID := d.Publish("bigok", map[string]any{"x": 1})
	failID := d.Publish("bigfail", map[string]any{"x": 1})
	d.WaitStatus(okID, "completed", 3*time.Second)
	job := d.WaitStatus(failID, "dead", 3*time.Second)
	took := time.Since(start)
	lastErr := job["lastError"].(string)
	require.True(t, strings.HasPrefix(lastErr, "webhook responded 500: xxx"), lastErr)
	require.LessOrEqual(t, len(lastErr), 300, "lastError is a snippet, not the body")
	require.Eventually(t, func() bool { return finished.Load() == 2 }, 5*time.Second, 10*time.Millisecond,
		"the daemon must hang up, not keep reading")
	require.Less(t, written.Load(), int64(64<<20), "far less than the endless body was sent")
	t.Logf("RELIABILITY huge webhook body: both outcomes recorded in %s; the webhook got to write %d KiB before the daemon hung up; lastError %d bytes",
		took.Round(time.Millisecond), written.Load()>>10, len(lastErr))
}

// TestReliabilityProxyEnvIgnored: with every proxy variable pointing at a
// recording proxy in the daemon's environment, deliveries still go straight
// to the webhook and the proxy sees nothing. The webhook is addressed by this
// machine's host name (resolving to loopback): Go never proxies a literal
// loopback address or "localhost", so a test with those could not fail.
func TestReliabilityProxyEnvIgnored(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	addrs, _ := net.LookupHost(host)
	loop := false
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && ip.IsLoopback() {
			loop = true
		}
	}
	if !loop || host == "localhost" {
		t.Skipf("host name %q does not resolve to a loopback address (%v)", host, addrs)
	}
	var proxied atomic.Int32
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.RequestURI)
		mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	hookURL := strings.Replace(hook.URL, "127.0.0.1", host, 1)
	env := []string{"NO_PROXY=", "no_proxy="}
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env = append(env, v+"="+proxy.URL)
	}
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", Env: env, YAML: QueueYAML("px", hookURL)})
	id := d.Publish("px", map[string]any{"x": 1})
	job := d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 1, job["attempts"])
	require.Equal(t, 1, hook.Count(), "the webhook was reached directly")
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, proxied.Load(), "the proxy saw %v", seen)
}
