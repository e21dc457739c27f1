package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Resolver looks a host name up; *net.Resolver is one. Tests pass a fake
// one, so that a name like rebind.test "resolves" to 10.0.0.1 without any
// query or connection.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to address, which the Dialer always passes as a
// literal ip:port it has already checked.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Dialer is the connect-time check: it resolves the host itself, checks
// every address the name resolves to against the current Policy, and only
// then dials, by address, so the address checked is the address dialled
// and a name cannot rebind between the two. A refused connection fails
// before anything is dialled, with a *RefusedError.
//
// A name that resolves to any refused address is refused as a whole
// rather than dialled at its allowed addresses: which record a resolver
// lists first is then irrelevant, and a name that mixes public and
// private addresses is a misconfiguration or an attack either way.
//
// The default DialFunc (Dial nil) also checks the address in the socket's
// Control hook, just before connect(2), so even a dial path that skipped
// the resolution above could not reach a refused address.
type Dialer struct {
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a checked ip:port; nil is a net.Dialer with
	// Timeout and KeepAlive below and the Control check.
	Dial DialFunc
	// Timeout bounds resolution and the default dial; 0 is 10 s.
	Timeout time.Duration
	// KeepAlive is the default dial's TCP keep-alive period.
	KeepAlive time.Duration

	policy atomic.Pointer[Policy]
}

// SetPolicy replaces the policy connections are checked against (on a
// configuration reload); nil is the default policy.
func (d *Dialer) SetPolicy(p *Policy) { d.policy.Store(p) }

// Policy returns the current policy (never nil).
func (d *Dialer) Policy() *Policy {
	if p := d.policy.Load(); p != nil {
		return p
	}
	return &Policy{}
}

func (d *Dialer) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return 10 * time.Second
}

// DialContext checks and dials address (host:port) over a TCP network.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	p := d.Policy()
	ctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()

	addrs, err := d.resolve(ctx, p, host)
	if err != nil {
		return nil, err
	}
	var last error
	for _, a := range addrs {
		// Some resolvers hand back A records as ::ffff:a.b.c.d; dial the
		// IPv4 address itself (it was checked as that already).
		c, err := d.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// resolve turns the host into the addresses to dial, each one checked.
func (d *Dialer) resolve(ctx context.Context, p *Policy, host string) ([]netip.Addr, error) {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		if err := p.checkDialLiteral(a); err != nil {
			return nil, err
		}
		return []netip.Addr{a}, nil
	}
	// The host was checked when the URL was written, but the policy may
	// have changed since, and the host came from fasthttp's parse, not ours.
	if err := p.CheckHost(h); err != nil {
		return nil, err
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", h)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("webhook host %s has no addresses", h)
	}
	for _, a := range addrs {
		if err := p.CheckAddr(h, a); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// checkDialLiteral is checkLiteral for an address the HTTP client passes,
// which may be in IPv4-mapped form.
func (p *Policy) checkDialLiteral(a netip.Addr) error {
	if p.restricted() && !p.inPrefixes(a) && !p.inPrefixes(a.Unmap()) {
		return &RefusedError{Addr: a, Reason: "is not in webhooks.allowedHosts"}
	}
	return p.CheckAddr("", a)
}

func (d *Dialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if d.Dial != nil {
		return d.Dial(ctx, network, address)
	}
	nd := net.Dialer{Timeout: d.timeout(), KeepAlive: d.KeepAlive, Control: d.Control}
	return nd.DialContext(ctx, network, address)
}

// Control is a net.Dialer Control hook applying the current policy's
// address rules to the socket's peer address just before connect(2).
func (d *Dialer) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook address %q is not an ip:port: %w", address, err)
	}
	// Only the address rules: whether the host is in allowedHosts was
	// decided on the name before it was resolved.
	return d.Policy().CheckAddr("", ap.Addr())
}

// IsRefused reports whether err is (or wraps) a policy refusal.
func IsRefused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}
