package store_test

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// The WAIT timeouts of these tests. A loopback replica confirms well
// within a millisecond, but a machine busy with other tests can leave it
// without a CPU for a few hundred: writes that must be confirmed get
// confirmTimeout; replicaTimeout is for writes that wait it out.
const (
	replicaTimeout = 200 * time.Millisecond
	confirmTimeout = 2 * time.Second
)

// startReplicated starts a master and one replica of it, and waits until the
// replica is in sync.
func startReplicated(t testing.TB) (master, replica *redistest.Server) {
	t.Helper()
	// Diskless sync at once: Redis 7 waits 5 s by default for more
	// replicas to share one transfer.
	master = redistest.Start(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Addr)
	replica = redistest.Start(t, "--replicaof", host, port)
	waitOnline(t, master.Client(t), 1)
	return master, replica
}

// waitOnline waits until n replicas of the master are online.
func waitOnline(t testing.TB, m *redis.Client, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := m.Info(context.Background(), "replication").Result()
		return err == nil && strings.Count(info, "state=online") == n
	}, 10*time.Second, 20*time.Millisecond, "%d replicas not online after 10s", n)
}

func replicatedStore(t testing.TB, rdb redis.UniversalClient, timeout time.Duration) *store.Store {
	t.Helper()
	s, err := store.New(rdb, store.Options{Prefix: "t", LeaseMargin: 50 * time.Millisecond,
		Replicated: true, ReplicaTimeout: timeout})
	require.NoError(t, err)
	require.NoError(t, s.Load(context.Background()))
	return s
}

// Under replicated durability every acknowledged write is on the replica
// when the call returns; with the replica gone each one fails with
// ErrNotReplicated (an ErrUnavailable, so the API answers 503) after the
// timeout, while a claim, which does not wait, still works.
func TestReplicatedWritesWaitForTheReplica(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	s := replicatedStore(t, master.Client(t), confirmTimeout)
	rc := replica.Client(t)
	q := queue("q")
	q.Mode = "ack"
	onReplica := func(id string) map[string]any {
		t.Helper()
		rec, err := rc.HGet(ctx, s.Keys(q.Name).List()[2], id).Result()
		require.NoError(t, err, "job %s is on the replica when the call returns", id)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(rec[:strings.IndexByte(rec, '\n')]), &m))
		return m
	}

	res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":1}`), IdempotencyKey: "k1"}})
	require.NoError(t, err)
	id := res[0].ID
	require.Equal(t, "p", onReplica(id)["st"])
	c, err := s.Claim(ctx, q, 1)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	rs, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
	require.NoError(t, err)
	require.Equal(t, store.Awaiting, rs[0].Word)
	require.Equal(t, "w", onReplica(id)["st"], "the recorded outcome is on the replica")
	_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
	require.NoError(t, err)
	require.Equal(t, "c", onReplica(id)["st"], "the ack is on the replica")
	require.NoError(t, s.Pause(ctx, q, "op"))
	st, err := rc.HGetAll(ctx, s.Keys(q.Name).List()[4]).Result()
	require.NoError(t, err)
	require.NotEmpty(t, st, "the pause is on the replica")

	// A master that lost its script cache (a promoted replica: Redis 7
	// does not replicate SCRIPT LOAD) gets the source, as Script.Run does.
	require.NoError(t, master.Client(t).ScriptFlush(ctx).Err())
	res, err = s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":2}`)}})
	require.NoError(t, err)
	onReplica(res[0].ID)

	// A client that reaches a replica (a master demoted mid-failover): a
	// repeat writes nothing, so the script runs there, and Redis refuses
	// WAIT on a replica. Not confirmed, so ErrUnavailable (a 503).
	_, err = replicatedStore(t, rc, confirmTimeout).Publish(ctx, q,
		[]store.NewJob{{Payload: json.RawMessage(`{"n":1}`), IdempotencyKey: "k1"}})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "replica instances")

	replica.Kill()
	s = replicatedStore(t, master.Client(t), replicaTimeout)
	expectShort := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrNotReplicated, what)
		require.ErrorIs(t, err, store.ErrUnavailable, what)
		require.Contains(t, err.Error(), "0 of 1 replicas within 200ms", what)
	}
	began := time.Now()
	_, err = s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":3}`)}})
	took := time.Since(began)
	expectShort("publish", err)
	require.GreaterOrEqual(t, took, replicaTimeout)
	require.Less(t, took, replicaTimeout+time.Second)
	// An idempotent repeat reports a stored job: it waits too.
	_, err = s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":1}`), IdempotencyKey: "k1"}})
	expectShort("repeated publish", err)
	expectShort("resume", s.Resume(ctx, q))
	expectShort("pause", s.Pause(ctx, q, "again"))
	_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
	expectShort("repeated ack", err)
	_, err = s.Replay(ctx, q, []string{id})
	expectShort("replay", err)
	// A claim does not wait: the job it hands out stays waiting on a
	// promoted replica that lacks the claim, so losing it only repeats a
	// delivery.
	q2 := queue("q2")
	_, err = s.Publish(ctx, q2, []store.NewJob{{Payload: json.RawMessage(`{}`)}})
	expectShort("publish on q2", err) // stored on the master all the same
	began = time.Now()
	c, err = s.Claim(ctx, q2, 1)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	require.Less(t, time.Since(began), replicaTimeout)
}

