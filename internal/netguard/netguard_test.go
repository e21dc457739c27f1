package netguard

import (
	"strings"
	"testing"
)

// These tests never resolve or dial anything: CheckURL looks at text only.

func mustPolicy(t *testing.T, hosts []string, private bool) *Policy {
	t.Helper()
	p, err := New(hosts, private)
	if err != nil {
		t.Fatalf("New(%q): %v", hosts, err)
	}
	return p
}

func TestCheckURLRefusesPrivateAndTrickyForms(t *testing.T) {
	p := mustPolicy(t, nil, false)
	for _, tc := range []struct{ url, want string }{
		// loopback, RFC 1918, link-local and cloud metadata, ULA, CGNAT
		{"http://127.0.0.1/", "loopback"},
		{"http://127.8.9.10:8080/x", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://10.0.0.1/", "webhook address 10.0.0.1 is a private network address; see webhooks.allowPrivateNetworks"},
		{"http://172.16.0.1/", "private network"},
		{"http://172.31.255.255/", "private network"},
		{"http://192.168.1.1/", "private network"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"http://169.254.1.1/", "link-local"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[fc00::1]/", "unique local"},
		{"http://[fd12:3456::1]/", "unique local"},
		{"http://100.64.0.1/", "carrier-grade NAT"},
		{"http://0.0.0.0/", "never a webhook address"},
		{"http://[::]/", "never a webhook address"},
		{"http://224.0.0.1/", "multicast"},
		{"http://[ff02::1]/", "multicast"},
		{"http://255.255.255.255/", "broadcast"},
		{"http://240.0.0.1/", "reserved"},
		// IPv4 written any way but the canonical dotted quad
		{"http://2130706433/", "canonical dotted quad"},
		{"http://0177.0.0.1/", "canonical dotted quad"},
		{"http://0x7f.0.0.1/", "canonical dotted quad"},
		{"http://0x7f000001/", "canonical dotted quad"},
		{"http://127.1/", "canonical dotted quad"},
		{"http://127.0.1/", "canonical dotted quad"},
		{"http://010.0.0.1/", "canonical dotted quad"},
		{"http://8.8.8.010/", "canonical dotted quad"},   // even a public one
		{"http://134744072/", "canonical dotted quad"},   // 8.8.8.8 in decimal
		{"http://127.0.0.1./", "canonical dotted quad"},  // trailing dot
		{"http://1.2.3.0x4/", "canonical dotted quad"},   // ends in hex
		{"http://256.0.0.1/", "canonical dotted quad"},   // out of range
		{"http://foo.0x10/", "canonical dotted quad"},    // ends in a number
		{"http://example.123/", "canonical dotted quad"}, // ditto
		// IPv4 inside IPv6
		{"http://[::ffff:127.0.0.1]/", "IPv6 form"},
		{"http://[::ffff:7f00:1]/", "IPv6 form"},
		{"http://[::ffff:8.8.8.8]/", "IPv6 form"},
		{"http://[::127.0.0.1]/", "IPv6 form"}, // IPv4-compatible
		{"http://[::7f00:1]/", "IPv6 form"},
		{"http://[64:ff9b::7f00:1]/", "loopback"},  // NAT64 of 127.0.0.1
		{"http://[2002:0a00:0001::1]/", "private"}, // 6to4 of 10.0.0.1
		{"http://[fe80::1%25eth0]/", "percent"},    // zone
		// names
		{"http://localhost/", "loopback name"},
		{"http://LOCALHOST:8080/", "loopback name"},
		{"http://api.localhost/", "loopback name"},
		{"http://localhost./", "ends in a dot"},
		{"http://hooks.example.com./", "ends in a dot"},
		{"http://exa_mple..com/", "empty label"},
		{"http://-bad.example.com/", "'-'"},
		{"http://bücher.example/", "xn--"},
		// forms parsers disagree on
		{"http://user:pw@example.com/", "user information"},
		{"http://example.com@127.0.0.1/", "user information"},
		{"http://127.0.0.1\\@example.com/", "backslash"},
		{"http://%31%32%37.0.0.1/", "percent"},
		{"http://exa mple.com/", "whitespace"},
		{"http://example.com\t/", "whitespace"},
		{"http://example.com:0/", "invalid port"},
		{"http://example.com:65536/", "invalid port"},
		{"http://example.com:080/", "invalid port"},
		{"http://example.com:/", "empty port"},
		{"http://[example.com]/", "not a valid URL"},
		// not http(s)
		{"ftp://example.com/", "http or https"},
		{"file:///etc/passwd", "http or https"},
		{"gopher://127.0.0.1/", "http or https"},
		{"example.com/hook", "absolute"},
		{"//example.com/hook", "absolute"},
		{"http:///path", "host"},
		{"", "absolute"},
	} {
		err := p.CheckURL(tc.url)
		if err == nil {
			t.Errorf("CheckURL(%q) = nil, want an error containing %q", tc.url, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckURL(%q) = %q, want it to contain %q", tc.url, err, tc.want)
		}
	}
}

func TestCheckURLAllowsPublic(t *testing.T) {
	p := mustPolicy(t, nil, false)
	for _, u := range []string{
		"https://hooks.example.com/simpleq",
		"http://hooks.example.com:8080/a?b=c#d",
		"HTTPS://Hooks.Example.COM/x",
		"https://8.8.8.8/hook",
		"https://1.1.1.1:443/",
		"https://[2606:4700:4700::1111]/hook",
		"https://cafe.de/",            // all hex letters, still a name
		"https://0x7f.example.com/",   // numeric-looking first label, name all the same
		"https://127.0.0.1.nip.io/",   // a name; the Dialer checks what it resolves to
		"https://my_host.example.com", // underscores occur in real names
		"https://xn--bcher-kva.example/",
	} {
		if err := p.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
}

func TestAllowPrivateNetworks(t *testing.T) {
	p := mustPolicy(t, nil, true)
	for _, u := range []string{
		"http://127.0.0.1:9000/", "http://[::1]/", "http://localhost:9000/", "http://10.1.2.3/",
		"http://192.168.0.10/", "http://169.254.169.254/", "http://[fd00::1]/", "http://100.64.1.1/",
	} {
		if err := p.CheckURL(u); err != nil {
			t.Errorf("allowPrivateNetworks: CheckURL(%q) = %v, want nil", u, err)
		}
	}
	// Never webhook addresses, and never well-formed, whatever the setting.
	for _, u := range []string{
		"http://0.0.0.0/", "http://[::]/", "http://224.0.0.1/", "http://2130706433/",
		"http://0177.0.0.1/", "http://[::ffff:127.0.0.1]/",
	} {
		if err := p.CheckURL(u); err == nil {
			t.Errorf("allowPrivateNetworks: CheckURL(%q) = nil, want refused", u)
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	p := mustPolicy(t, []string{"hooks.example.com", "*.customers.example", "203.0.113.0/24", "10.9.0.0/16", "2001:db8:1::/48", "198.51.100.7"}, false)
	for _, u := range []string{
		"https://hooks.example.com/",
		"https://HOOKS.example.com:8443/",
		"https://a.customers.example/",
		"https://a.b.customers.example/",
		"https://203.0.113.9/",
		"https://10.9.1.1/", // private, but its CIDR is listed
		"https://[2001:db8:1::5]/",
		"https://198.51.100.7/",
	} {
		if err := p.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", u, err)
		}
	}
	for _, tc := range []struct{ url, want string }{
		{"https://example.com/", "not in webhooks.allowedHosts"},
		{"https://customers.example/", "not in webhooks.allowedHosts"}, // the wildcard does not cover the apex
		{"https://evilhooks.example.com/", "not in webhooks.allowedHosts"},
		{"https://hooks.example.com.evil.test/", "not in webhooks.allowedHosts"},
		{"https://acustomers.example/", "not in webhooks.allowedHosts"},
		{"https://8.8.8.8/", "not in webhooks.allowedHosts"},
		{"https://10.8.0.1/", "not in webhooks.allowedHosts"},
		{"https://198.51.100.8/", "not in webhooks.allowedHosts"},
		{"https://localhost/", "not in webhooks.allowedHosts"},
	} {
		err := p.CheckURL(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckURL(%q) = %v, want %q", tc.url, err, tc.want)
		}
	}
}

func TestAllowedHostsEntries(t *testing.T) {
	for _, e := range []string{"example.com", "*.example.com", "10.0.0.0/8", "2001:db8::/32", "192.0.2.1", "::1", "Hooks.Example.com"} {
		if err := CheckEntry(e); err != nil {
			t.Errorf("CheckEntry(%q) = %v", e, err)
		}
	}
	for _, tc := range []struct{ entry, want string }{
		{"", "empty"},
		{"*", "host name"},
		{"*.", "wildcard"},
		{"*example.com", "host name"},
		{"foo.*.example.com", "host name"},
		{"10.0.0.1/8", "did you mean 10.0.0.0/8"},
		{"10.0.0.0/33", "CIDR"},
		{"0x7f.0.0.1", "canonical dotted quad"},
		{"127.1", "canonical dotted quad"},
		{"::ffff:10.0.0.0/104", "IPv4-mapped"},
		{"https://example.com", "host name"},
		{"example.com:443", "IPv6 address"},
		{"example.com.", "ends in a dot"},
	} {
		err := CheckEntry(tc.entry)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckEntry(%q) = %v, want it to mention %q", tc.entry, err, tc.want)
		}
	}
	_, err := New([]string{"example.com", "*.example.com", "10.0.0.1/8"}, false)
	if err == nil || !strings.HasPrefix(err.Error(), "webhooks.allowedHosts[2]: ") {
		t.Fatalf("New with a bad third entry = %v, want it to name webhooks.allowedHosts[2]", err)
	}
}

func TestNilPolicyIsDefault(t *testing.T) {
	var p *Policy
	if err := p.CheckURL("http://127.0.0.1/"); err == nil {
		t.Fatal("a nil policy let loopback through")
	}
	if err := p.CheckURL("https://example.com/"); err != nil {
		t.Fatalf("a nil policy refused a public name: %v", err)
	}
}
