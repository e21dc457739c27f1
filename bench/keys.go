package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/store"
)

// The flow-key phase (-only keys; issue 23 item 6, keys.md §6) measures
// what lanes cost: delivery rate with 1, 5,000 and 100,000 lanes beside no
// key at all, Redis memory per lane, that an empty lane leaves nothing
// behind, fairness (a flooding lane against light lanes, and Jain's index
// over equally weighted flooded lanes), and the seed's backpressure figure
// per lane (a lane held by 429s costs one delivery per Retry-After while the
// others keep their speed). Claim cost with 10 vs 100,000 lanes is a Go
// benchmark beside the store's others: BenchmarkLanes in internal/store.

// roundRobinKeys is a flowKey function for apiClient: job i goes to lane
// tenant-(i mod lanes).
func roundRobinKeys(lanes int) func(int) string {
	return func(i int) string { return "tenant-" + strconv.Itoa(i%lanes) }
}

// publishKeyedBatches is publishBatches for an apiClient with flowKey set:
// each batch is built for its own jobs (their keys differ), and each
// payload names its lane ("l") so that a lane webhook can count per lane.
func (a *apiClient) publishKeyedBatches(ctx context.Context, queue string, n, size, clients int, payload string) error {
	var next atomic.Int64
	batches := (n + size - 1) / size
	return concurrently(batches, clients, func() error {
		b := int(next.Add(1) - 1)
		var sb strings.Builder
		sb.WriteString(`{"jobs":[`)
		for i := b * size; i < min((b+1)*size, n); i++ {
			if i > b*size {
				sb.WriteByte(',')
			}
			fk := a.flowKey(i)
			sb.WriteString(`{"payload":{"data":"` + payload + `","l":"` + fk + `"},"flowKey":"` + fk + `"}`)
		}
		sb.WriteString(`]}`)
		req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/queues/"+queue+"/jobs/batch", strings.NewReader(sb.String()))
		req.Header.Set("Content-Type", "application/json")
		a.traceHeader(req.Header)
		resp, err := a.http.Do(req)
		if err != nil {
			return err
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("batch publish with flow keys: %d %s", resp.StatusCode, rb)
		}
		return nil
	})
}

// laneWebhook is the event-loop endpoint for the fairness and hold rows:
// it reads each delivery's lane from the payload's "l", counts deliveries
// per lane while a window is open, times the held lane's deliveries, and
// answers the held lane 429 with Retry-After: 1, always.
type laneWebhook struct {
	*epollWebhook
	mu       sync.Mutex
	held     string // the lane answered 429 ("" none)
	counting bool
	counts   map[string]int
	t0       time.Time
	heldAt   []time.Duration // the held lane's deliveries since t0
}

var tooManyResponse = []byte("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n")

func newLaneWebhook() *laneWebhook {
	h := &laneWebhook{counts: map[string]int{}}
	h.epollWebhook = newEpollWebhookFunc(newLatencyTracker(), h.respond)
	return h
}

