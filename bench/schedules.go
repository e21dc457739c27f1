package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// schedulesRun is -only schedules (issue 25 item 5): n schedules "@every
// 1s" spread over the queues of one daemon, and how late their ticks fire.
// The queues are paused, so the numbers are the scheduler's alone (a tick
// on a paused queue publishes like any other; nothing is delivered). Lag
// is each job's createdAt (Redis' clock when its tick fired) minus its tick
// (in its idempotency key "schedule:<id>:<tick ms>"), read back from Redis
// for every tick due in the measured window; CPU is the daemon's and
// Redis' over that window.
func schedulesRun(ctx context.Context, bin, work string, hook *noopWebhook, n, queues int, every string, window time.Duration,
	add func(name, value, target string)) error {
	rs, err := startRedis(ctx, work, "rs", false)
	if err != nil {
		return err
	}
	defer rs.stop()
	d, err := startDaemon(ctx, bin, work, "ds", []string{rs.addr}, nil, hook.url, 10, queues)
	if err != nil {
		return err
	}
	defer d.stop()
	api := newAPI(d.url)
	for i := 0; i < queues; i++ {
		if err := api.post(ctx, fmt.Sprintf("/v1/queues/q%d/pause", i), `{}`); err != nil {
			return err
		}
	}
	// Create the schedules, 16 requests at a time.
	began := time.Now()
	var next atomic.Int64
	if err := concurrently(n, 16, func() error {
		i := next.Add(1) - 1
		body := fmt.Sprintf(`{"id":"s%d","queue":"q%d","cron":%q,"payload":{"i":%d}}`, i, int(i)%queues, every, i)
		return api.post(ctx, "/v1/schedules", body)
	}); err != nil {
		return fmt.Errorf("create schedules: %w", err)
	}
	created := time.Since(began)

	// Warm up past the creation, then measure a window of whole seconds.
	time.Sleep(3 * time.Second)
	from := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(from))
	dCPU0, rCPU0 := procCPU(d.cmd.Process.Pid), procCPU(rs.cmd.Process.Pid)
	time.Sleep(window)
	dCPU1, rCPU1 := procCPU(d.cmd.Process.Pid), procCPU(rs.cmd.Process.Pid)
	until := from.Add(window)
	time.Sleep(2 * time.Second) // the window's last ticks fire

	// Every job of a tick in [from, until): lag, and one job per tick.
	var lags []float64
	perTick := map[string]int{}
	for i := 0; i < queues; i++ {
		key := fmt.Sprintf("simpleq:{q%d}:jobs", i)
		var cursor uint64
		for {
			kv, cur, err := rs.client.HScan(ctx, key, cursor, "*", 1000).Result()
			if err != nil {
				return err
			}
			for j := 1; j < len(kv); j += 2 {
				rec := kv[j]
				nl := strings.IndexByte(rec, '\n')
				var m struct {
					C   int64  `json:"c"`
					K   string `json:"k"`
					Sid string `json:"sid"`
				}
				if nl < 0 || json.Unmarshal([]byte(rec[:nl]), &m) != nil || m.Sid == "" {
					continue
				}
				tick, err := strconv.ParseInt(m.K[strings.LastIndexByte(m.K, ':')+1:], 10, 64)
				if err != nil || tick < from.UnixMilli() || tick >= until.UnixMilli() {
					continue
				}
				perTick[m.K]++
				lags = append(lags, float64(m.C-tick))
			}
			cursor = cur
			if cursor == 0 {
				break
			}
		}
	}
	dups := 0
	for _, c := range perTick {
		if c > 1 {
			dups++
		}
	}
	sort.Float64s(lags)
	pct := func(p float64) float64 {
		if len(lags) == 0 {
			return 0
		}
		return lags[min(len(lags)-1, int(p*float64(len(lags))))]
	}
	secs := window.Seconds()
	interval, _ := time.ParseDuration(strings.TrimPrefix(every, "@every "))
	want := float64(n) * secs / interval.Seconds()
	label := fmt.Sprintf("schedules: %s on %d queues, %q", human(n), queues, every)
	add(label+": created in", fmt.Sprintf("%.1f s (%.0f/s)", created.Seconds(), float64(n)/created.Seconds()), "")
	add(label+": ticks fired in the window / due", fmt.Sprintf("%d / %.0f, %d ticks twice", len(lags), want, dups), "every tick once")
	add(label+": tick lag p50 / p99 / max", fmt.Sprintf("%.0f / %.0f / %.0f ms", pct(0.50), pct(0.99), pct(1)), "")
	add(label+": CPU daemon / Redis (share of one core)", fmt.Sprintf("%.0f%% / %.0f%%",
		100*(dCPU1-dCPU0).Seconds()/secs, 100*(rCPU1-rCPU0).Seconds()/secs), "")
	return nil
}
