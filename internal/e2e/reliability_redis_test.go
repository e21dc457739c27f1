package test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Redis faults (issue #8): Redis killed with AOF on, paused, frozen, its
// client connections dropped, all while publishes and deliveries run.

// publishLoad publishes from `workers` goroutines until stop is closed. Every
// answer is recorded: acknowledged publishes (201/200 with the job id, by
// idempotency key), and every other answer with its start time and latency.
type publishLoad struct {
	mu    sync.Mutex
	acked map[string]string // idempotency key -> job id
	other []publishAnswer
	all   []publishAnswer
	n     atomic.Int64
	maxOK time.Duration
}

type publishAnswer struct {
	key        string
	status     int // 0: no answer (connection error)
	start, end time.Time
	err        error
}

// run publishes to the daemons in turn. With retry, a key whose publish got
// no acknowledgement is published again (same key) until it is.
func (p *publishLoad) run(ds []*Daemon, queue string, workers int, retry bool, stop <-chan struct{}) *sync.WaitGroup {
	p.acked = map[string]string{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := ""
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if key == "" || !retry {
					key = fmt.Sprintf("w%d-%d", w, p.n.Add(1))
				}
				d := ds[i%len(ds)]
				start := time.Now()
				code, b, err := relPost(d.URL+"/v1/queues/"+queue+"/jobs",
					map[string]any{"payload": map[string]any{"key": key}, "idempotencyKey": key})
				end := time.Now()
				p.mu.Lock()
				p.all = append(p.all, publishAnswer{key: key, status: code, start: start, end: end, err: err})
				p.mu.Unlock()
				var r struct{ ID string }
				if err == nil && (code == 201 || code == 200) && json.Unmarshal(b, &r) == nil && r.ID != "" {
					p.mu.Lock()
					p.acked[key] = r.ID
					p.maxOK = max(p.maxOK, end.Sub(start))
					p.mu.Unlock()
					key = ""
					continue
				}
				p.mu.Lock()
				p.other = append(p.other, publishAnswer{key: key, status: code, start: start, end: end, err: err})
				p.mu.Unlock()
				time.Sleep(10 * time.Millisecond) //nolint:testsleep // a client's pause before it publishes again after a refusal
			}
		}()
	}
	return &wg
}

// checkDownAnswers: every request was answered within 5 seconds, and one
// that started while Redis was away and was answered before it came back was
// answered 503 (never a 2xx, never a connection error).
func (p *publishLoad) checkDownAnswers(t *testing.T, down, up time.Time) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	var slowest time.Duration
	for _, a := range p.all {
		// No request hangs, whenever it started: one sent just before
		// Redis went away must not wait for it to come back either.
		require.Less(t, a.end.Sub(a.start), 5*time.Second, "the API must answer quickly while Redis is away: %+v", a)
		if a.start.Before(down) || !a.start.Before(up) {
			continue
		}
		n++
		slowest = max(slowest, a.end.Sub(a.start))
		require.Less(t, a.end.Sub(a.start), 5*time.Second, "the API must answer quickly while Redis is away: %+v", a)
		if a.end.Before(up) {
			require.Equal(t, 503, a.status, "answer while Redis was away: %+v", a)
		}
	}
	t.Logf("%d answers while Redis was away: all 503, slowest %s", n, slowest.Round(time.Millisecond))
	return n
}

// answeredSince counts the publishes that started at or after from and were
// answered; with acked, only the acknowledgements.
func (p *publishLoad) answeredSince(from time.Time, acked bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.all {
		if a.start.Before(from) || a.err != nil || a.status == 0 {
			continue
		}
		if !acked || a.status == 201 || a.status == 200 {
			n++
		}
	}
	return n
}

// flowing waits until n publishes that started at or after from were
// acknowledged: the load runs, and Redis answers.
func (p *publishLoad) flowing(t *testing.T, from time.Time, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return p.answeredSince(from, true) >= n }, 30*time.Second, 5*time.Millisecond, what)
}

func (p *publishLoad) snapshot() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.acked))
	for k, v := range p.acked {
		out[k] = v
	}
	return out
}

