package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// The ways production.md §1 reaches Redis, each against real redis-server
// processes on loopback: a rediss:// URL with a CA, mutual TLS, an ACL user
// (in the URL, and as username + passwordEnv), a TLS Redis Cluster, and a
// Sentinel set through a failover. Each daemon must deliver a job, say its
// mode on /readyz and in its start-up log, and never log a secret.

// deliverOne publishes one job and waits for the webhook to complete it.
func deliverOne(t *testing.T, d *Daemon, hook *Webhook) {
	t.Helper()
	id := d.Publish("jobs", map[string]any{"n": 1})
	d.WaitStatus(id, "completed", 10*time.Second)
	require.Positive(t, hook.Count())
}

// requireMode checks /readyz's redis object and that the start-up log says
// summary.
func requireMode(t *testing.T, d *Daemon, mode, tls, summary string) {
	t.Helper()
	r := d.Do("GET", "/readyz", nil)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, map[string]any{"mode": mode, "tls": tls, "durability": "local"}, r.JSON(t)["redis"])
	require.Contains(t, d.Log(), summary)
}

// exitAtStart runs simpleqd serve on redisYAML (as DaemonConfig.RedisYAML)
// and returns its exit code and output once it exits; it fails the test if
// the daemon is still running after within.
func exitAtStart(t *testing.T, redisYAML string, env []string, within time.Duration) (int, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "simpleqd.yaml")
	cfg := fmt.Sprintf("redis:\n  %s\nhttp:\n  listen: 127.0.0.1:%d\n", strings.ReplaceAll(strings.TrimRight(redisYAML, "\n"), "\n", "\n  "),
		redistest.FreePort(t))
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), "serve", "--config", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "daemon still running after %s:\n%s", within, out)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, string(out)
}

// TestRedisTLSURL: rediss:// with a CA file works; a CA that did not sign
// the server's certificate stops start-up naming the file and the reason.
func TestRedisTLSURL(t *testing.T) {
	t.Parallel()
	certs, other := redistest.NewCerts(t), redistest.NewCerts(t)
	rs := redistest.StartWith(t, redistest.Options{TLS: certs})
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("url: \"rediss://%s/0\"\ntls:\n  caFile: %s\n", rs.Addr, certs.CAFile),
		YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d, hook)
	requireMode(t, d, "single", "on", "single ("+rs.Addr+"), TLS on (CA "+certs.CAFile+"), user default, no password, db 0")

	code, out := exitAtStart(t, fmt.Sprintf("url: \"rediss://%s\"\ntls:\n  caFile: %s\n", rs.Addr, other.CAFile), nil, 15*time.Second)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "redis.tls.caFile "+other.CAFile+": x509: certificate signed by unknown authority")
}

// TestRedisMutualTLS: a server that requires client certificates serves a
// daemon that presents one (certFile/keyFile) and refuses, at start-up, one
// that does not.
func TestRedisMutualTLS(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	rs := redistest.StartWith(t, redistest.Options{TLS: certs, RequireClientCert: true})
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("addr: %q\ntls:\n  enabled: true\n  caFile: %s\n  certFile: %s\n  keyFile: %s\n",
		rs.Addr, certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile), YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d, hook)
	requireMode(t, d, "single", "mutual", "TLS mutual (CA "+certs.CAFile+")")

	code, out := exitAtStart(t, fmt.Sprintf("addr: %q\ntls:\n  enabled: true\n  caFile: %s\n", rs.Addr, certs.CAFile), nil, 15*time.Second)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "redis.tls.certFile (unset): the Redis server wants a client certificate (mutual TLS)")
	require.Contains(t, out, "certificate required")
}

// TestRedisACLUser: with the default user switched off, an ACL user
// reaches Redis from a redis:// URL with user:password, and from username
// with passwordEnv; neither password reaches the log.
func TestRedisACLUser(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	admin := rs.Client(t)
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "alice", "on", ">alice-pw-value", "~*", "&*", "+@all").Err())
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "off").Err())
	hook := NewWebhook(t, nil)

	d1 := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("url: \"redis://alice:alice-pw-value@%s/0\"\n", rs.Addr),
		YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d1, hook)
	requireMode(t, d1, "single", "off", "user alice, password in the URL")

	d2 := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("addr: %q\nusername: alice\npasswordEnv: ALICE_PW\n", rs.Addr),
		Env: []string{"ALICE_PW=alice-pw-value"}, YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d2, hook)
	requireMode(t, d2, "single", "off", "user alice, password from $ALICE_PW")

	// The least-privilege user docs/operations.md suggests is enough too.
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "bob", "on", ">bob-pw-value", "~simpleq:*", "&simpleq:*",
		"+@all", "-@dangerous", "+info", "+config|get").Err())
	d3 := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("url: \"redis://bob@%s\"\npasswordEnv: BOB_PW\n", rs.Addr),
		Env: []string{"BOB_PW=bob-pw-value"}, YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d3, hook)
	requireMode(t, d3, "single", "off", "user bob, password from $BOB_PW")
	require.NotContains(t, d3.Log(), "bob-pw-value")
	require.NotContains(t, d3.Log(), "NOPERM")
	for _, d := range []*Daemon{d1, d2} {
		require.NotContains(t, d.Log(), "alice-pw-value")
	}
}

