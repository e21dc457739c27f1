package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// durabilityRows measures what redis.durability: replicated costs a
// publish (production.md §1): one Redis master with one replica attached,
// a daemon with durability local and one with replicated on it, the queue
// paused so only publishing runs, the same loads on each (the 50-client
// runs one daemon after the other, so the CPU of the Redis processes is
// told apart; the 1-client runs alternate). The replicated daemon sends
// WAIT 1 after each publish script call, so each call waits for the
// replica's acknowledgement (a round trip to it, and its CPU) before the
// answers go out; merged publishes (package ingest) share one WAIT.
func durabilityRows(ctx context.Context, bin, work, hookURL string, o options, body []byte, add func(name, value, target string)) error {
	master, err := startRedis(ctx, work, "dur-master", false)
	if err != nil {
		return err
	}
	defer master.stop()
	if err := master.client.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return err
	}
	replica, err := startRedis(ctx, work, "dur-replica", false)
	if err != nil {
		return err
	}
	defer replica.stop()
	host, port, _ := net.SplitHostPort(master.addr)
	if err := replica.client.ReplicaOf(ctx, host, port).Err(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		info, err := master.client.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "state=online") {
			break
		}
		if i > 500 {
			return fmt.Errorf("durability: the replica never came online: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	local, err := startDaemon(ctx, bin, work, "dur-local", []string{master.addr}, nil, hookURL, o.concurrency, 1)
	if err != nil {
		return err
	}
	defer func() { _ = local.stop() }()
	os.Setenv("SIMPLEQ_REDIS_DURABILITY", "replicated")
	repl, err := startDaemon(ctx, bin, work, "dur-replicated", []string{master.addr}, nil, hookURL, o.concurrency, 1)
	os.Unsetenv("SIMPLEQ_REDIS_DURABILITY")
	if err != nil {
		return err
	}
	defer func() { _ = repl.stop() }()
	if err := newAPI(local.url).post(ctx, "/v1/queues/q0/pause", `{}`); err != nil {
		return err
	}

	daemons := []*daemonProc{local, repl}
	cpus := make([]*cpuSplit, 2)
	for i, d := range daemons {
		cpus[i] = &cpuSplit{redis: []int{master.cmd.Process.Pid, replica.cmd.Process.Pid}, daemons: []int{d.cmd.Process.Pid}}
	}
	for range o.warmup {
		for _, d := range daemons {
			if err := epollPublishMany(ctx, d.url, "q0", o.publishN, 50, body); err != nil {
				return err
			}
		}
	}
	// 50 clients: throughput, and CPU per publish including the replica's.
	rates := [2][]float64{}
	cpuOut := [2]string{}
	for i, d := range daemons {
		cpus[i].start()
		for range max(o.runs, 1) {
			start := time.Now()
			if err := epollPublishMany(ctx, d.url, "q0", o.publishN, 50, body); err != nil {
				return err
			}
			rates[i] = append(rates[i], float64(o.publishN)/time.Since(start).Seconds())
		}
		cpuOut[i] = cpus[i].perJob(o.publishN * max(o.runs, 1))
	}
	add("HTTP publish, 50 clients, one replica attached: durability local", medianOf(rates[0], "jobs/s"), "")
	add("  CPU per publish: Redis master+replica / daemon / client", cpuOut[0], "")
	add("  the same with durability replicated (WAIT 1 per script call)", medianOf(rates[1], "jobs/s"), "")
	add("  CPU per publish: Redis master+replica / daemon / client", cpuOut[1], "")

	// One client, one publish at a time: the latency WAIT adds to each.
	n := max(o.publishN/10, 500)
	lat := [2][]float64{}
	for range 3 {
		for i, d := range daemons {
			start := time.Now()
			if err := epollPublishMany(ctx, d.url, "q0", n, 1, body); err != nil {
				return err
			}
			lat[i] = append(lat[i], float64(time.Since(start).Microseconds())/float64(n))
		}
	}
	add("HTTP publish, 1 client, one at a time: local / replicated",
		fmt.Sprintf("%.0f / %.0f µs per publish (medians of 3 runs of %d)", median(lat[0]), median(lat[1]), n), "")
	return nil
}
