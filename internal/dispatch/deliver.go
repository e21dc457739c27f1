package dispatch

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/hold"
	"github.com/simpleq/simpleqd/internal/netguard"
	"github.com/simpleq/simpleqd/internal/store"
)

// errorBodyLimit bounds how much of a webhook's answer is read into lastError;
// drainLimit bounds how much more is read to keep the connection reusable.
const (
	errorBodyLimit = 512
	drainLimit     = 64 << 10
)

// Deliverer POSTs one job to its queue's webhook and classifies the answer.
//
// It uses fasthttp's client rather than net/http's: on the loopback
// benchmark (bench/) a delivery cost the daemon about 40 µs of CPU through
// net/http, whose transport runs two goroutines per connection and a header
// map per request, and about 17 µs through fasthttp. The delivery policy is
// the same either way: redirects are never followed (a 3xx is a failure:
// following could send a signed payload elsewhere), environment proxies
// are never used (a proxy would see every payload and signature), only a
// bounded part of a response body is read, and connections are pooled per
// webhook host.
type Deliverer struct {
	client    *fasthttp.Client
	userAgent string

	// checked delivers for checked (API) queues, every connection made by
	// guard under the webhooks policy (netguard.go).
	checked *fasthttp.Client
	guard   *netguard.Dialer

	// conns are the open webhook connections, so that a shutdown past its
	// grace period can cut deliveries in flight (fasthttp takes no context).
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool // after a shutdown cut, nothing new is dialled
	abort sync.Once

	// aborts are the deliveries under way, by lease token, so that a job
	// cancelled in flight can have its request aborted (abort.go).
	aborts *abortRegistry

	// macs keeps keyed HMAC states per signing secret (a *sync.Pool of
	// hash.Hash each): keying an HMAC hashes two blocks and allocates, a
	// cost every delivery would otherwise pay. stdMacs does the same for
	// webhook-signature, whose key is StandardKey(secret), so decoding a
	// whsec_ secret is paid once too.
	macs    sync.Map
	stdMacs sync.Map

	// hdrBufs holds scratch buffers for the signature header values
	// (fasthttp copies them), so they cost no allocation.
	hdrBufs sync.Pool

	// tracer, when set (WithTracer), makes each delivery a client span;
	// nil is tracing off, which costs a delivery a nil check (trace.go).
	tracer     trace.Tracer
	traceAttrs traceCache
}

// pooledMAC returns a reset HMAC-SHA256 keyed with key(secret), taken from
// the pool pools keeps for secret, and the pool to put it back in.
func pooledMAC(pools *sync.Map, secret string, key func(string) []byte) (hash.Hash, *sync.Pool) {
	pool, ok := pools.Load(secret)
	if !ok {
		pool, _ = pools.LoadOrStore(secret, &sync.Pool{New: func() any { return hmac.New(sha256.New, key(secret)) }})
	}
	p := pool.(*sync.Pool)
	m := p.Get().(hash.Hash)
	m.Reset()
	return m, p
}

func rawKey(secret string) []byte { return []byte(secret) }

// The signature headers' names in fasthttp's canonical form, so setting them
// skips normalizing the name on every delivery (a sixth of signing's cost).
var (
	hdrSimpleQSignature  = []byte("X-Simpleq-Signature")
	hdrStandardID        = []byte(StandardIDHeader)
	hdrStandardTimestamp = []byte(StandardTimestampHeader)
	hdrStandardSignature = []byte(StandardSignatureHeader)
)

// hdrScratch is a pooled buffer for the signature header values and the
// MAC being encoded.
type hdrScratch struct {
	buf []byte
	sum [sha256.Size]byte
}

// setSignatures signs a delivery: x-simpleq-signature with the first
// (current) secret alone, exactly as SimpleQ does, so SimpleQ's one-secret
// helpers keep verifying; then webhook-id, webhook-timestamp (now, Unix
// seconds: the attempt's time, which is what lets a receiver refuse a
// replay) and webhook-signature with every active secret. It is Sign and
// SignStandard on pooled, pre-keyed HMAC states and a pooled buffer.
// secrets must not be empty.
func (d *Deliverer) setSignatures(h *fasthttp.RequestHeader, secrets []string, j store.ClaimedJob, body []byte) {
	sc, _ := d.hdrBufs.Get().(*hdrScratch)
	if sc == nil {
		sc = new(hdrScratch)
	}
	m, p := pooledMAC(&d.macs, secrets[0], rawKey)
	b := appendSign(sc.buf[:0], m, &sc.sum, body)
	p.Put(m)
	h.SetCanonical(hdrSimpleQSignature, b)

	b = appendStandardID(b[:0], j.ID, j.Attempt)
	idEnd := len(b)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	tsEnd := len(b)
	for i, s := range secrets {
		if i > 0 {
			b = append(b, ' ')
		}
		m, p := pooledMAC(&d.stdMacs, s, StandardKey)
		b = appendStandardSig(b, m, &sc.sum, b[:idEnd], b[idEnd:tsEnd], body)
		p.Put(m)
	}
	h.SetCanonical(hdrStandardID, b[:idEnd])
	h.SetCanonical(hdrStandardTimestamp, b[idEnd:tsEnd])
	h.SetCanonical(hdrStandardSignature, b[tsEnd:])
	sc.buf = b
	d.hdrBufs.Put(sc)
}

