package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResolver maps names to addresses without any query: rebind.test
// "resolves" to 10.0.0.1 and nothing is ever sent to it.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	asked   []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	ans, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(ans))
	for i, a := range ans {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

// recordingDialer records every address it is asked to dial and never
// connects anywhere: it fails the test on a non-loopback address, and
// otherwise answers with errFakeDial (or, with real set, dials loopback).
type recordingDialer struct {
	t     *testing.T
	mu    sync.Mutex
	dials []string
	real  bool
}

var errFakeDial = errors.New("fake dial: not connecting")

func (d *recordingDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		d.t.Errorf("asked to dial %q, which is not a literal ip:port", address)
		return nil, err
	}
	if !ap.Addr().Unmap().IsLoopback() || !d.real {
		if d.real {
			d.t.Errorf("asked to dial %s, off loopback", address)
		}
		return nil, errFakeDial
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *recordingDialer) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

func newTestDialer(t *testing.T, p *Policy, answers map[string][]string) (*Dialer, *fakeResolver, *recordingDialer) {
	r := &fakeResolver{answers: answers}
	rec := &recordingDialer{t: t}
	d := &Dialer{Resolver: r, Dial: rec.Dial}
	d.SetPolicy(p)
	return d, r, rec
}

var answers = map[string][]string{
	"rebind.test":   {"10.0.0.1"},
	"metadata.test": {"169.254.169.254"},
	"loop.test":     {"127.0.0.1"},
	"loop6.test":    {"::1"},
	"mapped.test":   {"::ffff:127.0.0.1"}, // an AAAA record carrying loopback
	"ula.test":      {"fd00::1"},
	"mixed.test":    {"93.184.216.34", "10.0.0.1"},
	"public.test":   {"93.184.216.34", "2606:2800:220:1::1"},
	"zero.test":     {"0.0.0.0"},
	"mappub.test":   {"::ffff:93.184.216.34"},
}

// TestDialRefusesBeforeDialling proves that a refused address is never
// handed to the dial function: the recording dialer sees nothing.
func TestDialRefusesBeforeDialling(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"rebind.test:80", "webhook host rebind.test resolves to 10.0.0.1, which is a private network address; see webhooks.allowPrivateNetworks"},
		{"metadata.test:80", "cloud metadata"},
		{"loop.test:80", "loopback"},
		{"loop6.test:443", "loopback"},
		{"mapped.test:80", "loopback"},
		{"ula.test:80", "unique local"},
		{"mixed.test:80", "10.0.0.1"},
		{"zero.test:80", "never a webhook address"},
		{"10.0.0.1:80", "webhook address 10.0.0.1 is a private network address; see webhooks.allowPrivateNetworks"},
		{"127.0.0.1:9000", "loopback"},
		{"[::1]:80", "loopback"},
		{"[::ffff:127.0.0.1]:80", "loopback"},
		{"[::ffff:169.254.169.254]:80", "cloud metadata"},
		{"169.254.169.254:80", "cloud metadata"},
		{"2130706433:80", "canonical dotted quad"},
		{"0x7f.0.0.1:80", "canonical dotted quad"},
		{"127.1:80", "canonical dotted quad"},
		{"localhost:80", "loopback name"},
		{"localhost.:80", "loopback name"},
	} {
		d, _, rec := newTestDialer(t, nil, answers)
		_, err := d.DialContext(context.Background(), "tcp", tc.addr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DialContext(%s) = %v, want %q", tc.addr, err, tc.want)
		}
		if !IsRefused(err) {
			t.Errorf("DialContext(%s): %v is not a *RefusedError", tc.addr, err)
		}
		if got := rec.seen(); len(got) != 0 {
			t.Errorf("DialContext(%s) dialled %v; a refusal must come before any connection attempt", tc.addr, got)
		}
	}
}

// TestDialChecksAtConnectTime: the policy is applied to what the name
// resolves to when the connection is made, so a name that was public
// when the URL was written and rebinds to a private address is refused.
func TestDialChecksAtConnectTime(t *testing.T) {
	p := mustPolicy(t, nil, false)
	if err := p.CheckURL("http://flip.test/hook"); err != nil {
		t.Fatalf("write-time check: %v", err)
	}
	r := &fakeResolver{answers: map[string][]string{"flip.test": {"93.184.216.34"}}}
	rec := &recordingDialer{t: t}
	d := &Dialer{Resolver: r, Dial: rec.Dial}
	d.SetPolicy(p)
	if _, err := d.DialContext(context.Background(), "tcp", "flip.test:80"); !errors.Is(err, errFakeDial) {
		t.Fatalf("public answer: %v, want the fake dial's error", err)
	}
	r.mu.Lock()
	r.answers["flip.test"] = []string{"127.0.0.1"} // the rebind
	r.mu.Unlock()
	_, err := d.DialContext(context.Background(), "tcp", "flip.test:80")
	if !IsRefused(err) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("after the rebind: %v, want a refusal naming 127.0.0.1", err)
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "93.184.216.34:80" {
		t.Fatalf("dials = %v, want only the public address, dialled by address", got)
	}
}

