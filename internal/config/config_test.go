package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeConfig writes body to a fresh file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "simpleq.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// env returns a getenv backed by a map, so tests never touch process env.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// load writes body and loads it with vars as the environment.
func load(t *testing.T, body string, vars map[string]string) (*Config, error) {
	t.Helper()
	return Load(writeConfig(t, body), env(vars))
}

// problems loads body, requires a *Error and returns its lines.
func problems(t *testing.T, body string, vars map[string]string) []string {
	t.Helper()
	_, err := load(t, body, vars)
	require.Error(t, err)
	var cerr *Error
	require.True(t, errors.As(err, &cerr), "want *config.Error, got %T: %v", err, err)
	return cerr.Problems
}

// requireProblem asserts that some problem line starts with key and contains
// every fragment.
func requireProblem(t *testing.T, got []string, key string, fragments ...string) {
	t.Helper()
	for _, p := range got {
		if !strings.HasPrefix(p, key+":") && !strings.HasPrefix(p, key+" (from ") {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(p, f)
		}
		if ok {
			return
		}
	}
	require.Failf(t, "problem not reported", "want %q with %q in %q", key, fragments, got)
}

const minimalQueue = `
queues:
  emails:
    webhookUrl: http://127.0.0.1:9000/hooks/emails
    signingSecret: s3cret
`

func TestDefaultsWithoutFile(t *testing.T) {
	t.Parallel()
	c, err := Load("", nil)
	require.NoError(t, err)
	require.Equal(t, Default(), c)

	require.True(t, c.Redis.Embedded())
	require.Equal(t, "", c.Redis.Addr)
	require.Equal(t, "simpleq", c.Redis.Prefix)
	require.Equal(t, "127.0.0.1:8080", c.HTTP.Listen)
	require.Equal(t, int64(1048576), c.HTTP.MaxPayloadBytes)
	require.Equal(t, 10*time.Second, c.ShutdownGrace)
	require.Empty(t, c.Auth.APIKeys)
	require.Equal(t, Log{Format: "json", Level: "info"}, c.Log)
	require.Equal(t, Dispatch{LeaseMargin: 5 * time.Second, ClaimBatch: 64, Linger: 300 * time.Microsecond, ScheduleLease: 2 * time.Second}, c.Dispatch)
	require.Equal(t, QueueSettings{
		Mode:              "standard",
		Concurrency:       10,
		RateLimitMax:      0,
		RateLimitWindow:   time.Second,
		MaxAttempts:       5,
		MaxDefers:         50,
		Timeout:           15 * time.Second,
		AckTimeout:        5 * time.Minute,
		AckTimeoutAction:  "retry",
		Backoff:           Backoff{Type: "exponential", Base: time.Second, Max: 10 * time.Minute, Jitter: true},
		DefaultRetryAfter: 60 * time.Second,
		JobLifetime:       24 * time.Hour,
		Retention:         72 * time.Hour,
		Breaker:           Breaker{HoldFor: 30 * time.Second},
		FlowKeys:          FlowKeys{RateLimitWindow: time.Second, HoldScope: "key"},
	}, c.Defaults)
	require.Empty(t, c.Queues)
}

func TestEmptyFileGivesDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", nil)
	require.NoError(t, err)
	require.Equal(t, Default(), c)
}

// specExample is the file from config.md with the elided secret filled in.
const specExample = `
redis:
  addr: 127.0.0.1:6379        # empty: an embedded in-memory store
  addrs: []
  username: ""
  password: ""
  db: 0
  prefix: simpleq
http:
  listen: 127.0.0.1:8080
  maxPayloadBytes: 1048576
shutdownGrace: 10s
auth:
  apiKeys: []
defaults:
  mode: standard
  concurrency: 10
  rateLimitMax: 0
  rateLimitWindow: 1s
  maxAttempts: 5
  maxDefers: 50
  timeout: 15s
  ackTimeout: 5m
  ackTimeoutAction: retry
  backoff: {type: exponential, base: 1s, max: 10m, jitter: true}
  defaultRetryAfter: 60s
  jobLifetime: 24h
  retention: 72h
queues:
  emails:
    webhookUrl: http://127.0.0.1:9000/hooks/emails
    signingSecret: whsec_abc
    mode: ack
    concurrency: 5
    rateLimitMax: 50
    rateLimitWindow: 1m
`

