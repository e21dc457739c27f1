//go:build linux

package main

// Event-loop HTTP/1.1 endpoints for the headline rows: one goroutine runs an
// epoll loop over raw non-blocking sockets, as wrk does for its client and
// nginx for its server. A goroutine per connection (lean.go) pays per request
// for a read that finds nothing yet, a park and a wake-up in Go's scheduler;
// on 2 shared cores that is CPU taken from the daemon and Redis being
// measured. Deployed, clients and webhooks run on other machines. The table
// keeps rows with the goroutine endpoints and with Go's net/http, so what
// the harness costs stays visible.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// httpHead finds the end of one message head in b and the length of the
// body that follows (Content-Length; 0 without one). ok is false until the
// whole head is in b. A chunked body is an error: the daemon and its
// deliveries always send a length, and this endpoint keeps no chunk parser.
func httpHead(b []byte) (headEnd, bodyLen int, ok bool, err error) {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return 0, 0, false, nil
	}
	head := b[:i+2]
	for len(head) > 0 {
		j := bytes.IndexByte(head, '\n')
		line := head[:j+1]
		head = head[j+1:]
		k := bytes.IndexByte(line, ':')
		if k <= 0 {
			continue // the first line
		}
		name, val := line[:k], bytes.TrimSpace(line[k+1:])
		switch {
		case asciiEqualFold(name, "content-length"):
			n, perr := strconv.Atoi(string(val))
			if perr != nil || n < 0 {
				return 0, 0, false, fmt.Errorf("bad content-length %q", val)
			}
			bodyLen = n
		case asciiEqualFold(name, "transfer-encoding"):
			return 0, 0, false, fmt.Errorf("transfer-encoding %q: only Content-Length bodies are read here", val)
		}
	}
	return i + 4, bodyLen, true, nil
}

// nextMessage splits the first complete message off buf: its first line,
// its body and the bytes after it. ok is false while it is incomplete.
func nextMessage(buf []byte) (first, body, rest []byte, ok bool, err error) {
	headEnd, bodyLen, ok, err := httpHead(buf)
	if !ok || err != nil {
		return nil, nil, buf, false, err
	}
	if len(buf) < headEnd+bodyLen {
		return nil, nil, buf, false, nil
	}
	first = buf[:bytes.IndexByte(buf, '\n')+1]
	return first, buf[headEnd : headEnd+bodyLen], buf[headEnd+bodyLen:], true, nil
}

// epollConn is one socket with its unparsed input.
type epollConn struct {
	fd  int
	in  []byte // bytes read and not yet parsed
	out []byte // answers of one read, written at once
}

// fill reads what the socket holds into c.in, growing it when full. Nothing
// there yet (EAGAIN) is not an error; the peer closing is.
func (c *epollConn) fill() error {
	if len(c.in) == cap(c.in) {
		grown := make([]byte, len(c.in), 2*cap(c.in))
		copy(grown, c.in)
		c.in = grown
	}
	n, err := syscall.Read(c.fd, c.in[len(c.in):cap(c.in)])
	switch {
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
		return nil
	case err != nil:
		return err
	case n == 0:
		return errors.New("connection closed by peer")
	}
	c.in = c.in[:len(c.in)+n]
	return nil
}

// eachMessage hands every complete message in c's input to handle, in
// order, and drops the handled ones from the input (first and body point
// into the input, so handle must not keep them). The unparsed rest moves to
// the front once, not once per message. It stops at handle's first error or
// a malformed message.
func (c *epollConn) eachMessage(handle func(first, body []byte) error) error {
	done := 0
	defer func() { c.in = c.in[:copy(c.in, c.in[done:])] }()
	for {
		first, body, rest, ok, err := nextMessage(c.in[done:])
		if err != nil || !ok {
			return err
		}
		if err := handle(first, body); err != nil {
			return err
		}
		done = len(c.in) - len(rest)
	}
}

