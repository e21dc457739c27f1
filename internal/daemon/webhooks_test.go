package daemon

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
)

// TestCheckedQueueHeldToWebhooksPolicy: the daemon hands webhooks to its
// deliverer, at start and on reload. A checked queue (as the queue API will
// create) pointing at a loopback webhook dies with the reason in lastError
// and the webhook never sees a connection; after a reload with
// allowPrivateNetworks the same queue is delivered. Loopback only.
func TestCheckedQueueHeldToWebhooksPolicy(t *testing.T) {
	t.Parallel()
	var conns, hits atomic.Int32
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	hook.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	hook.Start()
	defer hook.Close()
	check := func(c *config.Config) {
		q := c.Queues["emails"]
		q.Checked = true
		c.Queues["emails"] = q
	}
	d, base := launch(t, hook.URL, 1, check)

	jobStatus := func(id string) (status string, lastError *string) {
		code, body := call(t, http.MethodGet, base+"/v1/jobs/"+id, "")
		require.Equal(t, http.StatusOK, code, body)
		var j struct {
			Status    string  `json:"status"`
			LastError *string `json:"lastError"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &j))
		return j.Status, j.LastError
	}
	publish := func() string {
		code, body := call(t, http.MethodPost, base+"/v1/queues/emails/jobs", `{"payload":{"n":1}}`)
		require.Equal(t, http.StatusCreated, code, body)
		var j struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(body), &j))
		return j.ID
	}

	id := publish()
	var lastError *string
	require.Eventually(t, func() bool {
		var st string
		st, lastError = jobStatus(id)
		return st == "dead"
	}, 10*time.Second, 20*time.Millisecond)
	require.NotNil(t, lastError)
	require.Contains(t, *lastError, "webhook address 127.0.0.1 is a loopback address; see webhooks.allowPrivateNetworks")
	require.Zero(t, conns.Load(), "a refused webhook must never see a connection")
	require.Zero(t, hits.Load())

	cfg := *d.cfg.Load()
	cfg.Queues = map[string]config.Queue{"emails": cfg.Queues["emails"]}
	cfg.Webhooks.AllowPrivateNetworks = true
	d.Reload(&cfg)
	id = publish()
	require.Eventually(t, func() bool {
		st, _ := jobStatus(id)
		return st == "completed"
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, int32(1), hits.Load())
}