func TestSpecExample(t *testing.T) {
	t.Parallel()
	c, err := load(t, specExample, nil)
	require.NoError(t, err)

	want := Default()
	want.Redis.Addr = "127.0.0.1:6379"
	want.Redis.Addrs = []string{}
	want.Auth.APIKeys = []string{}
	emails := Queue{
		Name:          "emails",
		WebhookURL:    "http://127.0.0.1:9000/hooks/emails",
		SigningSecret: "whsec_abc",
		QueueSettings: want.Defaults,
	}
	emails.Mode = "ack"
	emails.Concurrency = 5
	emails.RateLimitMax = 50
	emails.RateLimitWindow = time.Minute
	want.Queues["emails"] = emails
	require.Equal(t, want, c)
	require.False(t, c.Redis.Embedded())

	q, ok := c.Queue("emails")
	require.True(t, ok)
	require.Equal(t, emails, q)
	_, ok = c.Queue("Emails")
	require.False(t, ok, "queue lookup is case-sensitive")
	require.Equal(t, []string{"emails"}, c.QueueNames())
}

func TestRedactedRoundTrips(t *testing.T) {
	t.Parallel()
	c, err := load(t, specExample+`
  sms:
    webhookUrl: https://hooks.example.com/sms
    signingSecretEnv: SMS_SECRET
    backoff: {type: fixed, base: 250ms}
`, map[string]string{"SMS_SECRET": "from-env"})
	require.NoError(t, err)

	out := c.Redacted()
	again, err := load(t, out, map[string]string{"SMS_SECRET": "from-env"})
	require.NoError(t, err, out)

	want := *c
	emails := want.Queues["emails"]
	emails.SigningSecret = "[redacted]"
	want.Queues = map[string]Queue{"emails": emails, "sms": c.Queues["sms"]}
	require.Equal(t, &want, again)
}

