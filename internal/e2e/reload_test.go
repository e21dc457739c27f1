package test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reloadYAML renders the part of the test daemon's file below redis/http/log.
func reloadYAML(queues ...string) string {
	return "defaults:\n  backoff: {type: fixed, base: 50ms}\nqueues:\n" + strings.Join(queues, "")
}

func reloadQueue(name, url string, concurrency int) string {
	return "  " + name + ":\n    webhookUrl: " + url + "\n    signingSecret: whsec_test\n    concurrency: " +
		strconv.Itoa(concurrency) + "\n"
}

// configEditor rewrites the part of a test daemon's config file that the
// test chose, keeping the harness' redis/http/log header.
type configEditor struct {
	t      *testing.T
	header string
}

func newConfigEditor(t *testing.T, d *Daemon, yaml string) *configEditor {
	b, err := os.ReadFile(d.Config)
	require.NoError(t, err)
	i := strings.Index(string(b), yaml)
	require.GreaterOrEqual(t, i, 0)
	return &configEditor{t: t, header: string(b[:i])}
}

// write saves the file in place (truncate and write).
func (e *configEditor) write(path, yaml string) {
	require.NoError(e.t, os.WriteFile(path, []byte(e.header+yaml+"\n"), 0o600))
}

// replace saves the file the way many editors do: write a temporary file,
// then rename it over the original (a new inode).
func (e *configEditor) replace(path, yaml string) {
	tmp := path + ".tmp"
	require.NoError(e.t, os.WriteFile(tmp, []byte(e.header+yaml+"\n"), 0o600))
	require.NoError(e.t, os.Rename(tmp, path))
}

