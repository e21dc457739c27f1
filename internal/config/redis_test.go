package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// endpoint loads body and resolves its redis section.
func endpoint(t *testing.T, body string, vars map[string]string) Endpoint {
	t.Helper()
	c, err := load(t, body, vars)
	require.NoError(t, err)
	e, err := c.Redis.Endpoint()
	require.NoError(t, err)
	return e
}

// The URL forms managed services hand out mean what they mean to go-redis;
// keys fill in what the URL leaves out (a password from the environment).
func TestRedisURL(t *testing.T) {
	t.Parallel()
	e := endpoint(t, `redis: {url: "redis://alice:pw@redis.example.com:6380/2"}`, nil)
	require.Equal(t, Endpoint{Mode: RedisSingle, Addrs: []string{"redis.example.com:6380"},
		Username: "alice", Password: "pw", DB: 2}, e)

	e = endpoint(t, `redis: {url: "rediss://redis.example.com"}`, nil)
	require.Equal(t, Endpoint{Mode: RedisSingle, Addrs: []string{"redis.example.com:6379"}, TLS: true}, e)

	e = endpoint(t, `redis: {url: "rediss://alice@redis.example.com:6380", passwordEnv: REDIS_PW}`,
		map[string]string{"REDIS_PW": "from-env"})
	require.Equal(t, "alice", e.Username)
	require.Equal(t, "from-env", e.Password)
	require.True(t, e.TLS)

	e = endpoint(t, `redis: {url: "redis://h:6379", username: bob, password: pw, db: 3, tls: {enabled: true}}`, nil)
	require.Equal(t, Endpoint{Mode: RedisSingle, Addrs: []string{"h:6379"}, Username: "bob", Password: "pw", DB: 3, TLS: true}, e)

	// ?addr= lists more Redis Cluster seeds, as go-redis' ParseClusterURL.
	e = endpoint(t, `redis: {url: "rediss://u:p@n1:7000?addr=n2:7001&addr=n3:7002"}`, nil)
	require.Equal(t, Endpoint{Mode: RedisCluster, Addrs: []string{"n1:7000", "n2:7001", "n3:7002"},
		Username: "u", Password: "p", TLS: true}, e)
	e = endpoint(t, `redis: {url: "redis://n1:7000/0?addr=n2:7001"}`, nil)
	require.Equal(t, RedisCluster, e.Mode)

	c, err := Load("", env(map[string]string{"SIMPLEQ_REDIS_URL": "redis://env-host:6379/1"}))
	require.NoError(t, err)
	require.False(t, c.Redis.Embedded())
	e, err = c.Redis.Endpoint()
	require.NoError(t, err)
	require.Equal(t, []string{"env-host:6379"}, e.Addrs)
	require.Equal(t, 1, e.DB)
}

// A bad URL, or a URL together with a key saying the same thing, is a
// problem naming both keys; no message repeats the URL's password.
func TestRedisURLProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, key string
		want      []string
	}{
		{`redis: {url: "http://u:hunter2@h:6379"}`, "redis.url", []string{`must start with redis:// or rediss:// (got "http:")`}},
		{`redis: {url: "redis://u:hunter2@h:6379/x"}`, "redis.url", []string{"invalid database number"}},
		{`redis: {url: "redis://u:hunter2@h:6379/0?dial_timeout=3"}`, "redis.url", []string{`query parameter "dial_timeout" is not supported`}},
		{`redis: {url: "rediss://u:hunter2@h:6379?skip_verify=true"}`, "redis.url", []string{"redis.tls.insecureSkipVerify"}},
		{`redis: {url: "redis://u:hunter2@h:6379?db=2"}`, "redis.url", []string{"as the path"}},
		{`redis: {url: "redis://u:hunter2@h:7000/3?addr=h2:7000"}`, "redis.url", []string{"only database 0"}},
		{`redis: {url: "redis://u:hunter2@:6379"}`, "redis.url", []string{"has no host"}},
		{`redis: {url: "redis://u:hunter2@h:6379/%zz"}`, "redis.url", []string{"not a valid URL", "invalid URL escape"}},
		{`redis: {url: "redis://h:6379", addr: "h:6379"}`, "redis.url and redis.addr", []string{"set at most one"}},
		{`redis: {url: "redis://h:6379", addrs: ["h:6379"]}`, "redis.url and redis.addrs", []string{"set at most one"}},
		{`redis: {url: "redis://h:6379", sentinel: {masterName: m, addrs: ["h:26379"]}}`, "redis.url and redis.sentinel", []string{"set at most one"}},
		{`redis: {url: "redis://alice:hunter2@h:6379", username: bob}`, "redis.url and redis.username", []string{"holds a user already"}},
		{`redis: {url: "redis://alice:hunter2@h:6379", password: pw}`, "redis.url and redis.password", []string{"holds a password already"}},
		{`redis: {url: "redis://alice:hunter2@h:6379", passwordEnv: PW}`, "redis.url and redis.passwordEnv", []string{"holds a password already"}},
		{`redis: {url: "redis://alice:hunter2@h:6379/1", db: 2}`, "redis.url and redis.db", []string{"holds database 1 already"}},
		{`redis: {url: "redis://h:7000?addr=h2:7000", db: 2}`, "redis.db", []string{"must be 0 with a cluster redis.url"}},
		{`redis: {url: 6379}`, "redis.url", []string{"must be a string"}},
	} {
		got := problems(t, tc.body, map[string]string{"PW": "x"})
		requireProblem(t, got, tc.key, tc.want...)
		require.NotContains(t, strings.Join(got, "\n"), "hunter2", tc.body)
	}

	got := problems(t, "", map[string]string{"SIMPLEQ_REDIS_URL": "redis://u:hunter2@h:6379?pool_size=9"})
	requireProblem(t, got, "redis.url (from SIMPLEQ_REDIS_URL)", `"pool_size"`)
	require.NotContains(t, strings.Join(got, "\n"), "hunter2")
}