// redisCrash kills redis-server (kill -9) under publish load and restarts it
// from its AOF; it returns how many acknowledged publishes are gone.
func redisCrash(t *testing.T, fsync string) (lost, acked int) {
	t.Helper()
	rs := Redis(t, "--appendonly", "yes", "--appendfsync", fsync)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: QueueYAML("aof", hook.URL, "concurrency: 20")})
	var load publishLoad
	stop := make(chan struct{})
	wg := load.run([]*Daemon{d}, "aof", 4, false, stop)
	load.flowing(t, time.Time{}, 300, "publishes flow before Redis dies")
	before := len(load.snapshot())
	rs.Kill()
	down := time.Now()
	// Redis stays away until the daemon says so and has answered a good
	// number of publishes meanwhile.
	require.Eventually(t, func() bool {
		return load.answeredSince(down, false) >= 100 && d.Do("GET", "/readyz", nil).Status == 503
	}, 20*time.Second, 10*time.Millisecond, "the daemon answers while Redis is away")
	up := time.Now()
	rs.Restart(t)
	require.Eventually(t, func() bool { return d.Do("GET", "/readyz", nil).Status == 200 }, 20*time.Second, 50*time.Millisecond)
	load.flowing(t, time.Now(), 50, "publishes flow again")
	close(stop)
	wg.Wait()
	require.Greater(t, before, 50, "publishes were flowing when Redis died")
	require.Positive(t, load.checkDownAnswers(t, down, up), "requests were made while Redis was away")

	all := load.snapshot()
	var ids []string
	for _, id := range all {
		ids = append(ids, id)
	}
	for _, id := range ids {
		_, code, err := relGetJob(d.URL, id)
		require.NoError(t, err)
		if code == 404 {
			lost++
			continue
		}
		require.Equal(t, 200, code)
	}
	// Whatever survived is delivered: the daemon resumed by itself.
	relWaitDrained(t, d, "aof", 30*time.Second)
	require.False(t, d.Exited())
	return lost, len(ids)
}

// TestReliabilityRedisCrashAOFAlways: with appendfsync always, a kill -9 of
// redis-server under publish load loses no acknowledged (201) publish; while
// it is down the API answers 503 within 5 s, never 2xx; after the restart
// the daemon resumes by itself and every job is delivered.
func TestReliabilityRedisCrashAOFAlways(t *testing.T) {
	t.Parallel()
	lost, acked := redisCrash(t, "always")
	t.Logf("RELIABILITY redis kill -9, appendfsync always: %d acknowledged publishes, %d lost", acked, lost)
	require.Zero(t, lost, "an acknowledged publish was lost")
}

// TestReliabilityRedisCrashAOFEverysec: the same with appendfsync everysec,
// which may lose up to about a second of writes; the loss is measured and
// reported, not asserted (docs/operations.md documents it).
func TestReliabilityRedisCrashAOFEverysec(t *testing.T) {
	t.Parallel()
	lost, acked := redisCrash(t, "everysec")
	t.Logf("RELIABILITY redis kill -9, appendfsync everysec: %d acknowledged publishes, %d lost (measured, not asserted)", acked, lost)
}

