package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"
)

// issueRedisRate is the speed the performance issue gives for "this kind of
// machine": Redis answers about 85,000 simple commands/s. Its baselines
// (asynq, BullMQ) and targets were set on a machine running at that speed.
const issueRedisRate = 85000

// gaugeKey is the one key redis-benchmark writes (SET without -r); it is
// deleted after each gauge so that no phase counts it.
const gaugeKey = "key:__rand_int__"

// machineGauge measures how fast this machine is right now: SETs/s from
// redis-benchmark (the tool Redis ships) with 50 clients against the bench's
// own Redis, the median of three runs. This VM's speed drifts by more than
// half between phases a few minutes long (docs/performance.md), so each
// table prints the gauge taken just before the runs it qualifies, beside the
// issue's figure. When redis-benchmark is missing it says so in the row
// instead of failing the run.
func machineGauge(ctx context.Context, rs *redisProc) string {
	var rates []float64
	for range 3 {
		rate, err := redisBenchmarkSET(ctx, rs)
		if err != nil {
			return "n/a: " + err.Error()
		}
		rates = append(rates, rate)
	}
	rate := median(rates)
	return fmt.Sprintf("%.0f SET/s, %.0f%% of the issue's ~%s (median of 3)", rate, 100*rate/issueRedisRate, human(issueRedisRate))
}

// redisBenchmarkSET runs redis-benchmark -t set for 50,000 requests (about a
// second) against rs and returns its requests per second.
func redisBenchmarkSET(ctx context.Context, rs *redisProc) (float64, error) {
	host, port, err := net.SplitHostPort(rs.addr)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-benchmark", "-h", host, "-p", port,
		"-t", "set", "-n", "50000", "-c", "50", "--csv").Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	if err := rs.client.Del(ctx, gaugeKey).Err(); err != nil {
		return 0, fmt.Errorf("delete %s: %w", gaugeKey, err)
	}
	return parseBenchmarkCSV(out, "SET")
}

// parseBenchmarkCSV reads the rps column of test's row from redis-benchmark's
// --csv output.
func parseBenchmarkCSV(out []byte, test string) (float64, error) {
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark output: %w", err)
	}
	if len(recs) == 0 {
		return 0, errors.New("redis-benchmark printed nothing")
	}
	col := -1
	for i, h := range recs[0] {
		if h == "rps" {
			col = i
		}
	}
	if col < 0 {
		return 0, errors.New("redis-benchmark output has no rps column")
	}
	for _, r := range recs[1:] {
		if len(r) > col && r[0] == test {
			return strconv.ParseFloat(r[col], 64)
		}
	}
	return 0, fmt.Errorf("redis-benchmark output has no %s row", test)
}

// issueHTTPRate is the issue's other figure for "this kind of machine": a Go
// HTTP client drives the no-op endpoint at about 41,000 requests/s.
const issueHTTPRate = 41000

// httpGauge measures that figure here and now: Go's net/http client, 50
// keep-alive connections, POSTs of a 200-byte body to the no-op webhook,
// the median of three runs of 20,000 after a warm-up. With the Redis gauge
// it tells a slow phase of the machine from a slow build, for the HTTP side
// of publishing and delivery.
func httpGauge(ctx context.Context, url string) string {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 200)
	post := func(n int) (float64, error) {
		start := time.Now()
		err := concurrently(n, 50, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		})
		if err != nil {
			return 0, err
		}
		return float64(n) / time.Since(start).Seconds(), nil
	}
	if _, err := post(2000); err != nil {
		return "n/a: " + err.Error()
	}
	var rates []float64
	for range 3 {
		rate, err := post(20000)
		if err != nil {
			return "n/a: " + err.Error()
		}
		rates = append(rates, rate)
	}
	rate := median(rates)
	return fmt.Sprintf("%.0f requests/s, %.0f%% of the issue's ~%s (median of 3)", rate, 100*rate/issueHTTPRate, human(issueHTTPRate))
}