// logLines decodes the daemon's JSON log lines with the given message.
func logLines(t *testing.T, d *Daemon, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(d.Log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func reloadsBy(t *testing.T, d *Daemon, trigger string) int {
	n := 0
	for _, l := range logLines(t, d, "configuration reloaded") {
		if l["trigger"] == trigger {
			n++
		}
	}
	return n
}

func rejectionsBy(t *testing.T, d *Daemon, trigger string) []map[string]any {
	var out []map[string]any
	for _, l := range logLines(t, d, "reload rejected: keeping the running configuration") {
		if l["trigger"] == trigger {
			out = append(out, l)
		}
	}
	return out
}

// published collects job ids so the test can check at the end that no
// reload lost one.
type published struct {
	mu  sync.Mutex
	ids []string
}

func (p *published) add(d *Daemon, queue string, n int) {
	for i := 0; i < n; i++ {
		id := d.Publish(queue, map[string]any{"i": i})
		p.mu.Lock()
		p.ids = append(p.ids, id)
		p.mu.Unlock()
	}
}

// TestReloadOnFileChangeAndSIGHUP: a running daemon picks up a changed
// config file by itself (in-place writes and rename-over saves) and on
// SIGHUP: concurrency, webhookUrl and new queues take effect without a
// restart, an invalid file is rejected while the daemon keeps serving the
// old configuration, and no job is lost across all of it.
func TestReloadOnFileChangeAndSIGHUP(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	slow := func(Delivery) Reply { return Reply{Status: 200, Delay: 100 * time.Millisecond} }
	hookA := NewWebhook(t, slow)
	hookB := NewWebhook(t, slow)
	initial := reloadYAML(reloadQueue("orders", hookA.URL, 1))
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: initial, LogLevel: "info"})
	ed := newConfigEditor(t, d, initial)
	var jobs published

	// concurrency 1: one delivery at a time.
	jobs.add(d, "orders", 5)
	require.Eventually(t, func() bool { return hookA.Count() >= 3 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, hookA.MaxInflight())

	// 1. An in-place write raising concurrency to 4 while jobs wait.
	jobs.add(d, "orders", 30)
	ed.write(d.Config, reloadYAML(reloadQueue("orders", hookA.URL, 4)))
	require.Eventually(t, func() bool { return hookA.MaxInflight() == 4 }, 10*time.Second, 10*time.Millisecond,
		"concurrency never rose to 4 after the file changed")
	require.Eventually(t, func() bool { return reloadsBy(t, d, "file change") == 1 }, 5*time.Second, 10*time.Millisecond)
	line := logLines(t, d, "configuration reloaded")[0]
	require.Equal(t, []any{"orders: concurrency 1→4"}, line["queuesChanged"])
	require.EqualValues(t, 4, d.Queue("orders")["concurrency"])

	// 2. An editor-style save (rename over) moving the webhook and adding a
	// queue. Before it, the new queue does not exist.
	require.Equal(t, 404, d.Do("POST", "/v1/queues/invoices/jobs", map[string]any{"payload": map[string]any{}}).Status)
	require.Eventually(t, func() bool { return d.Queue("orders")["counts"].(map[string]any)["pending"] == 0.0 },
		20*time.Second, 20*time.Millisecond)
	ed.replace(d.Config, reloadYAML(reloadQueue("orders", hookB.URL, 4), reloadQueue("invoices", hookB.URL, 2)))
	require.Eventually(t, func() bool { return reloadsBy(t, d, "file change") == 2 }, 10*time.Second, 10*time.Millisecond)
	aBefore := hookA.Count()
	jobs.add(d, "orders", 8)
	r := d.Do("POST", "/v1/queues/invoices/jobs", map[string]any{"payload": map[string]any{"n": 1}})
	require.Equal(t, 201, r.Status, string(r.Body))
	jobs.ids = append(jobs.ids, r.JSON(t)["id"].(string))
	require.Eventually(t, func() bool { return hookB.Count() >= 9 }, 10*time.Second, 10*time.Millisecond,
		"deliveries never moved to the new webhook")
	require.Equal(t, aBefore, hookA.Count(), "no delivery may go to the old webhook after the reload")
	added := logLines(t, d, "configuration reloaded")[1]
	require.Equal(t, []any{"invoices"}, added["queuesAdded"])
	require.Equal(t, []any{"orders: webhookUrl"}, added["queuesChanged"], "the URL itself is never logged")

	// 3. An invalid file is rejected; the daemon keeps the running config.
	ed.write(d.Config, reloadYAML(reloadQueue("orders", hookB.URL, 0)))
	require.Eventually(t, func() bool { return len(rejectionsBy(t, d, "file change")) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, d.Log(), "reload rejected")
	require.Contains(t, rejectionsBy(t, d, "file change")[0]["error"], "queues.orders.concurrency")
	require.EqualValues(t, 4, d.Queue("orders")["concurrency"])
	jobs.add(d, "invoices", 2) // the queue the rejected file dropped still works
	jobs.add(d, "orders", 2)

	// 4. SIGHUP. The file is changed through a hard link under another
	// name, which the watcher ignores (it watches the config's own name), so
	// only the signal can apply it.
	alias := filepath.Join(filepath.Dir(d.Config), "alias.yaml")
	require.NoError(t, os.Link(d.Config, alias))
	fileReloads := reloadsBy(t, d, "file change")
	ed.write(alias, reloadYAML(reloadQueue("orders", hookA.URL, 2), reloadQueue("invoices", hookB.URL, 2),
		reloadQueue("refunds", hookA.URL, 1)))
	require.Never(t, func() bool { return reloadsBy(t, d, "file change") != fileReloads }, 400*time.Millisecond, 20*time.Millisecond,
		"past the watcher's debounce: it must not have reacted")
	require.Equal(t, 404, d.Do("POST", "/v1/queues/refunds/jobs", map[string]any{"payload": map[string]any{}}).Status)
	d.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool { return reloadsBy(t, d, "signal") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, fileReloads, reloadsBy(t, d, "file change"))
	sig := logLines(t, d, "configuration reloaded")
	require.Equal(t, []any{"refunds"}, sig[len(sig)-1]["queuesAdded"])
	require.Equal(t, []any{"orders: webhookUrl, concurrency 4→2"}, sig[len(sig)-1]["queuesChanged"])
	require.EqualValues(t, 2, d.Queue("orders")["concurrency"])
	jobs.add(d, "refunds", 2)
	aBefore = hookA.Count()
	jobs.add(d, "orders", 2)
	require.Eventually(t, func() bool { return hookA.Count() >= aBefore+4 }, 10*time.Second, 10*time.Millisecond,
		"orders and refunds deliveries must go to webhook A after SIGHUP")

	// 5. An invalid file on SIGHUP is rejected the same way.
	fileRejections := len(rejectionsBy(t, d, "file change"))
	ed.write(alias, reloadYAML("  orders:\n    webhookUrl: ftp://nowhere\n    signingSecret: whsec_test\n"))
	require.Never(t, func() bool { return len(rejectionsBy(t, d, "file change")) != fileRejections }, 400*time.Millisecond,
		20*time.Millisecond, "past the watcher's debounce: it must not have reacted")
	d.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool { return len(rejectionsBy(t, d, "signal")) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, rejectionsBy(t, d, "signal")[0]["error"], "queues.orders.webhookUrl")
	require.Equal(t, 201, d.Do("POST", "/v1/queues/refunds/jobs", map[string]any{"payload": map[string]any{}}).Status,
		"the daemon keeps serving the running configuration")

	// No reload lost or stranded a job.
	for _, id := range jobs.ids {
		d.WaitStatus(id, "completed", 20*time.Second)
	}
	require.False(t, d.Exited())
	require.NotContains(t, d.Log(), "whsec_test", "no signing secret in the log")
}
