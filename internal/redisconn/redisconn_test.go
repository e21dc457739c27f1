package redisconn

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/redistest"
)

// load validates a YAML redis section as the daemon would.
func load(t *testing.T, yaml string, env map[string]string) config.Redis {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	c, err := config.Load(path, func(k string) string { return env[k] })
	require.NoError(t, err)
	return c.Redis
}

func TestOptions(t *testing.T) {
	t.Parallel()
	o, err := Options(load(t, `redis: {url: "redis://alice:pw@h:6380/2"}`, nil))
	require.NoError(t, err)
	require.Equal(t, []string{"h:6380"}, o.Addrs)
	require.Equal(t, "alice", o.Username)
	require.Equal(t, "pw", o.Password)
	require.Equal(t, 2, o.DB)
	require.False(t, o.IsClusterMode)
	require.Nil(t, o.TLSConfig)
	require.IsType(t, &redis.Client{}, redis.NewUniversalClient(o))

	// One seed is enough for a cluster: the mode, not the count, decides.
	o, err = Options(load(t, `redis: {addrs: ["n1:7000"], username: u, tls: {enabled: true}}`, nil))
	require.NoError(t, err)
	require.True(t, o.IsClusterMode)
	require.NotNil(t, o.TLSConfig)
	require.Empty(t, o.TLSConfig.ServerName, "each cluster node is verified by its own host")
	require.IsType(t, &redis.ClusterClient{}, redis.NewUniversalClient(o))

	certs := redistest.NewCerts(t)
	o, err = Options(load(t, `
redis:
  username: app
  passwordEnv: DATA_PW
  sentinel: {masterName: mymaster, addrs: ["s1:26379", "s2:26379"], username: w, password: spw}
  tls: {enabled: true, caFile: `+certs.CAFile+`, certFile: `+certs.ClientCertFile+`, keyFile: `+certs.ClientKeyFile+`, serverName: redis.internal}
`, map[string]string{"DATA_PW": "dpw"}))
	require.NoError(t, err)
	require.Equal(t, "mymaster", o.MasterName)
	require.Equal(t, []string{"s1:26379", "s2:26379"}, o.Addrs)
	require.Equal(t, "app", o.Username)
	require.Equal(t, "dpw", o.Password)
	require.Equal(t, "w", o.SentinelUsername)
	require.Equal(t, "spw", o.SentinelPassword)
	require.Equal(t, "redis.internal", o.TLSConfig.ServerName)
	require.Len(t, o.TLSConfig.Certificates, 1)
	require.NotNil(t, o.TLSConfig.RootCAs)
	require.IsType(t, &redis.Client{}, redis.NewUniversalClient(o), "Sentinel's failover client")
}

// A certificate file that is missing, unreadable, not PEM or the wrong kind
// fails with the key, the file and the reason.
func TestTLSFileProblems(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not a certificate\n"), 0o600))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		tls  config.TLS
		want string
	}{
		{config.TLS{CAFile: missing}, "redis.tls.caFile " + missing + ": no such file or directory"},
		{config.TLS{CAFile: dir}, "redis.tls.caFile " + dir + ": is a directory"},
		{config.TLS{CAFile: garbage}, "redis.tls.caFile " + garbage + ": not PEM: no CERTIFICATE block found"},
		{config.TLS{CAFile: certs.ClientKeyFile}, "redis.tls.caFile " + certs.ClientKeyFile + `: holds a PEM "PRIVATE KEY" block`},
		{config.TLS{CertFile: missing, KeyFile: certs.ClientKeyFile}, "redis.tls.certFile " + missing + ": no such file or directory"},
		{config.TLS{CertFile: certs.ClientCertFile, KeyFile: garbage}, "redis.tls.keyFile " + garbage + ": not PEM: no PRIVATE KEY block found"},
		{config.TLS{CertFile: certs.ClientCertFile, KeyFile: certs.CAFile}, "redis.tls.keyFile " + certs.CAFile + `: holds a PEM "CERTIFICATE" block`},
		{config.TLS{CertFile: certs.ClientCertFile, KeyFile: certs.ServerKeyFile},
			"redis.tls.certFile " + certs.ClientCertFile + " and redis.tls.keyFile " + certs.ServerKeyFile + ": tls: private key does not match public key"},
	} {
		_, err := TLSConfig(tc.tls)
		require.Error(t, err, tc.want)
		require.Contains(t, err.Error(), tc.want)
	}
	_, err := TLSConfig(config.TLS{CAFile: certs.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile})
	require.NoError(t, err)
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	certs := redistest.NewCerts(t)
	for _, tc := range []struct {
		yaml string
		env  map[string]string
		want string
	}{
		{``, nil, "embedded in-memory store (development only: nothing persisted, one process), durability local"},
		{`redis: {addr: "h:6379"}`, nil, "single (h:6379), TLS off, user default, no password, db 0, durability local"},
		{`redis: {url: "rediss://alice:url-secret@h:6380/3"}`, nil,
			"single (h:6380), TLS on (system CAs), user alice, password in the URL, db 3, durability local"},
		{`redis: {addrs: ["a:7000", "b:7000"], password: file-secret, tls: {enabled: true, caFile: ` + certs.CAFile + `, certFile: c.pem, keyFile: k.pem}}`, nil,
			"cluster (seeds a:7000, b:7000), TLS mutual (CA " + certs.CAFile + "), user default, password set, durability local"},
		{`redis: {addr: "h:6379", tls: {enabled: true, insecureSkipVerify: true, serverName: x.internal}}`, nil,
			"single (h:6379), TLS on (server NOT verified: insecureSkipVerify, server name x.internal), user default, no password, db 0, durability local"},
		{`
redis:
  username: app
  passwordEnv: DATA_PW
  durability: replicated
  sentinel: {masterName: mymaster, addrs: ["s1:26379", "s2:26379", "s3:26379"], passwordEnv: SENTINEL_PW}
`, map[string]string{"DATA_PW": "data-secret", "SENTINEL_PW": "sentinel-secret"},
			"sentinel (master mymaster via 3 sentinels: s1:26379, s2:26379, s3:26379), TLS off, user app, password from $DATA_PW, sentinels as user default, password from $SENTINEL_PW, db 0, durability replicated"},
	} {
		m := Describe(load(t, tc.yaml, tc.env))
		require.Equal(t, tc.want, m.String())
		for _, secret := range []string{"url-secret", "file-secret", "data-secret", "sentinel-secret"} {
			require.NotContains(t, m.String(), secret)
		}
	}

	core, logs := observer.New(zapcore.InfoLevel)
	zap.New(core).Info("redis", zap.Object("redis", Describe(load(t, `
redis:
  url: "rediss://alice:url-secret@h:6380/1"
  tls: {caFile: /etc/ca.pem, certFile: c.pem, keyFile: k.pem}
`, nil))))
	fields := logs.All()[0].ContextMap()["redis"].(map[string]any)
	require.Equal(t, map[string]any{"mode": "single", "addrs": []any{"h:6380"}, "tls": "mutual", "caFile": "/etc/ca.pem",
		"user": "alice", "password": "in the URL", "db": 1, "durability": "local"}, fields)
}

