package config

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Queues created over the API (runtime.md §1). Their settings are named as
// in the file and validated by the file's own rules, through the same
// loader, so every message an API user sees is the one an operator sees for
// the same mistake in the file. What the API stores is a QueueSpec: only the
// settings the user gave. Unset ones come from the file's defaults each
// time the spec is resolved, as for a file queue.

// QueueSpec is the settings of one API queue as given: keys spelt as in the
// file (webhookUrl, backoff.max under "backoff", …), durations as numbers
// of seconds or Go duration strings, the signing secret(s) included. It is
// a JSON object's decoded form (map[string]any), the form it is stored in.
type QueueSpec map[string]any

// FieldProblem is one bad setting of a QueueSpec: Field is the setting's
// path ("concurrency", "backoff.max"), Message what is wrong, worded as in
// a configuration error.
type FieldProblem struct {
	Field   string
	Message string
}

// apiQueueSchema is queueSchema without the *Env keys: an API user must not
// make the daemon read its own environment (a signingSecretEnv naming
// SIMPLEQ_AUTH_APIKEYS would sign with, and so leak, an API key).
func apiQueueSchema(q *Queue) []node {
	return slices.DeleteFunc(queueSchema(q), func(n node) bool { return n.env })
}

// ValidQueueName reports whether name may name a queue (config.md:
// [A-Za-z0-9._-]{1,128}), for the API to refuse a bad one before anything.
func ValidQueueName(name string) bool { return queueNamePattern.MatchString(name) }

// QueueNamePattern is the pattern ValidQueueName applies, for messages.
func QueueNamePattern() string { return queueNamePattern.String() }

// ResolveQueueSpec turns spec into the queue called name: defaults
// overlaid with the spec, validated as the file would validate a queue, and
// Checked (its webhook URL goes through netguard when written and on every
// connection). It returns the canonical spec too, the same settings with
// every key spelt as the file's schema spells it (the loader accepts any
// letter case, as viper does for the file), which is what gets stored. On
// problems the Queue is not usable; the problems are sorted by field.
func ResolveQueueSpec(name string, spec QueueSpec, defaults QueueSettings) (Queue, QueueSpec, []FieldProblem) {
	l := &loader{
		getenv:  func(string) string { return "" },
		keys:    map[string][]string{},
		fromEnv: map[string]string{},
		given:   map[string]bool{},
	}
	q := Queue{Name: name, QueueSettings: defaults, Checked: true, Defined: true}
	schema := apiQueueSchema(&q)
	raw := lowerKeys(spec, "", l.keys)
	l.decodeSection("", "", schema, raw)
	switch {
	case q.SigningSecret == "" && q.SigningSecrets == nil:
		if !l.reported("signingSecret") && !l.reported("signingSecrets") {
			l.problemf("signingSecret", "required (or signingSecrets listing several to rotate)")
		}
	default:
		l.resolveSecret("", &q)
	}
	l.checkWebhookURL("webhookUrl", q.WebhookURL)
	for _, pr := range checkSettings(q.QueueSettings) {
		l.problemf(pr.keys[0], "%s", pr.msg)
	}
	var out []FieldProblem
	for _, p := range l.problems {
		field, msg, _ := strings.Cut(p, ": ")
		out = append(out, FieldProblem{Field: field, Message: msg})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	if len(out) > 0 {
		return Queue{}, nil, out
	}
	return q, canonical(spec, schema), nil
}

// lowerKeys copies spec with every mapping's keys lowercased (the form
// decodeSection reads, as viper gives it for the file), recording the
// spellings under rawPath so messages name keys as the user wrote them.
func lowerKeys(spec map[string]any, rawPath string, spellings map[string][]string) map[string]any {
	out := make(map[string]any, len(spec))
	for k, v := range spec {
		spellings[rawPath] = append(spellings[rawPath], k)
		lk := strings.ToLower(k)
		if sub, ok := v.(map[string]any); ok {
			v = lowerKeys(sub, joinRaw(rawPath, lk), spellings)
		}
		out[lk] = v
	}
	return out
}

// canonical respells spec's keys as schema spells them, dropping null
// values (a JSON null means "not set", as "key:" does in the file).
// Unknown keys cannot remain: ResolveQueueSpec refused them.
func canonical(spec map[string]any, schema []node) QueueSpec {
	out := QueueSpec{}
	for k, v := range spec {
		if v == nil {
			continue
		}
		i := slices.IndexFunc(schema, func(n node) bool { return strings.EqualFold(n.name, k) })
		if i < 0 {
			continue
		}
		n := schema[i]
		if sub, ok := v.(map[string]any); ok && n.children != nil {
			c := canonical(sub, n.children)
			if len(c) > 0 {
				out[n.name] = map[string]any(c)
			}
			continue
		}
		out[n.name] = v
	}
	return out
}

// MergeQueueSpec applies patch to base as a JSON merge patch (RFC 7396):
// a member replaces base's, a mapping merges into base's mapping, and null
// removes the setting (it falls back to the file's default). Keys match in
// any letter case, so a patch's "rateLimitMax" replaces a stored
// "ratelimitmax" rather than sitting beside it. base is not modified.
func MergeQueueSpec(base, patch QueueSpec) QueueSpec {
	return QueueSpec(mergeMaps(base, patch))
}

func mergeMaps(base, patch map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range patch {
		for bk := range out {
			if strings.EqualFold(bk, k) && bk != k {
				if _, ok := patch[bk]; !ok {
					out[k] = out[bk]
					delete(out, bk)
				}
			}
		}
		if v == nil {
			delete(out, k)
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			if cur, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(cur, sub)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// SecretHint is what the API shows of a signing secret: its last four
// characters, so an operator can tell which secret a queue holds without
// the secret being shown. A secret shorter than eight characters gets no
// hint (four of seven would be most of it).
func SecretHint(secret string) string {
	n := utf8.RuneCountInString(secret)
	if n < 8 {
		return ""
	}
	r := []rune(secret)
	return string(r[n-4:])
}