func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	e := endpoint(t, `
redis:
  username: app
  passwordEnv: DATA_PW
  db: 4
  sentinel:
    masterName: mymaster
    addrs: ["s1:26379", "s2:26379", "s3:26379"]
    username: watcher
    passwordEnv: SENTINEL_PW
`, map[string]string{"DATA_PW": "data-secret", "SENTINEL_PW": "sentinel-secret"})
	require.Equal(t, Endpoint{Mode: RedisSentinel, Addrs: []string{"s1:26379", "s2:26379", "s3:26379"},
		MasterName: "mymaster", Username: "app", Password: "data-secret", DB: 4,
		SentinelUsername: "watcher", SentinelPassword: "sentinel-secret"}, e)

	c, err := Load("", env(map[string]string{
		"SIMPLEQ_REDIS_SENTINEL_MASTERNAME": "m",
		"SIMPLEQ_REDIS_SENTINEL_ADDRS":      "s1:26379,s2:26379",
	}))
	require.NoError(t, err)
	require.False(t, c.Redis.Embedded())
	require.Equal(t, []string{"s1:26379", "s2:26379"}, c.Redis.Sentinel.Addrs)

	got := problems(t, `redis: {sentinel: {addrs: ["s1:26379", "nope"]}}`, nil)
	requireProblem(t, got, "redis.sentinel.masterName", "required with redis.sentinel")
	requireProblem(t, got, "redis.sentinel.addrs[1]", "host:port")

	got = problems(t, `redis: {sentinel: {masterName: m}}`, nil)
	requireProblem(t, got, "redis.sentinel.addrs", "required with redis.sentinel", "sentinels' host:port")

	got = problems(t, `redis: {addr: "h:6379", sentinel: {masterName: m, addrs: ["s:26379"]}}`, nil)
	requireProblem(t, got, "redis.sentinel and redis.addr", "set at most one")
	got = problems(t, `redis: {addrs: ["h:6379"], sentinel: {masterName: m, addrs: ["s:26379"]}}`, nil)
	requireProblem(t, got, "redis.sentinel and redis.addrs", "Redis Cluster does not use Sentinel")

	got = problems(t, `redis: {sentinel: {masterName: m, addrs: ["s:26379"], password: a, passwordEnv: SP}}`,
		map[string]string{"SP": "b"})
	requireProblem(t, got, "redis.sentinel.password and redis.sentinel.passwordEnv", "set at most one")
	got = problems(t, `redis: {sentinel: {masterName: m, addrs: ["s:26379"], passwordEnv: UNSET_PW}}`, nil)
	requireProblem(t, got, "redis.sentinel.passwordEnv", "UNSET_PW is unset or empty")
}

func TestRedisPasswordEnv(t *testing.T) {
	t.Parallel()
	c, err := load(t, `redis: {addr: "h:6379", username: alice, passwordEnv: REDIS_PW}`, map[string]string{"REDIS_PW": "s3cret"})
	require.NoError(t, err)
	require.Equal(t, "s3cret", c.Redis.Password)
	require.Equal(t, "REDIS_PW", c.Redis.PasswordEnv)

	got := problems(t, `redis: {addr: "h:6379", password: a, passwordEnv: REDIS_PW}`, map[string]string{"REDIS_PW": "b"})
	requireProblem(t, got, "redis.password and redis.passwordEnv", "set at most one")
	got = problems(t, `redis: {addr: "h:6379", passwordEnv: REDIS_PW}`, nil)
	requireProblem(t, got, "redis.passwordEnv", "environment variable REDIS_PW is unset or empty")

	// The variable passwordEnv names is read, so it is not stray even with
	// the settings' prefix.
	c, err = load(t, `redis: {addr: "h:6379", passwordEnv: SIMPLEQ_REDIS_SECRET}`, map[string]string{"SIMPLEQ_REDIS_SECRET": "x"})
	require.NoError(t, err)
	require.Empty(t, StrayEnv(c, []string{"SIMPLEQ_REDIS_SECRET=x"}))
}

