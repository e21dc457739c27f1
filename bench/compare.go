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
	d, err := startDaemon(ctx, bin, work, "dc", []string{rs.addr}, nil, hook.url, o.concurrency, 1)
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

	type tally struct {
		rates, calls, cmds []float64
		cpu                []string
	}
	results := make([]tally, len(ready)+1) // [0] is simpleqd
	for round := range rounds {
		// Rotate the order, so no product always runs right after another.
		for k := range len(ready) + 1 {
			i := (round + k) % (len(ready) + 1)
			var rate, calls, cmds float64
			var cpuLine string
			if i == 0 {
				cpu := &cpuSplit{redis: []int{rs.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
				rate, calls, cmds, _, err = deliveryRunUsec(ctx, api, rs, hook, "q0", o.n, payload, cpu, nil)
				cpuLine = cpu.result
			} else {
				rate, calls, cmds, cpuLine, err = competitorRun(ctx, ready[i-1], rs, hook, o.n, o.concurrency, payloadBytes)
			}
			if err != nil {
				return err
			}
			name := "simpleqd"
			if i > 0 {
				name = ready[i-1].name
			}
			fmt.Fprintf(os.Stderr, "  round %d: %-12s %6.0f deliveries/s\n", round+1, name, rate)
			t := &results[i]
			t.rates = append(t.rates, rate)
			t.calls = append(t.calls, calls)
			t.cmds = append(t.cmds, cmds)
			t.cpu = append(t.cpu, cpuLine)
		}
	}
	ratios := make([][]float64, len(ready))
	for r := range rounds {
		for i := range ready {
			ratios[i] = append(ratios[i], results[0].rates[r]/results[i+1].rates[r])
		}
	}
	for i, t := range results {
		name, process := "simpleqd", "daemon"
		if i > 0 {
			name, process = ready[i-1].name, "worker"
		}
		add(fmt.Sprintf("%s: deliveries/s, N=%d, concurrency %d", name, o.n, o.concurrency), medianOf(append([]float64(nil), t.rates...), "/s"), "")
		add(fmt.Sprintf("  %s: script calls / commands per delivered job", name), fmt.Sprintf("%.2f / %.1f", median(t.calls), median(t.cmds)), "")
		add(fmt.Sprintf("  %s: CPU per delivered job: Redis / %s / webhook (last round)", name, process), t.cpu[len(t.cpu)-1], "")
	}
	for i, c := range ready {
		parts := make([]string, len(ratios[i]))
		for r, x := range ratios[i] {
			parts[r] = fmt.Sprintf("%.1f", x)
		}
		add(fmt.Sprintf("simpleqd ÷ %s, same round", c.name), fmt.Sprintf("×%.1f (rounds %s)", median(append([]float64(nil), ratios[i]...)), strings.Join(parts, ", ")), "")
	}
	return nil
}
