package main

import "testing"

func TestParseBenchmarkCSV(t *testing.T) {
	out := []byte(`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","51229.51","0.521","0.120","0.495","0.711","1.231","5.671"
`)
	got, err := parseBenchmarkCSV(out, "SET")
	if err != nil || got != 51229.51 {
		t.Fatalf("parseBenchmarkCSV = %v, %v; want 51229.51", got, err)
	}
	if _, err := parseBenchmarkCSV(out, "GET"); err == nil {
		t.Fatal("a missing row must be an error")
	}
	if _, err := parseBenchmarkCSV([]byte(`"test","x"`+"\n"+`"SET","1"`), "SET"); err == nil {
		t.Fatal("a missing rps column must be an error")
	}
	if _, err := parseBenchmarkCSV(nil, "SET"); err == nil {
		t.Fatal("empty output must be an error")
	}
}
