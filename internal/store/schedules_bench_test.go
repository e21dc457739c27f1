package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// redisCPU is the CPU time the Redis server has used, in µs (INFO cpu):
// unlike commandstats' wall time, it does not count the time the server
// waited for a core on a busy machine.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x * 1e6
			}
		}
	}
	return total
}

// BenchmarkScheduleTicks measures Redis' script time per tick for what the
// scheduler does with each queue of `go run ./bench -only schedules`: one
// queue's 100 due schedules fired in one batch, and the queue settled in
// the fleet-wide index. "every" is an @every schedule (the script computes
// its tick); "cron" a cron one (the tick computed in Go, a second call).
// Between iterations the schedules' next ticks are rewound with plain
// ZADDs, each to a tick not fired before (not counted in redis-µs/tick,
// Redis' time in scripts; counted in redis-cpu-µs/tick, the server's CPU
// time, which a busy machine does not inflate). Run it with
//
//	go test ./internal/store -run '^$' -bench ScheduleTicks
func BenchmarkScheduleTicks(b *testing.B) {
	for _, kind := range []string{"every", "cron"} {
		b.Run(kind, func(b *testing.B) {
			srv := redistest.Start(b)
			rdb := srv.Client(b)
			s, err := store.New(rdb, store.Options{Prefix: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Load(ctx); err != nil {
				b.Fatal(err)
			}
			q := queue("bench")
			now, err := s.RedisTime(ctx)
			if err != nil {
				b.Fatal(err)
			}
			// A year's interval: the latest tick due is next + one year,
			// one millisecond apart between iterations.
			cron, iv := "@every 8760h", 8760*time.Hour
			if kind == "cron" {
				cron, iv = "* * * * * *", time.Second
			}
			base := now.Add(-iv - time.Hour).Truncate(time.Second)
			const n = 100
			for i := 0; i < n; i++ {
				sc := store.Schedule{ID: fmt.Sprintf("s%d", i), Queue: q.Name, Cron: cron, Timezone: "UTC",
					Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Source: store.ScheduleSourceAPI}
				if _, _, err := s.PutSchedule(ctx, q, sc, base); err != nil {
					b.Fatal(err)
				}
			}
			rewind := func(it int) {
				zs := make([]redis.Z, n)
				for i := range zs {
					zs[i] = redis.Z{Score: float64(base.UnixMilli() + int64(it)), Member: fmt.Sprintf("s%d", i)}
				}
				if err := rdb.ZAdd(ctx, "bench:{bench}:sched_due", zs...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			var script float64
			cpu0 := redisCPU(b, rdb)
			for it := 0; it < b.N; it++ {
				rewind(it)
				before := scriptUsec(b, rdb)
				tk, err := s.TickSchedules(ctx, q, n)
				if err != nil {
					b.Fatal(err)
				}
				fired, earliest := len(tk.Fired), tk.Earliest
				if len(tk.Cron) > 0 {
					fires := make([]store.Fire, len(tk.Cron))
					for j, d := range tk.Cron {
						tick := d.Next.Add(time.Millisecond)
						fires[j] = store.Fire{ID: d.ID, Expected: d.Next, Tick: tick, After: tk.Now.Add(time.Hour)}
					}
					_, out, e, err := s.FireSchedules(ctx, q, fires)
					if err != nil {
						b.Fatal(err)
					}
					for _, f := range out {
						if f.Word == "FIRED" {
							fired++
						}
					}
					earliest = e
				}
				if fired != n {
					b.Fatalf("fired %d of %d", fired, n)
				}
				if err := s.SettleScheduleIndex(ctx, q.Name, "0", earliest); err != nil {
					b.Fatal(err)
				}
				script += scriptUsec(b, rdb) - before
			}
			b.ReportMetric(script/float64(b.N*n), "redis-µs/tick")
			b.ReportMetric((redisCPU(b, rdb)-cpu0)/float64(b.N*n), "redis-cpu-µs/tick")
		})
	}
}
