package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeysLoad: auth.keys from the file and from the environment, with
// their roles and globs, beside auth.apiKeys.
func TestKeysLoad(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
http: {listen: "0.0.0.0:8080"}
auth:
  apiKeys: [full-key]
  keys:
    - key: sk_pub_a
      role: publisher
      queues: ["tenant-a-*", "shared"]
    - keyEnv: ADMIN_B_KEY
      Role: admin
      queues: ["tenant-b-[0-9]*"]
`, map[string]string{"ADMIN_B_KEY": "sk_admin_b"})
	require.NoError(t, err)
	require.Equal(t, []string{"full-key"}, c.Auth.APIKeys)
	require.Equal(t, []Key{
		{Key: "sk_pub_a", Role: RolePublisher, Queues: []string{"tenant-a-*", "shared"}},
		{Key: "sk_admin_b", KeyEnv: "ADMIN_B_KEY", Role: RoleAdmin, Queues: []string{"tenant-b-[0-9]*"}},
	}, c.Auth.Keys)
	pub, admin := c.Auth.Keys[0], c.Auth.Keys[1]
	require.True(t, pub.Reaches("tenant-a-1"))
	require.True(t, pub.Reaches("shared"))
	require.False(t, pub.Reaches("tenant-b-1"))
	require.False(t, pub.Reaches("shared2"))
	require.True(t, admin.Reaches("tenant-b-7x"))
	require.False(t, admin.Reaches("tenant-b-x"))
	// Keys alone satisfy the rule that a non-loopback listener needs keys.
	_, err = load(t, "http: {listen: \"0.0.0.0:8080\"}\nauth:\n  keys: [{key: k, role: admin, queues: ['*']}]\n", nil)
	require.NoError(t, err)
}

// TestKeysProblems: every mistake is named by its path, and no message
// shows a key.
func TestKeysProblems(t *testing.T) {
	t.Parallel()
	got := problems(t, `
auth:
  apiKeys: [sk_dup_full]
  keys:
    - {key: sk_secret_1, role: publisher, queues: ["a-*", "b[", "x/y", ""]}
    - {key: sk_secret_2, keyEnv: K2, role: admin, queues: ["*"]}
    - {keyEnv: UNSET_VAR, role: admin, queues: ["*"]}
    - {key: "", role: admin, queues: ["*"]}
    - {key: sk_secret_5, queues: ["*"]}
    - {key: sk_secret_6, role: owner, queues: ["*"]}
    - {key: sk_secret_7, role: admin}
    - {key: sk_secret_1, role: admin, queues: ["*"]}
    - {key: sk_dup_full, role: admin, queues: ["*"]}
    - {key: 12345, role: admin, queues: ["*"], qeues: ["*"]}
    - {role: admin, queues: ["*"]}
    - just-a-string
`, map[string]string{"K2": "sk_env_2"})
	requireProblem(t, got, "auth.keys[0].queues[1]", `"b[" is not a valid glob`)
	requireProblem(t, got, "auth.keys[0].queues[2]", "can never match a queue name")
	requireProblem(t, got, "auth.keys[0].queues[3]", "must not be empty")
	requireProblem(t, got, "auth.keys[1].keyEnv", "cannot be combined with key")
	requireProblem(t, got, "auth.keys[2].keyEnv", "environment variable UNSET_VAR is unset or empty")
	requireProblem(t, got, "auth.keys[3].key", "must not be empty")
	requireProblem(t, got, "auth.keys[4].role", "required")
	requireProblem(t, got, "auth.keys[5].role", `must be "publisher" or "admin" (got "owner")`)
	requireProblem(t, got, "auth.keys[6].queues", "must list at least one")
	requireProblem(t, got, "auth.keys[7]", "the same key as auth.keys[0]")
	requireProblem(t, got, "auth.keys[8]", "the same key as auth.apiKeys[0]")
	requireProblem(t, got, "auth.keys[9].key", "must be a string; quote it")
	requireProblem(t, got, "auth.keys[9].qeues", `did you mean "queues"`)
	requireProblem(t, got, "auth.keys[10].key", "required (or keyEnv")
	requireProblem(t, got, "auth.keys[11]", "must be a mapping")
	all := strings.Join(got, "\n")
	for _, secret := range []string{"sk_secret", "sk_env_2", "sk_dup_full", "12345"} {
		require.NotContains(t, all, secret)
	}
	require.Contains(t, problems(t, "auth: {keys: {key: a}}", nil)[0], "auth.keys: must be a list")
}

// TestKeysRedacted: check's output shows roles, globs and variable names
// but never a key, and loads again.
func TestKeysRedacted(t *testing.T) {
	t.Parallel()
	c, err := load(t, `
auth:
  keys:
    - {key: sk_visible_not, role: publisher, queues: ["tenant-a-*"]}
    - {key: sk_visible_not2, role: admin, queues: ["*"]}
    - {keyEnv: KEY_VAR, role: admin, queues: ["b"]}
`, map[string]string{"KEY_VAR": "sk_from_env"})
	require.NoError(t, err)
	out := c.Redacted()
	require.NotContains(t, out, "sk_")
	require.Contains(t, out, "[redacted 1 of 3]")
	require.Contains(t, out, "keyEnv: KEY_VAR")
	require.Contains(t, out, "role: publisher")
	again, err := load(t, out, map[string]string{"KEY_VAR": "sk_from_env"})
	require.NoError(t, err, out)
	require.Len(t, again.Auth.Keys, 3)
	require.Equal(t, c.Auth.Keys[0].Queues, again.Auth.Keys[0].Queues)
	require.Equal(t, "sk_from_env", again.Auth.Keys[2].Key)
}

// TestKeyEnvIsNotStray: a variable named by keyEnv is read, so StrayEnv
// does not warn about it even when it starts with SIMPLEQ_.
func TestKeyEnvIsNotStray(t *testing.T) {
	t.Parallel()
	c, err := load(t, "auth:\n  keys: [{keyEnv: SIMPLEQ_TENANT_A_KEY, role: admin, queues: ['a']}]\n",
		map[string]string{"SIMPLEQ_TENANT_A_KEY": "k"})
	require.NoError(t, err)
	require.Empty(t, StrayEnv(c, []string{"SIMPLEQ_TENANT_A_KEY=k"}))
}