func (h *laneWebhook) respond(body []byte) []byte {
	lane := ""
	if i := bytes.Index(body, []byte(`"l":"`)); i >= 0 {
		rest := body[i+5:]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			lane = string(rest[:j])
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counting {
		h.counts[lane]++
	}
	if h.held != "" && lane == h.held {
		h.heldAt = append(h.heldAt, time.Since(h.t0))
		return tooManyResponse
	}
	return okResponse
}

// reset starts a run: held is the lane to refuse, t0 now.
func (h *laneWebhook) reset(held string) {
	h.mu.Lock()
	h.held, h.counting, h.counts, h.heldAt, h.t0 = held, false, map[string]int{}, nil, time.Now()
	h.mu.Unlock()
}

// window opens (true) or closes the per-lane count.
func (h *laneWebhook) window(on bool) {
	h.mu.Lock()
	h.counting = on
	h.mu.Unlock()
}

func (h *laneWebhook) snapshot() (map[string]int, []time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		c[k] = v
	}
	return c, append([]time.Duration(nil), h.heldAt...)
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all equal.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// keysRun is the -only keys phase.
func keysRun(ctx context.Context, bin, work string, hook *noopWebhook, o options, add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rk", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	lh := newLaneWebhook()
	defer lh.close()
	var pprofAddr string
	if o.profile != "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		pprofAddr = "127.0.0.1:" + strconv.Itoa(port)
		os.Setenv("SIMPLEQD_PPROF_LISTEN", pprofAddr)
	}
	d, err := startDaemon(ctx, bin, work, "dk", []string{rs.addr}, nil, hook.url, o.concurrency, 1,
		[2]string{"qfair", lh.url}, [2]string{"qheld0", lh.url}, [2]string{"qheld1", lh.url},
		[2]string{"qheld2", lh.url}, [2]string{"qheld3", lh.url})
	os.Unsetenv("SIMPLEQD_PPROF_LISTEN")
	if err != nil {
		return err
	}
	defer d.stop()
	payload := strings.Repeat("x", 180)

	add("machine speed before the flow-key runs (redis-benchmark, 50 clients)", machineGauge(ctx, rs), "")
	add("machine speed: Go's net/http client → the no-op webhook, 50 connections", httpGauge(ctx, hook.url), "")

	part := func(p string) bool { return o.keysParts == "" || strings.Contains(","+o.keysParts+",", ","+p+",") }
	if part("rate") {
		if err := laneRateRows(ctx, rs, d, hook, o, pprofAddr, payload, add); err != nil {
			return err
		}
	}
	if part("memory") {
		if err := laneMemoryRows(ctx, work, o, payload, add); err != nil {
			return err
		}
	}
	if part("scripts") {
		if err := laneScriptRows(ctx, work, o, payload, add); err != nil {
			return err
		}
	}
	if part("fair") {
		flood, light := 100000, 100
		if o.quick {
			flood = 20000
		}
		for _, keyed := range []bool{true, false} {
			if err := floodRun(ctx, d, hook, flood, light, 10, 4*time.Second, keyed, payload, add); err != nil {
				return err
			}
		}
		// Jain's index of starts across equally weighted flooded lanes.
		for _, nl := range []int{10, 1000} {
			if err := jainRun(ctx, d, lh, nl, flood, payload, add); err != nil {
				return err
			}
		}
	}
	if part("held") {
		perLane := 2000
		if o.quick {
			perLane = 300
		}
		if err := heldLaneRows(ctx, d, lh, 100, perLane, 8*time.Second, payload, add); err != nil {
			return err
		}
	}
	return nil
}

