package store_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// scriptUsec is the time Redis has spent in scripts (EVALSHA and EVAL),
// from INFO commandstats: the server's own cost, without network or client.
func scriptUsec(b *testing.B, rdb *redis.Client) float64 {
	b.Helper()
	return scriptStat(b, rdb, "usec=")
}

// scriptStat sums one field ("usec=", "calls=") of the FCALL, EVALSHA and
// EVAL lines of INFO commandstats.
func scriptStat(b *testing.B, rdb *redis.Client, field string) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_fcall:") && !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(f, field); ok {
				u, _ := strconv.ParseFloat(v, 64)
				total += u
			}
		}
	}
	return total
}

// benchSetup starts the Redis of a store benchmark and loads the scripts;
// it gives the queue (concurrency unbounded, so only the script's work is
// measured) and the 200-byte payload every benchmark job carries.
func benchSetup(b *testing.B, queueName string) (*redistest.Server, *redis.Client, *store.Store, store.QueueParams, json.RawMessage) {
	b.Helper()
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	// STORE_BENCH_EVAL=1 sends the scripts with EVALSHA, to compare with
	// the function library (scripts.go).
	s, err := store.New(rdb, store.Options{Prefix: "bench", EvalScripts: os.Getenv("STORE_BENCH_EVAL") == "1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	q := queue(queueName)
	q.Concurrency = 1 << 20
	return srv, rdb, s, q, json.RawMessage(`{"data":"` + strings.Repeat("x", 180) + `"}`)
}

// BenchmarkScriptsPerJob measures Redis' script time per job for the three
// calls every delivered job passes through, in the batch sizes a busy
// daemon uses: publish (1,000 per call), claim, and settle-and-claim (20
// outcomes per call, refilling 20). Run it with
//
//	go test ./internal/store -run '^$' -bench ScriptsPerJob -benchtime 2000x
//
// The "redis-µs/job" metric is what bounds a single Redis' throughput.
func BenchmarkScriptsPerJob(b *testing.B) {
	srv, rdb, s, q, payload := benchSetup(b, "bench")
	ctx := context.Background()
	fill := func(n int) {
		jobs := make([]store.NewJob, 1000)
		for i := range jobs {
			jobs[i].Payload = payload
		}
		for ; n > 0; n -= 1000 {
			if _, err := s.Publish(ctx, q, jobs[:min(n, 1000)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("publish", func(b *testing.B) {
		before := scriptUsec(b, rdb)
		fill(b.N * 1000)
		b.ReportMetric((scriptUsec(b, rdb)-before)/float64(b.N*1000), "redis-µs/job")
		b.ReportMetric(0, "ns/op")
	})
	// Single publishes merged by package ingest: about 17 per call at
	// 20,000 publishes/s from 50 clients.
	for _, batch := range []int{1, 17} {
		b.Run("publish/batch="+strconv.Itoa(batch), func(b *testing.B) {
			jobs := make([]store.NewJob, batch)
			for i := range jobs {
				jobs[i].Payload = payload
			}
			before := scriptUsec(b, rdb)
			for range b.N {
				if _, err := s.Publish(ctx, q, jobs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((scriptUsec(b, rdb)-before)/float64(b.N*batch), "redis-µs/job")
			b.ReportMetric(0, "ns/op")
		})
	}
	srv.Flush(b)
	// Each batch size twice: with the claim's housekeeping in every call,
	// and left out as the dispatcher does between its runs (every 10 ms by
	// default, a few settle calls in a hundred on a busy queue).
	for _, batch := range []int{1, 20, 100} {
		for _, skip := range []bool{false, true} {
			name := "claim+settle/batch=" + strconv.Itoa(batch)
			if skip {
				name = "claim+settle-no-housekeeping/batch=" + strconv.Itoa(batch)
			}
			srv.Flush(b)
			b.Run(name, func(b *testing.B) {
				fill(b.N*batch + batch)
				before := scriptUsec(b, rdb)
				c, err := s.Claim(ctx, q, batch)
				if err != nil {
					b.Fatal(err)
				}
				outs := make([]store.Outcome, 0, batch)
				for range b.N {
					outs = outs[:0]
					for _, j := range c.Jobs {
						outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
					}
					_, c, err = s.SettleAndClaim(ctx, q, outs, store.Refill{Max: batch, SkipHousekeeping: skip})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((scriptUsec(b, rdb)-before)/float64(b.N*batch), "redis-µs/job")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	srv.Flush(b)
	b.Run("claim-then-settle-separately/batch=100", func(b *testing.B) {
		fill(b.N * 100)
		var claimUs, settleUs float64
		for range b.N {
			before := scriptUsec(b, rdb)
			c, err := s.Claim(ctx, q, 100)
			if err != nil {
				b.Fatal(err)
			}
			mid := scriptUsec(b, rdb)
			outs := make([]store.Outcome, 0, 100)
			for _, j := range c.Jobs {
				outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
			}
			if _, err := s.Settle(ctx, q, outs); err != nil {
				b.Fatal(err)
			}
			claimUs += mid - before
			settleUs += scriptUsec(b, rdb) - mid
		}
		b.ReportMetric(claimUs/float64(b.N*100), "claim-µs/job")
		b.ReportMetric(settleUs/float64(b.N*100), "settle-µs/job")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("claim-housekeeping-only", func(b *testing.B) {
		before := scriptUsec(b, rdb)
		for range b.N {
			if _, err := s.Claim(ctx, q, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric((scriptUsec(b, rdb)-before)/float64(b.N), "redis-µs/call")
		b.ReportMetric(0, "ns/op")
	})
}