// idleConnTimeout is how long a pooled webhook connection may sit unused.
// It stays below the keep-alive timeouts servers commonly close idle
// connections at (Node's http.Server 5 s keepAliveTimeout, Apache's and
// uvicorn's 5 s), so the daemon retires a connection before the webhook
// does. A POST written to a connection the server has just closed fails
// with nothing known about whether it ran, and a delivery is never re-sent
// within an attempt (see NewDeliverer), so such a race would cost a
// healthy webhook a failed attempt and a backoff. The second of margin
// covers the cleaner's timing and the response's time in transit (the
// server's idle clock starts when it has written the answer, ours when we
// have read it). Servers with shorter keep-alives (gunicorn's 2 s) can
// still race; each lost race is one failed attempt, retried after backoff.
const idleConnTimeout = 4 * time.Second

// NewDeliverer returns a Deliverer that sends userAgent with every delivery.
func NewDeliverer(userAgent string) *Deliverer {
	return newDeliverer(userAgent, idleConnTimeout)
}

// newDeliverer is NewDeliverer with the pool's idle timeout as a parameter,
// so tests can scale it down against a webhook's short keep-alive.
func newDeliverer(userAgent string, idle time.Duration) *Deliverer {
	d := &Deliverer{userAgent: userAgent, conns: map[net.Conn]struct{}{}, aborts: newAbortRegistry()}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	d.client = d.newClient(idle, func(addr string) (net.Conn, error) { return dialer.Dial("tcp", addr) })
	// Checked (API) queues dial through the guard: resolved and checked at
	// connect time, refused before any connection attempt (netguard.go).
	d.guard = &netguard.Dialer{Timeout: dialer.Timeout, KeepAlive: dialer.KeepAlive}
	d.checked = d.newClient(idle, func(addr string) (net.Conn, error) {
		return d.guard.DialContext(context.Background(), "tcp", addr)
	})
	return d
}

