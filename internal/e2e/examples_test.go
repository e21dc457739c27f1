package test

// End-to-end tests of the worker examples under examples/: for each example
// (Go, Python, Node; standard and ack mode) a real daemon on a real
// redis-server delivers 20 jobs to the example process, which calls a fake
// provider that rate-limits its first three calls. The example must relay
// that backpressure (standard: answer 429 + Retry-After; ack: POST /defer),
// so every job completes with attempts == 1 and the three 429s show up as
// deferred history entries, each with the provider's 0.2 s wait. Each
// example verifies webhook-signature (Standard Webhooks) with its timestamp:
// the daemon's queue is mid-rotation, and forged, un-timestamped and
// replayed deliveries are refused with 401.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client"
	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/internal/redistest"
)

const (
	exJobs    = 20
	exLimited = 3 // provider calls answered 429
	exKey     = "ex_key"
	// The queue is mid-rotation: it signs with [exNewSecret, exSecret], and
	// the examples were given only exSecret (and an older one). So every
	// delivery verifies by webhook-signature alone (x-simpleq-signature is
	// exNewSecret's), and exSecret, in the Standard Webhooks form (whsec_ +
	// base64 of 32 bytes), must be decoded as that form says.
	exSecret    = "whsec_c2ltcGxlcWQgZXhhbXBsZXMgc2lnbmluZyBrZXkhISE="
	exNewSecret = "examples-new-raw-secret"
)

// exExample is one example program and the queue mode it is written for.
type exExample struct {
	name string
	mode string
	// interp is the interpreter to run it with ("" for a built Go binary).
	interp string
	// path is the script, or the Go package directory, relative to the module root.
	path string
}

var exExamples = []exExample{
	{name: "go-standard", mode: "standard", path: "examples/go-standard"},
	{name: "go-ack", mode: "ack", path: "examples/go-ack"},
	{name: "python-standard", mode: "standard", interp: "python3", path: "examples/python/standard_worker.py"},
	{name: "python-ack", mode: "ack", interp: "python3", path: "examples/python/ack_worker.py"},
	{name: "node-standard", mode: "standard", interp: "node", path: "examples/node/standard_worker.mjs"},
	{name: "node-ack", mode: "ack", interp: "node", path: "examples/node/ack_worker.mjs"},
}

var (
	exBuildOnce sync.Once
	exBinDir    string
	exBuildErr  error
)

// exRoot is the module root (tests run in test/).
func exRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// exBuildGo builds the Go examples once per run. A built binary (rather than
// `go run`) is what the test signals and waits for: `go run` would leave the
// compiled child running when the go command is killed.
func exBuildGo(t *testing.T) string {
	t.Helper()
	exBuildOnce.Do(func() {
		exBinDir, exBuildErr = os.MkdirTemp("", "simpleqd-examples-")
		if exBuildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", exBinDir+string(filepath.Separator), "./examples/go-standard", "./examples/go-ack", "./examples/go-flowkeys")
		cmd.Dir = exRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			exBuildErr = fmt.Errorf("go build examples: %v\n%s", err, out)
		}
	})
	require.NoError(t, exBuildErr)
	return exBinDir
}

// exProvider is the fake rate-limited provider: its first exLimited calls
// answer 429, each naming a 0.2 s wait a different way (Retry-After with
// decimal seconds, OpenAI's retry-after-ms, Gemini's retryDelay in the
// body), so every example's wait parsing is exercised.
func exProvider(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0.2")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
		case 2:
			w.Header().Set("Retry-After-Ms", "200")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests"}}`))
		case 3:
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[` +
				`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.2s"}]}}`))
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// exStart runs the example with its configuration in the environment and
// waits until it accepts connections. It is stopped with SIGTERM at cleanup.
func exStart(t *testing.T, ex exExample, env []string, port int) {
	t.Helper()
	var cmd *exec.Cmd
	if ex.interp == "" {
		cmd = exec.Command(filepath.Join(exBuildGo(t), filepath.Base(ex.path)))
	} else {
		bin, err := exec.LookPath(ex.interp)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI: %v", ex.interp, err)
			}
			t.Skipf("%s not installed", ex.interp)
		}
		cmd = exec.Command(bin, filepath.Join(exRoot(t), ex.path))
	}
	logPath := filepath.Join(t.TempDir(), ex.name+".log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", ex.name, b)
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true // exited: reported below
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 100*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}, 30*time.Second, 20*time.Millisecond, "%s never listened", ex.name)
	select {
	case <-done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("%s exited at start:\n%s", ex.name, b)
	default:
	}
}

func TestExamples(t *testing.T) {
	t.Parallel()
	for _, ex := range exExamples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			exRun(t, ex)
		})
	}
}

