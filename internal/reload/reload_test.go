package reload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/simpleq/simpleqd/internal/config"
)

// fakeTarget records every configuration applied to it.
type fakeTarget struct {
	mu   sync.Mutex
	cfgs []*config.Config
}

func (f *fakeTarget) Reload(c *config.Config) {
	f.mu.Lock()
	f.cfgs = append(f.cfgs, c)
	f.mu.Unlock()
}

func (f *fakeTarget) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cfgs)
}

func (f *fakeTarget) last() *config.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cfgs) == 0 {
		return nil
	}
	return f.cfgs[len(f.cfgs)-1]
}

func queueFile(concurrency int, extra string) string {
	return fmt.Sprintf("queues:\n  emails:\n    webhookUrl: http://127.0.0.1:9/hook?token=sekrit\n    signingSecret: whsec_x\n    concurrency: %d\n%s", concurrency, extra)
}

type fixture struct {
	path   string
	target *fakeTarget
	w      *Watcher
	logs   *observer.ObservedLogs

	// What the watcher's test signals told, in order: seq numbers the
	// signals; relevantAt and reloadAt are the seq of the last relevant
	// file event and the last finished file-change reload.
	mu                   sync.Mutex
	seq                  int
	relevant, reloads    int
	relevantAt, reloadAt int
	ignored              []string
}

// signals installs the watcher's test signals; call it before Run.
func (f *fixture) signals() {
	f.w.afterEvent = func(name string, relevant bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seq++
		if relevant {
			f.relevant++
			f.relevantAt = f.seq
		} else {
			f.ignored = append(f.ignored, filepath.Base(name))
		}
	}
	f.w.afterReload = func(trigger string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seq++
		if trigger == "file change" {
			f.reloads++
			f.reloadAt = f.seq
		}
	}
}

// relevantEvents is how many file events the watcher counted so far.
func (f *fixture) relevantEvents() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.relevant
}

// settled reports whether the watcher has finished a file-change reload
// after the last relevant event it saw: nothing is pending.
func (f *fixture) settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads > 0 && f.reloadAt > f.relevantAt
}

// sawIgnored reports whether the watcher saw an event for name and did not
// count it.
func (f *fixture) sawIgnored(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.ignored, name)
}

func start(t *testing.T, initial string) *fixture {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "simpleqd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(initial), 0o600))
	cfg, err := config.Load(path, nil)
	require.NoError(t, err)
	core, logs := observer.New(zap.DebugLevel)
	f := &fixture{path: path, target: &fakeTarget{}, logs: logs}
	f.w = New(Options{Path: path, Getenv: func(string) string { return "" }, Target: f.target, Current: cfg,
		Logger: zap.New(core), Debounce: 50 * time.Millisecond})
	f.signals()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	// Let Run install its watch before the test writes.
	require.Eventually(t, func() bool {
		return logs.FilterMessage("watching the configuration file for changes").Len() == 1
	}, 5*time.Second, 5*time.Millisecond)
	return f
}

func (f *fixture) write(t *testing.T, s string) {
	t.Helper()
	require.NoError(t, os.WriteFile(f.path, []byte(s), 0o600))
}

func (f *fixture) messages(msg string) []observer.LoggedEntry {
	return f.logs.FilterMessage(msg).All()
}

