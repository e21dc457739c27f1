package config

import (
	"fmt"

	"github.com/simpleq/simpleqd/internal/netguard"
)

// Webhooks says where a queue created over the API may point its webhook
// (runtime.md §2). Queues from this file are trusted and never checked:
// the operator wrote them, and one pointing at a service on the same host
// or network is the common case. A queue from the API carries a URL an API
// user chose, so it is checked when written and on every connection
// (package netguard), or an API key would be a way into the operator's
// network: loopback services, cloud metadata at 169.254.169.254, the
// internal network.
type Webhooks struct {
	// AllowedHosts lists exact host names, "*.example.com" wildcards
	// (any name below example.com, not example.com itself), and CIDRs or
	// bare IP addresses. Empty allows any host at a public address. A CIDR
	// also lets its addresses past the private-network check.
	AllowedHosts []string `cfg:"allowedHosts"`
	// AllowPrivateNetworks lets API queues reach loopback, RFC 1918,
	// link-local (169.254.0.0/16, cloud metadata), unique local (fc00::/7)
	// and shared (100.64.0.0/10) addresses.
	AllowPrivateNetworks bool `cfg:"allowPrivateNetworks"`
}

// Policy returns the netguard policy of a validated section. Load has
// already refused a bad entry, so an error here means a Config built in
// code with one.
func (w Webhooks) Policy() (*netguard.Policy, error) {
	return netguard.New(w.AllowedHosts, w.AllowPrivateNetworks)
}

// validateWebhooks names every bad allowedHosts entry by its index. An
// empty list is stored as nil, so "allowedHosts: []" and no key at all
// load the same (and Redacted output loads back equal).
func (l *loader) validateWebhooks(w *Webhooks) {
	if len(w.AllowedHosts) == 0 {
		w.AllowedHosts = nil
	}
	for i, e := range w.AllowedHosts {
		if err := netguard.CheckEntry(e); err != nil {
			l.problemf(fmt.Sprintf("webhooks.allowedHosts[%d]", i), "%v (got %q)", err, e)
		}
	}
}
