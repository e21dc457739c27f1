package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reliability tests (issue #8): nothing acknowledged is lost and nothing is
// let in, whatever crashes. Real redis-server and real daemon processes on
// loopback. Leases are short (timeout 500ms + leaseMargin 200ms) so recovery
// after a kill takes well under a second. Random choices come from a seed
// that is logged; RELIABILITY_SEED=<n> replays a run.

const relLease = 700 * time.Millisecond // queue timeout 500ms + dispatch.leaseMargin 200ms

// relClient is for background goroutines, which must not call require.
var relClient = &http.Client{Timeout: 15 * time.Second}

func relSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RELIABILITY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("RELIABILITY_SEED=%d", seed)
	return seed
}

// relPost sends a JSON POST and returns status and body (err: no answer).
func relPost(url string, body any, headers ...string) (int, []byte, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := relClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func relGetJob(base, id string) (map[string]any, int, error) {
	resp, err := relClient.Get(base + "/v1/jobs/" + id)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	var m map[string]any
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, resp.StatusCode, err
		}
	}
	return m, resp.StatusCode, nil
}

// relJobs reads every job (4 readers in parallel) from base.
func relJobs(t *testing.T, base string, ids []string) map[string]map[string]any {
	t.Helper()
	out := make(map[string]map[string]any, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	ch := make(chan string)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				m, code, err := relGetJob(base, id)
				if err != nil || code != 200 {
					errs <- fmt.Errorf("GET %s: %d %v", id, code, err)
					continue
				}
				mu.Lock()
				out[id] = m
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		ch <- id
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return out
}

// relWaitDrained waits until a queue has nothing pending, in flight,
// backing off or awaiting an ack.
func relWaitDrained(t *testing.T, d *Daemon, queue string, within time.Duration) map[string]any {
	t.Helper()
	var counts map[string]any
	require.Eventually(t, func() bool {
		counts = d.Queue(queue)["counts"].(map[string]any)
		return counts["pending"] == 0.0 && counts["processing"] == 0.0 && counts["awaitingAck"] == 0.0
	}, within, 50*time.Millisecond, "queue %s never drained: %v", queue, counts)
	return counts
}

type relEntry struct {
	Attempt int
	Status  string
	Error   string
	Code    int
	TS      time.Time
}

func relHistory(t *testing.T, job map[string]any) []relEntry {
	t.Helper()
	var out []relEntry
	for _, e := range coreHistory(t, job) {
		re := relEntry{Attempt: int(e["attempt"].(float64)), Status: e["status"].(string), TS: coreTime(t, e["timestamp"])}
		if s, ok := e["error"].(string); ok {
			re.Error = s
		}
		if c, ok := e["webhookStatusCode"].(float64); ok {
			re.Code = int(c)
		}
		out = append(out, re)
	}
	return out
}

const relLeaseLost = "delivery lease expired"

// crashRun is one crash-matrix run: n jobs published at a steady pace
// through 3 daemons while `kills` SIGKILLs (each followed by a restart) hit
// random daemons at random moments. Every 50th job is poison (its webhook
// always answers 500).
type crashRun struct {
	jobs, kills int
	window      time.Duration // publishing lasts this long
}

type crashReport struct {
	jobs, completed, dead, deliveries, duplicates, leaseLost, repeatAnswers int
	killTimes                                                               []time.Time
}

func (c crashRun) run(t *testing.T) crashReport {
	t.Helper()
	rng := rand.New(rand.NewPCG(relSeed(t), 8))
	rs := Redis(t)
	hook := NewWebhook(t, func(dl Delivery) Reply {
		var env struct {
			Payload struct {
				Poison bool `json:"poison"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(dl.Body, &env)
		if env.Payload.Poison {
			return Reply{Status: 500, Body: "poison"}
		}
		// The package-level source: this runs on the webhook's goroutines.
		return Reply{Status: 200, Delay: time.Duration(5+rand.IntN(35)) * time.Millisecond}
	})
	cfg := DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("m", hook.URL, "timeout: 500ms", "concurrency: 9", "maxAttempts: 5",
			"backoff: {type: fixed, base: 20ms}")}
	ds := startFleet(t, 3, cfg)

	// Publishers: a steady pace, each job with its own idempotency key, to
	// a random daemon; a refused or failed request is retried on another
	// daemon with the same key, so a publish the dying daemon stored but
	// never answered comes back as 200 with the same id.
	ids := make([]string, c.jobs)
	var repeats atomic.Int64
	work := make(chan int)
	var pubWG sync.WaitGroup
	pubErr := make(chan error, c.jobs)
	for w := 0; w < 4; w++ {
		pubWG.Add(1)
		go func(w int) {
			defer pubWG.Done()
			for i := range work {
				body := map[string]any{"payload": map[string]any{"i": i, "poison": i%50 == 0}, "idempotencyKey": fmt.Sprintf("k%d", i)}
				ok := false
				for try := 0; try < 100 && !ok; try++ {
					code, b, err := relPost(ds[(i+w+try)%len(ds)].URL+"/v1/queues/m/jobs", body)
					if err != nil || code == 503 {
						time.Sleep(20 * time.Millisecond) //nolint:testsleep // a client's pause before it retries a refused publish
						continue
					}
					if code != 201 && code != 200 {
						pubErr <- fmt.Errorf("publish %d: %d %s", i, code, b)
						break
					}
					if code == 200 {
						repeats.Add(1)
					}
					var r struct{ ID string }
					if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
						pubErr <- fmt.Errorf("publish %d: %s", i, b)
						break
					}
					ids[i] = r.ID
					ok = true
				}
			}
		}(w)
	}
	pace := c.window / time.Duration(c.jobs)
	go func() {
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 0; i < c.jobs; i++ {
			work <- i
			<-tick.C
		}
		close(work)
	}()

	// Killer: SIGKILL a random daemon at random moments over the window (and
	// a little beyond, while the backlog drains), restart it at once.
	at := make([]time.Duration, c.kills)
	for i := range at {
		at[i] = 300*time.Millisecond + time.Duration(rng.Int64N(int64(c.window+500*time.Millisecond)))
	}
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	start := time.Now()
	var rep crashReport
	for _, a := range at {
		time.Sleep(time.Until(start.Add(a))) //nolint:testsleep // the kills fall at random moments of the load: a schedule in wall time
		v := rng.IntN(len(ds))
		rep.killTimes = append(rep.killTimes, time.Now())
		ds[v].Kill()
		ds[v].Restart()
	}
	pubWG.Wait()
	close(pubErr)
	for err := range pubErr {
		require.NoError(t, err)
	}
	for i, id := range ids {
		require.NotEmpty(t, id, "job %d was never acknowledged", i)
	}
	t.Logf("published %d jobs in %s (%d idempotent repeats), %d kills", c.jobs, time.Since(start).Round(time.Millisecond), repeats.Load(), len(rep.killTimes))

	relWaitDrained(t, ds[0], "m", 40*time.Second)
	require.Eventually(t, hook.Idle, 5*time.Second, 5*time.Millisecond, "the webhook recorded its last answers")
	jobs := relJobs(t, ds[0].URL, ids)
	byJob := map[string][]Delivery{}
	for _, dl := range hook.Deliveries() {
		byJob[dl.JobID] = append(byJob[dl.JobID], dl)
	}
	rep.jobs = c.jobs
	rep.repeatAnswers = int(repeats.Load())
	explained := func(from, to time.Time) bool {
		for _, k := range rep.killTimes {
			if !k.Before(from) && !k.After(to) {
				return true
			}
		}
		return false
	}
	for i, id := range ids {
		job := jobs[id]
		require.NotNil(t, job, "job %d (%s) lost", i, id)
		hist := relHistory(t, job)
		dls := byJob[id]
		rep.deliveries += len(dls)
		poison := i%50 == 0
		if poison {
			require.Equal(t, "dead", job["status"], "poison job %s", id)
			require.Equal(t, "max_attempts_exhausted", job["deadReason"], "poison job %s", id)
			require.EqualValues(t, 5, job["attempts"], "poison job %s", id)
			rep.dead++
		} else {
			require.Equal(t, "completed", job["status"], "job %s: %v", id, job)
			rep.completed++
		}
		// Each attempt number is one claim: the webhook sees it at most once,
		// and every delivery it saw ended in exactly one history entry.
		byAttempt := map[int]relEntry{}
		for _, e := range hist {
			_, dup := byAttempt[e.Attempt]
			require.False(t, dup, "job %s: two outcomes for attempt %d: %v", id, e.Attempt, hist)
			byAttempt[e.Attempt] = e
			if strings.Contains(e.Error, relLeaseLost) {
				rep.leaseLost++
				// A lease is lost only to a kill: one happened in the lease
				// before this entry was written.
				require.True(t, explained(e.TS.Add(-relLease-time.Second), e.TS),
					"job %s attempt %d: lease lost at %s with no kill before it", id, e.Attempt, e.TS)
			}
		}
		seen := map[int]bool{}
		for _, dl := range dls {
			require.False(t, seen[dl.Attempt], "job %s: attempt %d delivered twice", id, dl.Attempt)
			seen[dl.Attempt] = true
			e, ok := byAttempt[dl.Attempt]
			require.True(t, ok, "job %s: delivery of attempt %d has no outcome: %v", id, dl.Attempt, hist)
			switch {
			case poison:
				require.True(t, e.Code == 500 || strings.Contains(e.Error, relLeaseLost), "job %s: %v", id, e)
			case e.Status == "success":
			default:
				// A duplicate: this delivery reached the webhook but its
				// outcome was lost, because its daemon was killed between
				// sending it and recording the answer.
				require.Contains(t, e.Error, relLeaseLost, "job %s: extra delivery of attempt %d not explained: %v", id, dl.Attempt, hist)
				require.True(t, explained(dl.Start.Add(-200*time.Millisecond), e.TS),
					"job %s: attempt %d delivered at %s, lost at %s, with no kill between", id, dl.Attempt, dl.Start, e.TS)
				rep.duplicates++
			}
		}
		if !poison {
			require.Equal(t, "success", hist[len(hist)-1].Status, "job %s", id)
			require.True(t, seen[hist[len(hist)-1].Attempt], "job %s: completed without its delivery reaching the webhook", id)
		}
	}
	t.Logf("RELIABILITY crash matrix: jobs %d, kills %d, completed %d, dead %d (all max_attempts_exhausted, all poison), lost 0, "+
		"deliveries %d, duplicate deliveries %d (%.2f%%), leases lost to kills %d, idempotent publish repeats %d",
		rep.jobs, len(rep.killTimes), rep.completed, rep.dead, rep.deliveries, rep.duplicates,
		100*float64(rep.duplicates)/float64(rep.jobs), rep.leaseLost, rep.repeatAnswers)
	return rep
}

// TestReliabilityCrashMatrix: 2,000 jobs through 3 daemons while 10 SIGKILLs
// hit random daemons at random moments (each restarted at once). Every
// acknowledged job ends completed, or dead with the right reason (the poison
// ones: max_attempts_exhausted after exactly maxAttempts); none is lost;
// each (job, attempt) is delivered at most once; every duplicate delivery
// and every lost lease is explained by a kill; duplicates stay under 4%.
func TestReliabilityCrashMatrix(t *testing.T) {
	t.Parallel()
	rep := crashRun{jobs: 2000, kills: 10, window: 8 * time.Second}.run(t)
	require.Len(t, rep.killTimes, 10)
	require.Less(t, float64(rep.duplicates), 0.04*float64(rep.jobs), "duplicates under 4%%")
}

// TestReliabilityNoFaultsNoDuplicates: the same run without faults delivers
// every job exactly once (poison jobs exactly maxAttempts times).
func TestReliabilityNoFaultsNoDuplicates(t *testing.T) {
	t.Parallel()
	rep := crashRun{jobs: 2000, kills: 0, window: 5 * time.Second}.run(t)
	require.Zero(t, rep.duplicates)
	require.Zero(t, rep.leaseLost)
	require.Equal(t, rep.completed+5*rep.dead, rep.deliveries, "one delivery per job, maxAttempts per poison job")
}

// TestReliabilityStalledDaemonIsFenced: a daemon frozen (SIGSTOP) while its
// webhook call is in flight wakes after its lease expired and another daemon
// redelivered the job. Its late outcome is ignored ("outcome ignored" in its
// log): the job's final state and history are those of the newer delivery,
// whether the stale outcome would have completed a job that has since died,
// or failed a job that has since completed.
func TestReliabilityStalledDaemonIsFenced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		stale, newer int
		status       string
		deadReason   any
	}{
		{"stale success after a newer failure", 200, 500, "dead", "max_attempts_exhausted"},
		{"stale failure after a newer success", 500, 200, "completed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := Redis(t)
			arrived := make(chan struct{})
			var once sync.Once
			hook := NewWebhook(t, func(dl Delivery) Reply {
				if dl.Attempt == 1 {
					once.Do(func() { close(arrived) })
					// Answered while the daemon is frozen: the answer waits in
					// its socket until SIGCONT.
					return Reply{Status: tc.stale, Delay: 300 * time.Millisecond}
				}
				return Reply{Status: tc.newer}
			})
			cfg := DaemonConfig{RedisAddr: rs.Addr, YAML: "dispatch:\n  leaseMargin: 200ms\n" +
				QueueYAML("f", hook.URL, "timeout: 500ms", "maxAttempts: 2", "backoff: {type: fixed, base: 10ms}")}
			frozen := StartDaemon(t, cfg)
			id := frozen.Publish("f", map[string]any{"x": 1})
			coreWait(t, arrived, 5*time.Second, "the first delivery")
			frozen.Signal(syscall.SIGSTOP)
			stoppedAt := time.Now()

			other := StartDaemon(t, cfg)
			job := other.WaitStatus(id, tc.status, 10*time.Second)
			require.GreaterOrEqual(t, time.Since(stoppedAt), relLease-100*time.Millisecond, "redelivered only after the lease")
			frozen.Signal(syscall.SIGCONT)
			require.Eventually(t, func() bool { return strings.Contains(frozen.Log(), "outcome ignored") },
				10*time.Second, 20*time.Millisecond, "the woken daemon must report its stale outcome as ignored")
			require.Never(t, func() bool { return !assert.ObjectsAreEqual(job, other.Job(id)) }, 200*time.Millisecond,
				20*time.Millisecond, "the stale outcome changed the job")
			after := other.Job(id)
			require.Equal(t, job, after, "the stale outcome changed the job")
			require.Equal(t, tc.status, after["status"])
			require.Equal(t, tc.deadReason, after["deadReason"])
			hist := relHistory(t, after)
			require.Len(t, hist, 2, "%v", hist)
			require.Contains(t, hist[0].Error, relLeaseLost)
			require.Equal(t, 2, hist[1].Attempt)
			require.Equal(t, tc.newer, hist[1].Code)
			for _, e := range hist {
				require.NotEqual(t, tc.stale, e.Code, "the stale answer was recorded: %v", hist)
			}
			require.Equal(t, 2, hook.Count(), "no further delivery")
		})
	}
}

// TestReliabilityReplayRace: a dead job replayed twice at once, through two
// daemons, is replayed once (the answers' replayed counts add up to 1) and
// delivered once more, not twice.
func TestReliabilityReplayRace(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var calls atomic.Int32
	hook := NewWebhook(t, func(Delivery) Reply {
		if calls.Add(1) == 1 {
			return Reply{Status: 500}
		}
		return Reply{Status: 200}
	})
	cfg := DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: QueueYAML("rp", hook.URL, "maxAttempts: 1")}
	ds := startFleet(t, 2, cfg)
	id := ds[0].Publish("rp", map[string]any{"x": 1})
	ds[0].WaitStatus(id, "dead", 10*time.Second)

	var wg sync.WaitGroup
	res := make([]int, len(ds))
	errs := make([]error, len(ds))
	start := make(chan struct{})
	for i, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, b, err := relPost(d.URL+"/v1/queues/rp/dead/replay", map[string]any{"ids": []string{id}})
			if err == nil && code != 200 {
				err = fmt.Errorf("replay: %d %s", code, b)
			}
			var r struct{ Replayed int }
			if err == nil {
				err = json.Unmarshal(b, &r)
			}
			res[i], errs[i] = r.Replayed, err
		}()
	}
	close(start)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, 1, res[0]+res[1], "replayed counts %v", res)
	job := ds[1].WaitStatus(id, "completed", 10*time.Second)
	require.Never(t, func() bool { return hook.Count() != 2 }, 300*time.Millisecond, 10*time.Millisecond,
		"one delivery before dying, exactly one after the replay")
	require.Equal(t, 2, hook.Count(), "one delivery before dying, exactly one after the replay")
	require.EqualValues(t, 1, job["attempts"])
}
