package dispatch

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Aborting one delivery (control.md §1): a job cancelled while its delivery
// is under way is dead at once in Redis, and the daemon holding the delivery
// is told (package wakeup carries the job id and lease token fleet-wide) to
// abort the HTTP request. fasthttp takes no context, and its connections are
// pooled and shared, so abortTransport does what fasthttp's own transport
// does, with one addition: while a delivery's request is on a connection,
// that connection is known by the delivery's lease token, and Abort closes
// it. The webhook sees the connection close; the delivery ends with a
// connection error, whose outcome settle finds STALE (the lease is gone),
// and that settle frees the slot the cancelled delivery kept.

// errAborted is the error of a delivery aborted before its request went out.
var errAborted = errors.New("delivery aborted: the job was cancelled")

// abortHandle is one delivery's request, as the transport sees it.
type abortHandle struct {
	deadline time.Time

	mu      sync.Mutex
	conn    net.Conn // the connection carrying the request, while it does
	aborted bool
}

// attach notes the connection the request goes out on; false if the
// delivery was aborted already (the caller closes the connection).
func (h *abortHandle) attach(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.aborted {
		return false
	}
	h.conn = c
	return true
}

// detach ends the request's hold on its connection, before the connection
// goes back to the pool (an abort must never close a connection that
// carries another request); it reports whether the delivery was aborted.
func (h *abortHandle) detach() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conn = nil
	return h.aborted
}

func (h *abortHandle) abort() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aborted = true
	if h.conn != nil {
		_ = h.conn.Close()
	}
}

// abortRegistry maps deliveries under way to their handles.
type abortRegistry struct {
	mu      sync.Mutex
	byReq   map[*fasthttp.Request]*abortHandle
	byToken map[string]*abortHandle
	// early keeps tokens whose abort came before their delivery started (a
	// job cancelled right after its claim): the delivery is then not sent.
	early map[string]time.Time
}

// earlyKeep is how long an abort for a delivery not (yet) under way here is
// remembered; past it the lease token's outcome is STALE anyway.
const earlyKeep = 10 * time.Second

func newAbortRegistry() *abortRegistry {
	return &abortRegistry{byReq: map[*fasthttp.Request]*abortHandle{}, byToken: map[string]*abortHandle{},
		early: map[string]time.Time{}}
}

// add registers a delivery's request; nil if it was aborted already.
func (r *abortRegistry) add(req *fasthttp.Request, token string, timeout time.Duration) *abortHandle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.early) > 0 {
		if _, ok := r.early[token]; ok {
			delete(r.early, token)
			return nil
		}
	}
	h := &abortHandle{deadline: time.Now().Add(timeout)}
	r.byReq[req] = h
	if token != "" {
		r.byToken[token] = h
	}
	return h
}

func (r *abortRegistry) remove(req *fasthttp.Request, token string) {
	r.mu.Lock()
	delete(r.byReq, req)
	if token != "" {
		delete(r.byToken, token)
	}
	r.mu.Unlock()
}

func (r *abortRegistry) forRequest(req *fasthttp.Request) *abortHandle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byReq[req]
}

// abort aborts the delivery with this lease token, if this daemon holds it;
// it reports whether it did. An unknown token is remembered for a while, in
// case its delivery is about to start here.
func (r *abortRegistry) abort(token string) bool {
	if token == "" {
		return false
	}
	r.mu.Lock()
	h := r.byToken[token]
	if h == nil {
		now := time.Now()
		for t, at := range r.early { // bounded: a few entries, each kept earlyKeep
			if now.Sub(at) > earlyKeep {
				delete(r.early, t)
			}
		}
		if len(r.early) < 100000 {
			r.early[token] = now
		}
	}
	r.mu.Unlock()
	if h == nil {
		return false
	}
	h.abort()
	return true
}

// Abort aborts this daemon's delivery under the lease token (a job
// cancelled in flight); false if no such delivery is under way here now.
// Safe to call from any goroutine, for tokens of other daemons too.
func (d *Deliverer) Abort(token string) bool { return d.aborts.abort(token) }

// maxResponseBody bounds a webhook answer read by abortTransport: the part
// kept for lastError and the part read to keep the connection reusable. A
// longer body closes the connection (its status still counts).
const maxResponseBody = errorBodyLimit + drainLimit

// abortTransport is fasthttp's transport with abortable requests (see the
// top of this file). Requests without a handle (none: every delivery
// registers one) go through fasthttp's own.
type abortTransport struct{ reg *abortRegistry }

// RoundTrip implements fasthttp.RoundTripper.
func (t *abortTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	h := t.reg.forRequest(req)
	if h == nil {
		return fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	}
	timeout := time.Until(h.deadline)
	if timeout <= 0 {
		return false, fasthttp.ErrTimeout
	}
	cc, err := hc.AcquireConn(timeout, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	conn := cc.Conn()
	if !h.attach(conn) {
		hc.CloseConn(cc)
		return false, errAborted
	}
	resp.ParseNetConn(conn)
	fail := func(err error) (bool, error) {
		h.detach()
		hc.CloseConn(cc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = fasthttp.ErrTimeout
		}
		return false, err
	}
	if err := conn.SetDeadline(h.deadline); err != nil {
		return fail(err)
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		return fail(err)
	}
	// The body is read whole (bounded), not streamed: the connection must
	// be detached from the delivery before it goes back to the pool.
	resp.StreamBody = false
	br := hc.AcquireReader(conn)
	err = resp.ReadLimitBody(br, maxResponseBody)
	hc.ReleaseReader(br)
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		// The status line and headers were read; the rest is not wanted.
		h.detach()
		hc.CloseConn(cc)
		return false, nil
	}
	if err != nil {
		return fail(err)
	}
	if h.detach() || req.ConnectionClose() || resp.ConnectionClose() {
		hc.CloseConn(cc)
	} else {
		hc.ReleaseConn(cc)
	}
	return false, nil
}
