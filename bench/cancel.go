package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// cancelRun is the bulk cancel row (control.md §1, docs/performance.md): n
// waiting jobs cancelled by POST /v1/queues/{queue}/cancel's loop (the
// daemon's CancelBulk: store.CancelStep until done, answering every
// ~9 s), timed end to end, with the longest single script call read from
// Redis' SLOWLOG (every call logged) and the mean from INFO commandstats.
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
	fmt.Fprintf(os.Stderr, "  (filling %d waiting jobs for the bulk cancel run…)\n", n)
	payload := json.RawMessage(`{"data":"` + strings.Repeat("x", 180) + `"}`)
	jobs := make([]store.NewJob, 1000)
	for i := range jobs {
		jobs[i] = store.NewJob{Payload: payload}
	}
	for i := 0; i < n; i += len(jobs) {
		if _, err := st.Publish(ctx, q, jobs[:min(len(jobs), n-i)]); err != nil {
			return err
		}
	}
	r := rs.client
	for _, cmd := range [][]any{{"CONFIG", "SET", "slowlog-log-slower-than", "0"}, {"CONFIG", "SET", "slowlog-max-len", "100000"},
		{"SLOWLOG", "RESET"}, {"CONFIG", "RESETSTAT"}} {
		if err := r.Do(ctx, cmd...).Err(); err != nil {
			return fmt.Errorf("%v: %w", cmd, err)
		}
	}
	start := time.Now()
	total, calls := 0, 0
	for {
		calls++
		got, done, err := st.CancelBulk(ctx, q, store.CancelFilter{}, "bench", time.Now().Add(9*time.Second), nil)
		if err != nil {
			return err
		}
		total += got
		if done {
			break
		}
	}
	took := time.Since(start)
	// The longest call: SLOWLOG entries are [id, ts, µs, args...].
	entries, err := r.Do(ctx, "SLOWLOG", "GET", "100000").Slice()
	if err != nil {
		return err
	}
	var longest int64
	var durs []float64
	scripts := 0
	for _, e := range entries {
		f, ok := e.([]any)
		if !ok || len(f) < 4 {
			continue
		}
		args, _ := f[3].([]any)
		if len(args) == 0 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") {
			continue
		}
		scripts++
		us, _ := f[2].(int64)
		durs = append(durs, float64(us))
		if us > longest {
			longest = us
		}
	}
	info, _ := r.Info(ctx, "commandstats").Result()
	mean := ""
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") {
			for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					mean = v + " µs"
				}
			}
		}
	}
	_ = r.Do(ctx, "CONFIG", "SET", "slowlog-log-slower-than", "10000").Err()
	sort.Float64s(durs)
	p99 := 0.0
	if len(durs) > 0 {
		p99 = durs[len(durs)*99/100]
	}
	if total != n {
		return fmt.Errorf("bulk cancel took %d of %d jobs", total, n)
	}
	add(fmt.Sprintf("bulk cancel of %s waiting jobs (POST /v1/queues/{q}/cancel's loop)", human(n)),
		fmt.Sprintf("%.1f s, %d API calls of ≤9 s (%.0f jobs/s); %d script calls of %d jobs: mean %s, p99 %.1f ms, longest %.1f ms",
			took.Seconds(), calls, float64(n)/took.Seconds(), scripts, store.CancelBatch, mean, p99/1000, float64(longest)/1000),
		"each call a few ms")
	return nil
}
