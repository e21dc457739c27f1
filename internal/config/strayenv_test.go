package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStrayEnv(t *testing.T) {
	vars := map[string]string{
		"SIMPLEQ_REDIS_ADDR":                "127.0.0.1:6379",
		"SIMPLEQ_QUEUES_EMAILS_CONCURRENCY": "5",
		"EMAILS_SECRET":                     "s",
	}
	c, err := load(t, `
queues:
  emails:
    webhookUrl: http://127.0.0.1:9000/hook
    signingSecretEnv: EMAILS_SECRET
  v1.orders:
    webhookUrl: http://127.0.0.1:9000/hook
    signingSecret: s
`, vars)
	require.NoError(t, err)

	environ := []string{
		"PATH=/usr/bin",
		"SIMPLEQ_REDIS_ADDR=127.0.0.1:6379",         // read
		"SIMPLEQ_QUEUES_EMAILS_CONCURRENCY=5",       // read
		"SIMPLEQ_QUEUES_V1_ORDERS_MAXATTEMPTS=",     // empty: unset for Load too
		"EMAILS_SECRET=s",                           // a signingSecretEnv, any name
		"SIMPLEQ_URL=http://x", "SIMPLEQ_API_KEY=k", // known: read by the CLI
		"SIMPLEQ_REDIS_ADRR=127.0.0.1:6380",                 // a typo
		"SIMPLEQ_QUEUES_EMAIL_CONCURRENCY=5",                // a queue name's typo
		"SIMPLEQ_QUEUES_SMS_CONCURRENCY=5",                  // a queue the file lacks
		"SIMPLEQ_QUEUES_EMAILS_SIGNINGSECRETENV=SMS_SECRET", // a setting's variable too
		"SIMPLEQD_DISPATCH_LINGER=0s",                       // the binary's prefix
		"SIMPLEQD_PPROF_LISTEN=127.0.0.1:6060",              // known: the daemon's own
		"SIMPLEQD_SOMETHING_ELSE=1",                         // not a setting: another tool's
		"SIMPLEQ_NOTHING=x",                                 // nothing near it
		"MALFORMED",
	}
	got := StrayEnv(c, environ, "SIMPLEQ_URL", "SIMPLEQ_API_KEY", "SIMPLEQD_PPROF_LISTEN")
	require.Equal(t, []StrayVariable{
		{Name: "SIMPLEQD_DISPATCH_LINGER", Why: "settings' variables start with SIMPLEQ_ (did you mean SIMPLEQ_DISPATCH_LINGER?)"},
		{Name: "SIMPLEQ_NOTHING", Why: "no setting has this name"},
		{Name: "SIMPLEQ_QUEUES_EMAIL_CONCURRENCY", Why: "no setting has this name (did you mean SIMPLEQ_QUEUES_EMAILS_CONCURRENCY?)"},
		{Name: "SIMPLEQ_QUEUES_SMS_CONCURRENCY", Why: "no setting has this name (queue variables apply only to queues the file configures)"},
		{Name: "SIMPLEQ_REDIS_ADRR", Why: "no setting has this name (did you mean SIMPLEQ_REDIS_ADDR?)"},
	}, got)

	require.Empty(t, StrayEnv(Default(), []string{"SIMPLEQ_HTTP_LISTEN=:1", "SIMPLEQ_DEFAULTS_BACKOFF_BASE=1s", "HOME=/root"}),
		"every setting's variable, nested ones included, is read")
}
