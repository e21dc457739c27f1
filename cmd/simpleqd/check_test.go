package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// check prints the effective configuration (defaults filled in, env
// overrides applied) and hides every secret: API keys, the Redis password,
// signing secrets, and a password inside a webhook URL.
func TestCheckPrintsEffectiveConfigRedacted(t *testing.T) {
	t.Setenv("CHECK_TEST_SECRET", "whsec_from_env_value")
	t.Setenv("SIMPLEQ_DEFAULTS_MAXATTEMPTS", "7")
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, writeFile(path, `redis:
  addr: 127.0.0.1:6379
  password: redis-pass-value
auth:
  apiKeys: [sk_live_value]
queues:
  emails:
    webhookUrl: https://user:url-pass-value@hooks.example.com/emails
    signingSecret: whsec_inline_value
    concurrency: 3
  sms:
    webhookUrl: http://127.0.0.1:9000/sms
    signingSecretEnv: CHECK_TEST_SECRET
`))
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "--config", path}, &out, &errb), errb.String())
	got := out.String()
	for _, secret := range []string{"redis-pass-value", "sk_live_value", "url-pass-value", "whsec_inline_value", "whsec_from_env_value"} {
		require.NotContains(t, got, secret)
	}
	for _, want := range []string{
		"password: '[redacted]'",
		"- '[redacted]'",
		"signingSecretEnv: CHECK_TEST_SECRET",
		"concurrency: 3",
		"maxAttempts: 7", // the environment override is part of the effective config
		"rateLimitWindow: 1s",
	} {
		require.Contains(t, got, want)
	}
}

// check warns of variables that look like settings but are not read, and
// still passes: the configuration itself is valid.
func TestCheckWarnsOfStrayVariables(t *testing.T) {
	t.Setenv("SIMPLEQ_REDIS_ADRR", "127.0.0.1:6380")
	t.Setenv("SIMPLEQD_DEFAULTS_MAXATTEMPTS", "3")
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"check"}, &out, &errb))
	require.Contains(t, errb.String(), "warning: SIMPLEQ_REDIS_ADRR is set but not read: no setting has this name (did you mean SIMPLEQ_REDIS_ADDR?)")
	require.Contains(t, errb.String(), "warning: SIMPLEQD_DEFAULTS_MAXATTEMPTS is set but not read: settings' variables start with SIMPLEQ_ (did you mean SIMPLEQ_DEFAULTS_MAXATTEMPTS?)")
	require.Contains(t, out.String(), "maxAttempts: 5", "neither variable changed the configuration")
}

func TestCheckNamesEveryBadKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, writeFile(path, "defaults:\n  concurency: 3\nqueues:\n  emails:\n    webhookUrl: ftp://x\n    signingSecret: s\n"))
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"check", "--config", path}, &out, &errb))
	require.Empty(t, out.String())
	msg := errb.String()
	require.Contains(t, msg, "invalid configuration ("+path+")")
	require.Contains(t, msg, `defaults.concurency: unknown key (did you mean "concurrency"?)`)
	require.Contains(t, msg, "queues.emails.webhookUrl")

	errb.Reset()
	require.Equal(t, 1, run([]string{"check", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, &out, &errb))
	require.Contains(t, errb.String(), "missing.yaml")
}

func TestOperatorCommandsAndDemoAreRouted(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"queues", "--url", "http://127.0.0.1:1"}, &out, &errb))
	require.Contains(t, errb.String(), "simpleqd queues: cannot reach simpleqd at http://127.0.0.1:1")

	errb.Reset()
	require.Equal(t, 2, run([]string{"publish"}, &out, &errb))
	require.Contains(t, errb.String(), "usage: simpleqd publish QUEUE")

	errb.Reset()
	require.Equal(t, 2, run([]string{"demo", "--bogus"}, &out, &errb))

	out.Reset()
	require.Equal(t, 0, run([]string{"help"}, &out, &errb))
	for _, c := range []string{"serve", "check", "demo", "publish", "replay", "SIMPLEQ_API_KEY"} {
		require.True(t, strings.Contains(out.String(), c), c)
	}
}
