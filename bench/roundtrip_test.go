package main

import (
	"strings"
	"testing"
)

func TestParseScriptTimings(t *testing.T) {
	text := `# HELP simpleqd_redis_script_duration_seconds Round trip ...
# TYPE simpleqd_redis_script_duration_seconds histogram
simpleqd_redis_script_duration_seconds_bucket{script="claim",le="0.0001"} 0
simpleqd_redis_script_duration_seconds_sum{script="claim"} 0.5
simpleqd_redis_script_duration_seconds_count{script="claim"} 10
simpleqd_redis_script_duration_seconds_sum{script="publish"} 7
simpleqd_redis_script_duration_seconds_count{script="publish"} 700
simpleqd_redis_script_duration_seconds_sum{script="settle"} 1.25
simpleqd_redis_script_duration_seconds_count{script="settle"} 1000
simpleqd_redis_script_errors_total{script="settle"} 3
`
	sec, calls, err := parseScriptTimings(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if sec != 1.75 || calls != 1010 {
		t.Fatalf("got %v s over %d calls, want 1.75 s over 1010 (claim and settle only)", sec, calls)
	}
	if _, _, err := parseScriptTimings(strings.NewReader("simpleqd_up 1\n")); err == nil {
		t.Fatal("a daemon without the timings must be an error, not zero")
	}
	r := roundTrips{daemonSec: 1.5, daemonCalls: 1000, redisUsec: 750_000, redisCalls: 1000, jobs: 20_000}
	if got, want := r.String(), "1500 µs / 750 µs per call (20.0 jobs per call; 50% of the round trip outside the script)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
