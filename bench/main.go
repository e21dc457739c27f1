// Command bench is simpleqd's load harness. It starts a real redis-server, real
// simpleqd daemon processes and a no-op webhook, all on loopback, drives them
// with bounded loads, and prints one table:
//
//	go run ./bench                 # the full table (a few minutes)
//	go run ./bench -quick          # smaller N, for a smoke run
//	go run ./bench -only compare   # simpleqd, asynq and BullMQ side by side
//	go run ./bench -only keys      # flow keys: rate by lanes, memory, fairness, a held lane
//
// Every phase is bounded in count and time and stops by itself. Numbers come
// from this machine with everything sharing its cores: Redis, the daemons, the
// webhook and the load generator.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/store"
)

type options struct {
	n           int
	publishN    int
	batchN      int
	concurrency int
	claimBig    int
	quick       bool
	keep        bool
	skipCluster bool
	skipCompare bool
	profile     string
	only        string
	runs        int
	warmup      int
	// against is a second simpleqd binary (another version's build) that
	// -only compare runs in every round beside this checkout's daemon, on
	// a Redis of its own: an A/B of two versions in the same phase of the
	// machine, each with its own ratio to the competitors.
	against string
	// keysN is the jobs of each delivery run of -only keys; keys, with
	// -only compare, adds a simpleqd run whose jobs carry that many flow
	// keys round-robin (keys.go).
	keysN     int
	keys      int
	keysParts string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 20000, "jobs for the end-to-end delivery run")
	flag.IntVar(&o.publishN, "publish", 20000, "single-job HTTP publishes")
	flag.IntVar(&o.batchN, "batch", 200000, "jobs published through the batch endpoint")
	flag.IntVar(&o.concurrency, "concurrency", 50, "queue concurrency")
	flag.IntVar(&o.claimBig, "claim-big", 1000000, "waiting jobs for the large claim-cost run")
	flag.BoolVar(&o.quick, "quick", false, "smaller loads (smoke run)")
	flag.BoolVar(&o.skipCluster, "skip-cluster", false, "skip the Redis Cluster row")
	flag.BoolVar(&o.skipCompare, "skip-compare", false, "skip the asynq and BullMQ rows (they need Go modules and npm packages)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the daemon during the 1-daemon delivery run to this file; with -only compare, a path prefix for a daemon profile and a perf record of Redis per simpleqd round")
	flag.StringVar(&o.only, "only", "", "run only this phase: publish (single, batch, memory) | delivery (publish rows too, and tracing off vs on) | latency (delivery rows too) | claim (claim cost, 1k vs 1M waiting) | backpressure | compare (simpleqd, asynq and BullMQ deliveries, round by round) | schedules (10,000 schedules: tick lag and CPU) | queues (10,000 queues created over the API: an idle daemon's CPU, Redis memory per empty queue) | cancel (bulk cancel of 1M waiting jobs) | keys (flow keys: delivery rate by lanes, memory per lane, fairness, a held lane)")
	flag.IntVar(&o.runs, "runs", 5, "repeat the headline throughput runs this many times and report the median")
	flag.StringVar(&o.against, "against", "", "with -only compare: a second simpleqd binary (e.g. an older version's build) run in every round beside this one, for an A/B in the same phase of the machine")
	flag.IntVar(&o.keysN, "keys-n", 200000, "jobs of each delivery run of -only keys (enough for 100,000 lanes to hold two each)")
	flag.StringVar(&o.keysParts, "keys-parts", "", "with -only keys: only these parts, comma-separated: rate, memory, scripts, fair, held (default all)")
	flag.IntVar(&o.keys, "keys", 0, "with -only compare: also run simpleqd with its jobs spread round-robin over this many flow keys; with -only backpressure: also run each N with its jobs over this many flow keys (holdScope queue)")
	flag.IntVar(&o.warmup, "warmup", 1, "unmeasured runs before the headline throughput runs (connection pools, goroutines, heap and Redis tables grow to size)")
	flag.Parse()
	if o.quick {
		o.n, o.publishN, o.batchN, o.claimBig = 3000, 3000, 20000, 50000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type row struct{ name, value, target string }

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "simpleqd-bench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(work)
	}
	bin := filepath.Join(work, "simpleqd")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/simpleqd").CombinedOutput(); err != nil {
		return fmt.Errorf("build simpleqd: %v\n%s", err, out)
	}
	hook := newNoopWebhook()
	defer hook.close()

	var rows []row
	add := func(name, value, target string) {
		rows = append(rows, row{name, value, target})
		fmt.Fprintf(os.Stderr, "  %-58s %s\n", name, value)
	}

	if o.only == "compare" {
		if err := compareRun(ctx, bin, work, hook, o, max(o.runs, 1), add); err != nil {
			return err
		}
		return printRows(rows)
	}
	if o.only == "keys" {
		if err := keysRun(ctx, bin, work, hook, o, add); err != nil {
			return err
		}
		return printRows(rows)
	}
	if o.only == "queues" {
		if err := queuesRun(ctx, bin, work, hook, 10000, 10*time.Second, add); err != nil {
			return err
		}
		return printRows(rows)
	}
	if o.only == "schedules" {
		if err := schedulesRun(ctx, bin, work, hook, 10000, 100, "@every 1s", 20*time.Second, add); err != nil {
			return err
		}
		if err := schedulesRun(ctx, bin, work, hook, 10000, 100, "@every 10s", 20*time.Second, add); err != nil {
			return err
		}
		return printRows(rows)
	}
	if o.only == "backpressure" {
		for _, n := range []int{2000, 100000} {
			if o.quick {
				n = min(n, 5000)
			}
			if err := backpressureRun(ctx, bin, work, n, 0, add); err != nil {
				return err
			}
			if o.keys > 0 {
				if err := backpressureRun(ctx, bin, work, n, o.keys, add); err != nil {
					return err
				}
			}
		}
		return printRows(rows)
	}

	// Phase 1: one daemon, one Redis.
	rs, err := startRedis(ctx, work, "r1", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	if o.only == "claim" {
		if err := addClaimCost(ctx, rs, o, add); err != nil {
			return err
		}
		return printRows(rows)
	}
	if o.only == "cancel" {
		n := 1000000
		if o.quick {
			n = 50000
		}
		if err := cancelRun(ctx, rs, n, add); err != nil {
			return err
		}
		return printRows(rows)
	}
	var pubProf string
	if o.profile != "" && o.only == "publish" {
		port, err := freePort()
		if err != nil {
			return err
		}
		pubProf = "127.0.0.1:" + strconv.Itoa(port)
		os.Setenv("SIMPLEQD_PPROF_LISTEN", pubProf)
	}
	d, err := startDaemon(ctx, bin, work, "d1", []string{rs.addr}, nil, hook.url, o.concurrency, 1)
	os.Unsetenv("SIMPLEQD_PPROF_LISTEN")
	if err != nil {
		return err
	}
	api := newAPI(d.url)

	if o.only == "delivery" {
		o.publishN, o.batchN = 1000, 1000
	}
	add("machine speed before the publish runs (redis-benchmark, 50 clients)", machineGauge(ctx, rs), "")
	add("machine speed: Go's net/http client → the no-op webhook, 50 connections", httpGauge(ctx, hook.url), "")
	// HTTP publish throughput: the queue is paused so only publishing runs.
	if err := api.post(ctx, "/v1/queues/q0/pause", `{}`); err != nil {
		return err
	}
	memBefore, err := rs.usedMemory(ctx)
	if err != nil {
		return err
	}
	payload := strings.Repeat("x", 180)
	body := []byte(`{"payload":{"data":"` + payload + `"}}`) // a 200-byte payload
	var pubDone chan error
	if pubProf != "" {
		pubDone = make(chan error, 1)
		go func() { pubDone <- fetchProfile(ctx, pubProf, o.profile) }()
		time.Sleep(100 * time.Millisecond)
	}
	pubCPU := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
	published := 0
	for range o.warmup {
		if err := epollPublishMany(ctx, d.url, "q0", o.publishN, 50, body); err != nil {
			return err
		}
		published += o.publishN
	}
	pubCPU.start()
	if err := rs.resetStats(ctx); err != nil {
		return err
	}
	var pubRates []float64
	for range max(o.runs, 1) {
		start := time.Now()
		if err := epollPublishMany(ctx, d.url, "q0", o.publishN, 50, body); err != nil {
			return err
		}
		pubRates = append(pubRates, float64(o.publishN)/time.Since(start).Seconds())
	}
	add("HTTP publish, single-job requests, 50 clients", medianOf(pubRates, "jobs/s"), "≥ 20,000")
	add("CPU per single publish: Redis / daemon / client", pubCPU.perJob(o.publishN*len(pubRates)), "")
	pubScripts, _, err := rs.commandStats(ctx)
	if err != nil {
		return err
	}
	add("  publishes merged into one script call (package ingest)", fmt.Sprintf("%.1f on average", float64(o.publishN*len(pubRates))/float64(max(pubScripts, 1))), "")
	published += o.publishN * len(pubRates)
	pubCPU.start()
	start := time.Now()
	if err := leanPublishMany(ctx, d.url, "q0", o.publishN, 50, body); err != nil {
		return err
	}
	published += o.publishN
	add("  the same with a goroutine per client connection", fmt.Sprintf("%.0f jobs/s", float64(o.publishN)/time.Since(start).Seconds()), "")
	add("  CPU per single publish: Redis / daemon / client", pubCPU.perJob(o.publishN), "")
	pubCPU.start()
	start = time.Now()
	if err := api.publishMany(ctx, "q0", o.publishN/2, 50, body); err != nil {
		return err
	}
	published += o.publishN / 2
	add("  the same with Go's net/http client as load generator", fmt.Sprintf("%.0f jobs/s", float64(o.publishN/2)/time.Since(start).Seconds()), "")
	add("  CPU per single publish: Redis / daemon / client", pubCPU.perJob(o.publishN/2), "")
	if pubDone != nil {
		if err := <-pubDone; err != nil {
			return err
		}
	}

	// Batch publish throughput: a warm-up, then the median of three runs.
	if err := api.publishBatches(ctx, "q0", o.batchN/4, 1000, 4, payload); err != nil {
		return err
	}
	published += o.batchN / 4
	pubCPU.start()
	var batchRates []float64
	for range min(max(o.runs, 1), 3) {
		start = time.Now()
		if err := api.publishBatches(ctx, "q0", o.batchN, 1000, 4, payload); err != nil {
			return err
		}
		batchRates = append(batchRates, float64(o.batchN)/time.Since(start).Seconds())
	}
	add("HTTP batch publish (1,000 jobs per request, 4 clients)", medianOf(batchRates, "jobs/s"), "≥ 100,000")
	add("CPU per batch-published job: Redis / daemon / client", pubCPU.perJob(o.batchN*len(batchRates)), "")
	published += o.batchN * len(batchRates)

	// Memory per waiting job: every job published above is still waiting.
	waiting := published
	memNow, err := rs.usedMemory(ctx)
	if err != nil {
		return err
	}
	perJob := float64(memNow-memBefore)/float64(waiting) - 200
	add("Redis memory per waiting job beyond its 200-byte payload", fmt.Sprintf("%.0f bytes", perJob), "≤ 400")
	// What redis.durability: replicated costs, on a master with a replica
	// (durability.go); its own Redis pair and daemons.
	if err := durabilityRows(ctx, bin, work, hook.url, o, body, add); err != nil {
		return err
	}
	if o.only == "publish" {
		_ = d.stop()
		return printRows(rows)
	}
	// Drop the backlog before the delivery runs.
	if err := rs.client.FlushAll(ctx).Err(); err != nil {
		return err
	}
	_ = d.stop()
	var pprofAddr string
	if o.profile != "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		pprofAddr = "127.0.0.1:" + strconv.Itoa(port)
		os.Setenv("SIMPLEQD_PPROF_LISTEN", pprofAddr)
	}
	d, err = startDaemon(ctx, bin, work, "d1b", []string{rs.addr}, nil, hook.url, o.concurrency, 1,
		[2]string{"qgo", hook.goURL}, [2]string{"qnet", hook.netURL})
	os.Unsetenv("SIMPLEQD_PPROF_LISTEN")
	if err != nil {
		return err
	}
	api = newAPI(d.url)

	// End-to-end deliveries/s: N jobs published in batches while paused, then
	// resumed; commandstats cover publish + claim + delivery + settle. The
	// CPU split (and the profile, if asked for) covers the delivery only.
	cpu := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
	if pprofAddr != "" {
		cpu.profileAddr, cpu.profilePath = pprofAddr, o.profile
	}
	add("machine speed before the delivery runs (redis-benchmark, 50 clients)", machineGauge(ctx, rs), "")
	for range o.warmup {
		if _, _, _, err := deliveryRun(ctx, api, rs, hook, "q0", o.n, payload); err != nil {
			return err
		}
	}
	trips := &roundTrips{}
	rate, calls, cmds, usec, err := deliveryRunUsec(ctx, api, rs, hook, "q0", o.n, payload, cpu, trips)
	if err != nil {
		return err
	}
	if err := cpu.profileErr(); err != nil {
		return err
	}
	cpu.profileAddr = ""
	rates := []float64{rate}
	for len(rates) < o.runs {
		r, _, _, _, err := deliveryRunUsec(ctx, api, rs, hook, "q0", o.n, payload, nil, trips)
		if err != nil {
			return err
		}
		rates = append(rates, r)
	}
	rate = median(rates)
	add(fmt.Sprintf("end-to-end deliveries/s, N=%d, concurrency %d, 1 daemon", o.n, o.concurrency), medianOf(rates, "/s"), "≥ 15,000")
	add("Redis script calls per delivered job (publish..settle)", fmt.Sprintf("%.2f", calls), "≤ 1.5")
	add("Redis commands per delivered job (incl. inside scripts)", fmt.Sprintf("%.1f", cmds), "≤ 12")
	add("Redis script time per delivered job (publish..settle)", fmt.Sprintf("%.0f µs", usec), "")
	add("CPU per delivered job: Redis / daemon / webhook", cpu.result, "")
	add("claim/settle script round trip: daemon's view / Redis running it", trips.String(), "")
	rate, _, _, _, err = deliveryRunUsec(ctx, api, rs, hook, "qgo", o.n, payload, cpu, nil)
	if err != nil {
		return err
	}
	add("  the same with a goroutine per webhook connection", fmt.Sprintf("%.0f /s", rate), "")
	add("  CPU per delivered job: Redis / daemon / webhook", cpu.result, "")
	rate, _, _, _, err = deliveryRunUsec(ctx, api, rs, hook, "qnet", o.n, payload, cpu, nil)
	if err != nil {
		return err
	}
	add("  the same with Go's net/http server as the webhook", fmt.Sprintf("%.0f /s", rate), "")
	add("  CPU per delivered job: Redis / daemon / webhook", cpu.result, "")
	if err := tracingRows(ctx, bin, work, rs, hook, d, o, payload, add); err != nil {
		return err
	}

	if o.only == "delivery" {
		_ = d.stop()
		return printRows(rows)
	}
	if o.only == "latency" {
		defer d.stop()
		for _, r := range []float64{500, 1000, 2000, 3000, 4000} {
			p50, p99, err := latencyRun(ctx, d.url, hook, "q1", r, 4*time.Second)
			if err != nil {
				return err
			}
			add(fmt.Sprintf("publish→delivery latency at %.0f single publishes/s, p50 / p99", r),
				fmt.Sprintf("%.2f ms / %.2f ms", p50, p99), "")
		}
		return printRows(rows)
	}
	// The full pipeline: single-job HTTP publishes from 50 clients while the
	// queue delivers; its sustained rate is what "load" means for latency.
	pipeRate, err := pipelineRun(ctx, d.url, hook, "q1", o.n, body)
	if err != nil {
		return err
	}
	add(fmt.Sprintf("publish→delivery pipeline: %d single-job publishes, delivered/s", o.n), fmt.Sprintf("%.0f /s", pipeRate), "")
	// Latency at half load: half the pipeline's sustained rate.
	// Each publish here is a single-job HTTP request, so the load is the
	// publish path plus delivery; a few rates show where latency bends.
	for _, r := range []float64{500, 1000, 2000, pipeRate / 2} {
		p50, p99, err := latencyRun(ctx, d.url, hook, "q1", r, 4*time.Second)
		if err != nil {
			return err
		}
		target := ""
		if r == pipeRate/2 {
			target = "p50 < 5 ms (at half load)"
		}
		add(fmt.Sprintf("publish→delivery latency at %.0f single publishes/s, p50 / p99", r),
			fmt.Sprintf("%.2f ms / %.2f ms", p50, p99), target)
	}

	if err := addClaimCost(ctx, rs, o, add); err != nil {
		return err
	}
	_ = d.stop()

	// Scaling: 2 and 3 daemons on one Redis.
	for _, n := range []int{2, 3} {
		if err := rs.client.FlushAll(ctx).Err(); err != nil {
			return err
		}
		var ds []*daemonProc
		for i := 0; i < n; i++ {
			di, err := startDaemon(ctx, bin, work, fmt.Sprintf("s%d-%d", n, i), []string{rs.addr}, nil, hook.url, o.concurrency, 1)
			if err != nil {
				return err
			}
			ds = append(ds, di)
		}
		rate, _, _, err := deliveryRun(ctx, newAPI(ds[0].url), rs, hook, "q0", o.n, payload)
		for _, di := range ds {
			_ = di.stop()
		}
		if err != nil {
			return err
		}
		add(fmt.Sprintf("end-to-end deliveries/s, %d daemons, one Redis", n), fmt.Sprintf("%.0f /s", rate), "")
	}
	rs.stop()

	for _, n := range []int{2000, 100000} {
		if o.quick {
			n = min(n, 5000)
		}
		if err := backpressureRun(ctx, bin, work, n, 0, add); err != nil {
			return err
		}
	}

	if err := keysRun(ctx, bin, work, hook, o, add); err != nil {
		return err
	}

	if !o.skipCluster {
		rate, err := clusterRun(ctx, bin, work, hook, o, payload)
		if err != nil {
			add("3-master Redis Cluster, 2 daemons, 12 queues", "error: "+err.Error(), "")
		} else {
			add("end-to-end deliveries/s, 3-master Redis Cluster, 2 daemons, 12 queues", fmt.Sprintf("%.0f /s", rate), "")
		}
	}
	if !o.skipCompare {
		if err := compareRun(ctx, bin, work, hook, o, min(max(o.runs, 1), 3), add); err != nil {
			add("simpleqd, asynq and BullMQ side by side", "error: "+err.Error(), "")
		}
	}

	return printRows(rows)
}