func TestRedactedHidesSecrets(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
redis: {addr: "redis:6379", password: hunter2}
http: {listen: "0.0.0.0:8080"}
auth: {apiKeys: [key-one, key-two]}
queues:
  emails:
    webhookUrl: https://user:pw-in-url@example.com/hook
    signingSecret: whsec_topsecret
  sms:
    webhookUrl: https://example.com/sms
    signingSecretEnv: SMS_SECRET
`, map[string]string{"SMS_SECRET": "env-secret"})
	require.NoError(t, err)
	require.Equal(t, "env-secret", c.Queues["sms"].SigningSecret)
	require.Equal(t, "SMS_SECRET", c.Queues["sms"].SigningSecretEnv)

	out := c.Redacted()
	for _, secret := range []string{"hunter2", "key-one", "key-two", "whsec_topsecret", "env-secret", "pw-in-url"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, "[redacted]")
	require.Contains(t, out, "signingSecretEnv: SMS_SECRET")
	require.Contains(t, out, "jobLifetime: 24h0m0s")
	require.Contains(t, out, "addr: redis:6379")
	require.Equal(t, 2, strings.Count(out, "- '[redacted]'"), out)
}

func TestDurations(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
shutdownGrace: 1500ms
dispatch: {leaseMargin: 0.25}
defaults:
  timeout: 2m
  ackTimeout: 30
  rateLimitWindow: "2"
  defaultRetryAfter: 0
  jobLifetime: 1.5
  retention: "0.5"
  backoff: {base: 10ms, max: 1h30m}
`, nil)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, c.ShutdownGrace)
	require.Equal(t, 250*time.Millisecond, c.Dispatch.LeaseMargin)
	require.Equal(t, 2*time.Minute, c.Defaults.Timeout)
	require.Equal(t, 30*time.Second, c.Defaults.AckTimeout)
	require.Equal(t, 2*time.Second, c.Defaults.RateLimitWindow)
	require.Equal(t, time.Duration(0), c.Defaults.DefaultRetryAfter)
	require.Equal(t, 1500*time.Millisecond, c.Defaults.JobLifetime)
	require.Equal(t, 500*time.Millisecond, c.Defaults.Retention)
	require.Equal(t, 10*time.Millisecond, c.Defaults.Backoff.Base)
	require.Equal(t, 90*time.Minute, c.Defaults.Backoff.Max)

	got := problems(t, "defaults: {timeout: soon, ackTimeout: true}\n", nil)
	requireProblem(t, got, "defaults.timeout", `"soon"`, "duration")
	requireProblem(t, got, "defaults.ackTimeout", "duration")
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	c, err := load(t, minimalQueue+`
redis: {addr: "file:6379"}
defaults: {concurrency: 3}
`, map[string]string{
		"SIMPLEQ_REDIS_ADDR":              "env:6379",
		"SIMPLEQ_REDIS_PASSWORD":          "pw",
		"SIMPLEQ_REDIS_DB":                "2",
		"SIMPLEQ_HTTP_LISTEN":             "0.0.0.0:9090",
		"SIMPLEQ_HTTP_MAXPAYLOADBYTES":    "2048",
		"SIMPLEQ_SHUTDOWNGRACE":           "3",
		"SIMPLEQ_AUTH_APIKEYS":            "a, b,,c ",
		"SIMPLEQ_LOG_FORMAT":              "console",
		"SIMPLEQ_DISPATCH_CLAIMBATCH":     "8",
		"SIMPLEQ_DEFAULTS_CONCURRENCY":    "7",
		"SIMPLEQ_DEFAULTS_BACKOFF_JITTER": "false",
		"SIMPLEQ_DEFAULTS_BACKOFF_BASE":   "20ms",
		"SIMPLEQ_QUEUES_EMAILS_MODE":      "ack",
	})
	require.NoError(t, err)
	require.Equal(t, "env:6379", c.Redis.Addr)
	require.Equal(t, "pw", c.Redis.Password)
	require.Equal(t, 2, c.Redis.DB)
	require.Equal(t, "0.0.0.0:9090", c.HTTP.Listen)
	require.Equal(t, int64(2048), c.HTTP.MaxPayloadBytes)
	require.Equal(t, 3*time.Second, c.ShutdownGrace)
	require.Equal(t, []string{"a", "b", "c"}, c.Auth.APIKeys)
	require.Equal(t, "console", c.Log.Format)
	require.Equal(t, 8, c.Dispatch.ClaimBatch)
	require.Equal(t, 7, c.Defaults.Concurrency)
	require.False(t, c.Defaults.Backoff.Jitter)
	require.Equal(t, 20*time.Millisecond, c.Defaults.Backoff.Base)

	q := c.Queues["emails"]
	require.Equal(t, 7, q.Concurrency, "queue inherits the env-overridden default")
	require.Equal(t, "ack", q.Mode)
	require.False(t, q.Backoff.Jitter)
}

func TestEnvClusterAddrs(t *testing.T) {
	t.Parallel()
	c, err := Load("", env(map[string]string{"SIMPLEQ_REDIS_ADDRS": "r1:7000,r2:7000, r3:7000"}))
	require.NoError(t, err)
	require.Equal(t, []string{"r1:7000", "r2:7000", "r3:7000"}, c.Redis.Addrs)
	require.False(t, c.Redis.Embedded())
}

func TestEnvProblemNamesVariable(t *testing.T) {
	t.Parallel()
	got := problems(t, "", map[string]string{
		"SIMPLEQ_DEFAULTS_CONCURRENCY": "many",
		"SIMPLEQ_DISPATCH_CLAIMBATCH":  "0",
	})
	requireProblem(t, got, "defaults.concurrency (from SIMPLEQ_DEFAULTS_CONCURRENCY)", "integer", `"many"`)
	requireProblem(t, got, "dispatch.claimBatch (from SIMPLEQ_DISPATCH_CLAIMBATCH)", "between 1 and 1000")
}

func TestEnvAmbiguousQueueToken(t *testing.T) {
	t.Parallel()
	body := `
queues:
  a.b: {webhookUrl: "http://h/1", signingSecret: x}
  a_b: {webhookUrl: "http://h/2", signingSecret: x}
`
	_, err := load(t, body, nil)
	require.NoError(t, err, "colliding env names only matter when such a variable is set")

	got := problems(t, body, map[string]string{"SIMPLEQ_QUEUES_A_B_CONCURRENCY": "2"})
	requireProblem(t, got, "SIMPLEQ_QUEUES_A_B_CONCURRENCY", "ambiguous", `"a.b"`, `"a_b"`)
}