// ping reaches Redis as the daemon would, with options built from yaml,
// and returns what StartupError makes of the outcome.
func ping(t *testing.T, yaml string) (pingErr, startupErr error) {
	t.Helper()
	r := load(t, yaml, nil)
	o, err := Options(r)
	require.NoError(t, err)
	o.DialTimeout, o.ReadTimeout, o.MaxRetries, o.DialerRetries = time.Second, time.Second, -1, 1
	c := redis.NewUniversalClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pingErr = c.Ping(ctx).Err()
	return pingErr, StartupError(r, pingErr)
}

// Against real TLS servers: a certificate that cannot verify, or a client
// certificate the server wants and does not get, is a start-up error
// naming the key, the file and the reason; a Redis that is away is not.
func TestStartupErrorAgainstRealServers(t *testing.T) {
	t.Parallel()
	certs, other := redistest.NewCerts(t), redistest.NewCerts(t)
	optional := redistest.StartWith(t, redistest.Options{TLS: certs})
	mutual := redistest.StartWith(t, redistest.Options{TLS: certs, RequireClientCert: true})
	plain := redistest.Start(t)

	pingErr, err := ping(t, `redis: {url: "rediss://`+optional.Addr+`", tls: {caFile: `+certs.CAFile+`}}`)
	require.NoError(t, pingErr)
	require.NoError(t, err)

	_, err = ping(t, `redis: {url: "rediss://`+optional.Addr+`", tls: {caFile: `+other.CAFile+`}}`)
	require.ErrorContains(t, err, "redis.tls.caFile "+other.CAFile+": x509: certificate signed by unknown authority")

	_, err = ping(t, `redis: {url: "rediss://`+optional.Addr+`", tls: {caFile: `+certs.CAFile+`, serverName: bogus.example}}`)
	require.ErrorContains(t, err, "redis.tls.serverName bogus.example: x509: certificate is valid for localhost, not bogus.example")

	_, err = ping(t, `redis: {url: "rediss://`+mutual.Addr+`", tls: {caFile: `+certs.CAFile+`}}`)
	require.ErrorContains(t, err, "redis.tls.certFile (unset): the Redis server wants a client certificate (mutual TLS)")

	_, err = ping(t, `redis: {url: "rediss://`+mutual.Addr+`", tls: {caFile: `+certs.CAFile+`, certFile: `+other.ClientCertFile+`, keyFile: `+other.ClientKeyFile+`}}`)
	require.ErrorContains(t, err, "redis.tls.certFile "+other.ClientCertFile+": the Redis server refused it: remote error: tls:")

	pingErr, err = ping(t, `redis: {url: "rediss://`+mutual.Addr+`", tls: {caFile: `+certs.CAFile+`, certFile: `+certs.ClientCertFile+`, keyFile: `+certs.ClientKeyFile+`}}`)
	require.NoError(t, pingErr)
	require.NoError(t, err)

	plain.Kill()
	pingErr, err = ping(t, `redis: {addr: "`+plain.Addr+`"}`)
	require.Error(t, pingErr)
	require.NoError(t, err, "a Redis that is away is waited for: %v", pingErr)
	require.False(t, strings.Contains(pingErr.Error(), "tls"))
}
