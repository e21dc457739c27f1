package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// roundTrips compares, over the delivery runs, how long the claim and
// settle script calls took as the daemon saw them
// (simpleqd_redis_script_duration_seconds) with how long Redis spent running
// them (INFO commandstats). The difference is the network and, on a machine
// whose cores Redis, the daemon and the webhook share, the wait for a CPU
// on either side: the part of a delivery slot's cycle that no script
// change shortens.
type roundTrips struct {
	// totals over the runs
	daemonSec             float64
	daemonCalls           int64
	redisUsec, redisCalls int64
	jobs                  int
	// the counters when the current run began
	daemonSecBefore                   float64
	daemonCallsBefore                 int64
	redisUsecBefore, redisCallsBefore int64
}

// begin records the counters before a run.
func (r *roundTrips) begin(ctx context.Context, api *apiClient, rs *redisProc) error {
	sec, calls, err := api.scriptTimings(ctx)
	if err != nil {
		return err
	}
	scripts, _, usec, err := rs.commandStatsUsec(ctx)
	if err != nil {
		return err
	}
	r.daemonSecBefore, r.daemonCallsBefore, r.redisUsecBefore, r.redisCallsBefore = sec, calls, usec, scripts
	return nil
}

// end adds what happened since begin, for a run that delivered jobs.
// scripts and usec are Redis' script calls and microseconds, read (by the
// caller, for its own rows) before the daemon's /metrics is read here; begin
// reads them after it: a scrape reads queue status from Redis, which must not
// count as a call.
func (r *roundTrips) end(ctx context.Context, api *apiClient, scripts, usec int64, jobs int) error {
	sec, calls, err := api.scriptTimings(ctx)
	if err != nil {
		return err
	}
	r.daemonSec += sec - r.daemonSecBefore
	r.daemonCalls += calls - r.daemonCallsBefore
	r.redisUsec += usec - r.redisUsecBefore
	r.redisCalls += scripts - r.redisCallsBefore
	r.jobs += jobs
	return nil
}

func (r *roundTrips) String() string {
	if r.daemonCalls == 0 || r.redisCalls == 0 {
		return "n/a: no script calls seen"
	}
	daemon := r.daemonSec * 1e6 / float64(r.daemonCalls)
	redis := float64(r.redisUsec) / float64(r.redisCalls)
	return fmt.Sprintf("%.0f µs / %.0f µs per call (%.1f jobs per call; %.0f%% of the round trip outside the script)",
		daemon, redis, float64(r.jobs)/float64(r.daemonCalls), 100*(1-redis/daemon))
}

// scriptTimings reads the daemon's claim and settle call timings from its
// /metrics: total seconds and calls.
func (a *apiClient) scriptTimings(ctx context.Context) (sec float64, calls int64, err error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", a.base+"/metrics", nil)
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	return parseScriptTimings(resp.Body)
}

// parseScriptTimings sums the _sum and _count samples of
// simpleqd_redis_script_duration_seconds for the claim and settle scripts
// from Prometheus' text format.
func parseScriptTimings(r io.Reader) (sec float64, calls int64, err error) {
	const name = "simpleqd_redis_script_duration_seconds"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_sum{") && !strings.HasPrefix(line, name+"_count{") {
			continue
		}
		if !strings.Contains(line, `script="claim"`) && !strings.Contains(line, `script="settle"`) {
			continue
		}
		v, perr := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("parse %q: %w", line, perr)
		}
		if strings.HasPrefix(line, name+"_sum{") {
			sec += v
		} else {
			calls += int64(v)
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if seen != 4 {
		return 0, 0, fmt.Errorf("/metrics has %d of the 4 claim and settle timing samples of %s", seen, name)
	}
	return sec, calls, nil
}