// laneRateRows is the delivery rate with 1, 5,000 and 100,000 lanes (and
// no key), the same N each, round by round in rotating order so every
// variant sees the same phases of the VM; then what the lanes leave behind.
func laneRateRows(ctx context.Context, rs *redisProc, d *daemonProc, hook *noopWebhook, o options, pprofAddr, payload string, add func(name, value, target string)) error {
	// 1. Delivery rate by number of lanes, the same N each, round by round
	// in rotating order so every variant sees the same phases of the VM.
	n := o.keysN
	lanes := []int{0, 1, 5000, 100000}
	if o.quick {
		n, lanes = min(n, 20000), []int{0, 1, 500, 10000}
	}
	apis := make([]*apiClient, len(lanes))
	for i, l := range lanes {
		apis[i] = newAPI(d.url)
		if l > 0 {
			apis[i].flowKey = roundRobinKeys(l)
		}
	}
	label := func(l int) string {
		switch l {
		case 0:
			return "no flow key (reference)"
		case 1:
			return "1 lane"
		}
		return fmt.Sprintf("%s lanes", commas(l))
	}
	for range o.warmup {
		for _, a := range apis[:3] {
			if _, _, _, err := deliveryRun(ctx, a, rs, hook, "q0", min(n, 20000), payload); err != nil {
				return err
			}
		}
	}
	rounds := max(o.runs, 1)
	type tally struct {
		rates, calls, cmds, usec []float64
		cpu, top                 string
	}
	res := make([]tally, len(lanes))
	var residue string
	for r := range rounds {
		for k := range lanes {
			i := (r + k) % len(lanes)
			cpu := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
			if pprofAddr != "" && r == 0 {
				cpu.profileAddr, cpu.profilePath = pprofAddr, fmt.Sprintf("%s.lanes-%d.pprof", o.profile, lanes[i])
			}
			rate, calls, cmds, usec, err := deliveryRunUsec(ctx, apis[i], rs, hook, "q0", n, payload, cpu, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", label(lanes[i]), err)
			}
			if err := cpu.profileErr(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  round %d: %-24s %6.0f deliveries/s\n", r+1, label(lanes[i]), rate)
			t := &res[i]
			t.rates, t.calls, t.cmds, t.usec = append(t.rates, rate), append(t.calls, calls), append(t.cmds, cmds), append(t.usec, usec)
			t.cpu = cpu.result
			if r == rounds-1 {
				if t.top, err = topCommands(ctx, rs, n, 8); err != nil {
					return err
				}
			}
			if lanes[i] == lanes[len(lanes)-1] && r == rounds-1 {
				if residue, err = laneResidue(ctx, rs, "simpleq", "q0"); err != nil {
					return err
				}
			}
		}
	}
	for i, l := range lanes {
		t := res[i]
		target := ""
		if l == 5000 {
			target = "≥ 0.8× 1 lane"
		}
		add(fmt.Sprintf("deliveries/s, N=%s, concurrency %d, %s", commas(n), o.concurrency, label(l)), medianOf(append([]float64(nil), t.rates...), "/s"), target)
		add(fmt.Sprintf("  %s: script calls / commands / Redis script µs per job", label(l)),
			fmt.Sprintf("%.2f / %.1f / %.1f µs", median(t.calls), median(t.cmds), median(t.usec)), "")
		add(fmt.Sprintf("  %s: CPU per delivered job: Redis / daemon / webhook (last round)", label(l)), t.cpu, "")
		add(fmt.Sprintf("  %s: commands per job inside the scripts (last round)", label(l)), t.top, "")
	}
	one := res[1].rates
	for i := 2; i < len(lanes); i++ {
		parts := make([]string, rounds)
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = res[i].rates[r] / one[r]
			parts[r] = fmt.Sprintf("%.2f", ratios[r])
		}
		target := ""
		if lanes[i] == 5000 {
			target = "≥ 0.8"
		}
		add(fmt.Sprintf("%s ÷ 1 lane, same round", label(lanes[i])), fmt.Sprintf("×%.2f (rounds %s)", median(ratios), strings.Join(parts, ", ")), target)
	}
	parts := make([]string, rounds)
	ratios := make([]float64, rounds)
	for r := range rounds {
		ratios[r] = one[r] / res[0].rates[r]
		parts[r] = fmt.Sprintf("%.2f", ratios[r])
	}
	add("1 lane ÷ no flow key, same round", fmt.Sprintf("×%.2f (rounds %s)", median(ratios), strings.Join(parts, ", ")), "")
	add(fmt.Sprintf("after all delivered (%s lanes): what the lanes leave in Redis", commas(lanes[len(lanes)-1])), residue, "nothing")
	return nil
}

// topCommands lists the k commands Redis ran most since the last stats
// reset, as calls per job over n jobs (scripts' inner commands included).
func topCommands(ctx context.Context, rs *redisProc, n, k int) (string, error) {
	info, err := rs.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return "", err
	}
	type cmd struct {
		name  string
		calls int64
	}
	var cs []cmd
	for _, line := range strings.Split(info, "\r\n") {
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || isScriptCall(name) {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				c, _ := strconv.ParseInt(v, 10, 64)
				cs = append(cs, cmd{name, c})
			}
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].calls > cs[j].calls })
	parts := make([]string, 0, k)
	for _, c := range cs[:min(k, len(cs))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", c.name, float64(c.calls)/float64(n)))
	}
	return strings.Join(parts, ", "), nil
}

// commas formats n with thousands separators: 100000 → "100,000".
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// laneKeyNames are the lane keys of a queue (store.Keys' last six).
func laneKeyNames(prefix, queue string) []string {
	base := prefix + ":{" + queue + "}:"
	return []string{base + "lanes", base + "lwait", base + "lready", base + "ltimed", base + "lheld", base + "lstarts"}
}

// laneResidue waits (up to 10 s) for the queue's lane keys to empty and
// reports what is left in each: "nothing" when every one is gone.
func laneResidue(ctx context.Context, rs *redisProc, prefix, queue string) (string, error) {
	names := laneKeyNames(prefix, queue)
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		left = left[:0]
		for _, k := range names {
			t, err := rs.client.Type(ctx, k).Result()
			if err != nil {
				return "", err
			}
			var n int64
			switch t {
			case "hash":
				n, err = rs.client.HLen(ctx, k).Result()
			case "zset":
				n, err = rs.client.ZCard(ctx, k).Result()
			case "none":
				continue
			default:
				n = 1
			}
			if err != nil {
				return "", err
			}
			left = append(left, fmt.Sprintf("%s: %d", k[strings.LastIndexByte(k, ':')+1:], n))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) == 0 {
		return "nothing (lanes, lwait, lready, ltimed, lheld, lstarts: no such keys)", nil
	}
	return "LEFT: " + strings.Join(left, ", "), nil
}