func TestRedisTLSValidation(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
redis:
  addrs: ["n1:7000", "n2:7000"]
  tls: {enabled: true, caFile: /ca.pem, certFile: /c.pem, keyFile: /k.pem, serverName: redis.internal}
`, nil)
	require.NoError(t, err, "TLS applies to Redis Cluster too")
	e, err := c.Redis.Endpoint()
	require.NoError(t, err)
	require.True(t, e.TLS)
	require.Equal(t, RedisCluster, e.Mode)

	_, err = load(t, `redis: {url: "rediss://h:6379", tls: {caFile: /ca.pem}}`, nil)
	require.NoError(t, err, "rediss:// turns TLS on")
	_, err = load(t, `redis: {addr: "h:6379", tls: {enabled: true, insecureSkipVerify: true}}`, nil)
	require.NoError(t, err, "allowed, and warned about at start-up")

	got := problems(t, `redis: {addr: "h:6379", tls: {caFile: /ca.pem, serverName: x}}`, nil)
	requireProblem(t, got, "redis.tls.caFile", "TLS is off", "redis.tls.enabled: true", "rediss://")
	requireProblem(t, got, "redis.tls.serverName", "TLS is off")

	got = problems(t, `redis: {addr: "h:6379", tls: {enabled: true, certFile: /c.pem}}`, nil)
	requireProblem(t, got, "redis.tls.keyFile", "required with redis.tls.certFile")
	got = problems(t, `redis: {addr: "h:6379", tls: {enabled: true, keyFile: /k.pem}}`, nil)
	requireProblem(t, got, "redis.tls.certFile", "required with redis.tls.keyFile")

	got = problems(t, `redis: {url: "rediss://h:6379", tls: {enabled: false}}`, nil)
	requireProblem(t, got, "redis.tls.enabled", "rediss://")
	got = problems(t, `redis: {addr: "h:6379", tls: {enabled: true, caFile: /ca.pem, insecureSkipVerify: true}}`, nil)
	requireProblem(t, got, "redis.tls.insecureSkipVerify", "redis.tls.caFile")
	got = problems(t, `redis: {tls: {enabled: true}}`, nil)
	requireProblem(t, got, "redis.tls.enabled", "embedded store has no TLS")

	got = problems(t, "", map[string]string{"SIMPLEQ_REDIS_TLS_ENABLED": "maybe"})
	requireProblem(t, got, "redis.tls.enabled (from SIMPLEQ_REDIS_TLS_ENABLED)", "true or false")
}

// Redacted hides the URL's password and both passwords, shows variables by
// name, and loads again.
func TestRedactedRedis(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"SENTINEL_PW": "sentinel-secret"}
	c, err := load(t, `
redis:
  password: data-secret
  sentinel: {masterName: m, addrs: ["s1:26379"], username: w, passwordEnv: SENTINEL_PW}
`, vars)
	require.NoError(t, err)
	out := c.Redacted()
	require.NotContains(t, out, "data-secret")
	require.NotContains(t, out, "sentinel-secret")
	require.Contains(t, out, "passwordEnv: SENTINEL_PW")
	require.Contains(t, out, "masterName: m")
	again, err := load(t, out, vars)
	require.NoError(t, err, out)
	require.Equal(t, "sentinel-secret", again.Redis.Sentinel.Password)

	c, err = load(t, `redis: {url: "rediss://alice:url-secret@h:6380/1", tls: {caFile: /etc/ca.pem}}`, nil)
	require.NoError(t, err)
	out = c.Redacted()
	require.NotContains(t, out, "url-secret")
	require.Contains(t, out, "url: rediss://alice:xxxxx@h:6380/1")
	require.Contains(t, out, "caFile: /etc/ca.pem")
	_, err = load(t, out, nil)
	require.NoError(t, err, out)
}

// A reload tells any change of the redis section from none.
func TestRedisSame(t *testing.T) {
	t.Parallel()
	body := `redis: {url: "rediss://h:6379", sentinel: {}, tls: {caFile: /a.pem}}`
	a, err := load(t, body, nil)
	require.NoError(t, err)
	b, err := load(t, body, nil)
	require.NoError(t, err)
	require.True(t, a.Redis.Same(b.Redis))
	b.Redis.TLS.CAFile = "/b.pem"
	require.False(t, a.Redis.Same(b.Redis))
	r := a.Redis
	r.Sentinel.Addrs = []string{"s:1"}
	require.False(t, a.Redis.Same(r))
}
