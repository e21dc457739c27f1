package dispatch

import (
	"github.com/valyala/fasthttp"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/netguard"
)

// The deliveries of checked queues (config.Queue.Checked: webhook URLs an
// API user wrote) go through a client of their own, d.checked, whose every
// connection is made by d.guard: the host is resolved at connect time, and
// an address webhooks.allowedHosts and webhooks.allowPrivateNetworks refuse
// is never dialled (package netguard). The delivery then fails with the
// reason in lastError. Trusted (file) queues keep d.client, unchecked.
//
// A client of its own, not a per-host decision in one client's Dial, since
// fasthttp pools connections by host: if a file queue and an API queue
// named the same internal host, the API queue would otherwise be handed
// the file queue's open connection without any check.

// clientFor returns the client a queue's deliveries use.
func (d *Deliverer) clientFor(q config.Queue) *fasthttp.Client {
	if q.Checked {
		return d.checked
	}
	return d.client
}

// WithWebhookPolicy sets the policy checked queues' connections are held
// to (the default, before any is set, is any public address) and returns
// d, for NewDeliverer(...).WithWebhookPolicy(p).
func (d *Deliverer) WithWebhookPolicy(p *netguard.Policy) *Deliverer {
	d.SetWebhookPolicy(p)
	return d
}

// SetWebhookPolicy replaces the policy (a configuration reload). Idle
// connections of checked queues are closed, so none opened under the old,
// perhaps looser, policy is used again: the next delivery dials, and is
// checked, afresh.
func (d *Deliverer) SetWebhookPolicy(p *netguard.Policy) {
	d.guard.SetPolicy(p)
	d.checked.CloseIdleConnections()
}
