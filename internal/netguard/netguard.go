// Package netguard decides where a webhook may point: the policy of
// runtime.md §2 (webhooks.allowedHosts and webhooks.allowPrivateNetworks).
//
// A queue whose webhook URL comes from an API user must not be a way into
// the operator's own network: loopback, RFC 1918, link-local (where cloud
// metadata services answer, at 169.254.169.254), unique local IPv6, and the
// like. The policy is applied twice, because either check alone can be got
// round:
//
//   - when the URL is written (Policy.CheckURL), so a bad URL is refused
//     with a message rather than stored. It looks at the text only and
//     never resolves a name, so it is also strict about the text: an IPv4
//     address must be written as a canonical dotted quad, because resolvers
//     and URL parsers disagree about "2130706433", "0177.0.0.1", "0x7f.1"
//     and "127.1" (inet_aton reads all of them as 127.0.0.1);
//   - on every connection (Dialer), on the address actually dialled after
//     the name was resolved at connect time. A name can resolve to a public
//     address when the queue is written and to 127.0.0.1 a minute later (DNS
//     rebinding), so only the connect-time check is the guarantee.
//
// Redirects are not a third way round: the daemon never follows one (a 3xx
// is a failed delivery), so the only address ever dialled is the URL's.
//
// Queues from the configuration file are trusted and not checked (the
// operator wrote them); the package is used for queues from the API.
package netguard

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy is a parsed webhooks section. The zero Policy (and a nil one) is
// the default: any host, public addresses only.
type Policy struct {
	names        []string       // exact host names, lowercase
	suffixes     []string       // from "*.example.com": ".example.com"
	prefixes     []netip.Prefix // from CIDRs and bare addresses
	allowPrivate bool
}

// New builds a Policy from webhooks.allowedHosts and
// webhooks.allowPrivateNetworks. An entry of allowedHosts is one of:
//
//   - an exact host name ("hooks.example.com"), matched case-insensitively;
//   - a wildcard "*.example.com", matching every name below example.com at
//     any depth (a.example.com, a.b.example.com) but not example.com itself,
//     which needs its own entry;
//   - a CIDR ("203.0.113.0/24", "2001:db8::/32") or a bare address (a /32
//     or /128).
//
// Names allow names and CIDRs allow addresses: with a non-empty list, a URL
// whose host is a name must match a name entry, and one whose host is an IP
// address must fall in a CIDR entry. A CIDR entry also lets its addresses
// through the private-network check, whichever name resolved to them, so
// an operator can allow one internal range without allowing them all: list
// the internal name and its range. The first bad entry is returned as an
// *EntryError.
func New(allowedHosts []string, allowPrivateNetworks bool) (*Policy, error) {
	p := &Policy{allowPrivate: allowPrivateNetworks}
	for i, e := range allowedHosts {
		if err := p.add(e); err != nil {
			return nil, &EntryError{Index: i, Entry: e, Reason: err.Error()}
		}
	}
	return p, nil
}

// CheckEntry reports whether one allowedHosts entry is well formed, saying
// what is wrong with it otherwise (config validation names the key).
func CheckEntry(entry string) error {
	return new(Policy).add(entry)
}

// EntryError is a malformed allowedHosts entry.
type EntryError struct {
	Index  int
	Entry  string
	Reason string
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("webhooks.allowedHosts[%d]: %s (got %q)", e.Index, e.Reason, e.Entry)
}

func (p *Policy) add(e string) error {
	s := strings.ToLower(strings.TrimSpace(e))
	switch {
	case s == "":
		return fmt.Errorf("must not be empty")
	case strings.Contains(s, "/"):
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("must be a host name, *.domain, an IP address or a CIDR like 10.0.0.0/8")
		}
		if pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() {
			return fmt.Errorf("must be a plain IPv4 or IPv6 CIDR (no zone, no IPv4-mapped form)")
		}
		if m := pfx.Masked(); m != pfx {
			return fmt.Errorf("has bits set past the prefix length; did you mean %s?", m)
		}
		p.prefixes = append(p.prefixes, pfx)
	case endsInNumber(s) || strings.Contains(s, ":"):
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() || (a.Is4() && a.String() != s) {
			return fmt.Errorf("must be an IPv4 address as a canonical dotted quad, an IPv6 address, or a CIDR")
		}
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
	case strings.HasPrefix(s, "*."):
		if err := checkName(s[2:]); err != nil {
			return fmt.Errorf("wildcard must be \"*.\" followed by a host name: %v", err)
		}
		p.suffixes = append(p.suffixes, s[1:])
	default:
		if err := checkName(s); err != nil {
			return fmt.Errorf("must be a host name, *.domain, an IP address or a CIDR: %v", err)
		}
		p.names = append(p.names, s)
	}
	return nil
}

// restricted reports whether allowedHosts has any entry.
func (p *Policy) restricted() bool {
	return len(p.names)+len(p.suffixes)+len(p.prefixes) > 0
}

