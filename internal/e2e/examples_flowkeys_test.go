package test

// End-to-end test of the flow keys worker examples (examples/go-flowkeys,
// examples/python/flowkeys_worker.py): a real daemon on a real
// redis-server delivers two tenants' jobs, each with its tenant as flowKey,
// to the example, which calls a fake provider with that tenant's own API
// key. The provider rate-limits tenant acme's key for its first three calls
// (429, Retry-After 0.2) and never globex's. The example relays acme's 429s,
// so acme's lane is held (scope key) while globex keeps being served and
// the queue stays open; every job completes with one attempt.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

var exFlowKeysExamples = []exExample{
	{name: "go-flowkeys", mode: "standard", path: "examples/go-flowkeys"},
	{name: "python-flowkeys", mode: "standard", interp: "python3", path: "examples/python/flowkeys_worker.py"},
}

// exTenantCall is one call the tenant-aware provider answered.
type exTenantCall struct {
	tenant string
	at     time.Time
	status int
}

func TestExamplesFlowKeys(t *testing.T) {
	t.Parallel()
	for _, ex := range exFlowKeysExamples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			exRunFlowKeys(t, ex)
		})
	}
}

func exRunFlowKeys(t *testing.T, ex exExample) {
	rs := Redis(t)
	var mu sync.Mutex
	var calls []exTenantCall
	var wrongKey []string
	limited := 0
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Tenant string `json:"tenant"`
		}
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk_"+p.Tenant {
			wrongKey = append(wrongKey, fmt.Sprintf("%s with %q", p.Tenant, r.Header.Get("Authorization")))
		}
		c := exTenantCall{tenant: p.Tenant, at: time.Now(), status: 200}
		if p.Tenant == "acme" && limited < 3 {
			limited++
			c.status = 429
			w.Header().Set("Retry-After", "0.2")
		}
		calls = append(calls, c)
		mu.Unlock()
		<-time.After(20 * time.Millisecond) // the provider's work
		mu.Lock()
		w.WriteHeader(c.status)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(provider.Close)
	port := redistest.FreePort(t)
	yaml := fmt.Sprintf(`queues:
  tenants:
    webhookUrl: http://127.0.0.1:%d/webhook
    signingSecret: %s
    concurrency: 4
    maxAttempts: 1
    flowKeys: {holdScope: key}
`, port, exSecret)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info"})
	exStart(t, ex, []string{
		"SIGNING_SECRET=" + exSecret,
		"LISTEN=127.0.0.1:" + strconv.Itoa(port),
		"PROVIDER_URL=" + provider.URL + "/v1/messages",
		"TENANT_KEYS=acme=sk_acme,globex=sk_globex",
	}, port)

	var ids []string
	for _, tenant := range []string{"acme", "globex"} {
		items := make([]map[string]any, 10)
		for i := range items {
			items[i] = map[string]any{"flowKey": tenant, "payload": map[string]any{"tenant": tenant, "i": i}}
		}
		r := d.Do("POST", "/v1/queues/tenants/jobs/batch", map[string]any{"jobs": items})
		require.Equal(t, 200, r.Status, string(r.Body))
		var out struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &out))
		for _, j := range out.Jobs {
			ids = append(ids, j.ID)
		}
	}
	fkWaitCompleted(t, d, ids, 30*time.Second)

	deferred := 0
	var probeDone time.Time
	for _, id := range ids {
		job := d.Job(id)
		require.EqualValues(t, 1, job["attempts"], "a tenant's 429 never spends an attempt")
		var deferredAt time.Time
		for _, h := range fkHistory(t, job) {
			ts, err := time.Parse(time.RFC3339Nano, h["timestamp"].(string))
			require.NoError(t, err)
			switch {
			case h["status"] == "deferred":
				deferred++
				deferredAt = ts
				require.Equal(t, "acme", job["flowKey"], "only acme was limited")
				require.Equal(t, "key", h["scope"], "a keyed 429 holds the tenant's lane, not the queue")
				require.InDelta(t, 0.2, h["retryAfter"], 0.0015, "the provider's wait is relayed exactly")
			case h["status"] == "success" && h["probe"] == true:
				// acme's probe: out only after the relayed wait, from the
				// latest 429 (this job's own or a later one).
				require.Equal(t, "acme", job["flowKey"])
				require.False(t, deferredAt.IsZero(), "the probe is a job that was deferred first: %v", job["history"])
				require.GreaterOrEqual(t, ts.Sub(deferredAt), 200*time.Millisecond, "acme held for the relayed Retry-After")
				probeDone = ts
			}
		}
	}
	require.Equal(t, 3, deferred, "one deferred entry per acme 429")
	require.False(t, probeDone.IsZero(), "acme reopened through one probe")

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, wrongKey, "each job calls the provider with its tenant's key")
	require.Len(t, calls, 23, "20 jobs, three of acme's calls twice")
	var first429 time.Time
	for _, c := range calls {
		if c.tenant == "acme" && c.status == 429 {
			first429 = c.at
			break
		}
	}
	globexDuring := 0
	for _, c := range calls {
		if c.tenant == "globex" && c.at.After(first429) && c.at.Before(probeDone) {
			globexDuring++
		}
	}
	require.Positive(t, globexDuring, "globex kept being served while acme was held")
	q := d.Queue("tenants")
	require.Equal(t, "open", q["hold"].(map[string]any)["state"])
	fkDrained(t, d, "tenants")
}
