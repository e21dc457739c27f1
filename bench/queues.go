package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// queuesRun is the -only queues phase (issue 25, item 5): n queues created
// over the API (PUT /v1/queues/{queue}), then an idle daemon's CPU and
// Redis' over window, and Redis memory per empty queue. Idle means no job
// anywhere: what thousands of customers' queues cost while nobody publishes.
func queuesRun(ctx context.Context, bin, work string, hook *noopWebhook, n int, window time.Duration,
	add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rq", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	// The no-op webhook is on loopback, which API queues may reach only
	// with allowPrivateNetworks (runtime.md §2).
	os.Setenv("SIMPLEQ_WEBHOOKS_ALLOWPRIVATENETWORKS", "true")
	d, err := startDaemon(ctx, bin, work, "dq", []string{rs.addr}, nil, hook.url, 10, 1)
	os.Unsetenv("SIMPLEQ_WEBHOOKS_ALLOWPRIVATENETWORKS")
	if err != nil {
		return err
	}
	defer d.stop()

	idle := func(label string) error {
		time.Sleep(3 * time.Second) // settle past what came before
		cmds0, err := redisCommands(ctx, rs)
		if err != nil {
			return err
		}
		dCPU0, rCPU0 := procCPU(d.cmd.Process.Pid), procCPU(rs.cmd.Process.Pid)
		time.Sleep(window)
		dCPU1, rCPU1 := procCPU(d.cmd.Process.Pid), procCPU(rs.cmd.Process.Pid)
		cmds1, err := redisCommands(ctx, rs)
		if err != nil {
			return err
		}
		secs := window.Seconds()
		add(fmt.Sprintf("idle daemon CPU, %s", label), fmt.Sprintf("%.2f%% of a core (%s in %s)",
			100*(dCPU1-dCPU0).Seconds()/secs, (dCPU1-dCPU0).Round(time.Millisecond), window), "")
		add(fmt.Sprintf("idle Redis CPU, %s", label), fmt.Sprintf("%.2f%% of a core", 100*(rCPU1-rCPU0).Seconds()/secs), "")
		add(fmt.Sprintf("idle Redis commands/s, %s", label), fmt.Sprintf("%.1f", float64(cmds1-cmds0-1)/secs), "")
		add(fmt.Sprintf("daemon RSS, %s", label), fmt.Sprintf("%.0f MiB", float64(procRSS(d.cmd.Process.Pid))/(1<<20)), "")
		return nil
	}
	if err := idle("2 file queues"); err != nil {
		return err
	}
	mem0, err := redisMemory(ctx, rs)
	if err != nil {
		return err
	}

	// Create the queues, 16 requests at a time, each with its own secret
	// and a concurrency (a limit the claims read from Redis).
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 30 * time.Second}
	began := time.Now()
	var next atomic.Int64
	if err := concurrently(n, 16, func() error {
		i := next.Add(1) - 1
		body := fmt.Sprintf(`{"webhookUrl":%q,"signingSecret":"whsec_customer_%08d_secret","concurrency":5}`, hook.url, i)
		req, _ := http.NewRequestWithContext(ctx, "PUT", fmt.Sprintf("%s/v1/queues/cust-%d", d.url, i), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("PUT cust-%d: %d %s", i, resp.StatusCode, b)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("create queues: %w", err)
	}
	took := time.Since(began)
	add(fmt.Sprintf("create %d queues over the API (16 clients)", n), fmt.Sprintf("%s (%.0f/s)", took.Round(time.Millisecond), float64(n)/took.Seconds()), "")
	time.Sleep(2 * time.Second) // every pump's first claim
	mem1, err := redisMemory(ctx, rs)
	if err != nil {
		return err
	}
	add("Redis memory per empty API queue", fmt.Sprintf("%.0f B", float64(mem1-mem0)/float64(n)), "")
	return idle(fmt.Sprintf("%d API queues", n))
}

// redisMemory is Redis' used_memory in bytes.
func redisMemory(ctx context.Context, rs *redisProc) (int64, error) {
	return infoField(ctx, rs, "memory", "used_memory")
}

// redisCommands is Redis' total_commands_processed (the INFO call itself
// counts one).
func redisCommands(ctx context.Context, rs *redisProc) (int64, error) {
	return infoField(ctx, rs, "stats", "total_commands_processed")
}

func infoField(ctx context.Context, rs *redisProc, section, field string) (int64, error) {
	info, err := rs.client.Info(ctx, section).Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

// procRSS is a process's resident set in bytes (Linux).
func procRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
