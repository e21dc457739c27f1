package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/store"
)

// cancelRun is the bulk cancel rows (control.md §1, docs/performance.md):
// the loop behind POST /v1/queues/{queue}/cancel (the daemon's CancelBulk:
// store.CancelStep from store.StartCancel until done, one answer per ~9 s)
// over n waiting jobs, twice: every job matching (no filter), and an age
// filter matching half of them, the half the walk reaches last (n/2 jobs
// created first but delayed an hour, then n/2 younger ones due now: the walk
// looks at every young one and leaves it before it reaches a match). Each
// script call's Redis time comes from SLOWLOG (every call logged), and the
// Redis main thread's CPU time and run-queue wait over the call from
// /proc/<pid>/schedstat, which tells a call that was long because it worked
// from one that was long because the VM did not run Redis meanwhile.
func cancelRun(ctx context.Context, rs *redisProc, n int, add func(name, value, target string)) error {
	st, err := store.New(rs.client, store.Options{Prefix: "cancelbench", LeaseMargin: time.Second})
	if err != nil {
		return err
	}
	if err := st.Load(ctx); err != nil {
		return err
	}
	c := config.Default().Defaults
	q := config.Queue{Name: "cancel", WebhookURL: "http://127.0.0.1:1/", SigningSecret: "s", QueueSettings: c}
	r := rs.client
	persistence, _ := r.ConfigGet(ctx, "save").Result()
	aof, _ := r.ConfigGet(ctx, "appendonly").Result()
	add("machine speed before the bulk cancel runs (redis-benchmark, 50 clients)", machineGauge(ctx, rs), "")
	add("bench Redis persistence", fmt.Sprintf("save %q, appendonly %s: no background save, no fork", persistence["save"], aof["appendonly"]), "")

	if err := fillCancel(ctx, st, q, n, 0); err != nil {
		return err
	}
	all, err := measureCancel(ctx, rs, st, q, store.CancelFilter{})
	if err != nil {
		return err
	}
	if all.cancelled != n {
		return fmt.Errorf("bulk cancel took %d of %d jobs", all.cancelled, n)
	}
	add(fmt.Sprintf("bulk cancel of %s waiting jobs, all matching", human(n)), all.String(), "≤10 s per answer, each call a few ms")

	// The first run's records (dead now) go in the background: a FLUSHALL of
	// a million jobs would outlast the client's read timeout. Wait until
	// they are freed, so that the second run does not pay for it.
	if err := r.FlushAllAsync(ctx).Err(); err != nil {
		return err
	}
	for i := 0; i < 600; i++ {
		if v, err := infoField(ctx, rs, "memory", "lazyfree_pending_objects"); err != nil || v == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := st.Load(ctx); err != nil {
		return err
	}
	if err := fillCancel(ctx, st, q, n/2, time.Hour); err != nil {
		return err
	}
	t, err := r.Time(ctx).Result()
	if err != nil {
		return err
	}
	cut := t.Truncate(time.Millisecond).Add(time.Millisecond)
	time.Sleep(3 * time.Millisecond)
	if err := fillCancel(ctx, st, q, n-n/2, 0); err != nil {
		return err
	}
	half, err := measureCancel(ctx, rs, st, q, store.CancelFilter{CreatedBefore: cut})
	if err != nil {
		return err
	}
	if half.cancelled != n/2 {
		return fmt.Errorf("filtered bulk cancel took %d of %d jobs", half.cancelled, n/2)
	}
	add(fmt.Sprintf("bulk cancel createdBefore of %s waiting jobs, %s matching (walked after the %s that do not)",
		human(n), human(n/2), human(n-n/2)), half.String(), "≤10 s per answer, each call a few ms")
	return nil
}

// fillCancel publishes n 200-byte jobs to q, delayed by delay.
func fillCancel(ctx context.Context, st *store.Store, q config.Queue, n int, delay time.Duration) error {
	fmt.Fprintf(os.Stderr, "  (filling %d waiting jobs for the bulk cancel run…)\n", n)
	payload := json.RawMessage(`{"data":"` + strings.Repeat("x", 180) + `"}`)
	jobs := make([]store.NewJob, 1000)
	for i := range jobs {
		jobs[i] = store.NewJob{Payload: payload, Delay: delay}
	}
	for i := 0; i < n; i += len(jobs) {
		if _, err := st.Publish(ctx, queueparams.Of(q), jobs[:min(len(jobs), n-i)]); err != nil {
			return err
		}
	}
	return nil
}

// cancelMeasure is one bulk cancel run.
type cancelMeasure struct {
	took             time.Duration
	cancelled        int
	apiCalls         int
	longestAPI       time.Duration
	steps            int
	looked           int
	redis            []float64 // SLOWLOG µs per script call
	cpu, wait        []float64 // the main thread's CPU and run-queue wait µs per call
	longestCPU       float64   // CPU µs of the call with the longest SLOWLOG time
	longestWait      float64   // its run-queue wait µs
	forks            string
	latency          string
	meanCommandstats string
	steal            float64 // the VM's steal time over the run, % of its CPUs
	inner            string  // the longest command a script ran
	over5            int     // calls longer than 5 ms in SLOWLOG
	over5CPU         float64 // the most CPU µs any of those had
}

func (m cancelMeasure) String() string {
	return fmt.Sprintf("%.1f s, %d API calls (longest %.1f s), %.0f jobs/s; %d script calls (≤ %d members looked at, ≤ %d µs each; %.0f looked at and %.0f cancelled per call on average): "+
		"Redis time (SLOWLOG) mean %s, p50 %.2f, p99 %.2f, max %.2f ms; Redis main thread CPU per call p99 %.2f, max %.2f ms; "+
		"%d calls over 5 ms, with at most %.2f ms of CPU each; the longest call had %.2f ms of CPU and %.2f ms waiting for a core; longest command inside a script %s; forks %s; LATENCY LATEST %s; VM steal %.0f%%",
		m.took.Seconds(), m.apiCalls, m.longestAPI.Seconds(), float64(m.cancelled)/m.took.Seconds(),
		m.steps, store.DefaultCancelLimits.Look, store.DefaultCancelLimits.Budget.Microseconds(), float64(m.looked)/float64(m.steps), float64(m.cancelled)/float64(m.steps),
		m.meanCommandstats, pct(m.redis, 50)/1000, pct(m.redis, 99)/1000, pct(m.redis, 100)/1000,
		pct(m.cpu, 99)/1000, pct(m.cpu, 100)/1000, m.over5, m.over5CPU/1000, m.longestCPU/1000, m.longestWait/1000, m.inner, m.forks, m.latency, m.steal)
}

// pct is the p-th percentile of xs (100: the max); xs is sorted in place.
func pct(xs []float64, p int) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := len(xs) * p / 100
	if i >= len(xs) {
		i = len(xs) - 1
	}
	return xs[i]
}

