package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// grownQueue is a Queue with settings added the way a new one would be:
// tagged fields and nothing else. The mechanisms that walk the settings
// must pick them up with no other edit.
type grownQueue struct {
	Queue  `cfg:",inline"`
	Region string `cfg:"region"`
	// Token is a new secret: never in messages, redacted in check's output,
	// named without values in the reload diff.
	Token  string `cfg:"token,secret"`
	Tuning struct {
		Depth int           `cfg:"depth"`
		Pause time.Duration `cfg:"pause"`
	} `cfg:"tuning"`
}

// grownConfig is a Config with a new setting that needs a restart.
type grownConfig struct {
	Config `cfg:",inline"`
	Pool   int `cfg:"pool" reload:"restart"`
}

func renderForTest(t *testing.T, v any) string {
	t.Helper()
	n, err := renderStruct(reflect.ValueOf(v), listPlace{})
	require.NoError(t, err)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	require.NoError(t, enc.Encode(n))
	require.NoError(t, enc.Close())
	return buf.String()
}

// A new tagged field is decoded (with its SIMPLEQ_ variable and "did you
// mean"), shown by check, redacted when tagged secret, and named in the
// reload diff, all from its tags.
func TestNewTaggedSettingAppearsEverywhere(t *testing.T) {
	t.Parallel()
	var g grownQueue
	g.Queue = Queue{Name: "q", WebhookURL: "http://h/", SigningSecret: "whsec_x", QueueSettings: Default().Defaults}
	schema := schemaOf(reflect.ValueOf(&g).Elem())

	// Decoding, the environment and the messages.
	l := &loader{getenv: func(k string) string {
		if k == "SIMPLEQ_QUEUES_Q_TUNING_DEPTH" {
			return "3"
		}
		return ""
	}, keys: map[string][]string{}, fromEnv: map[string]string{}, given: map[string]bool{}}
	raw := map[string]any{"region": "eu", "token": "tok_secret_value", "tuning": map[string]any{"pause": "250ms"}}
	l.applyEnv(EnvPrefix+"_QUEUES_Q", "queues.q", schema, raw)
	l.decodeSection("queues.q", "queues::q", schema, raw)
	require.Empty(t, l.problems)
	require.Equal(t, "eu", g.Region)
	require.Equal(t, "tok_secret_value", g.Token)
	require.Equal(t, 3, g.Tuning.Depth)
	require.Equal(t, 250*time.Millisecond, g.Tuning.Pause)
	require.Contains(t, envNames(EnvPrefix, schema), "SIMPLEQ_TOKEN")

	bad := g
	l = &loader{getenv: func(string) string { return "" }, keys: map[string][]string{}, fromEnv: map[string]string{}, given: map[string]bool{}}
	l.decodeSection("queues.q", "queues::q", schemaOf(reflect.ValueOf(&bad).Elem()),
		map[string]any{"regoin": "eu", "token": 918273645})
	require.Contains(t, l.problems, `queues.q.regoin: unknown key (did you mean "region"?)`)
	require.Contains(t, l.problems, "queues.q.token: must be a string; quote it")
	require.NotContains(t, strings.Join(l.problems, "\n"), "918273645")

	// check's output: shown, the secret redacted.
	out := renderForTest(t, g)
	require.Contains(t, out, "region: eu\n")
	require.Contains(t, out, "token: '[redacted]'\n")
	require.Contains(t, out, "tuning:\n  depth: 3\n  pause: 250ms\n")
	require.NotContains(t, out, "tok_secret_value")
	require.NotContains(t, out, "whsec_x")

	// The reload diff: values shown, the secret named only.
	next := g
	next.Region, next.Token, next.Tuning.Depth = "us", "tok_other", 4
	changed := ChangedSettings(g, next)
	require.Equal(t, []string{"region eu→us", "token", "tuning.depth 3→4"}, changed)
	require.NotContains(t, strings.Join(changed, " "), "tok_")
	require.Empty(t, ChangedSettings(g, g))
	require.True(t, SameSettings(g, g))
	require.False(t, SameSettings(g, next))
}

// A new setting tagged reload:"restart" is named by RestartChanges and
// kept by KeepRunning with no other edit: the reload warning and the
// daemon agree on it.
func TestNewRestartSettingIsKept(t *testing.T) {
	t.Parallel()
	old := grownConfig{Config: *Default(), Pool: 4}
	next := grownConfig{Config: *Default(), Pool: 8}
	next.Defaults.Concurrency = 3
	require.Equal(t, []string{"pool"}, restartChanges(reflect.ValueOf(old), reflect.ValueOf(next)))
	require.Equal(t, []string{"pool"}, keepRunning(reflect.ValueOf(old), reflect.ValueOf(&next).Elem()))
	require.Equal(t, 4, next.Pool)
	require.Equal(t, 3, next.Defaults.Concurrency, "a live setting stays as reloaded")
}

// The queue diff follows the tags: a secret read from a variable is named
// as the secret, never with its value; the breaker's settings, which the
// hand-written list once left out, are named too.
func TestChangedSettingsOfAQueue(t *testing.T) {
	t.Parallel()
	a := Queue{Name: "q", WebhookURL: "https://u:pw@h/", SigningSecret: "s1", QueueSettings: Default().Defaults}
	b := a
	b.WebhookURL = "https://u:pw2@h/"
	b.SigningSecretEnv, b.SigningSecret = "Q_SECRET", "s2"
	b.Breaker.Failures = 5
	changed := ChangedSettings(a, b)
	require.Equal(t, []string{"webhookUrl", "signingSecret", "breaker.failures 0→5"}, changed)
	require.NotContains(t, strings.Join(changed, " "), "pw")
}

// auth compares apiKeys as a set and every auth.keys entry field by field.
func TestSameSettingsOfAuth(t *testing.T) {
	t.Parallel()
	a := Auth{APIKeys: []string{"k1", "k2"}, Keys: []Key{{Key: "sk", Role: RoleAdmin, Queues: []string{"a"}}}}
	b := Auth{APIKeys: []string{"k2", "k1", "k1"}, Keys: []Key{{Key: "sk", Role: RoleAdmin, Queues: []string{"a"}}}}
	require.True(t, SameSettings(a, b), "order and repeats of apiKeys mean nothing")
	b.Keys[0].Role = RolePublisher
	require.False(t, SameSettings(a, b))
}
