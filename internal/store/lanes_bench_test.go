package store_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/store"
)

// BenchmarkLanes measures what a claim costs with flow keys (keys.md §6:
// O(log lanes), not growing with the backlog; 100,000 lanes with jobs
// within 30% of 10). Each sub-benchmark fills a fresh queue (untimed) with
// its lanes, every lane holding enough jobs that none runs dry while timed,
// then runs b.N settle-and-claim calls of batch jobs each, as a busy
// daemon's pump does. Run it with a fixed count, so both sides take the
// same number of jobs:
//
//	go test ./internal/store -run '^$' -bench Lanes -benchtime 2000x
//
// Each call settles and claims 20 jobs; LANES_BENCH_BATCH=2 makes it 2, as
// a daemon whose webhook answers fast settles a few jobs per call, to show
// the fixed cost a call pays for lanes.
//
// Metrics: µs/job is the wall time per job (client, network and Redis),
// redis-µs/job and redis-µs/call Redis' own script time (INFO
// commandstats) per job and per call, cmds/job the commands the scripts
// ran per job. "lanes=0" is the same queue with no
// flow keys (the default lane alone), for reference. On a machine where
// other work competes for the cores, wall times (and commandstats, which
// Redis measures on the wall clock) grow with the competition;
// redis-cpu-µs/job, the CPU time Redis' main thread spent
// (/proc/<pid>/schedstat), grows much less.
func BenchmarkLanes(b *testing.B) {
	srv, rdb, s, q, payload := benchSetup(b, "lanes")
	ctx := context.Background()
	// fill publishes perLane jobs to each of lanes lanes (0: no key),
	// round-robin over the lanes, 1,000 jobs per call.
	fill := func(b *testing.B, lanes, total int) {
		jobs := make([]store.NewJob, 0, 1000)
		for i := 0; i < total; i += 1000 {
			jobs = jobs[:0]
			for j := i; j < min(i+1000, total); j++ {
				fk := ""
				if lanes > 0 {
					fk = "tenant-" + strconv.Itoa(j%lanes)
				}
				jobs = append(jobs, store.NewJob{Payload: payload, FlowKey: fk})
			}
			if _, err := s.Publish(ctx, q, jobs); err != nil {
				b.Fatal(err)
			}
		}
	}
	batch := 20
	if v, err := strconv.Atoi(os.Getenv("LANES_BENCH_BATCH")); err == nil && v > 0 {
		batch = v
	}
	// With 10 lanes a call of 20 takes two jobs of each lane it visits,
	// with 20 and more one: "lanes=20" tells the cost of a lane visit from
	// the cost of many lanes.
	// The 100,000-lane queue holds more jobs than the 10-lane one (two
	// more per lane); "backlog=same" is 10 lanes (and no lanes) holding as
	// many jobs as the 100,000 lanes do, to tell the lanes' share from the
	// backlog's.
	for _, v := range []struct {
		lanes     int
		sameAsBig bool
	}{{0, false}, {1, false}, {10, false}, {20, false}, {5000, false}, {100000, false}, {10, true}, {0, true}} {
		name := "claim+settle/lanes=" + strconv.Itoa(v.lanes)
		if v.sameAsBig {
			name += "/backlog=same-as-100000"
		}
		lanes := v.lanes
		b.Run(name, func(b *testing.B) {
			srv.Flush(b)
			// Every lane keeps at least two jobs while timed: the round-robin
			// takes one job of each lane in turn.
			take := b.N*batch + batch
			per := max(lanes, 1)
			total := per * ((take+per-1)/per + 2)
			if v.sameAsBig {
				total = 100000 * ((take+100000-1)/100000 + 2)
			}
			fill(b, lanes, total)
			before := scriptUsec(b, rdb)
			calls0 := scriptCalls(b, rdb)
			cmds0 := innerCommands(b, rdb)
			pid := redisPID(b, rdb)
			cpu0 := cpuNanos(pid)
			c, err := s.Claim(ctx, q, batch)
			if err != nil {
				b.Fatal(err)
			}
			outs := make([]store.Outcome, 0, batch)
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				outs = outs[:0]
				for _, j := range c.Jobs {
					outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
				}
				_, c, err = s.SettleAndClaim(ctx, q, outs, store.Refill{Max: batch, SkipHousekeeping: true})
				if err != nil {
					b.Fatal(err)
				}
				if len(c.Jobs) != batch {
					b.Fatalf("claimed %d jobs, want %d: a lane ran dry", len(c.Jobs), batch)
				}
			}
			b.StopTimer()
			wall := time.Since(start)
			if cpu0 >= 0 {
				b.ReportMetric(float64(cpuNanos(pid)-cpu0)/1e3/float64(b.N*batch), "redis-cpu-µs/job")
			}
			used := scriptUsec(b, rdb) - before
			calls := scriptCalls(b, rdb) - calls0
			b.ReportMetric(float64(wall.Microseconds())/float64(b.N*batch), "µs/job")
			b.ReportMetric(used/float64(b.N*batch), "redis-µs/job")
			b.ReportMetric(used/float64(max(calls, 1)), "redis-µs/call")
			b.ReportMetric((innerCommands(b, rdb)-cmds0)/float64(b.N*batch), "cmds/job")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// scriptCalls is the number of script calls (EVALSHA and EVAL) Redis has
// run, from INFO commandstats.
func scriptCalls(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	return scriptStat(b, rdb, "calls=")
}

// innerCommands is the number of commands Redis has run other than script
// calls and INFO (the commands inside the scripts), from INFO commandstats.
func innerCommands(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "fcall", "evalsha", "eval", "info", "function|load":
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				total += n
			}
		}
	}
	return total
}

// redisPID is the process id of the Redis behind rdb (INFO server).
func redisPID(b *testing.B, rdb *redis.Client) int {
	b.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// cpuNanos is the CPU time process pid's main thread has run, in ns, from
// /proc/<pid>/schedstat; -1 where that cannot be read.
func cpuNanos(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