// schedstat reads a task's CPU time and run-queue wait (ns) from
// /proc/<pid>/schedstat: for a process, its main thread, which is the one
// that runs Redis' commands.
func schedstat(pid int) (cpu, wait int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0
	}
	cpu, _ = strconv.ParseInt(f[0], 10, 64)
	wait, _ = strconv.ParseInt(f[1], 10, 64)
	return cpu, wait
}

// cpuSteal reads the steal time and the total of /proc/stat's cpu line
// (jiffies): the time the hypervisor ran something else while this VM
// wanted its CPUs.
func cpuSteal() (steal, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i := 1; i < len(f); i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		total += v
		if i == 8 {
			steal = v
		}
	}
	return steal, total
}

// measureCancel runs the API's loop for filter f until done, one "API call"
// per 9 s (each starting from store.StartCancel, as a request sent again
// does), with every command in SLOWLOG: Redis logs the commands a script
// runs as well as the script, so the bench reads and resets SLOWLOG every
// drainEvery steps (the clock of the run and of its API calls stops
// meanwhile), and reads LATENCY LATEST before each of those reads, whose
// own latency it would otherwise count.
func measureCancel(ctx context.Context, rs *redisProc, st *store.Store, q config.Queue, f store.CancelFilter) (cancelMeasure, error) {
	const drainEvery = 200
	r := rs.client
	var m cancelMeasure
	forksBefore, _ := infoField(ctx, rs, "stats", "total_forks")
	for _, cmd := range [][]any{{"CONFIG", "SET", "slowlog-log-slower-than", "0"}, {"CONFIG", "SET", "slowlog-max-len", "100000"},
		{"CONFIG", "SET", "latency-monitor-threshold", "1"}, {"LATENCY", "RESET"}, {"SLOWLOG", "RESET"}, {"CONFIG", "RESETSTAT"}} {
		if err := r.Do(ctx, cmd...).Err(); err != nil {
			return m, fmt.Errorf("%v: %w", cmd, err)
		}
	}
	events := map[string]int64{} // LATENCY event -> max ms
	inner := map[string]int64{}  // command run by the scripts -> total µs
	var longestInner int64
	innerName := ""
	longest := int64(-1)
	drained := 0        // steps whose SLOWLOG entries were read
	var within []string // the commands of the script call being read
	shown := 0          // calls of over 5 ms of CPU shown on stderr
	drain := func() error {
		lat, err := r.Do(ctx, "LATENCY", "LATEST").Slice()
		if err != nil {
			return err
		}
		for _, e := range lat {
			if f, ok := e.([]any); ok && len(f) >= 4 {
				name := fmt.Sprint(f[0])
				v, _ := f[3].(int64)
				events[name] = max(events[name], v)
			}
		}
		// Entries are [id, ts, µs, args...], newest first; the run's
		// script calls are its only EVALSHAs, in the order of m.cpu.
		entries, err := r.Do(ctx, "SLOWLOG", "GET", "100000").Slice()
		if err != nil {
			return err
		}
		for i := len(entries) - 1; i >= 0; i-- {
			e, ok := entries[i].([]any)
			if !ok || len(e) < 4 {
				continue
			}
			args, _ := e[3].([]any)
			us, _ := e[2].(int64)
			if len(args) == 0 {
				continue
			}
			name := strings.ToUpper(fmt.Sprint(args[0]))
			if name != "EVALSHA" {
				if name == "SLOWLOG" || name == "LATENCY" || name == "CONFIG" || name == "INFO" {
					continue // the bench's own, around a drain
				}
				inner[name] += us
				within = append(within, fmt.Sprintf("%s %.2f", name, float64(us)/1000))
				if us > longestInner {
					longestInner, innerName = us, name
				}
				continue
			}
			m.redis = append(m.redis, float64(us))
			calls := within
			within = nil
			if k := drained; k < len(m.cpu) {
				if m.cpu[k] > 5000 && shown < 5 {
					shown++
					fmt.Fprintf(os.Stderr, "  (a call with %.2f ms of CPU, %.2f ms in SLOWLOG, %.2f ms waiting; its commands, ms: %s)\n",
						m.cpu[k]/1000, float64(us)/1000, m.wait[k]/1000, strings.Join(calls, " "))
				}
				if us > 5000 {
					m.over5++
					m.over5CPU = max(m.over5CPU, m.cpu[k])
				}
				if us > longest {
					longest, m.longestCPU, m.longestWait = us, m.cpu[k], m.wait[k]
				}
				drained++
			}
		}
		if drained != m.steps {
			fmt.Fprintf(os.Stderr, "  (SLOWLOG held %d script calls of %d)\n", drained, m.steps)
			drained = m.steps
		}
		for _, cmd := range [][]any{{"SLOWLOG", "RESET"}, {"LATENCY", "RESET"}} {
			if err := r.Do(ctx, cmd...).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	pid := rs.cmd.Process.Pid
	steal0, total0 := cpuSteal()
	var paused time.Duration
	start := time.Now()
	for done := false; !done; {
		m.apiCalls++
		began, pausedBefore := time.Now(), paused
		cur := store.StartCancel
		for !cur.Done() && time.Since(began)-(paused-pausedBefore) < 9*time.Second {
			c0, w0 := schedstat(pid)
			step, err := st.BulkCancelStep(ctx, queueparams.Of(q), store.BulkCancelParams{Filter: f, Reason: "bench", Cursor: cur, Limits: store.DefaultCancelLimits})
			if err != nil {
				return m, err
			}
			c1, w1 := schedstat(pid)
			m.cpu = append(m.cpu, float64(c1-c0)/1000)
			m.wait = append(m.wait, float64(w1-w0)/1000)
			m.steps++
			m.looked += step.Looked
			m.cancelled += step.Cancelled
			cur = step.Next
			if m.steps%drainEvery == 0 {
				t := time.Now()
				if err := drain(); err != nil {
					return m, err
				}
				paused += time.Since(t)
			}
		}
		done = cur.Done()
		m.longestAPI = max(m.longestAPI, time.Since(began)-(paused-pausedBefore))
	}
	m.took = time.Since(start) - paused
	if steal1, total1 := cpuSteal(); total1 > total0 {
		m.steal = 100 * float64(steal1-steal0) / float64(total1-total0)
	}
	if err := drain(); err != nil {
		return m, err
	}
	for _, cmd := range []string{"cmdstat_fcall", "cmdstat_evalsha"} {
		if v := infoCommandstat(ctx, rs, cmd, "usec_per_call"); v != "" && m.meanCommandstats == "" {
			m.meanCommandstats = v + " µs"
		}
	}
	forksAfter, _ := infoField(ctx, rs, "stats", "total_forks")
	m.forks = strconv.FormatInt(forksAfter-forksBefore, 10)
	names := make([]string, 0, len(events))
	for k := range events {
		names = append(names, k)
	}
	sort.Strings(names)
	var ev []string
	for _, k := range names {
		ev = append(ev, fmt.Sprintf("%s max %d ms", k, events[k]))
	}
	m.latency = "(threshold 1 ms): " + strings.Join(ev, ", ")
	if len(ev) == 0 {
		m.latency = "(threshold 1 ms): no event"
	}
	m.inner = fmt.Sprintf("%s %.2f ms", innerName, float64(longestInner)/1000)
	var total float64
	for _, v := range m.redis {
		total += v
	}
	var parts []string
	for k, v := range inner {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*float64(v)/total))
	}
	sort.Strings(parts)
	fmt.Fprintf(os.Stderr, "  (Redis time of the script calls by command they ran: %s; the rest is Lua)\n", strings.Join(parts, ", "))
	_ = r.Do(ctx, "CONFIG", "SET", "slowlog-log-slower-than", "10000").Err()
	_ = r.Do(ctx, "CONFIG", "SET", "latency-monitor-threshold", "0").Err()
	return m, nil
}

// infoCommandstat is one value of a command's INFO commandstats line.
func infoCommandstat(ctx context.Context, rs *redisProc, cmd, key string) string {
	info, _ := rs.client.Info(ctx, "commandstats").Result()
	line := ""
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, cmd+":"); ok {
			line = v
		}
	}
	for _, kv := range strings.Split(line, ",") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
