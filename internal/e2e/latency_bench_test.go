package test

import (
	"bytes"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkPublishToDelivery measures, on an idle machine, the time from the
// start of a publish request to the webhook receiving the delivery: one job at
// a time, real redis-server, real daemon process. It reports p50 and p99.
//
//	go test ./test -run '^$' -bench PublishToDelivery -benchtime 500x
func BenchmarkPublishToDelivery(b *testing.B) {
	rs := Redis(b)
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	got := make(chan string, 1)
	hook := NewWebhook(b, func(dl Delivery) Reply {
		mu.Lock()
		arrived[dl.JobID] = dl.Start
		mu.Unlock()
		got <- dl.JobID
		return Reply{Status: 200}
	})
	d := StartDaemon(b, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("lat", hook.URL), LogLevel: "warn"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := client.Post(d.URL+"/v1/queues/lat/jobs", "application/json",
			bytes.NewReader([]byte(`{"payload":{"n":1}}`)))
		if err != nil || resp.StatusCode != 201 {
			b.Fatalf("publish: %v %v", err, resp)
		}
		resp.Body.Close()
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			b.Fatal("delivery did not arrive")
		}
		mu.Lock()
		for id, at := range arrived {
			lat = append(lat, at.Sub(start))
			delete(arrived, id)
		}
		mu.Unlock()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