func TestQueueNamesKeepCaseAndDots(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
queues:
  Emails.EU-West_1:
    webhookUrl: https://example.com/eu
    signingSecret: x
    Concurrency: 2
  v1.orders:
    webhookUrl: https://example.com/orders
    signingSecret: y
    backoff: {max: 1m}
`, map[string]string{"SIMPLEQ_QUEUES_V1_ORDERS_RATELIMITMAX": "9"})
	require.NoError(t, err)
	require.Equal(t, []string{"Emails.EU-West_1", "v1.orders"}, c.QueueNames())

	eu, ok := c.Queue("Emails.EU-West_1")
	require.True(t, ok)
	require.Equal(t, "Emails.EU-West_1", eu.Name)
	require.Equal(t, 2, eu.Concurrency)
	require.Equal(t, "https://example.com/eu", eu.WebhookURL)

	orders := c.Queues["v1.orders"]
	require.Equal(t, 9, orders.RateLimitMax)
	require.Equal(t, Backoff{Type: "exponential", Base: time.Second, Max: time.Minute, Jitter: true}, orders.Backoff,
		"a partial backoff overrides only the keys it gives")
}

func TestQueueNamesDifferingOnlyInCase(t *testing.T) {
	t.Parallel()
	got := problems(t, `
queues:
  Emails: {webhookUrl: "http://h/1", signingSecret: x}
  emails: {webhookUrl: "http://h/2", signingSecret: x}
`, nil)
	requireProblem(t, got, "queues", `"Emails" and "emails"`, "letter case")
}

func TestSigningSecret(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
queues:
  q: {webhookUrl: "http://h/", signingSecretEnv: Q_SECRET}
`, map[string]string{"Q_SECRET": "shh"})
	require.NoError(t, err)
	require.Equal(t, "shh", c.Queues["q"].SigningSecret)

	got := problems(t, `
queues:
  unset: {webhookUrl: "http://h/", signingSecretEnv: MISSING}
  both: {webhookUrl: "http://h/", signingSecret: a, signingSecretEnv: Q_SECRET}
  none: {webhookUrl: "http://h/"}
  blank: {webhookUrl: "http://h/", signingSecret: ""}
`, map[string]string{"Q_SECRET": "shh"})
	requireProblem(t, got, "queues.unset.signingSecretEnv", "MISSING", "unset or empty")
	requireProblem(t, got, "queues.both.signingSecretEnv", "cannot be combined with signingSecret", "only one of")
	requireProblem(t, got, "queues.none.signingSecret", "required")
	requireProblem(t, got, "queues.blank.signingSecret", "required")
	require.Len(t, got, 4, got)
}