// laneMemoryRows measures Redis memory per lane with jobs: the same number
// of waiting jobs published without a key, in one lane each, and ten to a
// lane; the lanes' share is the difference. Then it delivers every job of
// the keyed queue (claim and settle through the store) and checks that the
// empty lanes left nothing.
func laneMemoryRows(ctx context.Context, work string, o options, payload string, add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rkm", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	st, err := store.New(rs.client, store.Options{Prefix: "lanemem", LeaseMargin: time.Second})
	if err != nil {
		return err
	}
	if err := st.Load(ctx); err != nil {
		return err
	}
	c := config.Default().Defaults
	c.Concurrency = 100000
	q := config.Queue{Name: "mem", WebhookURL: "http://127.0.0.1:1/", SigningSecret: "s", QueueSettings: c}
	jobs := 100000
	if o.quick {
		jobs = 20000
	}
	body := json.RawMessage(`{"data":"` + payload + `"}`)
	fill := func(lanes int) error { return publishSpread(ctx, st, queueparams.Of(q), jobs, lanes, body) }
	mem := func() (int64, error) { return redisMemory(ctx, rs) }
	measure := func(lanes int) (int64, error) {
		if err := rs.client.FlushAll(ctx).Err(); err != nil {
			return 0, err
		}
		m0, err := mem()
		if err != nil {
			return 0, err
		}
		if err := fill(lanes); err != nil {
			return 0, err
		}
		m1, err := mem()
		return m1 - m0, err
	}
	plain, err := measure(0)
	if err != nil {
		return err
	}
	add(fmt.Sprintf("Redis memory, %s waiting jobs, no flow key", commas(jobs)), fmt.Sprintf("%.0f B per job", float64(plain)/float64(jobs)), "")
	for _, per := range []int{1, 10} {
		lanes := jobs / per
		m, err := measure(lanes)
		if err != nil {
			return err
		}
		add(fmt.Sprintf("Redis memory per lane with jobs, %s lanes × %d job(s)", commas(lanes), per),
			fmt.Sprintf("%.0f B per lane (%.0f B per job in all, %+.0f B per job vs no key)", float64(m-plain)/float64(lanes), float64(m)/float64(jobs), float64(m-plain)/float64(jobs)), "")
	}
	// The 10-per-lane queue is still there: deliver all of it.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if time.Now().After(deadline) {
			return fmt.Errorf("lane memory: the queue did not drain in 2 minutes")
		}
		cl, err := st.Claim(ctx, queueparams.Of(q), 1000)
		if err != nil {
			return err
		}
		if len(cl.Jobs) == 0 {
			break
		}
		outs := make([]store.Outcome, len(cl.Jobs))
		for k, j := range cl.Jobs {
			outs[k] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}
		}
		if _, err := st.Settle(ctx, queueparams.Of(q), outs); err != nil {
			return err
		}
	}
	residue, err := laneResidue(ctx, rs, "lanemem", "mem")
	if err != nil {
		return err
	}
	add(fmt.Sprintf("after delivering all %s jobs of %s lanes: lane keys left", commas(jobs), commas(jobs/10)), residue, "nothing")
	return nil
}

