package dispatch

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/netguard"
	"github.com/simpleq/simpleqd/internal/store"
)

// Every test here stays on loopback. The guard's resolver is a fake (no
// query is sent anywhere), and its dial function records every address it
// is asked for, fails the test on one off loopback, and only then dials.

type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range r[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

type recordingDial struct {
	t     *testing.T
	mu    sync.Mutex
	dials []string
}

func (r *recordingDial) dial(ctx context.Context, network, address string) (net.Conn, error) {
	r.mu.Lock()
	r.dials = append(r.dials, address)
	r.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		r.t.Errorf("the guard asked to dial %q, which is not a loopback ip:port", address)
		return nil, net.ErrClosed
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (r *recordingDial) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.dials...)
}

// guardedDeliverer is a Deliverer whose checked client resolves with res
// and dials through a recorder.
func guardedDeliverer(t *testing.T, res fakeResolver) (*Deliverer, *recordingDial) {
	d := NewDeliverer("t")
	rec := &recordingDial{t: t}
	d.guard.Resolver = res
	d.guard.Dial = rec.dial
	return d, rec
}

// loopbackWebhook counts the connections and requests it gets.
func loopbackWebhook(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	var conns, reqs atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns, &reqs
}

func checkedQueue(url string) config.Queue {
	return config.Queue{Name: "q", WebhookURL: url, SigningSecret: "s", Checked: true,
		QueueSettings: config.QueueSettings{Mode: "standard", MaxAttempts: 3, Timeout: 5 * time.Second}}
}

var job = store.ClaimedJob{ID: "job_1_q", Attempt: 1, Token: "t", Payload: []byte(`{}`)}

// TestCheckedQueueRefusedBeforeDialling: a checked queue pointing at a
// loopback webhook fails, with the reason in lastError, and nothing is
// dialled: the recorder sees no address and the webhook no connection.
// With allowPrivateNetworks the same queue is delivered.
func TestCheckedQueueRefusedBeforeDialling(t *testing.T) {
	t.Parallel()
	srv, conns, reqs := loopbackWebhook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	res := fakeResolver{"hook.test": {"127.0.0.1"}, "rebind.test": {"10.0.0.1"}, "meta.test": {"169.254.169.254"}}

	d, rec := guardedDeliverer(t, res)
	for _, tc := range []struct{ url, want string }{
		{srv.URL + "/hook", "webhook address 127.0.0.1 is a loopback address; see webhooks.allowPrivateNetworks"},
		{"http://hook.test:" + port + "/hook", "webhook host hook.test resolves to 127.0.0.1, which is a loopback address; see webhooks.allowPrivateNetworks"},
		{"http://rebind.test:" + port + "/hook", "resolves to 10.0.0.1, which is a private network address; see webhooks.allowPrivateNetworks"},
		{"http://meta.test/latest/meta-data/", "cloud metadata"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"http://[::ffff:127.0.0.1]:" + port + "/hook", "loopback"},
		{"http://2130706433:" + port + "/hook", "canonical dotted quad"},
	} {
		out := d.Deliver(context.Background(), checkedQueue(tc.url), job)
		require.Equal(t, store.OutcomeFail, out.Kind, tc.url)
		require.Contains(t, out.Error, tc.want, tc.url)
	}
	require.Empty(t, rec.seen(), "a refused connection must not be attempted")
	require.Zero(t, conns.Load())
	require.Zero(t, reqs.Load())

	// allowPrivateNetworks lets the same queues through, by address.
	p, err := netguard.New(nil, true)
	require.NoError(t, err)
	d.SetWebhookPolicy(p)
	for _, u := range []string{srv.URL + "/hook", "http://hook.test:" + port + "/hook"} {
		out := d.Deliver(context.Background(), checkedQueue(u), job)
		require.Equal(t, store.OutcomeOK, out.Kind, out.Error)
	}
	require.Equal(t, int32(2), reqs.Load())
	require.Equal(t, []string{"127.0.0.1:" + port, "127.0.0.1:" + port}, rec.seen())

	// A reload back to the default closes the checked client's idle
	// connections: the next delivery dials afresh and is refused, rather
	// than riding a connection opened under the looser policy.
	d.SetWebhookPolicy(nil)
	out := d.Deliver(context.Background(), checkedQueue(srv.URL+"/hook"), job)
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Contains(t, out.Error, "loopback address")
	require.Equal(t, int32(2), reqs.Load())
}

// TestFileQueueUnchecked: a file queue (Checked false) is trusted, as the
// spec says: it reaches a loopback webhook under the default policy, and
// never through the guard.
func TestFileQueueUnchecked(t *testing.T) {
	t.Parallel()
	srv, _, reqs := loopbackWebhook(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	d, rec := guardedDeliverer(t, nil)
	q := checkedQueue(srv.URL + "/hook")
	q.Checked = false
	out := d.Deliver(context.Background(), q, job)
	require.Equal(t, store.OutcomeOK, out.Kind, out.Error)
	require.Equal(t, int32(1), reqs.Load())
	require.Empty(t, rec.seen())
}

// TestCheckedQueueRedirectNotFollowed: a webhook answering with a redirect
// to a private address is a failed delivery, and the only address ever
// dialled is the webhook's own (the Location is never followed).
func TestCheckedQueueRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	srv, _, reqs := loopbackWebhook(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.1/internal", http.StatusFound)
	})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	d, rec := guardedDeliverer(t, nil)
	p, err := netguard.New(nil, true) // let the loopback webhook itself through
	require.NoError(t, err)
	d.SetWebhookPolicy(p)
	out := d.Deliver(context.Background(), checkedQueue(srv.URL+"/hook"), job)
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Equal(t, "webhook responded 302 (redirects are not followed)", out.Error)
	require.Equal(t, int32(1), reqs.Load())
	require.Equal(t, []string{"127.0.0.1:" + port}, rec.seen())
}