// TestSigningSecrets: a queue may list its secrets to rotate them. The
// first is the current one (SigningSecret, which alone signs
// x-simpleq-signature); the list is also read from one environment
// variable, comma- or space-separated. Every mistake names its key and the
// secret's position, never its value.
func TestSigningSecrets(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
queues:
  file: {webhookUrl: "http://h/", signingSecrets: [whsec_bmV3bmV3bmV3, whsec_b2xkb2xkb2xk]}
  env: {webhookUrl: "http://h/", signingSecretsEnv: Q_SECRETS}
  one: {webhookUrl: "http://h/", signingSecret: solo}
  override: {webhookUrl: "http://h/", signingSecrets: [a]}
`, map[string]string{"Q_SECRETS": " new-secret,\told-secret \n", "SIMPLEQ_QUEUES_OVERRIDE_SIGNINGSECRETS": "b,c"})
	require.NoError(t, err)
	file := c.Queues["file"]
	require.Equal(t, []string{"whsec_bmV3bmV3bmV3", "whsec_b2xkb2xkb2xk"}, file.SigningSecrets)
	require.Equal(t, "whsec_bmV3bmV3bmV3", file.SigningSecret, "the first secret is the current one")
	require.Equal(t, file.SigningSecrets, file.Secrets())
	envQ := c.Queues["env"]
	require.Equal(t, []string{"new-secret", "old-secret"}, envQ.SigningSecrets)
	require.Equal(t, "new-secret", envQ.SigningSecret)
	require.Equal(t, "Q_SECRETS", envQ.SigningSecretsEnv)
	require.Nil(t, c.Queues["one"].SigningSecrets)
	require.Equal(t, []string{"solo"}, c.Queues["one"].Secrets())
	require.Equal(t, []string{"b", "c"}, c.Queues["override"].SigningSecrets, "SIMPLEQ_QUEUES_<Q>_SIGNINGSECRETS overrides the list")
	require.Nil(t, Queue{}.Secrets())

	got := problems(t, `
queues:
  mixed: {webhookUrl: "http://h/", signingSecret: s3cret-one, signingSecrets: [s3cret-two]}
  mixedEnv: {webhookUrl: "http://h/", signingSecrets: [s3cret-two], signingSecretsEnv: Q_SECRETS}
  empty: {webhookUrl: "http://h/", signingSecrets: []}
  blank: {webhookUrl: "http://h/", signingSecrets: [s3cret-two, " "]}
  dup: {webhookUrl: "http://h/", signingSecrets: [s3cret-two, s3cret-three, s3cret-two]}
  unset: {webhookUrl: "http://h/", signingSecretsEnv: MISSING}
  envDup: {webhookUrl: "http://h/", signingSecretsEnv: DUP_SECRETS}
  numeric: {webhookUrl: "http://h/", signingSecrets: [918273645]}
`, map[string]string{"Q_SECRETS": "x", "DUP_SECRETS": "s3cret-four s3cret-four"})
	requireProblem(t, got, "queues.mixed.signingSecrets", "cannot be combined with signingSecret", "only one of")
	requireProblem(t, got, "queues.mixedEnv.signingSecretsEnv", "cannot be combined with signingSecrets")
	requireProblem(t, got, "queues.empty.signingSecrets", "at least one")
	requireProblem(t, got, "queues.blank.signingSecrets", "secret 2 of 2 is empty")
	requireProblem(t, got, "queues.dup.signingSecrets", "secrets 1 and 3 are the same")
	requireProblem(t, got, "queues.unset.signingSecretsEnv", "MISSING", "unset or empty")
	requireProblem(t, got, "queues.envDup.signingSecretsEnv", "DUP_SECRETS", "secrets 1 and 2 are the same")
	requireProblem(t, got, "queues.numeric.signingSecrets", "quote")
	require.Len(t, got, 8, got)
	for _, p := range got {
		require.NotContains(t, p, "s3cret", "a message never shows a secret")
		require.NotContains(t, p, "918273645", "a message never shows a secret")
	}
}

// TestRedactedSecretLists: Redacted shows how many secrets a queue
// rotates through, never which, and its output loads again.
func TestRedactedSecretLists(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
queues:
  file: {webhookUrl: "http://h/", signingSecrets: [whsec_bmV3bmV3bmV3, old-raw-secret]}
  env: {webhookUrl: "http://h/", signingSecretsEnv: Q_SECRETS}
`, map[string]string{"Q_SECRETS": "env-new,env-old"})
	require.NoError(t, err)
	out := c.Redacted()
	for _, secret := range []string{"bmV3bmV3bmV3", "old-raw-secret", "env-new", "env-old"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, "signingSecretsEnv: Q_SECRETS")
	require.Contains(t, out, "- '[redacted 1 of 2]'\n")
	require.Contains(t, out, "- '[redacted 2 of 2]'\n")
	require.NotContains(t, out, "signingSecret:", "the current secret is shown once, as the list's first")

	again, err := load(t, out, map[string]string{"Q_SECRETS": "env-new,env-old"})
	require.NoError(t, err, out)
	require.Equal(t, []string{"[redacted 1 of 2]", "[redacted 2 of 2]"}, again.Queues["file"].SigningSecrets)
	require.Equal(t, c.Queues["env"], again.Queues["env"])
}

