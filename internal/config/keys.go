package config

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Roles of a key with a reach (auth.keys[].role; runtime.md §3).
const (
	// RolePublisher may publish, read jobs, send callbacks and list its
	// queues' jobs, and nothing else.
	RolePublisher = "publisher"
	// RoleAdmin may do everything on the queues it reaches.
	RoleAdmin = "admin"
)

// maxGlobLen bounds one queue glob: a queue name is at most 128 characters,
// and a glob much longer than that is a mistake, not a pattern.
const maxGlobLen = 256

// Key is one entry of auth.keys: an API key that reaches only the queues
// its globs match, with a role. auth.apiKeys stay full access.
type Key struct {
	// Key is the Bearer token: the file's, or the one read from KeyEnv.
	Key string `cfg:"key,secret,numbered,omitempty"`
	// KeyEnv names the environment variable Key was read from ("" when the
	// file held the key itself); kept so Redacted shows only the name.
	KeyEnv string `cfg:"keyEnv,env,omitempty" resolves:"key"`
	// Role is RolePublisher or RoleAdmin.
	Role string `cfg:"role"`
	// Queues are path.Match globs of the queue names the key may use.
	Queues []string `cfg:"queues"`
}

// Reaches reports whether the key may use the queue called name: whether
// one of its globs matches it with path.Match semantics (globs were
// validated at load, so a match error cannot happen and counts as no).
func (k Key) Reaches(name string) bool {
	for _, g := range k.Queues {
		if ok, err := path.Match(g, name); err == nil && ok {
			return true
		}
	}
	return false
}

// decodeKeys decodes auth.keys, a list of mappings, which the top-level
// schema walk cannot describe (its leaves are scalars and lists of
// strings): each entry is decoded as a section of Key's tags. raw is
// viper's view: mapping keys lowercased. Every problem names the entry by
// index (auth.keys[2].role) and never shows a key's value (key is tagged
// secret).
func (l *loader) decodeKeys(c *Config, raw any) {
	if raw == nil {
		return
	}
	list, ok := raw.([]any)
	if !ok {
		l.problemf("auth.keys", "must be a list of {key or keyEnv, role, queues} (got %s)", describe(raw))
		return
	}
	c.Auth.Keys = make([]Key, 0, len(list))
	for i, item := range list {
		p := fmt.Sprintf("auth.keys[%d]", i)
		m, ok := item.(map[string]any)
		if !ok {
			l.problemf(p, "must be a mapping of key or keyEnv, role and queues (got %s)", describe(item))
			continue
		}
		// One entry is a section of Key's tagged fields; its keys are not
		// collected (they sit inside a list), so they show lowercased.
		var k Key
		l.decodeSection(p, joinRaw(joinRaw("auth", "keys"), strconv.Itoa(i)), schemaOf(reflect.ValueOf(&k).Elem()), m)
		l.resolveKey(p, &k, l.given[p+".key"])
		l.checkReach(p, k)
		c.Auth.Keys = append(c.Auth.Keys, k)
	}
}

// resolveKey enforces exactly one of key and keyEnv and reads keyEnv's
// variable, which must be set and non-empty: a key that silently became ""
// would be refused per request, and the operator would learn it from 401s.
func (l *loader) resolveKey(p string, k *Key, keyGiven bool) {
	switch {
	case keyGiven && k.KeyEnv != "":
		l.problemf(p+".keyEnv", "cannot be combined with key: set only one of key, keyEnv")
	case k.KeyEnv != "":
		secret := l.getenv(k.KeyEnv)
		if strings.TrimSpace(secret) == "" {
			l.problemf(p+".keyEnv", "environment variable %s is unset or empty", k.KeyEnv)
			return
		}
		k.Key = secret
	case keyGiven && strings.TrimSpace(k.Key) == "":
		l.problemf(p+".key", "must not be empty")
	case !keyGiven && !l.reported(p+".key"):
		l.problemf(p+".key", "required (or keyEnv naming an environment variable that holds it)")
	}
}

// checkReach validates an entry's role and queue globs. A glob is checked
// with path.Match's own parser, so what loads is what matches; it may hold
// only queue-name characters ([A-Za-z0-9._-]) and the glob's * ? [ ] ^ \,
// since anything else (a "/", a space) could never match a queue name and
// is surely a mistake.
func (l *loader) checkReach(p string, k Key) {
	switch k.Role {
	case RolePublisher, RoleAdmin:
	case "":
		if !l.reported(p + ".role") {
			l.problemf(p+".role", "required: %q or %q", RolePublisher, RoleAdmin)
		}
	default:
		l.problemf(p+".role", "must be %q or %q (got %q)", RolePublisher, RoleAdmin, k.Role)
	}
	if len(k.Queues) == 0 {
		if !l.reported(p + ".queues") {
			l.problemf(p+".queues", "must list at least one queue name or glob (\"*\" is every queue)")
		}
		return
	}
	for j, g := range k.Queues {
		gp := fmt.Sprintf("%s.queues[%d]", p, j)
		if g == "" {
			l.problemf(gp, "must not be empty")
			continue
		}
		if len(g) > maxGlobLen {
			l.problemf(gp, "must be at most %d characters", maxGlobLen)
			continue
		}
		if i := strings.IndexFunc(g, func(r rune) bool { return !globRune(r) }); i >= 0 {
			l.problemf(gp, "%q: %q can never match a queue name (names are [A-Za-z0-9._-])", g, g[i:i+1])
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			l.problemf(gp, "%q is not a valid glob: %v", g, err)
		}
	}
}

// globRune reports whether r may appear in a queue glob.
func globRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("._-*?[]^\\", r)
}

// checkDuplicateKeys refuses a key listed twice among auth.keys, or both
// there and in auth.apiKeys: one token would then have two reaches, and
// which one counts would be a guess. Messages name positions, never keys.
func (l *loader) checkDuplicateKeys(a Auth) {
	for i, k := range a.Keys {
		if k.Key == "" {
			continue
		}
		if j := slices.Index(a.APIKeys, k.Key); j >= 0 {
			l.problemf(fmt.Sprintf("auth.keys[%d]", i), "the same key as auth.apiKeys[%d]: a key has one reach", j)
		}
		for j := range i {
			if a.Keys[j].Key == k.Key {
				l.problemf(fmt.Sprintf("auth.keys[%d]", i), "the same key as auth.keys[%d]: a key has one reach", j)
				break
			}
		}
	}
}
