package reload

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
)

// The reload warning (Diff's NeedRestart) and the daemon's apply
// (daemon.Reload goes through config.KeepRunning) agree on what needs a
// restart, because both read config's reload:"restart" tags: for each
// setting changed alone, Diff names it exactly when KeepRunning keeps its
// running value, and a live setting is neither named nor kept.
func TestRestartWarningAgreesWithApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(queueFile(1, "")), 0o600))
	cases := []struct {
		env, value string
		restart    string // the key named, "" for a live setting
	}{
		{"SIMPLEQ_REDIS_ADDR", "10.0.0.1:6379", "redis"},
		{"SIMPLEQ_REDIS_PREFIX", "other", "redis"},
		{"SIMPLEQ_HTTP_LISTEN", "127.0.0.2:9000", "http.listen"},
		{"SIMPLEQ_HTTP_MAXPAYLOADBYTES", "2048", "http.maxPayloadBytes"},
		{"SIMPLEQ_HTTP_MAXCONCURRENTREQUESTS", "7", "http.maxConcurrentRequests"},
		{"SIMPLEQ_SHUTDOWNGRACE", "3s", "shutdownGrace"},
		{"SIMPLEQ_LOG_FORMAT", "console", "log.format"},
		{"SIMPLEQ_DISPATCH_LINGER", "1ms", "dispatch.linger"},
		{"SIMPLEQ_DISPATCH_SCHEDULELEASE", "5s", "dispatch.scheduleLease"},
		{"SIMPLEQ_TRACING_SAMPLERATIO", "0.5", "tracing"},
		{"SIMPLEQ_LAMEDUCK", "1s", ""},
		{"SIMPLEQ_DEFAULTS_CONCURRENCY", "3", ""},
		{"SIMPLEQ_QUEUES_EMAILS_TIMEOUT", "3s", ""},
		{"SIMPLEQ_WEBHOOKS_ALLOWPRIVATENETWORKS", "true", ""},
		{"SIMPLEQ_AUTH_APIKEYS", "k1", ""},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			old, err := config.Load(path, nil)
			require.NoError(t, err)
			next, err := config.Load(path, func(k string) string {
				if k == c.env {
					return c.value
				}
				return ""
			})
			require.NoError(t, err)
			require.False(t, reflect.DeepEqual(old, next), "the variable changed something")

			warned := Diff(old, next).NeedRestart
			kept := config.KeepRunning(old, next)
			require.Equal(t, warned, kept, "the warning names what the apply keeps")
			if c.restart == "" {
				require.Empty(t, kept)
				require.False(t, reflect.DeepEqual(old, next), "a live setting stays as reloaded")
				return
			}
			require.Equal(t, []string{c.restart}, kept)
			require.Empty(t, Diff(old, next).NeedRestart, "after the apply the running value is back")
		})
	}
}

// The queue diff is read from config.Queue's tags, so every setting is in
// it: the breaker's, which the hand-written list left out, too.
func TestDiffNamesEverySetting(t *testing.T) {
	old, err := loadString(t, queueFile(1, ""))
	require.NoError(t, err)
	next, err := loadString(t, queueFile(1, "    breaker: {failures: 3, holdFor: 1m}\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"emails: breaker.failures 0→3, breaker.holdFor 30s→1m0s"}, Diff(old, next).ChangedLines())
}