// TestRedisClusterTLS: redis.addrs with redis.tls reaches a Redis Cluster
// whose nodes and bus speak only TLS, with a client certificate.
func TestRedisClusterTLS(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	cl := redistest.StartClusterWith(t, 3, redistest.Options{TLS: certs, RequireClientCert: true})
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisYAML: fmt.Sprintf("addrs: [%s]\ntls:\n  enabled: true\n  caFile: %s\n  certFile: %s\n  keyFile: %s\n",
		cl.Nodes[0].Addr, certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile), YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d, hook)
	requireMode(t, d, "cluster", "mutual", "cluster (seeds "+cl.Nodes[0].Addr+"), TLS mutual")
}

// TestRedisSentinel: a daemon given only the sentinels (and both
// passwords from the environment) finds the master, delivers, and after
// the master is killed with SIGKILL follows the failover by itself: it is
// ready again and delivers without a restart.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	set := redistest.StartSentinelSet(t, redistest.SentinelOptions{Password: "data-pw-value", SentinelPassword: "sentinel-pw-value"})
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{
		RedisYAML: fmt.Sprintf("passwordEnv: DATA_PW\nsentinel:\n  masterName: %s\n  addrs: [%s]\n  passwordEnv: SENTINEL_PW\n",
			set.MasterName, strings.Join(set.SentinelAddrs(), ", ")),
		Env:  []string{"DATA_PW=data-pw-value", "SENTINEL_PW=sentinel-pw-value"},
		YAML: QueueYAML("jobs", hook.URL, "backoff: {type: fixed, base: 100ms}"), LogLevel: "info"})
	deliverOne(t, d, hook)
	requireMode(t, d, "sentinel", "off", "sentinel (master "+set.MasterName+" via 3 sentinels: "+strings.Join(set.SentinelAddrs(), ", ")+")")

	old := set.KillMaster(t)
	next := set.WaitNewMaster(t, old, 20*time.Second)
	t.Logf("failover: %s -> %s", old, next)

	// Publishes may fail (503) until the daemon's client has moved; then
	// one is accepted and delivered through the new master.
	var id string
	require.Eventually(t, func() bool {
		r := d.Do("POST", "/v1/queues/jobs/jobs", map[string]any{"payload": map[string]any{"n": 2}})
		if r.Status != 201 {
			return false
		}
		id = r.JSON(t)["id"].(string)
		return true
	}, 20*time.Second, 100*time.Millisecond, "no publish accepted after the failover")
	d.WaitStatus(id, "completed", 15*time.Second)
	require.Equal(t, 200, d.Do("GET", "/readyz", nil).Status)
	keys, err := set.MasterServer(t).Client(t).Keys(context.Background(), "simpleq:*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys, "the job lives on the new master %s", next)
	for _, secret := range []string{"data-pw-value", "sentinel-pw-value"} {
		require.NotContains(t, d.Log(), secret)
	}
}

// TestRedisSentinelTLS: redis.tls applies to the sentinels and the master
// they name alike: a Sentinel set on mutual TLS serves a daemon.
func TestRedisSentinelTLS(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	set := redistest.StartSentinelSet(t, redistest.SentinelOptions{TLS: certs, RequireClientCert: true})
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{
		RedisYAML: fmt.Sprintf("sentinel:\n  masterName: %s\n  addrs: [%s]\ntls:\n  enabled: true\n  caFile: %s\n  certFile: %s\n  keyFile: %s\n",
			set.MasterName, strings.Join(set.SentinelAddrs(), ", "), certs.CAFile, certs.ClientCertFile, certs.ClientKeyFile),
		YAML: QueueYAML("jobs", hook.URL), LogLevel: "info"})
	deliverOne(t, d, hook)
	requireMode(t, d, "sentinel", "mutual", "sentinel (master "+set.MasterName+" via 3 sentinels")
}
