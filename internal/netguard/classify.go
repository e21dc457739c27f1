package netguard

import (
	"net/netip"
)

// class is what an address is to the policy.
type class int

const (
	public  class = iota
	private       // allowed by allowPrivateNetworks or an allowedHosts CIDR
	never         // not a unicast address anyone could mean: always refused
)

// special is one special-purpose range (IANA's IPv4 and IPv6
// special-purpose address registries) and how the policy treats it.
type special struct {
	pfx   netip.Prefix
	class class
	what  string
}

// specials are checked in order, first match wins, so a narrower range
// (the metadata address) comes before the one holding it. Everything not
// listed is public. Shared address space (100.64.0.0/10, carrier-grade
// NAT) counts as private: it is another operator's internal network, and
// overlays such as Tailscale number their private nodes from it.
// Documentation and benchmarking ranges count as private too: nothing
// public answers there, so a webhook in them can only be a local
// deployment.
var specials = func() []special {
	s := func(p string, c class, what string) special {
		return special{netip.MustParsePrefix(p), c, what}
	}
	return []special{
		// IPv4
		s("0.0.0.0/8", never, "in 0.0.0.0/8 (\"this network\")"),
		s("127.0.0.0/8", private, "a loopback address"),
		s("10.0.0.0/8", private, "a private network address"),
		s("172.16.0.0/12", private, "a private network address"),
		s("192.168.0.0/16", private, "a private network address"),
		s("169.254.169.254/32", private, "a link-local address (the cloud metadata service)"),
		s("169.254.0.0/16", private, "a link-local address"),
		s("100.64.0.0/10", private, "a shared (carrier-grade NAT) address"),
		s("192.0.0.0/24", private, "an IETF protocol assignment address"),
		s("192.0.2.0/24", private, "a documentation address"),
		s("198.51.100.0/24", private, "a documentation address"),
		s("203.0.113.0/24", private, "a documentation address"),
		s("198.18.0.0/15", private, "a benchmarking address"),
		s("224.0.0.0/4", never, "a multicast address"),
		s("255.255.255.255/32", never, "the broadcast address"),
		s("240.0.0.0/4", never, "a reserved address"),
		// IPv6
		s("::/128", never, "the unspecified address"),
		s("::1/128", private, "a loopback address"),
		s("fe80::/10", private, "a link-local address"),
		s("fec0::/10", private, "a site-local address"),
		s("fc00::/7", private, "a unique local address (fc00::/7)"),
		s("ff00::/8", never, "a multicast address"),
		s("100::/64", never, "a discard-only address"),
		s("2001:db8::/32", private, "a documentation address"),
	}
}()

// classify says what an address is. An IPv6 address that carries an IPv4
// one (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, NAT64
// 64:ff9b::/96 and 6to4 2002::/16) is what its IPv4 address is, since
// packets to it can end up there: a resolver answering an AAAA query with
// ::ffff:127.0.0.1 must not get round the loopback rule.
func classify(a netip.Addr) (class, string) {
	if v4, ok := embeddedIPv4(a); ok {
		a = v4
	}
	for _, s := range specials {
		if s.pfx.Contains(a) {
			return s.class, s.what
		}
	}
	return public, "a public address"
}

var (
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	compatible  = netip.MustParsePrefix("::/96")
	unspecified = netip.IPv6Unspecified()
	loopback6   = netip.IPv6Loopback()
)

// embeddedIPv4 returns the IPv4 address an IPv6 one carries, if it does.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4() {
		return a, false
	}
	if a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	switch {
	case isIPv4Compatible(a), nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case nat64Local.Contains(a):
		// RFC 8215 leaves the embedding to the operator; treat the range as
		// private whatever it embeds.
		return netip.MustParseAddr("10.0.0.0"), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return a, false
}

// isIPv4Compatible reports the deprecated ::a.b.c.d form (RFC 4291 §2.5.5.1),
// other than :: and ::1, which are addresses of their own.
func isIPv4Compatible(a netip.Addr) bool {
	return a.Is6() && !a.Is4In6() && compatible.Contains(a) && a != unspecified && a != loopback6
}