// writeAll writes b to a non-blocking socket. One request or a few answers
// fit the socket's buffer, so a full buffer is waited out briefly, never for
// long.
func writeAll(fd int, b []byte) error {
	for deadline := time.Now().Add(5 * time.Second); len(b) > 0; {
		n, err := syscall.Write(fd, b)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			if time.Now().After(deadline) {
				return errors.New("write: socket buffer full for 5 s")
			}
			time.Sleep(50 * time.Microsecond)
			continue
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

func loopbackSockaddr(hostport string) (*syscall.SockaddrInet4, error) {
	a, err := net.ResolveTCPAddr("tcp4", hostport)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: a.Port}
	copy(sa.Addr[:], a.IP.To4())
	return sa, nil
}

// dialRaw opens a non-blocking TCP connection with Nagle off, as Go's net
// package does.
func dialRaw(sa *syscall.SockaddrInet4) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, sa); err != nil { // blocking: loopback connects at once
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// epollPublishMany sends n single-job publishes over `clients` keep-alive
// connections from one epoll loop, one request in flight per connection,
// and checks each answer is 201. It gives up after 2 minutes.
func epollPublishMany(ctx context.Context, base, queue string, n, clients int, body []byte) error {
	hostport := base[len("http://"):]
	sa, err := loopbackSockaddr(hostport)
	if err != nil {
		return err
	}
	req := fmt.Appendf(nil, "POST /v1/queues/%s/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		queue, hostport, len(body), body)
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	defer syscall.Close(epfd)
	conns := map[int32]*epollConn{}
	defer func() {
		for _, c := range conns {
			syscall.Close(c.fd)
		}
	}()
	sent, done := 0, 0
	for range min(clients, n) {
		fd, err := dialRaw(sa)
		if err != nil {
			return fmt.Errorf("connect %s: %w", hostport, err)
		}
		c := &epollConn{fd: fd, in: make([]byte, 0, 4096)}
		conns[int32(fd)] = c
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
		if err := writeAll(fd, req); err != nil {
			return err
		}
		sent++
	}
	events := make([]syscall.EpollEvent, len(conns))
	deadline := time.Now().Add(2 * time.Minute)
	for done < n {
		if ctx.Err() != nil {
			return errors.New("publish run cancelled")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("publish run: %d of %d answered in 2 minutes", done, n)
		}
		k, err := syscall.EpollWait(epfd, events, 100)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:k] {
			c := conns[ev.Fd]
			if err := c.fill(); err != nil {
				return fmt.Errorf("publish connection: %w", err)
			}
			err := c.eachMessage(func(first, answer []byte) error {
				if !bytes.HasPrefix(first, []byte("HTTP/1.1 201")) {
					return fmt.Errorf("publish: %s %s", bytes.TrimSpace(first), answer)
				}
				done++
				if sent < n {
					if err := writeAll(c.fd, req); err != nil {
						return err
					}
					sent++
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// epollWebhook is a no-op endpoint on one epoll loop: it answers every
// request 200 with an empty body, counts deliveries and, when asked,
// measures publish→delivery latency from a key in the payload.
type epollWebhook struct {
	url      string
	lfd      int
	epfd     int
	count    atomic.Int64
	lat      *latencyTracker
	stopping atomic.Bool
	done     chan struct{}
	// respond, when set, answers each request from its body instead of
	// the empty 200 (the flow-key rows count deliveries per lane and
	// answer one lane 429, keys.go).
	respond func(body []byte) []byte
}

func newEpollWebhook(lat *latencyTracker) *epollWebhook {
	return newEpollWebhookFunc(lat, nil)
}

// newEpollWebhookFunc is newEpollWebhook whose answers come from respond
// (nil: the empty 200). respond runs on the loop's goroutine.
func newEpollWebhookFunc(lat *latencyTracker, respond func(body []byte) []byte) *epollWebhook {
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	must(err)
	must(syscall.SetsockoptInt(lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
	must(syscall.Bind(lfd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	must(syscall.Listen(lfd, 1024))
	sa, err := syscall.Getsockname(lfd)
	must(err)
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	must(err)
	must(syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, lfd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(lfd)}))
	h := &epollWebhook{
		url: fmt.Sprintf("http://127.0.0.1:%d/hook", sa.(*syscall.SockaddrInet4).Port),
		lfd: lfd, epfd: epfd, lat: lat, done: make(chan struct{}), respond: respond,
	}
	go h.loop()
	return h
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// close stops the loop (within its 100 ms wait) and closes every socket.
func (h *epollWebhook) close() {
	h.stopping.Store(true)
	<-h.done
}

func (h *epollWebhook) loop() {
	defer close(h.done)
	conns := map[int32]*epollConn{}
	defer func() {
		for _, c := range conns {
			syscall.Close(c.fd)
		}
		syscall.Close(h.lfd)
		syscall.Close(h.epfd)
	}()
	drop := func(c *epollConn) {
		delete(conns, int32(c.fd))
		syscall.Close(c.fd) // leaves the epoll set with its last descriptor
	}
	events := make([]syscall.EpollEvent, 256)
	for !h.stopping.Load() {
		k, err := syscall.EpollWait(h.epfd, events, 100)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		must(err)
		for _, ev := range events[:k] {
			if int(ev.Fd) == h.lfd {
				h.accept(conns)
				continue
			}
			c := conns[ev.Fd]
			if c == nil {
				continue
			}
			if err := c.fill(); err != nil {
				drop(c)
				continue
			}
			if err := h.answer(c); err != nil {
				drop(c)
			}
		}
	}
}

// accept takes every pending connection.
func (h *epollWebhook) accept(conns map[int32]*epollConn) {
	for {
		fd, _, err := syscall.Accept4(h.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		if err := syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			syscall.Close(fd)
			continue
		}
		conns[int32(fd)] = &epollConn{fd: fd, in: make([]byte, 0, 8192), out: make([]byte, 0, 256)}
	}
}

// answer answers every complete request in c's input with one write.
func (h *epollWebhook) answer(c *epollConn) error {
	c.out = c.out[:0]
	err := c.eachMessage(func(_, body []byte) error {
		h.count.Add(1)
		h.lat.observe(body)
		if h.respond != nil {
			c.out = append(c.out, h.respond(body)...)
			return nil
		}
		c.out = append(c.out, okResponse...)
		return nil
	})
	if err != nil {
		return err
	}
	if len(c.out) == 0 {
		return nil
	}
	return writeAll(c.fd, c.out)
}
