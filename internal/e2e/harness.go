// Package test holds simpleqd's integration and end-to-end tests: real
// redis-server processes, real simpleqd daemon processes built from
// cmd/simpleqd, and scripted webhooks, all on loopback. This file is the
// harness; tests wait on observed state (require.Eventually), not on sleeps.
package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/simpleqd once per test run and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "simpleqd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "simpleqd")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/simpleqd")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// Daemon is one simpleqd process, or one daemon inside the test process
// (StartInProcess).
type Daemon struct {
	t       testing.TB
	URL     string
	Config  string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	exit    error
	// inproc is set for a daemon inside the test process.
	inproc *inProcess
}

// DaemonConfig is the YAML a test daemon runs with; %REDIS% and %LISTEN% are filled in.
type DaemonConfig struct {
	RedisAddr string
	// RedisAddrs, when set, points the daemon at a Redis Cluster instead.
	RedisAddrs []string
	// RedisYAML, when set, is the whole redis section instead (url:, tls:,
	// sentinel:, …), its keys unindented; the harness indents it.
	RedisYAML string
	// YAML is everything below the redis/http sections (defaults:, queues:, …).
	YAML string
	// Env adds environment variables (e.g. signing secrets).
	Env []string
	// LogLevel defaults to debug, so a failing test shows every decision.
	LogLevel string
}

// StartDaemon writes the config, starts simpleqd serve and waits for /readyz.
func StartDaemon(t testing.TB, c DaemonConfig) *Daemon {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "simpleqd.yaml")
	d := &Daemon{t: t, Config: path, LogPath: filepath.Join(dir, "simpleqd.log"), done: make(chan struct{})}
	// A port FreePort found free can still be taken before the daemon binds
	// it (rarely: see FreePort); then the daemon gets another one.
	for try := 1; ; try++ {
		port := redistest.FreePort(t)
		require.NoError(t, os.WriteFile(path, []byte(c.file("127.0.0.1:"+strconv.Itoa(port))), 0o600))
		d.URL = "http://127.0.0.1:" + strconv.Itoa(port)
		if d.start(c.Env, try < 3) {
			break
		}
		t.Logf("port %d was taken before the daemon bound it; trying another", port)
	}
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(d.LogPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("daemon %s log (tail):\n%s", d.URL, b)
		}
	})
	return d
}

// file is the configuration file for c, the API listening on listen.
func (c DaemonConfig) file(listen string) string {
	level := c.LogLevel
	if level == "" {
		level = "debug"
	}
	redisYAML := fmt.Sprintf("addr: %q", c.RedisAddr)
	if len(c.RedisAddrs) > 0 {
		redisYAML = fmt.Sprintf("addrs: [%s]", strings.Join(c.RedisAddrs, ", "))
	}
	if c.RedisYAML != "" {
		redisYAML = strings.ReplaceAll(strings.TrimRight(c.RedisYAML, "\n"), "\n", "\n  ")
	}
	// A short lame duck: a stop waits it out, and no load balancer has to
	// leave these daemons (a test that wants one sets it).
	lameDuck := "lameDuck: 100ms\n"
	if strings.Contains(c.YAML, "lameDuck:") {
		lameDuck = ""
	}
	return fmt.Sprintf("redis:\n  %s\nhttp:\n  listen: %s\nlog:\n  level: %s\n%s%s\n", redisYAML, listen, level, lameDuck, c.YAML)
}