// A write that the script leaves unchanged (an idempotent repeat) may have
// been made by another connection and not be replicated yet: the answer
// must wait for that write, not only for this connection's own. Redis moves
// a connection's write offset to the master's after every command, so WAIT
// after the script covers it; a replica that is connected but frozen shows
// that it does (WAIT alone on a fresh connection would count the frozen
// replica and answer at once).
func TestReplicatedRepeatWaitsForTheOriginalWrite(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	q := queue("q")
	local := newStore(t, master.Client(t))
	replica.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { replica.Signal(syscall.SIGCONT) })
	// Written by another client while the replica is frozen: not on it.
	res, err := local.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{}`), IdempotencyKey: "k"}})
	require.NoError(t, err)
	require.False(t, res[0].Duplicate)

	fresh := redis.NewClient(&redis.Options{Addr: master.Addr})
	t.Cleanup(func() { _ = fresh.Close() })
	s := replicatedStore(t, fresh, replicaTimeout)
	_, err = s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{}`), IdempotencyKey: "k"}})
	require.ErrorIs(t, err, store.ErrNotReplicated, "the repeat is answered only once the job is replicated")

	replica.Signal(syscall.SIGCONT)
	res, err = replicatedStore(t, fresh, confirmTimeout).Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{}`), IdempotencyKey: "k"}})
	require.NoError(t, err)
	require.True(t, res[0].Duplicate)
}

// Local durability (the default) never sends WAIT: a missing replica
// changes nothing.
func TestLocalDurabilityDoesNotWait(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStore(t, srv.Client(t))
	began := time.Now()
	publish(t, s, queue("q"), `{}`)
	require.Less(t, time.Since(began), replicaTimeout)
	info, err := srv.Client(t).Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	require.NotContains(t, info, "cmdstat_wait:")
}

// On Redis Cluster, WAIT must reach the master that ran the script (a
// keyless command in a cluster pipeline goes to some other node). With one
// replica attached to the master of the queue's slot only, replicated
// writes succeed, and every WAIT was sent to that master.
func TestReplicatedWaitOnClusterGoesToTheQueueMaster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	s := replicatedStore(t, cc, confirmTimeout)
	q := queue("q")

	// Every master answers ErrNotReplicated: none has a replica.
	_, err := replicatedStore(t, cc, replicaTimeout).Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{}`)}})
	require.ErrorIs(t, err, store.ErrNotReplicated)

	owner, err := cc.MasterForKey(ctx, s.Keys(q.Name).List()[0])
	require.NoError(t, err)
	ownerID, err := owner.Do(ctx, "cluster", "myid").Text()
	require.NoError(t, err)
	rep := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(redistest.FreePort(t)))
	out, err := exec.Command("redis-cli", "--cluster", "add-node", rep.Addr, owner.Options().Addr,
		"--cluster-slave", "--cluster-master-id", ownerID).CombinedOutput()
	require.NoError(t, err, "%s", out)
	waitOnline(t, owner, 1)
	onRep := rep.Client(t).Conn()
	t.Cleanup(func() { _ = onRep.Close() })
	require.NoError(t, onRep.ReadOnly(ctx).Err()) // a cluster replica serves reads only after READONLY

	for i := range 5 {
		res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err, "publish %d", i)
		rec, err := onRep.HExists(ctx, s.Keys(q.Name).List()[2], res[0].ID).Result()
		require.NoError(t, err)
		require.True(t, rec, "job %d is on the replica", i)
	}
	for _, n := range c.Nodes {
		info, err := n.Client(t).Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		if n.Addr == owner.Options().Addr {
			require.Contains(t, info, "cmdstat_wait:calls=6,", "every WAIT went to the queue's master")
		} else {
			require.NotContains(t, info, "cmdstat_wait:", "no WAIT went to %s", n.Addr)
		}
	}
}

// BenchmarkPublishDurability is the cost of replicated durability per
// publish script call, one call at a time, on a master with one loopback
// replica: local runs the script; replicated runs it and waits for the
// replica to confirm (WAIT 1), one more round trip to the replica. Each
// iteration times one call of each, alternating which goes first, and the
// medians are reported (local-µs, replicated-µs, and their difference), so
// a machine busy with other work slows both alike and its spikes drop out.
//
//	go test ./store -run '^$' -bench PublishDurability -benchtime 5000x
func BenchmarkPublishDurability(b *testing.B) {
	master, _ := startReplicated(b)
	ctx := context.Background()
	stores := make([]*store.Store, 2)
	for i, replicated := range []bool{false, true} {
		rdb := redis.NewClient(&redis.Options{Addr: master.Addr})
		b.Cleanup(func() { _ = rdb.Close() })
		s, err := store.New(rdb, store.Options{Prefix: "b" + strconv.Itoa(i), Replicated: replicated})
		require.NoError(b, err)
		require.NoError(b, s.Load(ctx))
		stores[i] = s
	}
	q := queue("q")
	job := []store.NewJob{{Payload: json.RawMessage(`{"data":"` + strings.Repeat("x", 180) + `"}`)}}
	took := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	diff := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var one [2]time.Duration
		for k := range 2 {
			m := (i + k) % 2
			began := time.Now()
			if _, err := stores[m].Publish(ctx, q, job); err != nil {
				b.Fatal(err)
			}
			one[m] = time.Since(began)
		}
		took[0], took[1] = append(took[0], one[0]), append(took[1], one[1])
		diff = append(diff, one[1]-one[0])
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(med(took[0]), "local-µs")
	b.ReportMetric(med(took[1]), "replicated-µs")
	b.ReportMetric(med(diff), "wait-µs")
}
