package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The competitor phase (-only compare) runs the delivery workload —
// N 200-byte jobs, concurrency 50, a no-op HTTP endpoint — on simpleqd, asynq
// and BullMQ in turn, against the same redis-server and the same event-loop
// webhook, round after round, so the three rates come from the same phase of
// this machine. The issue quotes asynq and BullMQ from "this kind of
// machine"; measured here beside simpleqd they also show how fast this
// machine is at the moment relative to the issue's.
//
// The competitors live in modules of their own under bench/compare (simpleqd
// does not depend on them): a Go program for asynq and a Node.js script for
// BullMQ. Each is driven in two steps, "enqueue" (untimed, like simpleqd's
// batch publish while paused) and "work", timed from the worker's "started"
// line to the webhook's N-th delivery.

// competitor is one queue product the bench can drive.
type competitor struct {
	name string
	// prepare builds or installs it; a failure skips it with the reason.
	prepare func(ctx context.Context, work string) error
	// command returns the command line for one step ("enqueue" or "work").
	// payloadBytes is the size of each job's JSON payload.
	command func(step, redisAddr, hookURL string, n, concurrency, payloadBytes int) *exec.Cmd
	// keys is the pattern of the Redis keys it leaves behind.
	keys string
}

// competitors are asynq v0.26 and BullMQ 6.7, the versions the issue quotes.
func competitors() []*competitor {
	asynqDir := filepath.Join("bench", "compare", "asynq")
	bullDir := filepath.Join("bench", "compare", "bullmq")
	var asynqBin string
	return []*competitor{
		{
			name: "asynq v0.26",
			prepare: func(ctx context.Context, work string) error {
				asynqBin = filepath.Join(work, "asynq-bench")
				bin, err := filepath.Abs(asynqBin)
				if err != nil {
					return err
				}
				cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
				cmd.Dir = asynqDir
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("go build in %s: %v: %s", asynqDir, err, firstLine(out))
				}
				return nil
			},
			command: func(step, redisAddr, hookURL string, n, concurrency, payloadBytes int) *exec.Cmd {
				return exec.Command(asynqBin, "-redis", redisAddr, "-webhook", hookURL, "-n", strconv.Itoa(n),
					"-payload", strconv.Itoa(payloadBytes), "-concurrency", strconv.Itoa(concurrency), step)
			},
			keys: "asynq:*",
		},
		{
			name: "BullMQ 6.7",
			prepare: func(ctx context.Context, _ string) error {
				if _, err := exec.LookPath("node"); err != nil {
					return errors.New("node is not installed")
				}
				if _, err := os.Stat(filepath.Join(bullDir, "node_modules", "bullmq")); err == nil {
					return nil
				}
				cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
				cmd.Dir = bullDir
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("npm ci in %s: %v: %s", bullDir, err, firstLine(out))
				}
				return nil
			},
			command: func(step, redisAddr, hookURL string, n, concurrency, payloadBytes int) *exec.Cmd {
				cmd := exec.Command("node", "bench.mjs", step, "--redis", redisAddr, "--webhook", hookURL,
					"--n", strconv.Itoa(n), "--payload", strconv.Itoa(payloadBytes), "--concurrency", strconv.Itoa(concurrency))
				cmd.Dir = bullDir
				return cmd
			},
			keys: "bull:*",
		},
	}
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// competitorRun is one timed run of c: its deliveries per second, script
// calls and commands per delivered job (enqueue included, as for simpleqd),
// and the CPU split of the work step.
func competitorRun(ctx context.Context, c *competitor, rs *redisProc, hook *noopWebhook, n, concurrency, payloadBytes int) (rate, calls, cmds float64, cpuPerJob string, err error) {
	defer rs.deleteMatching(context.Background(), c.keys)
	if err := rs.resetStats(ctx); err != nil {
		return 0, 0, 0, "", err
	}
	enq := c.command("enqueue", rs.addr, hook.url, n, concurrency, payloadBytes)
	if out, err := enq.CombinedOutput(); err != nil {
		return 0, 0, 0, "", fmt.Errorf("%s enqueue: %v: %s", c.name, err, firstLine(out))
	}
	worker := c.command("work", rs.addr, hook.url, n, concurrency, payloadBytes)
	worker.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	worker.Stderr = os.Stderr
	stdout, err := worker.StdoutPipe()
	if err != nil {
		return 0, 0, 0, "", err
	}
	base := hook.delivered()
	if err := worker.Start(); err != nil {
		return 0, 0, 0, "", fmt.Errorf("%s work: %w", c.name, err)
	}
	exited := make(chan struct{})
	defer func() {
		_ = worker.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = worker.Process.Kill()
			<-exited
		}
	}()
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "started" {
				close(started)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = worker.Wait()
		close(exited)
	}()
	select {
	case <-started:
	case <-exited:
		return 0, 0, 0, "", fmt.Errorf("%s work exited before it started", c.name)
	case <-time.After(30 * time.Second):
		return 0, 0, 0, "", fmt.Errorf("%s work did not start in 30 s", c.name)
	}
	cpu := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{worker.Process.Pid}}
	cpu.start()
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for hook.delivered()-base < int64(n) {
		if time.Now().After(deadline) {
			return 0, 0, 0, "", fmt.Errorf("%s: only %d of %d delivered in 3 minutes", c.name, hook.delivered()-base, n)
		}
		select {
		case <-exited:
			return 0, 0, 0, "", fmt.Errorf("%s work exited after %d of %d deliveries", c.name, hook.delivered()-base, n)
		case <-ctx.Done():
			return 0, 0, 0, "", ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	rate = float64(n) / time.Since(start).Seconds()
	cpuPerJob = cpu.perJob(n)
	// Let the last completions land before reading stats.
	time.Sleep(300 * time.Millisecond)
	scripts, all, err := rs.commandStats(ctx)
	if err != nil {
		return 0, 0, 0, "", err
	}
	return rate, float64(scripts) / float64(n), float64(all) / float64(n), cpuPerJob, nil
}

// deleteMatching removes the keys matching pattern (a competitor's state
// after its run), so runs do not pile up memory or slow each other.
func (r *redisProc) deleteMatching(ctx context.Context, pattern string) {
	iter := r.client.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			r.client.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		r.client.Unlink(ctx, batch...)
	}
}