// start runs the daemon and waits until it is ready. With retryBind, a
// daemon that exits because its port is taken reports false instead of
// failing the test.
func (d *Daemon) start(env []string, retryBind bool) bool {
	d.t.Helper()
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(d.t, err)
	d.cmd = exec.Command(Binary(d.t), "serve", "--config", d.Config)
	// Die with the test process even if it is killed before its cleanup runs.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.Env = append(os.Environ(), env...)
	require.NoError(d.t, d.cmd.Start())
	d.done = make(chan struct{})
	go func() {
		d.exit = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	require.Eventually(d.t, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		resp, err := http.Get(d.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 20*time.Second, 20*time.Millisecond, "daemon never became ready")
	select {
	case <-d.done:
		b, _ := os.ReadFile(d.LogPath)
		if retryBind && bytes.Contains(b, []byte("address already in use")) {
			_ = os.Remove(d.LogPath)
			return false
		}
		d.t.Fatalf("daemon exited at start: %v\n%s", d.exit, b)
	default:
	}
	return true
}

// Restart starts the same daemon again after Kill or Stop.
func (d *Daemon) Restart() {
	d.t.Helper()
	if d.inproc != nil {
		d.t.Fatal("Restart needs a daemon process (StartDaemon), not StartInProcess")
	}
	d.start(nil, false)
}

// Signal sends sig to the daemon process.
func (d *Daemon) Signal(sig syscall.Signal) {
	if d.inproc != nil {
		d.t.Fatalf("Signal(%s) needs a daemon process (StartDaemon), not StartInProcess", sig)
	}
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(sig)
	}
}

// Kill ends the daemon abruptly (SIGKILL), as a crash would, and waits. An
// in-process daemon cannot crash: it stops, gracefully.
func (d *Daemon) Kill() {
	if d.inproc != nil {
		d.inproc.stop()
		return
	}
	d.Signal(syscall.SIGCONT)
	d.Signal(syscall.SIGKILL)
	<-d.done
}

// Stop sends SIGTERM and returns the exit code once the daemon has exited.
func (d *Daemon) Stop(within time.Duration) int {
	d.t.Helper()
	if d.inproc != nil {
		d.inproc.cancel()
	} else {
		d.Signal(syscall.SIGTERM)
	}
	select {
	case <-d.done:
	case <-time.After(within):
		d.t.Fatalf("daemon did not exit within %s", within)
	}
	if d.exit == nil {
		return 0
	}
	if ee, ok := d.exit.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Exited reports whether the process has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Log returns the daemon's log so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}

// Response is an API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), string(r.Body))
	return m
}

// Do sends an API request; body may be nil, a string, []byte or any JSON value.
func (d *Daemon) Do(method, path string, body any, headers ...string) Response {
	d.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(d.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, d.URL+path, rd)
	require.NoError(d.t, err)
	// Every request that may change state says JSON, even without a body, as
	// the SDKs and the console do: the API refuses any other (its CSRF
	// defence, api/browser.go). A test that means to send none passes
	// "Content-Type", "" in headers.
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Publish publishes a job and returns its id.
func (d *Daemon) Publish(queue string, payload any) string {
	d.t.Helper()
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs", map[string]any{"payload": payload})
	require.Equal(d.t, 201, r.Status, string(r.Body))
	return r.JSON(d.t)["id"].(string)
}

// Job reads a job.
func (d *Daemon) Job(id string) map[string]any {
	d.t.Helper()
	r := d.Do("GET", "/v1/jobs/"+id, nil)
	require.Equal(d.t, 200, r.Status, string(r.Body))
	return r.JSON(d.t)
}

// Queue reads a queue's status.
func (d *Daemon) Queue(name string) map[string]any {
	d.t.Helper()
	r := d.Do("GET", "/v1/queues/"+name, nil)
	require.Equal(d.t, 200, r.Status, string(r.Body))
	return r.JSON(d.t)
}

// WaitStatus waits until a job reaches status and returns it.
func (d *Daemon) WaitStatus(id, status string, within time.Duration) map[string]any {
	d.t.Helper()
	var last map[string]any
	require.Eventually(d.t, func() bool {
		last = d.Job(id)
		return last["status"] == status
	}, within, 10*time.Millisecond, "job %s never reached %s", id, status)
	return last
}

// Delivery is one request a Webhook received.
type Delivery struct {
	JobID    string
	Attempt  int
	Body     []byte
	Header   http.Header
	Start    time.Time
	End      time.Time
	Inflight int // concurrent requests including this one, at its start
}

// Envelope decodes the delivery body.
func (dl Delivery) Envelope() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(dl.Body, &m)
	return m
}

// Reply is what a scripted webhook answers.
type Reply struct {
	Status     int
	RetryAfter string
	Delay      time.Duration
	Body       string
}

// Webhook is a scripted, recording webhook on loopback.
type Webhook struct {
	URL string
	srv *httptest.Server

	mu          sync.Mutex
	deliveries  []Delivery
	inflight    int
	maxInflight int
	script      func(Delivery) Reply
	notify      chan struct{}
}

// NewWebhook starts a webhook answering per script (nil: always 200).
func NewWebhook(t testing.TB, script func(Delivery) Reply) *Webhook {
	t.Helper()
	w := &Webhook{script: script, notify: make(chan struct{}, 1)}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	w.URL = w.srv.URL + "/hook"
	t.Cleanup(w.srv.Close)
	return w
}

// SetScript replaces the answering script.
func (w *Webhook) SetScript(script func(Delivery) Reply) {
	w.mu.Lock()
	w.script = script
	w.mu.Unlock()
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	att, _ := strconv.Atoi(r.Header.Get("X-Simpleq-Attempt"))
	w.mu.Lock()
	w.inflight++
	if w.inflight > w.maxInflight {
		w.maxInflight = w.inflight
	}
	dl := Delivery{JobID: r.Header.Get("X-Simpleq-Job-Id"), Attempt: att, Body: body,
		Header: r.Header.Clone(), Start: time.Now(), Inflight: w.inflight}
	script := w.script
	w.mu.Unlock()
	reply := Reply{Status: 200}
	if script != nil {
		reply = script(dl)
	}
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
		}
	}
	if reply.RetryAfter != "" {
		rw.Header().Set("Retry-After", reply.RetryAfter)
	}
	if reply.Status == 0 {
		reply.Status = 200
	}
	rw.WriteHeader(reply.Status)
	_, _ = io.WriteString(rw, reply.Body)
	w.mu.Lock()
	w.inflight--
	dl.End = time.Now()
	w.deliveries = append(w.deliveries, dl)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Deliveries returns a copy of every finished delivery so far, in finishing order.
func (w *Webhook) Deliveries() []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Delivery(nil), w.deliveries...)
}

// Count returns how many deliveries finished.
func (w *Webhook) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.deliveries)
}

// Idle reports whether no request is being answered: every delivery that
// reached the webhook is recorded.
func (w *Webhook) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inflight == 0
}

// MaxInflight is the highest number of concurrent requests seen.
func (w *Webhook) MaxInflight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxInflight
}

// Redis starts a real redis-server for one test.
func Redis(t testing.TB, extra ...string) *redistest.Server {
	t.Helper()
	return redistest.Start(t, extra...)
}

// QueueYAML renders a queues: section for one queue with extra settings
// (already indented by 4 spaces each line).
func QueueYAML(name, url string, settings ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "queues:\n  %s:\n    webhookUrl: %s\n    signingSecret: whsec_test\n", name, url)
	for _, s := range settings {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}