func printRows(rows []row) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tresult\ttarget")
	fmt.Fprintln(tw, "-------\t------\t------")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.value, r.target)
	}
	return tw.Flush()
}

// fetchProfile takes a 2-second CPU profile from the daemon's pprof listener.
func fetchProfile(ctx context.Context, addr, path string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/debug/pprof/profile?seconds=2", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func human(n int) string {
	if n >= 1000000 {
		return fmt.Sprintf("%gM", float64(n)/1e6)
	}
	return fmt.Sprintf("%dk", n/1000)
}

// deliveryRun publishes n jobs while the queue is paused, resets Redis'
// command statistics, resumes, waits for all deliveries and returns the rate
// and the script calls and commands per delivered job (publish included).
func deliveryRun(ctx context.Context, api *apiClient, rs *redisProc, hook *noopWebhook, queue string, n int, payload string) (rate, callsPerJob, cmdsPerJob float64, err error) {
	rate, callsPerJob, cmdsPerJob, _, err = deliveryRunUsec(ctx, api, rs, hook, queue, n, payload, nil, nil)
	return
}

// deliveryRunUsec is deliveryRun that also reports Redis script time per
// job, and adds the run's script round trips to trips if it is not nil.
func deliveryRunUsec(ctx context.Context, api *apiClient, rs *redisProc, hook *noopWebhook, queue string, n int, payload string, cpu *cpuSplit, trips *roundTrips) (rate, callsPerJob, cmdsPerJob, usecPerJob float64, err error) {
	if err := api.post(ctx, "/v1/queues/"+queue+"/pause", `{}`); err != nil {
		return 0, 0, 0, 0, err
	}
	if err := rs.resetStats(ctx); err != nil {
		return 0, 0, 0, 0, err
	}
	if err := api.publishBatches(ctx, queue, n, 1000, 2, payload); err != nil {
		return 0, 0, 0, 0, err
	}
	if trips != nil {
		if err := trips.begin(ctx, api, rs); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	base := hook.delivered()
	start := time.Now()
	if cpu != nil {
		cpu.start()
	}
	if err := api.post(ctx, "/v1/queues/"+queue+"/resume", `{}`); err != nil {
		return 0, 0, 0, 0, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for hook.delivered()-base < int64(n) {
		if time.Now().After(deadline) {
			return 0, 0, 0, 0, fmt.Errorf("only %d of %d delivered in 3 minutes", hook.delivered()-base, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	rate = float64(n) / time.Since(start).Seconds()
	if cpu != nil {
		cpu.result = cpu.perJob(n)
	}
	// Let the last settles land before reading stats.
	time.Sleep(300 * time.Millisecond)
	calls, cmds, usec, err := rs.commandStatsUsec(ctx)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if trips != nil {
		if err := trips.end(ctx, api, calls, usec, n); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	return rate, float64(calls) / float64(n), float64(cmds) / float64(n), float64(usec) / float64(n), nil
}

// latencyRun publishes single jobs at a steady rate over a pool of lean
// keep-alive connections and measures publish start → webhook arrival.
func latencyRun(ctx context.Context, base string, hook *noopWebhook, queue string, perSec float64, dur time.Duration) (p50, p99 float64, err error) {
	if perSec < 50 {
		perSec = 50
	}
	pool, err := newLeanPool(ctx, base, 64)
	if err != nil {
		return 0, 0, err
	}
	defer pool.close()
	interval := time.Duration(float64(time.Second) / perSec)
	hook.trackLatency(true)
	defer hook.trackLatency(false)
	var wg sync.WaitGroup
	end := time.Now().Add(dur)
	next := time.Now()
	var i int64
	var perr atomic.Value
	for time.Now().Before(end) {
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		i++
		go func(i int64) {
			defer wg.Done()
			key := "lat-" + strconv.FormatInt(i, 10)
			hook.markStart(key)
			if err := pool.publish(queue, []byte(`{"payload":{"k":"`+key+`"}}`)); err != nil {
				perr.Store(err)
			}
		}(i)
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	if e, ok := perr.Load().(error); ok {
		return 0, 0, e
	}
	lat := hook.latencies()
	if len(lat) == 0 {
		return 0, 0, errors.New("no latency samples")
	}
	sort.Float64s(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

// addClaimCost adds the row for claim cost with 1k vs 1M waiting jobs.
func addClaimCost(ctx context.Context, rs *redisProc, o options, add func(name, value, target string)) error {
	small, big, err := claimCost(ctx, rs, o.claimBig, strings.Repeat("x", 180))
	if err != nil {
		return err
	}
	add(fmt.Sprintf("claim+settle cost, 1k waiting vs %s waiting", human(o.claimBig)),
		fmt.Sprintf("%.0f µs vs %.0f µs (×%.2f)", small, big, big/small), "within ×1.3")
	return nil
}

// claimCost times store.Claim+Settle directly against queues holding 1k and
// big waiting jobs: cost per call must not grow with the backlog.
func claimCost(ctx context.Context, rs *redisProc, big int, payload string) (smallUS, bigUS float64, err error) {
	st, err := store.New(rs.client, store.Options{Prefix: "claimcost", LeaseMargin: time.Second})
	if err != nil {
		return 0, 0, err
	}
	if err := st.Load(ctx); err != nil {
		return 0, 0, err
	}
	q := func(name string) config.Queue {
		c := config.Default().Defaults
		c.Concurrency = 1000
		return config.Queue{Name: name, WebhookURL: "http://127.0.0.1:1/", SigningSecret: "s", QueueSettings: c}
	}
	fill := func(qq config.Queue, n int) error {
		jobs := make([]store.NewJob, 0, 1000)
		for i := 0; i < n; i += 1000 {
			jobs = jobs[:0]
			for j := 0; j < 1000 && i+j < n; j++ {
				jobs = append(jobs, store.NewJob{Payload: json.RawMessage(`{"data":"` + payload + `"}`)})
			}
			if _, err := st.Publish(ctx, queueparams.Of(qq), jobs); err != nil {
				return err
			}
		}
		return nil
	}
	measure := func(qq config.Queue) (float64, error) {
		const rounds, per = 200, 5
		start := time.Now()
		for i := 0; i < rounds; i++ {
			res, err := st.Claim(ctx, queueparams.Of(qq), per)
			if err != nil {
				return 0, err
			}
			outs := make([]store.Outcome, len(res.Jobs))
			for k, j := range res.Jobs {
				outs[k] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}
			}
			if _, err := st.Settle(ctx, queueparams.Of(qq), outs); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Microseconds()) / rounds, nil
	}
	small, large := q("small"), q("large")
	if err := fill(small, 1000); err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(os.Stderr, "  (filling %d waiting jobs for the claim-cost run…)\n", big)
	if err := fill(large, big); err != nil {
		return 0, 0, err
	}
	// Alternate, and take the median of each: one measure is 200 rounds
	// (~0.1 s), short enough for a hiccup of the VM to move a mean. A
	// measure takes 1,000 jobs, so each queue is topped up by as many first
	// (untimed): the small one holds 2,000 → 1,000 waiting jobs while timed,
	// never running dry (an empty queue's claim is cheaper and would flatter
	// the ratio's other side).
	var s, b []float64
	for i := 0; i < 7; i++ {
		if err := fill(small, 1000); err != nil {
			return 0, 0, err
		}
		x, err := measure(small)
		if err != nil {
			return 0, 0, err
		}
		if err := fill(large, 1000); err != nil {
			return 0, 0, err
		}
		y, err := measure(large)
		if err != nil {
			return 0, 0, err
		}
		s, b = append(s, x), append(b, y)
	}
	return median(s), median(b), nil
}

func clusterRun(ctx context.Context, bin, work string, hook *noopWebhook, o options, payload string) (float64, error) {
	var nodes []*redisProc
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	var addrs []string
	for i := 0; i < 3; i++ {
		n, err := startRedis(ctx, work, fmt.Sprintf("c%d", i), true)
		if err != nil {
			return 0, err
		}
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("cluster create: %v %s", err, out)
	}
	for _, n := range nodes {
		for i := 0; ; i++ {
			info, _ := n.client.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") {
				break
			}
			if i > 400 {
				return 0, errors.New("cluster never became ok")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	const queues = 12
	var ds []*daemonProc
	for i := 0; i < 2; i++ {
		d, err := startDaemon(ctx, bin, work, fmt.Sprintf("cl%d", i), nil, addrs, hook.url, o.concurrency, queues)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	defer func() {
		for _, d := range ds {
			_ = d.stop()
		}
	}()
	api := newAPI(ds[0].url)
	per := o.n / queues
	for i := 0; i < queues; i++ {
		if err := api.post(ctx, fmt.Sprintf("/v1/queues/q%d/pause", i), `{}`); err != nil {
			return 0, err
		}
		if err := api.publishBatches(ctx, fmt.Sprintf("q%d", i), per, 1000, 2, payload); err != nil {
			return 0, err
		}
	}
	base := hook.delivered()
	start := time.Now()
	for i := 0; i < queues; i++ {
		if err := api.post(ctx, fmt.Sprintf("/v1/queues/q%d/resume", i), `{}`); err != nil {
			return 0, err
		}
	}
	total := int64(per * queues)
	deadline := time.Now().Add(3 * time.Minute)
	for hook.delivered()-base < total {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d delivered", hook.delivered()-base, total)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// ---- processes ----

type redisProc struct {
	addr   string
	cmd    *exec.Cmd
	client *redis.Client
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startRedis(ctx context.Context, work, name string, cluster bool) (*redisProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "no", "--protected-mode", "no"}
	if cluster {
		// The bus port is the client port + 10000 unless set, which can be
		// past 65535 for a port from the ephemeral range.
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", strconv.Itoa(bus))
	}
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	r := &redisProc{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	r.client = redis.NewClient(&redis.Options{Addr: r.addr})
	for i := 0; ; i++ {
		if r.client.Ping(ctx).Err() == nil {
			return r, nil
		}
		if i > 200 {
			r.stop()
			return nil, errors.New("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *redisProc) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
	_ = r.client.Close()
}

func (r *redisProc) resetStats(ctx context.Context) error {
	return r.client.ConfigResetStat(ctx).Err()
}

// isScriptCall reports the INFO commandstats names of a script call: a
// function (fcall, where Redis has Functions: package store's scripts.go)
// or a script (evalsha, eval).
func isScriptCall(name string) bool { return name == "fcall" || name == "evalsha" || name == "eval" }

// commandStats sums calls from INFO commandstats: script calls (fcall, evalsha, eval)
// and every command, counting those run inside scripts.
func (r *redisProc) commandStats(ctx context.Context) (scripts, all int64, err error) {
	scripts, all, _, err = r.commandStatsUsec(ctx)
	return scripts, all, err
}

// commandStatsUsec also returns the microseconds Redis spent running scripts.
func (r *redisProc) commandStatsUsec(ctx context.Context) (scripts, all, scriptUsec int64, err error) {
	c, err := r.commandStatsSplit(ctx)
	return c.scripts, c.all, c.scriptUsec, err
}

// cmdStats is INFO commandstats summed: calls of scripts and of every
// command (those run inside scripts included), and the microseconds of
// the scripts and of the other commands.
type cmdStats struct {
	scripts, all          int64
	scriptUsec, innerUsec int64
}

// commandStatsSplit reads INFO commandstats, leaving out the harness's own
// commands and connection set-up.
func (r *redisProc) commandStatsSplit(ctx context.Context) (cmdStats, error) {
	var c cmdStats
	info, err := r.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return c, err
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name := strings.TrimPrefix(line[:strings.IndexByte(line, ':')], "cmdstat_")
		fields := line[strings.IndexByte(line, ':')+1:]
		var calls, usec int64
		for _, f := range strings.Split(fields, ",") {
			if strings.HasPrefix(f, "calls=") {
				calls, _ = strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
			}
			if strings.HasPrefix(f, "usec=") {
				usec, _ = strconv.ParseInt(strings.TrimPrefix(f, "usec="), 10, 64)
			}
		}
		switch name {
		case "config|resetstat", "info", "ping", "config|get", "script|load", "script|exists", "function|load", "subscribe", "client|setinfo", "hello":
			continue // the harness's own or connection set-up
		}
		if isScriptCall(name) {
			c.scripts += calls
			c.scriptUsec += usec
		} else {
			c.innerUsec += usec
		}
		c.all += calls
	}
	return c, nil
}

func (r *redisProc) usedMemory(ctx context.Context) (int64, error) {
	info, err := r.client.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if strings.HasPrefix(line, "used_memory:") {
			return strconv.ParseInt(strings.TrimPrefix(line, "used_memory:"), 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO")
}

type daemonProc struct {
	url string
	cmd *exec.Cmd
}

// startDaemon starts a simpleqd process with queues q0..q{queues-1} (plus q1
// when queues is 1) delivering to hookURL, and one more queue per entry of
// extra (name → webhook URL).
func startDaemon(ctx context.Context, bin, work, name string, addr, addrs []string, hookURL string, conc, queues int, extra ...[2]string) (*daemonProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var y strings.Builder
	if len(addrs) > 0 {
		fmt.Fprintf(&y, "redis:\n  addrs: [%s]\n", strings.Join(addrs, ", "))
	} else {
		fmt.Fprintf(&y, "redis:\n  addr: %s\n", addr[0])
	}
	fmt.Fprintf(&y, "http:\n  listen: 127.0.0.1:%d\n  maxPayloadBytes: 4194304\nlog:\n  level: warn\nqueues:\n", port)
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&y, "  q%d:\n    webhookUrl: %s\n    signingSecret: s\n    concurrency: %d\n    maxAttempts: 3\n", i, hookURL, conc)
	}
	if queues == 1 {
		fmt.Fprintf(&y, "  q1:\n    webhookUrl: %s\n    signingSecret: s\n    concurrency: %d\n", hookURL, conc)
	}
	for _, e := range extra {
		fmt.Fprintf(&y, "  %s:\n    webhookUrl: %s\n    signingSecret: s\n    concurrency: %d\n    maxAttempts: 3\n", e[0], e[1], conc)
	}
	path := filepath.Join(work, name+".yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(work, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemonProc{url: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	for i := 0; ; i++ {
		resp, err := http.Get(d.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d, nil
			}
		}
		if i > 500 {
			_ = d.stop()
			return nil, fmt.Errorf("daemon %s never ready (log %s)", name, logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemonProc) stop() error {
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
	d.cmd = nil
	return nil
}

// ---- HTTP ----

type apiClient struct {
	base string
	http *http.Client
	// traceParent, when set, goes with every batch publish (tracingRows).
	traceParent string
	// mixedPriority gives the jobs of a batch publish priorities 0-9 in
	// turn (control.md §2), for the mixed-priority delivery row.
	mixedPriority bool
	// flowKey, when set, gives the i-th job of a batch publish run the
	// flow key flowKey(i) (keys.md §1), for the flow-key rows (keys.go).
	flowKey func(i int) string
}

func newAPI(base string) *apiClient {
	return &apiClient{base: base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256}, Timeout: 60 * time.Second}}
}

func (a *apiClient) post(ctx context.Context, path, body string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", a.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return nil
}

func (a *apiClient) publishOne(ctx context.Context, queue string, body []byte) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/queues/"+queue+"/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		return fmt.Errorf("publish: status %d", resp.StatusCode)
	}
	return nil
}

func (a *apiClient) publishMany(ctx context.Context, queue string, n, clients int, body []byte) error {
	return concurrently(n, clients, func() error { return a.publishOne(ctx, queue, body) })
}

// concurrently calls do n times in all from clients goroutines, and returns
// the first error (each goroutine stops at its first).
func concurrently(n, clients int, do func() error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := do(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return e
	}
	return nil
}

func (a *apiClient) publishBatches(ctx context.Context, queue string, n, size, clients int, payload string) error {
	item := `{"payload":{"data":"` + payload + `"}}`
	if a.mixedPriority {
		// Ten items, one per priority, repeated: batchBody cycles through
		// them (the items are joined by "\x00", which no payload holds).
		items := make([]string, 10)
		for p := range items {
			items[p] = `{"payload":{"data":"` + payload + `"},"priority":` + strconv.Itoa(p) + `}`
		}
		item = strings.Join(items, "\x00")
	}
	full := batchBody(item, size)
	if a.flowKey != nil {
		return a.publishKeyedBatches(ctx, queue, n, size, clients, payload)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	batches := (n + size - 1) / size
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := next.Add(1)
				if b > int64(batches) {
					return
				}
				body := full
				if rest := n - int(b-1)*size; rest < size {
					body = batchBody(item, rest)
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/queues/"+queue+"/jobs/batch", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				a.traceHeader(req.Header)
				resp, err := a.http.Do(req)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				rb, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					firstErr.CompareAndSwap(nil, fmt.Errorf("batch publish: %d %s", resp.StatusCode, rb))
					return
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return e
	}
	return nil
}

// batchBody is a batch publish request of n copies of item.
func batchBody(item string, n int) []byte {
	items := strings.Split(item, "\x00") // several: used in turn
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(items[i%len(items)])
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// serveLoopback serves h on a free loopback port and returns its webhook URL.
func serveLoopback(h http.HandlerFunc) (string, *http.Server) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/hook", srv
}

// ---- webhook ----

// noopWebhook is the delivery target: the event-loop responder at url (the
// headline rows), a goroutine per connection at goURL and Go's net/http
// server at netURL (the comparison rows). Each counts its own deliveries
// (delivered sums them) and all feed one latency tracker.
type noopWebhook struct {
	url    string
	goURL  string
	netURL string
	srv    *http.Server
	loop   *epollWebhook
	lean   *leanWebhook
	// netCount counts the net/http server's deliveries.
	netCount atomic.Int64
	*latencyTracker
}

func newNoopWebhook() *noopWebhook {
	lat := newLatencyTracker()
	h := &noopWebhook{latencyTracker: lat}
	h.loop = newEpollWebhook(lat)
	h.url = h.loop.url
	h.lean = newLeanWebhook(lat)
	h.goURL = h.lean.url
	h.netURL, h.srv = serveLoopback(h.serve)
	return h
}

func (h *noopWebhook) close() { _ = h.srv.Close(); h.lean.close(); h.loop.close() }

// delivered counts the deliveries all three endpoints received.
func (h *noopWebhook) delivered() int64 {
	return h.loop.count.Load() + h.lean.count.Load() + h.netCount.Load()
}

func (h *noopWebhook) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.netCount.Add(1)
	h.observe(body)
	w.WriteHeader(200)
}

func (h *noopWebhook) trackLatency(on bool) { h.track(on) }

// procCPU is the user+system CPU time a process has used so far (pid 0: this
// process, which runs the load generator and the webhook), from /proc.
func procCPU(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the whole line, in clock ticks (100 per second).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// machineTicks reads the machine's total and stolen CPU ticks from
// /proc/stat: on a shared VM, time the hypervisor gave to other guests
// explains much of the run-to-run noise.
func machineTicks() (total, steal int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal
			total += v
		}
		if i == 7 {
			steal = v
		}
	}
	return total, steal
}

// cpuSplit measures CPU used by Redis, the daemons and this process between
// start and stop.
type cpuSplit struct {
	redis, daemons []int
	before         [3]time.Duration
	ticks, steal   int64
	result         string
	// profileAddr, when set, is a daemon pprof listener: start takes a CPU
	// profile into profilePath.
	profileAddr, profilePath string
	profDone                 chan error
	// onStart, when set, runs as start begins measuring.
	onStart func()
}

func (c *cpuSplit) sample() [3]time.Duration {
	var r [3]time.Duration
	for _, p := range c.redis {
		r[0] += procCPU(p)
	}
	for _, p := range c.daemons {
		r[1] += procCPU(p)
	}
	r[2] = procCPU(0)
	return r
}

func (c *cpuSplit) start() {
	if c.onStart != nil {
		c.onStart()
	}
	if c.profileAddr != "" {
		c.profDone = make(chan error, 1)
		go func() { c.profDone <- fetchProfile(context.Background(), c.profileAddr, c.profilePath) }()
	}
	c.before = c.sample()
	c.ticks, c.steal = machineTicks()
}

// profileErr waits for the profile started by start, if any.
func (c *cpuSplit) profileErr() error {
	if c.profDone == nil {
		return nil
	}
	err := <-c.profDone
	c.profDone = nil
	return err
}

// perJob formats CPU per job for Redis, daemons, and webhook + load generator.
func (c *cpuSplit) perJob(n int) string {
	after := c.sample()
	us := func(i int) float64 { return float64((after[i] - c.before[i]).Microseconds()) / float64(n) }
	ticks, steal := machineTicks()
	stolen := ""
	if ticks > c.ticks {
		stolen = fmt.Sprintf(" (CPU stolen by the hypervisor meanwhile: %.0f%%)", 100*float64(steal-c.steal)/float64(ticks-c.ticks))
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f µs%s", us(0), us(1), us(2), stolen)
}

// pipelineRun sends n single-job publishes from 50 lean clients to a queue
// that delivers meanwhile, and returns deliveries per second from the first
// publish to the last delivery.
func pipelineRun(ctx context.Context, base string, hook *noopWebhook, queue string, n int, body []byte) (float64, error) {
	baseCount := hook.delivered()
	start := time.Now()
	if err := epollPublishMany(ctx, base, queue, n, 50, body); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for hook.delivered()-baseCount < int64(n) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("pipeline: only %d of %d delivered in 3 minutes", hook.delivered()-baseCount, n)
		}
		time.Sleep(time.Millisecond)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// median of xs (xs is sorted in place).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// medianOf formats the median of several runs, with every run when there
// is more than one: "14812 /s (runs 13581, 14812, 15472)".
func medianOf(xs []float64, unit string) string {
	m := median(xs)
	if len(xs) == 1 {
		return fmt.Sprintf("%.0f %s", m, unit)
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.0f %s (runs %s)", m, unit, strings.Join(parts, ", "))
}
