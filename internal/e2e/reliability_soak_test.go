package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The soak (issue #8): 3 daemons, a webhook that answers 5% 429 and 10% 500,
// random SIGKILLs, steady publishing for a bounded time, then a report. The
// full run is scripts/soak (SOAK_DURATION, default 10m); CI runs
// TestReliabilitySoakShort (about 20 s of load).

const (
	soakConcurrency = 20
	soakRateMax     = 150 // per soakWindow
	soakWindow      = time.Second
	// Publishing alternates 2 s at 200 jobs/s with 2 s at 25 jobs/s: the
	// bursts push deliveries into the rate limit and build a backlog that
	// the quiet phases drain.
	soakBurstRate, soakQuietRate = 200, 25
	soakPhase                    = 2 * time.Second
)

// soakHook is a light recording webhook: job id, start, answer, concurrency.
type soakHook struct {
	srv         *httptest.Server
	mu          sync.Mutex
	starts      []time.Time
	okByJob     map[string]int
	byJob       map[string]int
	answers     map[int]int
	inflight    int
	maxInflight int
}

func newSoakHook(t *testing.T) *soakHook {
	h := &soakHook{okByJob: map[string]int{}, byJob: map[string]int{}, answers: map[int]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Simpleq-Job-Id")
		h.mu.Lock()
		h.inflight++
		h.maxInflight = max(h.maxInflight, h.inflight)
		h.starts = append(h.starts, time.Now())
		h.mu.Unlock()
		code := 200
		switch p := rand.Float64(); {
		case p < 0.05:
			code = 429
			w.Header().Set("Retry-After", "0.05")
		case p < 0.15:
			code = 500
		}
		time.Sleep(time.Duration(2+rand.IntN(18)) * time.Millisecond) //nolint:testsleep // the webhook takes 2–20 ms to answer, in wall time
		w.WriteHeader(code)
		h.mu.Lock()
		h.inflight--
		h.byJob[id]++
		h.answers[code]++
		if code == 200 {
			h.okByJob[id]++
		}
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// scrape reads go_goroutines and process_resident_memory_bytes from /metrics.
func scrape(t *testing.T, d *Daemon) (goroutines, rss float64) {
	t.Helper()
	resp, err := relClient.Get(d.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []struct {
			name string
			v    *float64
		}{{"go_goroutines ", &goroutines}, {"process_resident_memory_bytes ", &rss}} {
			if strings.HasPrefix(line, m.name) {
				*m.v, err = strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, m.name)), 64)
				require.NoError(t, err)
			}
		}
	}
	require.Positive(t, goroutines, "go_goroutines on /metrics")
	require.Positive(t, rss, "process_resident_memory_bytes on /metrics")
	return goroutines, rss
}

type soakReport struct {
	duration                           time.Duration
	in, completed, lost, kills         int
	dead                               map[string]int
	deliveries, duplicates             int
	answers                            map[int]int
	maxInflight, maxRate, maxRateSeen  int
	maxRateRedis, startsLogged         int
	goWarm, goEnd, rssWarm, rssEnd     float64
	drainTook                          time.Duration
	publishRetries, publishNotAccepted int64
}