func TestValidationNamesEveryKey(t *testing.T) {
	t.Parallel()
	got := problems(t, `
redis:
  addr: "r:6379"
  addrs: ["r1:7000", "nope"]
  db: 1
  prefix: "{x}"
http:
  listen: "0.0.0.0:8080"
  maxPayloadBytes: 1023
shutdownGrace: -1s
log: {format: xml, level: loud}
dispatch: {claimBatch: 1001, leaseMargin: -1ms}
defaults:
  mode: foo
  concurrency: 0
  rateLimitMax: -1
  maxAttempts: 0
  maxDefers: -1
  timeout: 0s
  ackTimeout: 0
  ackTimeoutAction: drop
  backoff: {type: linear, base: 0s}
  defaultRetryAfter: -1s
  jobLifetime: 0
  retention: 0
queues:
  emails:
    webhookUrl: ftp://example.com/x
    signingSecret: x
    concurrency: 0
    rateLimitMax: 5
    rateLimitWindow: 0
    backoff: {base: 2m, max: 1m}
  relative: {webhookUrl: /hooks, signingSecret: x}
  nourl: {signingSecret: x}
  "bad name!": {webhookUrl: "http://h/", signingSecret: x}
`, nil)

	requireProblem(t, got, "redis.addr and redis.addrs", "set at most one")
	requireProblem(t, got, "redis.addrs[1]", "host:port", `"nope"`)
	requireProblem(t, got, "redis.db", "must be 0 with redis.addrs")
	requireProblem(t, got, "redis.prefix", "{ or }")
	requireProblem(t, got, "http.maxPayloadBytes", "≥ 1024", "1023")
	requireProblem(t, got, "auth.apiKeys", "required when http.listen is not a loopback address")
	requireProblem(t, got, "shutdownGrace", "≥ 0", "-1s")
	requireProblem(t, got, "log.format", `"xml"`)
	requireProblem(t, got, "log.level", `"loud"`)
	requireProblem(t, got, "dispatch.claimBatch", "between 1 and 1000", "1001")
	requireProblem(t, got, "dispatch.leaseMargin", "≥ 0")
	requireProblem(t, got, "defaults.mode", `must be "standard" or "ack" (got "foo")`)
	requireProblem(t, got, "defaults.concurrency", "must be ≥ 1 (got 0)")
	requireProblem(t, got, "defaults.rateLimitMax", "must be ≥ 0 (got -1)")
	requireProblem(t, got, "defaults.maxAttempts", "must be ≥ 1 (got 0)")
	requireProblem(t, got, "defaults.maxDefers", "must be ≥ 0 (got -1)")
	requireProblem(t, got, "defaults.timeout", "must be > 0")
	requireProblem(t, got, "defaults.ackTimeout", "must be > 0")
	requireProblem(t, got, "defaults.ackTimeoutAction", `"retry" or "dead"`, `"drop"`)
	requireProblem(t, got, "defaults.backoff.type", `"exponential" or "fixed"`, `"linear"`)
	requireProblem(t, got, "defaults.backoff.base", "must be > 0")
	requireProblem(t, got, "defaults.defaultRetryAfter", "≥ 0")
	requireProblem(t, got, "defaults.jobLifetime", "must be > 0")
	requireProblem(t, got, "defaults.retention", "must be > 0")
	requireProblem(t, got, "queues.emails.webhookUrl", "absolute http:// or https:// URL")
	requireProblem(t, got, "queues.emails.concurrency", "must be ≥ 1 (got 0)")
	requireProblem(t, got, "queues.emails.rateLimitWindow", "when rateLimitMax > 0")
	requireProblem(t, got, "queues.relative.webhookUrl", "absolute")
	requireProblem(t, got, "queues.nourl.webhookUrl", "required")
	requireProblem(t, got, `queues.bad name!`, "must match")

	// Inherited defaults are blamed once, under defaults, not per queue.
	for _, p := range got {
		require.False(t, strings.HasPrefix(p, "queues.relative.mode"), p)
	}
}

func TestValidationBackoffMax(t *testing.T) {
	t.Parallel()
	got := problems(t, `
queues:
  q:
    webhookUrl: http://h/
    signingSecret: x
    backoff: {base: 2m, max: 1m}
`, nil)
	requireProblem(t, got, "queues.q.backoff.max", "≥ backoff.base 2m0s", "1m0s")

	_, err := load(t, `
queues:
  q:
    webhookUrl: http://h/
    signingSecret: x
    backoff: {type: fixed, base: 20m}
`, nil)
	require.NoError(t, err, "a fixed backoff never reads max")
}