// floodRun: one lane floods the queue with flood jobs (published while
// paused), then, once it delivers, lightLanes light lanes publish perLight
// single jobs each, spread over spread; it reports the light jobs'
// publish→delivery latency. keyed false is the reference: the same jobs
// with no flow key at all, where a light job waits behind the flood.
func floodRun(ctx context.Context, d *daemonProc, hook *noopWebhook, flood, lightLanes, perLight int, spread time.Duration, keyed bool, payload string, add func(name, value, target string)) error {
	const queue = "q1"
	api := newAPI(d.url)
	if keyed {
		api.flowKey = func(int) string { return "flood" }
	}
	if err := api.post(ctx, "/v1/queues/"+queue+"/pause", `{}`); err != nil {
		return err
	}
	if err := api.publishBatches(ctx, queue, flood, 1000, 2, payload); err != nil {
		return err
	}
	pool, err := newLeanPool(ctx, d.url, 16)
	if err != nil {
		return err
	}
	defer pool.close()
	total := lightLanes * perLight
	hook.trackLatency(true)
	defer hook.trackLatency(false)
	base := hook.delivered()
	if err := api.post(ctx, "/v1/queues/"+queue+"/resume", `{}`); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the flood is under way
	interval := spread / time.Duration(total)
	var wg sync.WaitGroup
	var perr atomic.Value
	next := time.Now()
	for i := range total {
		next = next.Add(interval)
		if dd := time.Until(next); dd > 0 {
			time.Sleep(dd)
		}
		key := "light-" + strconv.Itoa(i)
		body := `{"payload":{"k":"` + key + `"}}`
		if keyed {
			body = `{"payload":{"k":"` + key + `"},"flowKey":"light-` + strconv.Itoa(i%lightLanes) + `"}`
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hook.markStart(key)
			if err := pool.publish(queue, []byte(body)); err != nil {
				perr.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	atLast := hook.delivered() - base - int64(len(hook.latencies()))
	if e, ok := perr.Load().(error); ok {
		return e
	}
	for deadline := time.Now().Add(3 * time.Minute); hook.delivered()-base < int64(flood+total); {
		if time.Now().After(deadline) {
			return fmt.Errorf("flood run: %d of %d delivered in 3 minutes", hook.delivered()-base, flood+total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	drained := time.Since(next)
	lat := hook.latencies()
	if len(lat) < total {
		return fmt.Errorf("flood run: %d of %d light jobs timed", len(lat), total)
	}
	sort.Float64s(lat)
	what, target := "flow keys", "about one round of the ready lanes"
	if !keyed {
		what, target = "no flow keys (reference: one FIFO)", ""
	}
	add(fmt.Sprintf("flood of %s jobs + %d light lanes × %d jobs over %s, %s: light jobs' publish→delivery p50 / p99 / max", commas(flood), lightLanes, perLight, spread, what),
		fmt.Sprintf("%.1f ms / %.1f ms / %.1f ms", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]), target)
	add(fmt.Sprintf("  %s: flood jobs delivered when the last light job was published; drain after it", what),
		fmt.Sprintf("%s of %s; %.1f s", commas(int(atLast)), commas(flood), drained.Seconds()), "flood still backlogged")
	return nil
}

// jainRun floods lanes equally weighted lanes with jobs jobs in all, and
// counts the deliveries each lane starts while the run goes from 10% to
// 60% delivered (every lane backlogged throughout); Jain's index of the
// counts and their spread against keys.md §4's bound (claimBatch + 1).
func jainRun(ctx context.Context, d *daemonProc, lh *laneWebhook, lanes, jobs int, payload string, add func(name, value, target string)) error {
	const queue = "qfair"
	api := newAPI(d.url)
	api.flowKey = func(i int) string { return "fair-" + strconv.Itoa(i%lanes) }
	if err := api.post(ctx, "/v1/queues/"+queue+"/pause", `{}`); err != nil {
		return err
	}
	if err := api.publishBatches(ctx, queue, jobs, 1000, 2, payload); err != nil {
		return err
	}
	lh.reset("")
	base := lh.count.Load()
	if err := api.post(ctx, "/v1/queues/"+queue+"/resume", `{}`); err != nil {
		return err
	}
	// The window opens when a tenth of the jobs are delivered and closes
	// at six tenths: every lane stays backlogged throughout (the spread
	// between lanes is bounded far below a lane's backlog).
	waitFor := func(k int64) error {
		for deadline := time.Now().Add(3 * time.Minute); lh.count.Load()-base < k; {
			if time.Now().After(deadline) {
				return fmt.Errorf("jain run: %d of %d delivered in 3 minutes", lh.count.Load()-base, k)
			}
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	}
	if err := waitFor(int64(jobs / 10)); err != nil {
		return err
	}
	lh.window(true)
	opened := time.Now()
	if err := waitFor(int64(jobs * 6 / 10)); err != nil {
		return err
	}
	lh.window(false)
	window := time.Since(opened)
	counts, _ := lh.snapshot()
	xs := make([]float64, 0, lanes)
	lo, hi, sum := math.MaxInt, 0, 0
	for i := range lanes {
		c := counts["fair-"+strconv.Itoa(i)]
		xs = append(xs, float64(c))
		lo, hi, sum = min(lo, c), max(hi, c), sum+c
	}
	if err := waitFor(int64(jobs)); err != nil {
		return err
	}
	add(fmt.Sprintf("fairness, %s equally weighted flooded lanes (%s jobs): Jain's index of starts from the 10%% to the 60%% delivered", commas(lanes), commas(jobs)),
		fmt.Sprintf("%.4f (%s starts in %.2f s, per lane min %d / max %d)", jain(xs), commas(sum), window.Seconds(), lo, hi), "≥ 0.99")
	add(fmt.Sprintf("  %s lanes: largest difference of starts between two lanes", commas(lanes)),
		fmt.Sprintf("%d", hi-lo), "≤ claimBatch + 1 = 65")
	return nil
}

// heldLaneRows runs lanes lanes of perLane jobs each for window, first
// alone (qheld0), then beside a lane "held" that the webhook always answers
// 429 with Retry-After: 1 (qheld1): the held lane should get one delivery
// per second (its probe) after the first wave, and the others their rate.
func heldLaneRows(ctx context.Context, d *daemonProc, lh *laneWebhook, lanes, perLane int, window time.Duration, payload string, add func(name, value, target string)) error {
	run := func(queue string, held bool) (others float64, heldAt []time.Duration, err error) {
		api := newAPI(d.url)
		n := lanes * perLane
		all := lanes
		if held {
			all++
			n += perLane
		}
		api.flowKey = func(i int) string {
			if held && i%all == lanes {
				return "held"
			}
			return "hl-" + strconv.Itoa(i%all)
		}
		if err := api.post(ctx, "/v1/queues/"+queue+"/pause", `{}`); err != nil {
			return 0, nil, err
		}
		if err := api.publishBatches(ctx, queue, n, 1000, 2, payload); err != nil {
			return 0, nil, err
		}
		h := ""
		if held {
			h = "held"
		}
		lh.reset(h)
		if err := api.post(ctx, "/v1/queues/"+queue+"/resume", `{}`); err != nil {
			return 0, nil, err
		}
		// The others' rate over the window after its first second.
		time.Sleep(time.Second)
		lh.window(true)
		time.Sleep(window - time.Second)
		lh.window(false)
		counts, heldAt := lh.snapshot()
		if err := api.post(ctx, "/v1/queues/"+queue+"/pause", `{}`); err != nil {
			return 0, nil, err
		}
		sum, minLane := 0, math.MaxInt
		for i := range lanes {
			c := counts["hl-"+strconv.Itoa(i)]
			sum += c
			minLane = min(minLane, c)
		}
		if minLane == 0 || minLane >= perLane {
			return 0, nil, fmt.Errorf("held-lane run %s: a lane ran dry or got nothing (min %d of %d)", queue, minLane, perLane)
		}
		return float64(sum) / (window - time.Second).Seconds(), heldAt, nil
	}
	// Two pairs, alone then beside, so that a drift of the machine shows.
	var alones, besides []float64
	var heldAt []time.Duration
	for p := range 2 {
		alone, _, err := run(fmt.Sprintf("qheld%d", 2*p), false)
		if err != nil {
			return err
		}
		beside, at, err := run(fmt.Sprintf("qheld%d", 2*p+1), true)
		if err != nil {
			return err
		}
		alones, besides = append(alones, alone), append(besides, beside)
		if p == 0 {
			heldAt = at
		}
	}
	secs := int(window / time.Second)
	per := make([]int, secs)
	for _, t := range heldAt {
		if s := int(t / time.Second); s < secs {
			per[s]++
		}
	}
	later := 0
	parts := make([]string, secs)
	for s, c := range per {
		parts[s] = strconv.Itoa(c)
		if s > 0 {
			later += c
		}
	}
	add(fmt.Sprintf("held lane (429, Retry-After: 1, always) beside %d busy lanes: its deliveries per second, s 1…%d", lanes, secs),
		strings.Join(parts, ", "), "")
	add("  held lane: deliveries per second after the first", fmt.Sprintf("%.2f", float64(later)/float64(secs-1)), "≈ 1 (one probe per Retry-After)")
	add(fmt.Sprintf("  the other %d lanes: deliveries/s without the held lane / beside it", lanes),
		fmt.Sprintf("%.0f, %.0f /s / %.0f, %.0f /s (×%.2f, ×%.2f)", alones[0], alones[1], besides[0], besides[1], besides[0]/alones[0], besides[1]/alones[1]), "full speed")
	return nil
}

// laneScriptRows splits a keyed delivery's Redis cost between its claim and
// its settle script, and between the commands a script sends and its own
// Lua: 20,000 waiting jobs with no key, 10, 5,000 and 20,000 lanes are
// claimed 22 at a time (the daemon's average batch in the delivery runs)
// and each batch settled at once, through package store on a Redis of its
// own, reading INFO commandstats around every call.
func laneScriptRows(ctx context.Context, work string, o options, payload string, add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rks", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	st, err := store.New(rs.client, store.Options{Prefix: "lanescr", LeaseMargin: time.Second})
	if err != nil {
		return err
	}
	if err := st.Load(ctx); err != nil {
		return err
	}
	c := config.Default().Defaults
	c.Concurrency = 100000
	q := queueparams.Of(config.Queue{Name: "scr", WebhookURL: "http://127.0.0.1:1/", SigningSecret: "s", QueueSettings: c})
	jobs, per := 20000, 22
	if o.quick {
		jobs = 4000
	}
	body := json.RawMessage(`{"data":"` + payload + `"}`)
	// What INFO commandstats counts: the scripts' time (fcall) and that
	// of the commands they sent.
	type usec struct{ script, inner, cmds int64 }
	read := func() (usec, error) {
		c, err := rs.commandStatsSplit(ctx)
		return usec{script: c.scriptUsec, inner: c.innerUsec, cmds: c.all - c.scripts}, err
	}
	for _, lanes := range []int{0, 10, 5000, 20000} {
		if err := rs.client.FlushAll(ctx).Err(); err != nil {
			return err
		}
		if err := publishSpread(ctx, st, q, jobs, lanes, body); err != nil {
			return err
		}
		var claim, settle usec
		sub := func(acc *usec, a, b usec) {
			acc.script += b.script - a.script
			acc.inner += b.inner - a.inner
			acc.cmds += b.cmds - a.cmds
		}
		for n, deadline := 0, time.Now().Add(2*time.Minute); n < jobs; {
			if time.Now().After(deadline) {
				return fmt.Errorf("script split: %d lanes did not drain in 2 minutes", lanes)
			}
			u0, err := read()
			if err != nil {
				return err
			}
			cl, err := st.Claim(ctx, q, per)
			if err != nil {
				return err
			}
			u1, err := read()
			if err != nil {
				return err
			}
			outs := make([]store.Outcome, len(cl.Jobs))
			for k, j := range cl.Jobs {
				outs[k] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}
			}
			if _, err := st.Settle(ctx, q, outs); err != nil {
				return err
			}
			u2, err := read()
			if err != nil {
				return err
			}
			// The INFO calls in between count themselves only (skipped above).
			sub(&claim, u0, u1)
			sub(&settle, u1, u2)
			n += len(cl.Jobs)
		}
		name := "no flow key"
		if lanes > 0 {
			name = commas(lanes) + " lanes"
		}
		per := func(v int64) float64 { return float64(v) / float64(jobs) }
		add(fmt.Sprintf("Redis µs per job, claim / settle script (of which its commands), %s", name),
			fmt.Sprintf("%.1f (%.1f) / %.1f (%.1f); commands per job %.2f / %.2f", per(claim.script), per(claim.inner),
				per(settle.script), per(settle.inner), per(claim.cmds), per(settle.cmds)), "")
	}
	return nil
}

// publishSpread publishes jobs waiting jobs of body to q in batches of 1,000,
// their flow keys round-robin over lanes ("tenant-0" …; none when lanes is
// 0).
func publishSpread(ctx context.Context, st *store.Store, q store.QueueParams, jobs, lanes int, body json.RawMessage) error {
	batch := make([]store.NewJob, 0, 1000)
	for i := 0; i < jobs; i += 1000 {
		batch = batch[:0]
		for j := i; j < min(i+1000, jobs); j++ {
			fk := ""
			if lanes > 0 {
				fk = "tenant-" + strconv.Itoa(j%lanes)
			}
			batch = append(batch, store.NewJob{Payload: body, FlowKey: fk})
		}
		if _, err := st.Publish(ctx, q, batch); err != nil {
			return err
		}
	}
	return nil
}