func (r soakReport) String() string {
	var dead []string
	for k, v := range r.dead {
		dead = append(dead, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(dead)
	mib := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	return fmt.Sprintf(`SOAK REPORT
  load:            %s of publishing (%s bursts at %d jobs/s, then at %d jobs/s) into 3 daemons,
                   %d SIGKILLs (daemons 2 and 3 at random; daemon 1 never killed)
  webhook:         5%% 429 (Retry-After 0.05), 10%% 500, 2-20 ms per request; answers %v
  jobs in:         %d (acknowledged publishes; %d publish retries after a refused or failed request)
  completed:       %d
  dead by reason:  %s
  lost:            %d
  deliveries:      %d, duplicate 2xx deliveries %d (%.2f%% of jobs)
  concurrency:     highest %d in flight at the webhook, limit %d
  rate:            highest %d delivery starts admitted in any %s window on Redis' clock (%d starts logged),
                   limit %d; at the webhook: highest %d starts in any window 250 ms shorter, %d in
                   any full window (arrival jitter: a delivery admitted late in one window can
                   arrive together with the next window's)
  goroutines:      %.0f after warm-up, %.0f at the end (daemon 1)
  memory (RSS):    %s after warm-up, %s at the end (daemon 1)
  drain:           backlog delivered %s after publishing stopped`,
		r.duration, soakPhase, soakBurstRate, soakQuietRate, r.kills, r.answers, r.in, r.publishRetries, r.completed, strings.Join(dead, ", "), r.lost,
		r.deliveries, r.duplicates, 100*float64(r.duplicates)/float64(max(r.in, 1)),
		r.maxInflight, soakConcurrency, r.maxRateRedis, soakWindow, r.startsLogged, soakRateMax, r.maxRate, r.maxRateSeen,
		r.goWarm, r.goEnd, mib(r.rssWarm), mib(r.rssEnd), r.drainTook.Round(time.Millisecond))
}

func runSoak(t *testing.T, dur time.Duration) soakReport {
	t.Helper()
	rng := rand.New(rand.NewPCG(relSeed(t), 7))
	rs := Redis(t)
	hook := newSoakHook(t)
	cfg := DaemonConfig{RedisAddr: rs.Addr, LogLevel: "warn", YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("soak", hook.srv.URL+"/hook", "timeout: 500ms",
			fmt.Sprintf("concurrency: %d", soakConcurrency), fmt.Sprintf("rateLimitMax: %d", soakRateMax),
			"rateLimitWindow: 1s", "maxAttempts: 3", "backoff: {type: fixed, base: 50ms}")}
	ds := startFleet(t, 3, cfg)

	// Sample the rate-limit log (token -> start ms) often enough that no
	// entry is trimmed unseen: claim.lua keeps each for a whole window.
	startLog := map[string]int64{}
	stopStarts, startsDone := make(chan struct{}), make(chan struct{})
	rc := rs.Client(t)
	go func() {
		defer close(startsDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if zs, err := rc.ZRangeWithScores(context.Background(), "simpleq:{soak}:starts", 0, -1).Result(); err == nil {
				for _, z := range zs {
					startLog[z.Member.(string)] = int64(z.Score)
				}
			}
			select {
			case <-stopStarts:
				return
			case <-tick.C:
			}
		}
	}()

	var rep soakReport
	rep.duration = dur
	acked := map[string]string{}
	var ackMu sync.Mutex
	var retries, refused atomic.Int64
	stop := make(chan struct{})
	var pubWG sync.WaitGroup
	work := make(chan int, 1024)
	for w := 0; w < 8; w++ {
		pubWG.Add(1)
		go func(w int) {
			defer pubWG.Done()
			for i := range work {
				key := fmt.Sprintf("s%d", i)
				body := map[string]any{"payload": map[string]any{"i": i}, "idempotencyKey": key}
				for try := 0; ; try++ {
					code, b, err := relPost(ds[(i+try)%len(ds)].URL+"/v1/queues/soak/jobs", body)
					var r struct{ ID string }
					if err == nil && (code == 201 || code == 200) && json.Unmarshal(b, &r) == nil && r.ID != "" {
						ackMu.Lock()
						acked[key] = r.ID
						ackMu.Unlock()
						break
					}
					if err == nil && code != 503 {
						refused.Add(1) // never expected: reported as lost below
						break
					}
					retries.Add(1)
					time.Sleep(20 * time.Millisecond) //nolint:testsleep // a client's pause before it retries a refused publish
				}
			}
		}(w)
	}
	start := time.Now()
	go func() {
		tick := time.NewTicker(time.Second / soakBurstRate)
		defer tick.Stop()
		i := 0
		for n := 0; ; n++ {
			select {
			case <-stop:
				close(work)
				return
			case <-tick.C:
			}
			quiet := int(time.Since(start)/soakPhase)%2 == 1
			if quiet && n%(soakBurstRate/soakQuietRate) != 0 {
				continue
			}
			work <- i
			i++
		}
	}()

	warm := max(5*time.Second, dur/4)
	warmDone := false
	warmAt := time.NewTimer(time.Until(start.Add(warm)))
	defer warmAt.Stop()
	kill := time.NewTimer(time.Until(start.Add(time.Duration(3+rng.IntN(8)) * time.Second)))
	defer kill.Stop()
	end := time.NewTimer(time.Until(start.Add(dur)))
	defer end.Stop()
soak:
	for {
		select {
		case <-end.C:
			break soak
		case <-warmAt.C:
			rep.goWarm, rep.rssWarm = scrape(t, ds[0])
			warmDone = true
		case <-kill.C:
			v := 1 + rng.IntN(2)
			ds[v].Kill()
			ds[v].Restart()
			rep.kills++
			kill.Reset(time.Duration(5+rng.IntN(11)) * time.Second)
		}
	}
	close(stop)
	pubWG.Wait()
	stopped := time.Now()
	if !warmDone {
		rep.goWarm, rep.rssWarm = scrape(t, ds[0])
	}
	relWaitDrained(t, ds[0], "soak", 2*time.Minute)
	rep.drainTook = time.Since(stopped)
	time.Sleep(500 * time.Millisecond) //nolint:testsleep // idle connections and timers settle before the end's memory is measured
	rep.goEnd, rep.rssEnd = scrape(t, ds[0])
	rep.publishRetries, rep.publishNotAccepted = retries.Load(), refused.Load()

	ids := make([]string, 0, len(acked))
	for _, id := range acked {
		ids = append(ids, id)
	}
	rep.in = len(ids)
	jobs := relJobs(t, ds[0].URL, ids)
	rep.dead = map[string]int{}
	for _, id := range ids {
		j := jobs[id]
		switch {
		case j == nil:
			rep.lost++
		case j["status"] == "completed":
			rep.completed++
		case j["status"] == "dead":
			rep.dead[fmt.Sprint(j["deadReason"])]++
		default:
			rep.lost++ // acknowledged but never finished: stuck counts as lost
		}
	}
	rep.lost += int(rep.publishNotAccepted)

	hook.mu.Lock()
	for id, n := range hook.byJob {
		rep.deliveries += n
		if ok := hook.okByJob[id]; ok > 1 {
			rep.duplicates += ok - 1
		}
	}
	rep.answers = map[int]int{}
	for k, v := range hook.answers {
		rep.answers[k] = v
	}
	rep.maxInflight = hook.maxInflight
	starts := append([]time.Time(nil), hook.starts...)
	hook.mu.Unlock()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	// Starts are seen at the webhook some time after Redis admitted them,
	// and on a loaded machine (daemons restarting, GC, the rest of the
	// suite) that transit varies by tens to hundreds of milliseconds (156
	// in a window 100 ms short was seen at load 10 on 2 cores, while Redis'
	// own log of admitted starts held the limit exactly): count within the
	// window less 250 ms. The exact check is the admitted starts' below.
	rep.maxRate = maxInWindow(starts, soakWindow-250*time.Millisecond)
	rep.maxRateSeen = maxInWindow(starts, soakWindow)
	// The limit itself, exactly: the claim script's own log of admitted
	// starts (Redis' clock), sampled before it trims them.
	close(stopStarts)
	<-startsDone
	admitted := make([]time.Time, 0, len(startLog))
	for _, ms := range startLog {
		admitted = append(admitted, time.UnixMilli(ms))
	}
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].Before(admitted[j]) })
	rep.startsLogged = len(admitted)
	rep.maxRateRedis = maxInWindow(admitted, soakWindow)

	t.Log("\n" + rep.String())
	if p := os.Getenv("SOAK_REPORT"); p != "" {
		require.NoError(t, os.WriteFile(p, []byte(rep.String()+"\n"), 0o644))
	}
	require.Zero(t, rep.lost, "lost jobs")
	require.Equal(t, rep.in, rep.completed+sumValues(rep.dead))
	for reason := range rep.dead {
		require.Contains(t, []string{"max_attempts_exhausted", "defer_cap_exhausted"}, reason)
	}
	require.LessOrEqual(t, rep.maxInflight, soakConcurrency, "fleet-wide concurrency")
	require.LessOrEqual(t, rep.maxRateRedis, soakRateMax, "fleet-wide rate limit (admitted starts)")
	require.GreaterOrEqual(t, rep.startsLogged, rep.deliveries, "every delivery start was logged")
	require.LessOrEqual(t, rep.maxRate, soakRateMax, "fleet-wide rate limit (seen at the webhook)")
	require.Less(t, rep.goEnd, rep.goWarm+50, "goroutines grew")
	require.Less(t, rep.rssEnd, 2*rep.rssWarm+32<<20, "memory grew")
	return rep
}

// maxInWindow is the most of the sorted times that fall in any half-open
// interval (t-w, t].
func maxInWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestReliabilitySoakShort runs the soak for about 20 s (CI).
func TestReliabilitySoakShort(t *testing.T) {
	t.Parallel()
	rep := runSoak(t, 20*time.Second)
	require.Positive(t, rep.kills)
	require.Positive(t, rep.answers[429])
	require.Positive(t, rep.answers[500])
}

// TestReliabilitySoak is the full soak, run by scripts/soak: SOAK_DURATION
// (a Go duration, e.g. 10m) sets its length. Skipped without it.
func TestReliabilitySoak(t *testing.T) {
	s := os.Getenv("SOAK_DURATION")
	if s == "" {
		t.Skip("set SOAK_DURATION (scripts/soak) to run the full soak")
	}
	dur, err := time.ParseDuration(s)
	require.NoError(t, err)
	runSoak(t, dur)
}
