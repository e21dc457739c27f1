package test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeysWithAReach (runtime.md §3, issue 25 item 3) against one daemon
// binary: a publisher key read from the environment (keyEnv) publishes to
// its tenant's queue but gets 403 {"error":"forbidden"} on another
// tenant's queue — existing or not, the same answer — and on pause; GET
// /v1/queues lists only its queues; the full apiKey still does everything.
// Then a reload (the file rewritten, SIGHUP) widens the key's reach, and
// the next request sees it without a restart.
func TestKeysWithAReach(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	const full, pub = "sk_e2e_full", "sk_e2e_publisher_a"
	authYAML := func(globs string) string {
		return "auth:\n  apiKeys: [" + full + "]\n  keys:\n    - keyEnv: TENANT_A_KEY\n      role: publisher\n      queues: [" + globs + "]\n"
	}
	queues := "queues:\n" +
		"  tenant-a-1:\n    webhookUrl: " + hook.URL + "\n    signingSecret: whsec_test\n" +
		"  tenant-b-1:\n    webhookUrl: " + hook.URL + "\n    signingSecret: whsec_test\n"
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: authYAML(`"tenant-a-*"`) + queues,
		Env: []string{"TENANT_A_KEY=" + pub}})
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	job := map[string]any{"payload": map[string]any{"n": 1}}

	r := d.Do("POST", "/v1/queues/tenant-a-1/jobs", job, as(pub)...)
	require.Equal(t, 201, r.Status, string(r.Body))
	id := r.JSON(t)["id"].(string)
	r = d.Do("GET", "/v1/jobs/"+id, nil, as(pub)...)
	require.Equal(t, 200, r.Status, string(r.Body))

	forbidden := func(r Response) {
		t.Helper()
		require.Equal(t, 403, r.Status, string(r.Body))
		require.JSONEq(t, `{"error":"forbidden"}`, string(r.Body))
	}
	forbidden(d.Do("POST", "/v1/queues/tenant-b-1/jobs", job, as(pub)...))
	forbidden(d.Do("POST", "/v1/queues/tenant-b-nope/jobs", job, as(pub)...))
	require.Equal(t, d.Do("GET", "/v1/queues/tenant-b-1", nil, as(pub)...).Body,
		d.Do("GET", "/v1/queues/tenant-b-nope", nil, as(pub)...).Body)
	forbidden(d.Do("POST", "/v1/queues/tenant-a-1/pause", map[string]any{}, as(pub)...))
	// Lanes (keys.md §5): a publisher reads its queues' lanes, changes none.
	r = d.Do("GET", "/v1/queues/tenant-a-1/keys?state=held", nil, as(pub)...)
	require.Equal(t, 200, r.Status, string(r.Body))
	forbidden(d.Do("GET", "/v1/queues/tenant-b-1/keys", nil, as(pub)...))
	forbidden(d.Do("PUT", "/v1/queues/tenant-a-1/keys/t1", map[string]any{"weight": 2}, as(pub)...))
	forbidden(d.Do("POST", "/v1/queues/tenant-a-1/keys/t1/resume", map[string]any{}, as(pub)...))
	forbidden(d.Do("POST", "/v1/queues/tenant-b-1/pause", map[string]any{}, as(pub)...))

	listed := func(key string) []string {
		t.Helper()
		r := d.Do("GET", "/v1/queues", nil, as(key)...)
		require.Equal(t, 200, r.Status, string(r.Body))
		var names []string
		for _, q := range r.JSON(t)["queues"].([]any) {
			names = append(names, q.(map[string]any)["name"].(string))
		}
		return names
	}
	require.Equal(t, []string{"tenant-a-1"}, listed(pub))
	require.Equal(t, []string{"tenant-a-1", "tenant-b-1"}, listed(full))
	r = d.Do("POST", "/v1/queues/tenant-b-1/pause", map[string]any{}, as(full)...)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, 401, d.Do("GET", "/v1/queues", nil, as("sk_wrong")...).Status)

	// Reload: the same key now reaches tenant-b-* as well.
	b, err := os.ReadFile(d.Config)
	require.NoError(t, err)
	widened := strings.Replace(string(b), `queues: ["tenant-a-*"]`, `queues: ["tenant-a-*", "tenant-b-*"]`, 1)
	require.NotEqual(t, string(b), widened)
	require.NoError(t, os.WriteFile(d.Config, []byte(widened), 0o600))
	d.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool {
		return d.Do("POST", "/v1/queues/tenant-b-1/jobs", job, as(pub)...).Status == 201
	}, 10*time.Second, 20*time.Millisecond, "the widened reach never took effect")
	require.Equal(t, []string{"tenant-a-1", "tenant-b-1"}, listed(pub))
	forbidden(d.Do("POST", "/v1/queues/tenant-b-1/resume", map[string]any{}, as(pub)...))
	require.False(t, d.Exited())
}
