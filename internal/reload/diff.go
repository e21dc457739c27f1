package reload

import (
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
	// Any tagged setting of auth (apiKeys as a set; every auth.keys entry's
	// key, variable, role and reach).
	ch.APIKeys = !config.SameSettings(old.Auth, next.Auth)

	// What needs a restart is the config's own word (its reload:"restart"
	// tags), the same list daemon.Reload keeps the running values of.
	ch.NeedRestart = config.RestartChanges(old, next)
	return ch
}

// queueDiff lists the changed settings of one queue, read from the
// config's tags (config.ChangedSettings): values that may be secret (signing
// secrets, the webhook URL) are named without their values, and a setting
// added to config.Queue shows up here without an edit.
func queueDiff(o, n config.Queue) []string {
	return config.ChangedSettings(o, n)
}