// newClient returns a webhook client whose connections dial makes.
func (d *Deliverer) newClient(idle time.Duration, dial func(addr string) (net.Conn, error)) *fasthttp.Client {
	return &fasthttp.Client{
		// Deliveries are abortable by lease token (abort.go).
		Transport: &abortTransport{reg: d.aborts},
		Dial: func(addr string) (net.Conn, error) {
			c, err := dial(addr)
			if err != nil {
				return nil, err
			}
			return d.track(c)
		},
		MaxConnsPerHost:     4096,
		MaxConnWaitTimeout:  10 * time.Second,
		MaxIdleConnDuration: idle,
		// LIFO hands out the connection used last, so under light traffic
		// one connection stays warm and the rest age out, instead of FIFO
		// rotating every connection a burst opened until each one sits idle
		// longer than the webhook keeps it.
		ConnPoolStrategy:         fasthttp.LIFO,
		StreamResponseBody:       true,
		NoDefaultUserAgentHeader: true,
		// One POST per attempt, never a second one within it. When a
		// connection fails after the request went out, fasthttp cannot tell
		// whether the webhook read it and ran its handler (a panicking
		// net/http handler or a resetting proxy looks exactly like a server
		// closing an idle connection), so a re-send would deliver the same
		// attempt twice, outside the rate limit and the backoff. A
		// connection error is instead one failed attempt, which the state
		// machine retries after backoff. fasthttp already declines to retry
		// a POST by default (only GET, HEAD, PUT and QUERY count as
		// idempotent); one call attempt and a RetryIfErr that always says no
		// keep that true whatever the method and whatever later fasthttp
		// versions default to.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
}

// trackedConn removes itself from the Deliverer's set when closed.
type trackedConn struct {
	net.Conn
	d    *Deliverer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

func (d *Deliverer) track(c net.Conn) (net.Conn, error) {
	tc := &trackedConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		_ = c.Close()
		return nil, errors.New("shutting down")
	}
	d.conns[tc] = struct{}{}
	return tc, nil
}

// cutAll closes every webhook connection: deliveries in flight fail at once.
func (d *Deliverer) cutAll() {
	d.mu.Lock()
	d.cut = true
	conns := make([]net.Conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Deliver makes one delivery. It returns the outcome to record; a cancelled
// ctx (shutdown past its grace period) yields a release, which spends nothing.
// With a tracer, the delivery's span ends here, without what recording the
// outcome did (the pump's deliveries keep theirs open for that).
func (d *Deliverer) Deliver(ctx context.Context, q config.Queue, j store.ClaimedJob) store.Outcome {
	out, sp := d.deliver(ctx, q, j)
	sp.end(out, store.Settled{}, j.Probe)
	return out
}

// deliver is Deliver returning the delivery's span still open (nil while
// tracing is off), so the pump can add the settle result and end it.
func (d *Deliverer) deliver(ctx context.Context, q config.Queue, j store.ClaimedJob) (store.Outcome, *span) {
	out := store.Outcome{ID: j.ID, Token: j.Token}
	d.abort.Do(func() { context.AfterFunc(ctx, d.cutAll) })
	if ctx.Err() != nil {
		out.Kind = store.OutcomeRelease
		return out, nil
	}
	var sp *span
	body := Envelope(q.Name, q.MaxAttempts, j)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(q.WebhookURL)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.SetUserAgent(d.userAgent)
	secrets := q.SigningSecrets
	if len(secrets) == 0 { // a Queue built in code with SigningSecret only
		one := [1]string{q.SigningSecret}
		secrets = one[:]
	}
	d.setSignatures(&req.Header, secrets, j, body)
	req.Header.Set("X-Simpleq-Job-Id", j.ID)
	req.Header.Set("X-Simpleq-Attempt", strconv.Itoa(j.Attempt))
	req.Header.Set("X-Simpleq-Queue", q.Name)
	if j.FlowKey != "" {
		// keys.md §1: the job's lane, so a worker knows whose downstream
		// (which tenant's API key) to call; the envelope stays SimpleQ's.
		req.Header.Set("X-Simpleq-Flow-Key", j.FlowKey)
	}
	if d.tracer != nil {
		sp = d.startSpan(q, j)
	}
	setTraceHeaders(&req.Header, sp, j)
	req.SetBodyRaw(body)

	// The request is abortable by its lease token while it runs (abort.go).
	h := d.aborts.add(req, j.Token, q.Timeout)
	var err error
	if h == nil {
		err = errAborted // cancelled before it went out: nothing is sent
	} else {
		err = d.clientFor(q).DoTimeout(req, resp, q.Timeout)
		d.aborts.remove(req, j.Token)
	}
	sp.answered()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			out.Kind = store.OutcomeRelease
		case h == nil || h.detach():
			// Cancelled (control.md §1): the outcome is STALE whatever it
			// says; its settle frees the slot the delivery kept.
			out.Kind, out.Error = store.OutcomeFail, "aborted: the job was cancelled"
		case errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) || isTimeout(err):
			out.Kind, out.Error = store.OutcomeFail, fmt.Sprintf("timeout after %s", q.Timeout)
		default:
			out.Kind, out.Error = store.OutcomeFail, "connection error: "+trimErr(err)
		}
		return out, sp
	}
	out.StatusCode = resp.StatusCode()
	var snippet []byte
	if stream := resp.BodyStream(); stream != nil {
		snippet, _ = io.ReadAll(io.LimitReader(stream, errorBodyLimit))
		_, _ = io.Copy(io.Discard, io.LimitReader(stream, drainLimit))
		_ = resp.CloseBodyStream() // an undrained body closes the connection
	} else {
		snippet = resp.Body()
		if len(snippet) > errorBodyLimit {
			snippet = snippet[:errorBodyLimit]
		}
	}

	switch code := out.StatusCode; {
	case code >= 200 && code < 300:
		out.Kind = store.OutcomeOK
		if q.Mode == "ack" {
			out.Kind = store.OutcomeDelivered
		}
	case hold.IsBackpressure(code):
		out.Kind = store.OutcomeDefer
		ra := string(resp.Header.Peek("Retry-After"))
		// An HTTP-date stays absolute: settle turns it into a wait on Redis'
		// clock, so this daemon's clock never enters a release time.
		wait, at, ok := hold.ParseRetryAfterValue(ra)
		if !ok {
			wait = q.DefaultRetryAfter
		}
		out.RetryAfter, out.RetryAt = wait, at
		out.Reason = fmt.Sprintf("webhook responded %d", code)
		if ra != "" {
			out.Reason += " (Retry-After: " + trimTo(ra, 64) + ")"
		}
	case code >= 300 && code < 400:
		out.Kind, out.Error = store.OutcomeFail, fmt.Sprintf("webhook responded %d (redirects are not followed)", code)
	default:
		out.Kind = store.OutcomeFail
		out.Error = fmt.Sprintf("webhook responded %d", code)
		if s := strings.TrimSpace(string(snippet)); s != "" {
			out.Error += ": " + trimTo(s, 200)
		}
	}
	return out, sp
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func trimErr(err error) string {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) {
		if inner := uerr.Unwrap(); inner != nil {
			return trimTo(inner.Error(), 300)
		}
	}
	return trimTo(err.Error(), 300)
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
