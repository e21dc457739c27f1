package reload

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/simpleq/simpleqd/internal/config"
)

// Changes is what a new configuration changes relative to the running one,
// for the reload log line. It names keys and shows numbers and durations but
// never a secret or a webhook URL (a URL often carries a token), so the log
// stays safe to ship.
type Changes struct {
	// Added and Removed are queue names, sorted.
	Added, Removed []string
	// Changed maps a queue name to its changed settings, each "key" or
	// "key old→new".
	Changed map[string][]string
	// APIKeys is true when the set of accepted API keys changed: an
	// auth.apiKeys key, or an auth.keys key, its role or its reach.
	APIKeys bool
	// NeedRestart lists changed keys that a running daemon cannot apply
	// (connections, listener, logger, dispatcher tuning, tracing):
	// config.RestartChanges.
	NeedRestart []string
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Changed) == 0 && !c.APIKeys && len(c.NeedRestart) == 0
}

// ChangedLines renders Changed as "queue: key old→new, key" lines sorted by
// queue, the form the reload log uses.
func (c Changes) ChangedLines() []string {
	names := make([]string, 0, len(c.Changed))
	for n := range c.Changed {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, n+": "+strings.Join(c.Changed[n], ", "))
	}
	return out
}

// Diff compares the running configuration old with next. A nil old counts
// as the built-in defaults.
func Diff(old, next *config.Config) Changes {
	if old == nil {
		old = config.Default()
	}
	ch := Changes{Changed: map[string][]string{}}
	for _, name := range next.QueueNames() {
		o, ok := old.Queues[name]
		if !ok {
			ch.Added = append(ch.Added, name)
			continue
		}
		if d := queueDiff(o, next.Queues[name]); len(d) > 0 {
			ch.Changed[name] = d
		}
	}
	for _, name := range old.QueueNames() {
		if _, ok := next.Queues[name]; !ok {
			ch.Removed = append(ch.Removed, name)
		}
	}
	if len(ch.Changed) == 0 {
		ch.Changed = nil
	}
	ch.APIKeys = !sameSet(old.Auth.APIKeys, next.Auth.APIKeys) ||
		!slices.EqualFunc(old.Auth.Keys, next.Auth.Keys, func(a, b config.Key) bool {
			return a.Key == b.Key && a.KeyEnv == b.KeyEnv && a.Role == b.Role && slices.Equal(a.Queues, b.Queues)
		})

	// What needs a restart is the config's own word (its reload:"restart"
	// tags), the same list daemon.Reload keeps the running values of.
	ch.NeedRestart = config.RestartChanges(old, next)
	return ch
}

// queueDiff lists the changed settings of one queue. Values that may be
// secret (signing secret, webhook URL) are named without their values.
func queueDiff(o, n config.Queue) []string {
	var out []string
	named := func(key string, changed bool) {
		if changed {
			out = append(out, key)
		}
	}
	valued := func(key string, a, b any) {
		as, bs := fmt.Sprint(a), fmt.Sprint(b)
		if as != bs {
			out = append(out, key+" "+as+"→"+bs)
		}
	}
	named("webhookUrl", o.WebhookURL != n.WebhookURL)
	named("signingSecret", o.SigningSecret != n.SigningSecret || o.SigningSecretEnv != n.SigningSecretEnv)
	// A rotation step (a secret added, promoted or dropped) changes the list.
	named("signingSecrets", !slices.Equal(o.SigningSecrets, n.SigningSecrets) || o.SigningSecretsEnv != n.SigningSecretsEnv)
	valued("mode", o.Mode, n.Mode)
	valued("concurrency", o.Concurrency, n.Concurrency)
	valued("rateLimitMax", o.RateLimitMax, n.RateLimitMax)
	valued("rateLimitWindow", o.RateLimitWindow, n.RateLimitWindow)
	valued("maxAttempts", o.MaxAttempts, n.MaxAttempts)
	valued("maxDefers", o.MaxDefers, n.MaxDefers)
	valued("timeout", o.Timeout, n.Timeout)
	valued("ackTimeout", o.AckTimeout, n.AckTimeout)
	valued("ackTimeoutAction", o.AckTimeoutAction, n.AckTimeoutAction)
	valued("backoff.type", o.Backoff.Type, n.Backoff.Type)
	valued("backoff.base", o.Backoff.Base, n.Backoff.Base)
	valued("backoff.max", o.Backoff.Max, n.Backoff.Max)
	valued("backoff.jitter", o.Backoff.Jitter, n.Backoff.Jitter)
	valued("defaultRetryAfter", o.DefaultRetryAfter, n.DefaultRetryAfter)
	valued("jobLifetime", o.JobLifetime, n.JobLifetime)
	valued("retention", o.Retention, n.Retention)
	valued("flowKeys.concurrency", o.FlowKeys.Concurrency, n.FlowKeys.Concurrency)
	valued("flowKeys.rateLimitMax", o.FlowKeys.RateLimitMax, n.FlowKeys.RateLimitMax)
	valued("flowKeys.rateLimitWindow", o.FlowKeys.RateLimitWindow, n.FlowKeys.RateLimitWindow)
	valued("flowKeys.holdScope", o.FlowKeys.HoldScope, n.FlowKeys.HoldScope)
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