func TestDialAllowed(t *testing.T) {
	// Public names are dialled at their resolved addresses, by address.
	d, _, rec := newTestDialer(t, nil, answers)
	if _, err := d.DialContext(context.Background(), "tcp", "public.test:443"); !errors.Is(err, errFakeDial) {
		t.Fatalf("public.test: %v", err)
	}
	if got := rec.seen(); len(got) != 2 || got[0] != "93.184.216.34:443" || got[1] != "[2606:2800:220:1::1]:443" {
		t.Fatalf("dials = %v", got)
	}
	// An A record handed back in IPv4-mapped form is dialled as IPv4.
	d, _, rec = newTestDialer(t, nil, answers)
	if _, err := d.DialContext(context.Background(), "tcp", "mappub.test:80"); !errors.Is(err, errFakeDial) {
		t.Fatalf("mappub.test: %v", err)
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "93.184.216.34:80" {
		t.Fatalf("dials = %v", got)
	}

	// allowPrivateNetworks lets loopback through: a real connection to a
	// loopback listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_ = c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d, _, rec = newTestDialer(t, mustPolicy(t, nil, true), answers)
	rec.real = true
	c, err := d.DialContext(context.Background(), "tcp", "loop.test:"+port)
	if err != nil {
		t.Fatalf("allowPrivateNetworks: loop.test: %v", err)
	}
	_ = c.Close()

	// A CIDR entry lets its range through without allowPrivateNetworks,
	// but a name still has to be listed by name.
	p := mustPolicy(t, []string{"rebind.test", "10.0.0.0/8"}, false)
	d, r, rec := newTestDialer(t, p, answers)
	if _, err := d.DialContext(context.Background(), "tcp", "rebind.test:80"); !errors.Is(err, errFakeDial) {
		t.Fatalf("listed name in a listed CIDR: %v", err)
	}
	if _, err := d.DialContext(context.Background(), "tcp", "public.test:80"); !IsRefused(err) {
		t.Fatalf("unlisted name: %v, want refused", err)
	}
	r.mu.Lock()
	asked := append([]string(nil), r.asked...)
	r.mu.Unlock()
	if len(asked) != 1 || asked[0] != "rebind.test" {
		t.Fatalf("resolver asked %v: an unlisted name must be refused before it is looked up", asked)
	}
	if got := rec.seen(); len(got) != 1 || got[0] != "10.0.0.1:80" {
		t.Fatalf("dials = %v", got)
	}
}

// TestControlRefuses: the default dial's Control hook, which runs just
// before connect(2), refuses a private address on its own. It is called
// directly: no socket is made.
func TestControlRefuses(t *testing.T) {
	var d Dialer
	for _, a := range []string{"10.0.0.1:80", "127.0.0.1:80", "[::1]:80", "[::ffff:127.0.0.1]:80", "169.254.169.254:80"} {
		if err := d.Control("tcp4", a, nil); !IsRefused(err) {
			t.Errorf("Control(%s) = %v, want refused", a, err)
		}
	}
	if err := d.Control("tcp4", "93.184.216.34:80", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
	d.SetPolicy(mustPolicy(t, []string{"hooks.example.com"}, false))
	if err := d.Control("tcp4", "93.184.216.34:80", nil); err != nil {
		t.Errorf("Control(public, with a name list) = %v: the list applies to names, before resolution", err)
	}
}

// TestDefaultDialRefusesLoopback runs the real default dial path (no
// DialFunc) at a loopback listener with the default policy: the Control
// hook refuses it, and the listener never sees a connection.
func TestDefaultDialRefusesLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var d Dialer
	// Skip resolve's check to exercise Control alone.
	_, err = d.dial(context.Background(), "tcp", ln.Addr().String())
	if !IsRefused(err) {
		t.Fatalf("default dial to %s = %v, want refused by Control", ln.Addr(), err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		_ = c.Close()
		t.Fatal("the listener accepted a connection the Control hook refused")
	}
}