func TestFileChangeReloads(t *testing.T) {
	f := start(t, queueFile(1, ""))
	f.write(t, queueFile(4, "  sms:\n    webhookUrl: http://127.0.0.1:9/sms\n    signingSecret: whsec_y\n"))
	require.Eventually(t, func() bool { return f.target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := f.target.last()
	require.Equal(t, 4, c.Queues["emails"].Concurrency)
	require.Contains(t, c.Queues, "sms")

	entries := f.messages("configuration reloaded")
	require.Len(t, entries, 1)
	fields := entries[0].ContextMap()
	require.Equal(t, "file change", fields["trigger"])
	require.Equal(t, []any{"sms"}, fields["queuesAdded"])
	require.Equal(t, []any{"emails: concurrency 1→4"}, fields["queuesChanged"])
}

// An editor that writes a temporary file and renames it over the original
// replaces the inode: the directory watch still sees it.
func TestRenameOverReloads(t *testing.T) {
	f := start(t, queueFile(1, ""))
	tmp := f.path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(queueFile(3, "")), 0o600))
	require.NoError(t, os.Rename(tmp, f.path))
	require.Eventually(t, func() bool { return f.target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 3, f.target.last().Queues["emails"].Concurrency)

	// And a second save after the rename is still seen.
	f.write(t, queueFile(5, ""))
	require.Eventually(t, func() bool { return f.target.count() == 2 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 5, f.target.last().Queues["emails"].Concurrency)
}

func TestBurstOfWritesIsOneReload(t *testing.T) {
	f := start(t, queueFile(1, ""))
	for i := 2; i <= 6; i++ {
		// Each write is seen as an event of its own before the next, all
		// within the debounce.
		seen := f.relevantEvents()
		f.write(t, queueFile(i, ""))
		require.Eventually(t, func() bool { return f.relevantEvents() > seen }, 5*time.Second, time.Millisecond)
	}
	require.Eventually(t, func() bool { return f.target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, f.settled, 5*time.Second, time.Millisecond, "the watcher has nothing pending")
	require.Equal(t, 1, f.target.count())
	require.Equal(t, 6, f.target.last().Queues["emails"].Concurrency)
}

func TestInvalidFileIsRejected(t *testing.T) {
	f := start(t, queueFile(1, ""))
	f.write(t, queueFile(0, ""))
	require.Eventually(t, func() bool { return len(f.messages("reload rejected: keeping the running configuration")) == 1 },
		5*time.Second, 10*time.Millisecond)
	require.Zero(t, f.target.count())
	rejected := f.messages("reload rejected: keeping the running configuration")[0]
	require.Contains(t, rejected.ContextMap()["error"], "queues.emails.concurrency")

	// An empty file (a save caught half-way) is rejected too.
	f.write(t, "")
	require.Eventually(t, func() bool { return len(f.messages("reload rejected: keeping the running configuration")) == 2 },
		5*time.Second, 10*time.Millisecond)
	require.Zero(t, f.target.count())

	// Fixing the file applies it.
	f.write(t, queueFile(2, ""))
	require.Eventually(t, func() bool { return f.target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, f.target.last().Queues["emails"].Concurrency)
}

func TestUnchangedContentsAndOtherFilesAreIgnored(t *testing.T) {
	f := start(t, queueFile(1, ""))
	f.write(t, queueFile(1, ""))                                                                                    // same bytes
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(f.path), ".simpleqd.yaml.swp"), []byte("x"), 0o600)) // another file
	require.Eventually(t, func() bool { return f.sawIgnored(".simpleqd.yaml.swp") && f.settled() }, 5*time.Second, time.Millisecond,
		"the watcher has looked at both files")
	require.Zero(t, f.target.count())
	require.Empty(t, f.messages("reload rejected: keeping the running configuration"))
}

func TestTriggerReloadsEvenWhenUnchanged(t *testing.T) {
	f := start(t, queueFile(1, ""))
	f.w.Trigger()
	require.Eventually(t, func() bool { return f.target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	fields := f.messages("configuration reloaded")[0].ContextMap()
	require.Equal(t, "signal", fields["trigger"])
	require.Empty(t, fields["queuesChanged"])
}

func TestMissingFileIsRejected(t *testing.T) {
	f := start(t, queueFile(1, ""))
	require.NoError(t, os.Remove(f.path))
	f.w.Trigger()
	require.Eventually(t, func() bool { return len(f.messages("reload rejected: keeping the running configuration")) == 1 },
		5*time.Second, 10*time.Millisecond)
	require.Zero(t, f.target.count())
}

func TestRunWithoutFileServesTrigger(t *testing.T) {
	target := &fakeTarget{}
	w := New(Options{Target: target, Current: config.Default(), Getenv: func(k string) string {
		if k == "SIMPLEQ_DEFAULTS_CONCURRENCY" {
			return "7"
		}
		return ""
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	w.Trigger()
	require.Eventually(t, func() bool { return target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 7, target.last().Defaults.Concurrency)
}

func TestDiffNeverShowsSecrets(t *testing.T) {
	old, err := loadString(t, queueFile(1, "auth:\n  apiKeys: [k1]\n"))
	require.NoError(t, err)
	next, err := loadString(t, strings.Replace(queueFile(1, "auth:\n  apiKeys: [k2]\nlog:\n  level: debug\n"),
		"token=sekrit", "token=other", 1))
	require.NoError(t, err)
	ch := Diff(old, next)
	require.Equal(t, []string{"emails: webhookUrl"}, ch.ChangedLines())
	require.True(t, ch.APIKeys)
	require.Equal(t, []string{"log.level"}, ch.NeedRestart)
	require.NotContains(t, fmt.Sprint(ch), "sekrit")
	require.NotContains(t, fmt.Sprint(ch), "k2")
	require.True(t, Diff(old, old).Empty())
}

// Each rotation step (docs/operations.md) is a change the reload names,
// without the secrets.
func TestDiffNamesRotationSteps(t *testing.T) {
	file := func(secrets string) string {
		return strings.Replace(queueFile(1, ""), "signingSecret: whsec_x", secrets, 1)
	}
	steps := []string{"signingSecret: whsec_old", "signingSecrets: [whsec_old, whsec_new]",
		"signingSecrets: [whsec_new, whsec_old]", "signingSecrets: [whsec_new]"}
	// Promoting the new secret changes the current one too.
	want := [][]string{{"emails: signingSecrets"}, {"emails: signingSecret, signingSecrets"}, {"emails: signingSecrets"}}
	for i := 1; i < len(steps); i++ {
		old, err := loadString(t, file(steps[i-1]))
		require.NoError(t, err)
		next, err := loadString(t, file(steps[i]))
		require.NoError(t, err)
		ch := Diff(old, next)
		require.Equal(t, want[i-1], ch.ChangedLines(), "%s → %s", steps[i-1], steps[i])
		require.NotContains(t, fmt.Sprint(ch), "whsec_")
	}
}

func loadString(t *testing.T, s string) (*config.Config, error) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	return config.Load(path, nil)
}

// A Kubernetes ConfigMap mount: the config path is a symlink through a
// "..data" link that is swapped atomically; no event names the file itself.
func TestSymlinkSwapReloads(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "..v1"), filepath.Join(dir, "..v2")
	require.NoError(t, os.Mkdir(v1, 0o700))
	require.NoError(t, os.Mkdir(v2, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(v1, "simpleqd.yaml"), []byte(queueFile(1, "")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(v2, "simpleqd.yaml"), []byte(queueFile(9, "")), 0o600))
	require.NoError(t, os.Symlink("..v1", filepath.Join(dir, "..data")))
	path := filepath.Join(dir, "simpleqd.yaml")
	require.NoError(t, os.Symlink(filepath.Join("..data", "simpleqd.yaml"), path))

	cfg, err := config.Load(path, nil)
	require.NoError(t, err)
	core, logs := observer.New(zap.DebugLevel)
	target := &fakeTarget{}
	w := New(Options{Path: path, Target: target, Current: cfg, Logger: zap.New(core), Debounce: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	require.Eventually(t, func() bool { return logs.FilterMessage("watching the configuration file for changes").Len() == 1 },
		5*time.Second, 5*time.Millisecond)

	require.NoError(t, os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	require.Eventually(t, func() bool { return target.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 9, target.last().Queues["emails"].Concurrency)
}