func TestValidationBreaker(t *testing.T) {
	t.Parallel()
	got := problems(t, `
defaults:
  breaker: {failures: -1}
queues:
  q:
    webhookUrl: http://h/
    signingSecret: x
    breaker: {failures: 5, holdFor: 0s}
  r:
    webhookUrl: http://h/
    signingSecret: x
    breaker: {failures: many}
`, nil)
	requireProblem(t, got, "defaults.breaker.failures", "≥ 0", "-1")
	requireProblem(t, got, "queues.q.breaker.holdFor", "> 0 when breaker.failures > 0", "0s")
	requireProblem(t, got, "queues.r.breaker.failures")

	c, err := load(t, `
defaults:
  breaker: {failures: 5}
queues:
  q:
    webhookUrl: http://h/
    signingSecret: x
    breaker: {holdFor: 2m}
`, nil)
	require.NoError(t, err)
	require.Equal(t, Breaker{Failures: 5, HoldFor: 2 * time.Minute}, c.Queues["q"].Breaker, "a queue inherits what it does not set")
	require.Equal(t, 30*time.Second, c.Defaults.Breaker.HoldFor)
}

func TestLoopbackListenNeedsNoKeys(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"127.0.0.1:8080", "127.9.9.9:1", "[::1]:8080", "localhost:8080", "LOCALHOST:80"} {
		_, err := Load("", env(map[string]string{"SIMPLEQ_HTTP_LISTEN": listen}))
		require.NoError(t, err, listen)
	}
	for _, listen := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "10.0.0.1:8080", "example.com:80"} {
		_, err := Load("", env(map[string]string{"SIMPLEQ_HTTP_LISTEN": listen}))
		require.ErrorContains(t, err, "auth.apiKeys: ", listen)
		require.ErrorContains(t, err, "required when http.listen is not a loopback address", listen)
	}
	_, err := Load("", env(map[string]string{
		"SIMPLEQ_HTTP_LISTEN":  ":8080",
		"SIMPLEQ_AUTH_APIKEYS": "k",
	}))
	require.NoError(t, err)
}

func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	got := problems(t, `
redsi: {addr: x}
defaults: {concurency: 3, backoff: {jiter: false}}
queues:
  emails:
    webhookUrl: http://h/
    signingSecret: x
    maxAtempts: 3
    url: http://h/
`, nil)
	requireProblem(t, got, "redsi", "unknown key", `"redis"`)
	requireProblem(t, got, "defaults.concurency", "unknown key", `"concurrency"`)
	requireProblem(t, got, "defaults.backoff.jiter", "unknown key", `"jitter"`)
	requireProblem(t, got, "queues.emails.maxAtempts", "unknown key", `"maxAttempts"`)
	requireProblem(t, got, "queues.emails.url", "unknown key")
}

func TestWrongShapes(t *testing.T) {
	t.Parallel()
	got := problems(t, `
redis: localhost
http: {maxPayloadBytes: lots}
auth: {apiKeys: [1, 2]}
defaults: {backoff: 5s, concurrency: 2.5, mode: 1}
queues: [a, b]
`, nil)
	requireProblem(t, got, "redis", "must be a mapping")
	requireProblem(t, got, "http.maxPayloadBytes", "integer", `"lots"`)
	requireProblem(t, got, "auth.apiKeys", "must be a string")
	requireProblem(t, got, "defaults.backoff", "must be a mapping")
	requireProblem(t, got, "defaults.concurrency", "integer", "2.5")
	requireProblem(t, got, "defaults.mode", "must be a string")
	requireProblem(t, got, "queues", "must be a mapping")
}

func TestFileErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(missing, nil)
	require.ErrorContains(t, err, missing)
	require.ErrorIs(t, err, os.ErrNotExist)

	bad := writeConfig(t, "redis: [unclosed\n")
	_, err = Load(bad, nil)
	require.ErrorContains(t, err, bad)
	require.ErrorContains(t, err, "not valid YAML")

	got := problems(t, "defaults: {concurrency: 0}\n", nil)
	_, err = load(t, "defaults: {concurrency: 0}\n", nil)
	require.ErrorContains(t, err, "simpleq.yaml")
	require.Len(t, got, 1)
}

func TestYAMLMergeKeysKeepQueueNames(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
common: &common
  signingSecret: x
  concurrency: 4
queues:
  Alpha:
    <<: *common
    webhookUrl: http://h/a
`, nil)
	require.Error(t, err, "unknown top-level key common")
	require.Nil(t, c)
	require.ErrorContains(t, err, "common: unknown key")

	c, err = load(t, `
defaults: &d
  concurrency: 4
queues:
  Alpha:
    <<: *d
    webhookUrl: http://h/a
    signingSecret: x
`, nil)
	require.NoError(t, err)
	require.Equal(t, 4, c.Queues["Alpha"].Concurrency)
}