// nameAllowed applies allowedHosts to a host name (lowercase, no trailing
// dot). An empty list allows every name.
func (p *Policy) nameAllowed(name string) bool {
	if !p.restricted() {
		return true
	}
	for _, n := range p.names {
		if name == n {
			return true
		}
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	return false
}

// inPrefixes reports whether an address falls in a CIDR entry.
func (p *Policy) inPrefixes(a netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// CheckHost applies the policy to a URL's host as written (no brackets, no
// port): a literal address must be allowed as an address, and a name must
// be allowed by allowedHosts and be a well-formed host name. It never
// resolves a name; the Dialer checks the addresses at connect time.
func (p *Policy) CheckHost(host string) error {
	if p == nil {
		p = &Policy{}
	}
	h := strings.ToLower(host)
	if strings.Contains(h, ":") { // IPv6 literal
		a, err := netip.ParseAddr(h)
		if err != nil || a.Zone() != "" {
			return &RefusedError{Host: host, Reason: "is not a valid IPv6 address (zones are not allowed)"}
		}
		if a.Is4In6() || isIPv4Compatible(a) {
			return &RefusedError{Host: host, Reason: "is an IPv4 address in IPv6 form; write it as a dotted quad"}
		}
		return p.checkLiteral(host, a)
	}
	if endsInNumber(h) {
		// An attempted IPv4 address: only the canonical dotted quad is one
		// every parser agrees on.
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is4() || a.String() != h {
			return &RefusedError{Host: host, Reason: "looks like an IPv4 address but is not a canonical dotted quad (decimal, octal, hex and short forms are refused)"}
		}
		return p.checkLiteral(host, a)
	}
	if err := checkName(h); err != nil {
		return &RefusedError{Host: host, Reason: "is not a valid host name: " + err.Error()}
	}
	if !p.nameAllowed(h) {
		return &RefusedError{Host: host, Reason: "is not in webhooks.allowedHosts"}
	}
	// RFC 6761: localhost and every name under it are loopback whatever
	// DNS says; refusing them here gives the message at write time.
	if (h == "localhost" || strings.HasSuffix(h, ".localhost")) && !p.allowPrivate {
		return &RefusedError{Host: host, Reason: "is a loopback name", Setting: "webhooks.allowPrivateNetworks"}
	}
	return nil
}

// checkLiteral applies the policy to an address written in the URL.
func (p *Policy) checkLiteral(host string, a netip.Addr) error {
	if p.restricted() && !p.inPrefixes(a) {
		return &RefusedError{Addr: a, Reason: "is not in webhooks.allowedHosts"}
	}
	return p.CheckAddr("", a)
}

// CheckAddr applies the address rules to one address about to be dialled;
// host, when not empty, is the name that resolved to it (for the message).
// An address in an allowedHosts CIDR is allowed; otherwise a private one
// needs allowPrivateNetworks. Unspecified, multicast, broadcast and
// reserved addresses are never allowed: none is a webhook (0.0.0.0 and ::
// even reach this host on Linux).
func (p *Policy) CheckAddr(host string, a netip.Addr) error {
	if p == nil {
		p = &Policy{}
	}
	a = a.WithZone("")
	c, what := classify(a)
	switch {
	case c == never:
		return &RefusedError{Host: host, Addr: a, Reason: "is " + what + ", never a webhook address"}
	case c == public, p.inPrefixes(a.Unmap()), p.inPrefixes(a):
		return nil
	case p.allowPrivate:
		return nil
	}
	return &RefusedError{Host: host, Addr: a, Reason: "is " + what, Setting: "webhooks.allowPrivateNetworks"}
}

// RefusedError says why a webhook host or address is refused. Its message
// is what lastError shows for a refused connection, so it names the
// setting that would allow it.
type RefusedError struct {
	Host    string     // the name as written or dialled, if any
	Addr    netip.Addr // the address refused, if one was
	Reason  string     // "is a private network address", …
	Setting string     // the setting that would allow it, if any
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	switch {
	case e.Addr.IsValid() && e.Host != "":
		fmt.Fprintf(&b, "webhook host %s resolves to %s, which %s", e.Host, e.Addr, e.Reason)
	case e.Addr.IsValid():
		fmt.Fprintf(&b, "webhook address %s %s", e.Addr, e.Reason)
	default:
		fmt.Fprintf(&b, "webhook host %q %s", e.Host, e.Reason)
	}
	if e.Setting != "" {
		b.WriteString("; see " + e.Setting)
	}
	return b.String()
}

// endsInNumber is the URL Standard's "ends in a number" test: the host's
// last label (ignoring one trailing dot) is all decimal digits, or 0x
// followed by hex digits. Such a host is an attempted IPv4 address to
// inet_aton and to browsers, never a DNS name (no top-level domain is
// numeric). It is narrower than "all hex digits and dots" on purpose, so
// real names like cafe.de stay names.
func endsInNumber(h string) bool {
	h = strings.TrimSuffix(h, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		for _, r := range last[2:] {
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
		return true
	}
	for _, r := range last {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// checkName requires a DNS host name: ASCII letters, digits, '-' and '_'
// in labels of 1 to 63 characters, at most 253 in all, no trailing dot
// (an FQDN's dot is refused rather than normalized, so "localhost." and
// "hooks.example.com." cannot slip past a comparison with the undotted
// name). A name in Unicode must be written in its xn-- form.
func checkName(h string) error {
	if h == "" {
		return fmt.Errorf("empty")
	}
	if len(h) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	if strings.HasSuffix(h, ".") {
		return fmt.Errorf("ends in a dot")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("has an empty label or one longer than 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("has a label starting or ending with '-'")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("has the character %q (only letters, digits, '-' and '_'; write Unicode names in their xn-- form)", string(rune(c)))
			}
		}
	}
	return nil
}