// TestReliabilityRedisPauseAndDroppedConnections: CLIENT PAUSE for 2 s, then
// CLIENT KILL TYPE normal five times, mid-traffic with 2 daemons. Publishers
// retry unacknowledged publishes with the same idempotency key. Every job is
// acknowledged once and completes; nothing is stuck, and the queue's counters
// end at zero (a script run twice by a client retry would leave them off).
func TestReliabilityRedisPauseAndDroppedConnections(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200, Delay: 5 * time.Millisecond} })
	cfg := DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("pz", hook.URL, "timeout: 500ms", "concurrency: 8", "maxAttempts: 20", "backoff: {type: fixed, base: 20ms}")}
	ds := startFleet(t, 2, cfg)
	rc := rs.Client(t)
	ctx := context.Background()

	var load publishLoad
	stop := make(chan struct{})
	wg := load.run(ds, "pz", 4, true, stop)
	load.flowing(t, time.Time{}, 100, "publishes flow before the pause")
	require.NoError(t, rc.Do(ctx, "CLIENT", "PAUSE", "2000").Err())
	// A publish that started after the pause began is acknowledged only
	// once the pause has ended.
	load.flowing(t, time.Now(), 50, "publishes flow again after the pause")
	for i := 0; i < 5; i++ {
		killed := time.Now()
		n, err := rc.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Int()
		require.NoError(t, err)
		require.Positive(t, n, "connections were dropped")
		load.flowing(t, killed, 20, "publishes flow again after the connections dropped")
	}
	close(stop)
	wg.Wait()

	acked := load.snapshot()
	require.Greater(t, len(acked), 100)
	var ids []string
	seen := map[string]bool{}
	for k, id := range acked {
		require.False(t, seen[id], "two keys got the same job %s (%s)", id, k)
		seen[id] = true
		ids = append(ids, id)
	}
	// Every answer that was not an acknowledgement was a 503, quick.
	load.mu.Lock()
	for _, a := range load.other {
		require.Equal(t, 503, a.status, "%+v", a)
		require.Less(t, a.end.Sub(a.start), 5*time.Second)
	}
	slowestDuringPause := load.maxOK
	nOther := len(load.other)
	load.mu.Unlock()
	require.Less(t, slowestDuringPause, 5*time.Second, "a publish during CLIENT PAUSE waited too long")

	counts := relWaitDrained(t, ds[0], "pz", 30*time.Second)
	require.EqualValues(t, 0, counts["dead"])
	jobs := relJobs(t, ds[1].URL, ids)
	perJob := map[string]int{}
	for _, dl := range hook.Deliveries() {
		perJob[dl.JobID]++
	}
	dups := 0
	for _, id := range ids {
		require.Equal(t, "completed", jobs[id]["status"], "job %s", id)
		require.GreaterOrEqual(t, perJob[id], 1)
		dups += perJob[id] - 1
	}
	t.Logf("RELIABILITY CLIENT PAUSE 2s + 5x CLIENT KILL TYPE normal: %d jobs acknowledged and completed, "+
		"%d 503 answers, slowest acknowledged publish %s, duplicate deliveries %d",
		len(ids), nOther, slowestDuringPause.Round(time.Millisecond), dups)
	for _, d := range ds {
		require.False(t, d.Exited())
	}
}

// TestReliabilityRedisFrozen: redis-server frozen with SIGSTOP (it accepts
// connections and answers nothing, the worst case for a client) for 7 s under
// publish load: the API answers 503 within 5 s, never 2xx, /readyz says 503;
// after SIGCONT every acknowledged job completes and the counters are right.
func TestReliabilityRedisFrozen(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("fz", hook.URL, "timeout: 500ms", "maxAttempts: 20", "backoff: {type: fixed, base: 20ms}")})
	var load publishLoad
	stop := make(chan struct{})
	wg := load.run([]*Daemon{d}, "fz", 3, true, stop)
	load.flowing(t, time.Time{}, 100, "publishes flow before the freeze")
	rs.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	t.Cleanup(func() { rs.Signal(syscall.SIGCONT) })
	var readyz []int
	for time.Since(frozen) < 7*time.Second {
		start := time.Now()
		r := d.Do("GET", "/readyz", nil)
		require.Less(t, time.Since(start), 5*time.Second, "/readyz hangs")
		readyz = append(readyz, r.Status)
		time.Sleep(500 * time.Millisecond) //nolint:testsleep // the freeze lasts 7 s of wall time, sampled every 500 ms
	}
	thawed := time.Now()
	rs.Signal(syscall.SIGCONT)
	require.Contains(t, readyz, 503)
	require.Eventually(t, func() bool { return d.Do("GET", "/readyz", nil).Status == 200 }, 20*time.Second, 50*time.Millisecond)
	load.flowing(t, time.Now(), 50, "publishes flow again after the thaw")
	close(stop)
	wg.Wait()
	// A request sent just before the freeze may be answered once Redis
	// thaws; one that started a second into the freeze must not be a 2xx.
	require.Positive(t, load.checkDownAnswers(t, frozen.Add(time.Second), thawed))

	acked := load.snapshot()
	var ids []string
	for _, id := range acked {
		ids = append(ids, id)
	}
	counts := relWaitDrained(t, d, "fz", 30*time.Second)
	require.EqualValues(t, 0, counts["dead"])
	jobs := relJobs(t, d.URL, ids)
	for _, id := range ids {
		require.Equal(t, "completed", jobs[id]["status"])
	}
	t.Logf("RELIABILITY redis SIGSTOP 7s: %d jobs acknowledged and completed", len(ids))
}