// compareRun is the competitor phase: rounds of simpleqd, asynq and
// BullMQ deliveries in rotating order, then one row per product and the
// per-round ratios.
func compareRun(ctx context.Context, bin, work string, hook *noopWebhook, o options, rounds int, add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rc", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	var ready []*competitor
	for _, c := range competitors() {
		fmt.Fprintf(os.Stderr, "  (preparing %s…)\n", c.name)
		if err := c.prepare(ctx, work); err != nil {
			add(c.name, "skipped: "+err.Error(), "")
			continue
		}
		ready = append(ready, c)
	}
	pprofPort := func() (string, error) {
		if o.profile == "" {
			return "", nil
		}
		port, err := freePort()
		if err != nil {
			return "", err
		}
		return "127.0.0.1:" + strconv.Itoa(port), nil
	}
	pprof1, err := pprofPort()
	if err != nil {
		return err
	}
	d, err := startDaemonEnv(ctx, bin, work, "dc", pprof1, []string{rs.addr}, hook.url, o.concurrency)
	if err != nil {
		return err
	}
	defer d.stop()
	api := newAPI(d.url)
	payload := strings.Repeat("x", 180)
	// The competitors get the very JSON simpleqd's jobs carry: {"data":"xx…"}.
	payloadBytes := len(`{"data":"`) + len(payload) + len(`"}`)
	add("machine speed before the comparison (redis-benchmark, 50 clients)", machineGauge(ctx, rs), "")
	add("machine speed: Go's net/http client → the no-op webhook, 50 connections", httpGauge(ctx, hook.url), "")
	for range o.warmup {
		if _, _, _, err := deliveryRun(ctx, api, rs, hook, "q0", o.n, payload); err != nil {
			return err
		}
	}

	// The products of a round: this simpleqd, the -against build if any,
	// then the competitors.
	type product struct {
		name, process string
		run           func() (rate, calls, cmds float64, cpu string, err error)
	}
	// With -profile, every round of a simpleqd takes a 2 s CPU profile of
	// its daemon (<profile>.<tag>.<round>.pprof) and, when perf is
	// installed, of its Redis and daemon (<profile>.<tag>.<round>.perf), so two
	// builds can be compared function by function in the same phase.
	simpleqdRun := func(tag, pprofAddr string, rs *redisProc, d *daemonProc, api *apiClient) func() (float64, float64, float64, string, error) {
		round := 0
		return func() (float64, float64, float64, string, error) {
			round++
			cpu := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
			var perf *exec.Cmd
			if pprofAddr != "" {
				base := fmt.Sprintf("%s.%s.%d", o.profile, tag, round)
				cpu.profileAddr, cpu.profilePath = pprofAddr, base+".pprof"
				if _, err := exec.LookPath("perf"); err == nil {
					perf = exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", "-p", strconv.Itoa(rs.cmd.Process.Pid)+","+strconv.Itoa(d.cmd.Process.Pid),
						"-o", base+".perf", "--", "sleep", "2")
				}
			}
			// System calls, context switches and CPU of each process over the
			// whole delivery, for counts per job that do not depend on the
			// machine's speed (perf stat, stopped by SIGINT after the run).
			var stats []*exec.Cmd
			var statFiles []string
			if pprofAddr != "" && perf != nil {
				for _, pp := range []struct {
					name string
					pid  int
				}{{"redis", rs.cmd.Process.Pid}, {"daemon", d.cmd.Process.Pid}} {
					f := fmt.Sprintf("%s.%s.%d.%s.stat", o.profile, tag, round, pp.name)
					stats = append(stats, exec.Command("perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter,context-switches,task-clock",
						"-p", strconv.Itoa(pp.pid), "-o", f))
					statFiles = append(statFiles, f)
				}
			}
			// perf starts when the run resumes the queue: deliveryRunUsec
			// calls cpu.start then, and the profile fetch with it.
			cpu.onStart = func() {
				if perf != nil {
					_ = perf.Start()
				}
				for _, c := range stats {
					_ = c.Start()
				}
			}
			rate, calls, cmds, _, err := deliveryRunUsec(ctx, api, rs, hook, "q0", o.n, payload, cpu, nil)
			for _, c := range stats {
				if c.Process != nil {
					_ = c.Process.Signal(os.Interrupt)
					_ = c.Wait()
				}
			}
			for i, f := range statFiles {
				if b, rerr := os.ReadFile(f); rerr == nil {
					fmt.Fprintf(os.Stderr, "  round %d: %s %s per job:%s\n", round, tag, []string{"redis", "daemon"}[i], perJobStat(string(b), o.n))
				}
			}
			if perr := cpu.profileErr(); err == nil && perr != nil {
				err = perr
			}
			if perf != nil && perf.Process != nil {
				_ = perf.Wait()
			}
			if pprofAddr != "" && err == nil {
				// The commands behind the run, for a per-command comparison.
				if info, ierr := rs.client.Info(ctx, "commandstats").Result(); ierr == nil {
					_ = os.WriteFile(fmt.Sprintf("%s.%s.%d.cmdstats", o.profile, tag, round), []byte(info), 0o644)
				}
			}
			return rate, calls, cmds, cpu.result, err
		}
	}
	products := []product{{"simpleqd", "daemon", simpleqdRun("this", pprof1, rs, d, api)}}
	// The same daemon and workload with priorities 0-9 mixed in every batch
	// (control.md §2): what walking the priority levels costs a claim.
	prio := newAPI(d.url)
	prio.mixedPriority = true
	products = append(products, product{"simpleqd, priorities 0-9 mixed", "daemon", simpleqdRun("prio", pprof1, rs, d, prio)})
	// With -keys K, the same daemon and workload with the jobs spread
	// round-robin over K flow keys (keys.md): the queue-level figures with
	// lanes in use.
	if o.keys > 0 {
		keyed := newAPI(d.url)
		keyed.flowKey = roundRobinKeys(o.keys)
		products = append(products, product{fmt.Sprintf("simpleqd, %s flow keys", commas(o.keys)), "daemon", simpleqdRun("keys", pprof1, rs, d, keyed)})
	}
	if o.against != "" {
		rs2, err := startRedis(ctx, work, "rc2", false)
		if err != nil {
			return err
		}
		defer rs2.stop()
		pprof2, err := pprofPort()
		if err != nil {
			return err
		}
		d2, err := startDaemonEnv(ctx, o.against, work, "dc2", pprof2, []string{rs2.addr}, hook.url, o.concurrency)
		if err != nil {
			return fmt.Errorf("-against %s: %w", o.against, err)
		}
		defer d2.stop()
		api2 := newAPI(d2.url)
		for range o.warmup {
			if _, _, _, err := deliveryRun(ctx, api2, rs2, hook, "q0", o.n, payload); err != nil {
				return err
			}
		}
		products = append(products, product{"simpleqd -against", "daemon", simpleqdRun("against", pprof2, rs2, d2, api2)})
	}
	ours := len(products)
	for _, c := range ready {
		products = append(products, product{c.name, "worker", func() (float64, float64, float64, string, error) {
			return competitorRun(ctx, c, rs, hook, o.n, o.concurrency, payloadBytes)
		}})
	}

	type tally struct {
		rates, calls, cmds []float64
		cpu                []string
	}
	results := make([]tally, len(products))
	for round := range rounds {
		// Rotate the order, so no product always runs right after another.
		for k := range products {
			i := (round + k) % len(products)
			rate, calls, cmds, cpuLine, err := products[i].run()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  round %d: %-17s %6.0f deliveries/s\n", round+1, products[i].name, rate)
			t := &results[i]
			t.rates = append(t.rates, rate)
			t.calls = append(t.calls, calls)
			t.cmds = append(t.cmds, cmds)
			t.cpu = append(t.cpu, cpuLine)
		}
	}
	for i, t := range results {
		name, process := products[i].name, products[i].process
		add(fmt.Sprintf("%s: deliveries/s, N=%d, concurrency %d", name, o.n, o.concurrency), medianOf(append([]float64(nil), t.rates...), "/s"), "")
		add(fmt.Sprintf("  %s: script calls / commands per delivered job", name), fmt.Sprintf("%.2f / %.1f", median(t.calls), median(t.cmds)), "")
		add(fmt.Sprintf("  %s: CPU per delivered job: Redis / %s / webhook (last round)", name, process), t.cpu[len(t.cpu)-1], "")
	}
	for s := range ours {
		for i := ours; i < len(products); i++ {
			parts := make([]string, rounds)
			ratios := make([]float64, rounds)
			for r := range rounds {
				ratios[r] = results[s].rates[r] / results[i].rates[r]
				parts[r] = fmt.Sprintf("%.1f", ratios[r])
			}
			add(fmt.Sprintf("%s ÷ %s, same round", products[s].name, products[i].name), fmt.Sprintf("×%.1f (rounds %s)", median(ratios), strings.Join(parts, ", ")), "")
		}
	}
	return nil
}

// startDaemonEnv is startDaemon for one queue with the pprof listener at
// pprofAddr when it is not empty.
func startDaemonEnv(ctx context.Context, bin, work, name, pprofAddr string, addr []string, hookURL string, conc int) (*daemonProc, error) {
	if pprofAddr != "" {
		os.Setenv("SIMPLEQD_PPROF_LISTEN", pprofAddr)
		defer os.Unsetenv("SIMPLEQD_PPROF_LISTEN")
	}
	return startDaemon(ctx, bin, work, name, addr, nil, hookURL, conc, 1)
}

// perJobStat turns perf stat's CSV (value,unit,event,...) into counts per
// delivered job.
func perJobStat(csv string, n int) string {
	var b strings.Builder
	for _, line := range strings.Split(csv, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		name := f[2]
		if name == "task-clock" {
			fmt.Fprintf(&b, " CPU %.1f µs", v*1000/float64(n)) // msec → µs per job
			continue
		}
		fmt.Fprintf(&b, " %s %.2f", name, v/float64(n))
	}
	return b.String()
}