func exRun(t *testing.T, ex exExample) {
	rs := Redis(t)
	provider, calls := exProvider(t)
	port := redistest.FreePort(t)
	yaml := fmt.Sprintf(`auth:
  apiKeys: [%s]
queues:
  work:
    webhookUrl: http://127.0.0.1:%d/webhook
    signingSecrets: [%s, %s]
    mode: %s
    concurrency: 4
    maxAttempts: 3
    backoff: {type: fixed, base: 100ms}
`, exKey, port, exNewSecret, exSecret, ex.mode)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info"})
	exStart(t, ex, []string{
		"SIMPLEQ_URL=" + d.URL,
		"SIMPLEQ_API_KEY=" + exKey,
		// A rotation in progress (see exSecret): the worker knows the
		// queue's second secret only.
		"SIGNING_SECRET=whsec_previous," + exSecret,
		"LISTEN=127.0.0.1:" + strconv.Itoa(port),
		"PROVIDER_URL=" + provider.URL + "/v1/messages",
	}, port)

	// Deliveries that are unsigned, wrongly signed, signed the SimpleQ way
	// only (which carries no timestamp, so could be a replay), or genuinely
	// signed but ten minutes old (a replay) are refused before any work.
	env := []byte(`{"id":"job_x_work","queue":"work","payload":{},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`)
	// standard signs env for webhook-signature under key, at.
	standard := func(key []byte, at time.Time) http.Header {
		ts := strconv.FormatInt(at.Unix(), 10)
		m := hmac.New(sha256.New, key)
		m.Write([]byte("job_x_work:1." + ts + "."))
		m.Write(env)
		return http.Header{"Webhook-Id": {"job_x_work:1"}, "Webhook-Timestamp": {ts},
			"Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))}}
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(exSecret, "whsec_"))
	require.NoError(t, err)
	require.NoError(t, (&webhook.Verifier{Secrets: []string{exSecret}}).Verify(standard(decoded, time.Now()), env), "the test's own signing is right")
	refreshed := standard(decoded, time.Now().Add(-time.Hour))
	refreshed.Set("Webhook-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	for name, h := range map[string]http.Header{
		"unsigned":                    {},
		"x-simpleq-signature only":    {"X-Simpleq-Signature": {webhook.Sign(exSecret, env)}},
		"wrong secret":                standard([]byte("whsec_wrong"), time.Now()),
		"whsec_ secret not decoded":   standard([]byte(exSecret), time.Now()),
		"replayed ten minutes later":  standard(decoded, time.Now().Add(-10*time.Minute)),
		"replay with a new timestamp": refreshed,
	} {
		req, err := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(port)+"/webhook", bytes.NewReader(env))
		require.NoError(t, err)
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	c, err := client.New(d.URL, exKey)
	require.NoError(t, err)
	ids := make([]string, exJobs)
	for i := range ids {
		res, err := c.Publish(ctx, "work", map[string]any{"prompt": fmt.Sprintf("job %d", i), "big": json12345678901234567890()}, nil)
		require.NoError(t, err)
		ids[i] = res.ID
	}

	jobs := make([]*client.Job, exJobs)
	require.Eventually(t, func() bool {
		for i, id := range ids {
			if jobs[i] != nil && jobs[i].Status.Terminal() {
				continue
			}
			j, err := c.GetJob(ctx, id)
			require.NoError(t, err)
			jobs[i] = j
			if !j.Status.Terminal() {
				return false
			}
		}
		return true
	}, 40*time.Second, 25*time.Millisecond, "not every job finished")

	deferred, deferCount := 0, 0
	for _, j := range jobs {
		require.Equal(t, client.StatusCompleted, j.Status, "job %s: %+v", j.ID, j.History)
		require.Equal(t, 1, j.Attempts, "job %s: a 429 must never spend an attempt: %+v", j.ID, j.History)
		deferCount += j.DeferCount
		for i, h := range j.History {
			switch {
			case h.Status == client.AttemptDeferred:
				deferred++
				require.Equal(t, 200*time.Millisecond, h.RetryAfter, "the provider's wait is relayed exactly")
				require.Equal(t, client.ScopeQueue, h.Scope)
				require.Equal(t, 1, h.Attempt)
			case i == len(j.History)-1:
				require.Equal(t, client.AttemptSuccess, h.Status)
				require.Equal(t, ex.mode == "ack", h.Acked, "an ack is a success marked acked")
			default:
				t.Fatalf("job %s: unexpected history %+v", j.ID, j.History)
			}
		}
	}
	require.Equal(t, exLimited, deferred, "one deferred entry per provider 429")
	require.Equal(t, exLimited, deferCount)
	require.EqualValues(t, exJobs+exLimited, calls.Load(), "each job called the provider once more per 429 it met (refused deliveries never)")
	q, err := c.Queue(ctx, "work")
	require.NoError(t, err)
	require.Equal(t, client.HoldOpen, q.Hold.State, "the probe's success reopened the queue")
	require.Equal(t, client.QueueCounts{}, q.Counts)
}

// json12345678901234567890 is a payload member above 2^53; every example must
// pass the payload on without choking on it.
func json12345678901234567890() any { return uint64(12345678901234567890) }
