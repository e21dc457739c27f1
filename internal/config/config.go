package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts the name of every environment variable that overrides a
// setting: SIMPLEQ_REDIS_ADDR overrides redis.addr. It is exported so the
// command line help and docs can quote it rather than repeat it.
const EnvPrefix = "SIMPLEQ"

// keyDelim separates nested keys inside viper. It is not "." because queue
// names may contain dots.
const keyDelim = "::"

// DefaultLameDuck is how long a stopping daemon answers 503 on /readyz while
// still serving the API: long enough for a load balancer or a Kubernetes
// Service to take it out of rotation, short enough not to slow a rollout.
// MaxLameDuck bounds it: past a minute a stop would look hung.
const (
	DefaultLameDuck = 2 * time.Second
	MaxLameDuck     = time.Minute
)

// queueNamePattern is the set of queue names the API and Redis keys accept.
var queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// Default returns the built-in configuration, the one a daemon runs with when
// it is given no file and no environment overrides: an embedded in-memory
// store, a loopback listener without API keys, and no queues. Load starts from
// it, so every key the file omits keeps the value shown here.
func Default() *Config {
	return &Config{
		Redis: Redis{Prefix: "simpleq", Durability: DurabilityLocal, ReplicaTimeout: DefaultReplicaTimeout},
		HTTP: HTTP{
			Listen:                "127.0.0.1:8080",
			MaxPayloadBytes:       1 << 20,
			MaxConcurrentRequests: 1024,
		},
		ShutdownGrace: 10 * time.Second,
		LameDuck:      DefaultLameDuck,
		Log:           Log{Format: "json", Level: "info"},
		Dispatch:      Dispatch{LeaseMargin: 5 * time.Second, ClaimBatch: 64, Linger: 300 * time.Microsecond, ScheduleLease: 2 * time.Second},
		Tracing:       Tracing{SampleRatio: 1, ServiceName: "simpleqd"},
		Defaults: QueueSettings{
			Mode:             "standard",
			Concurrency:      10,
			RateLimitMax:     0,
			RateLimitWindow:  time.Second,
			MaxAttempts:      5,
			MaxDefers:        50,
			Timeout:          15 * time.Second,
			AckTimeout:       5 * time.Minute,
			AckTimeoutAction: "retry",
			Backoff: Backoff{
				Type:   "exponential",
				Base:   time.Second,
				Max:    10 * time.Minute,
				Jitter: true,
			},
			DefaultRetryAfter: 60 * time.Second,
			JobLifetime:       24 * time.Hour,
			Retention:         72 * time.Hour,
			Breaker:           Breaker{Failures: 0, HoldFor: 30 * time.Second},
			FlowKeys:          FlowKeys{RateLimitWindow: time.Second, HoldScope: "key"},
		},
		Queues: map[string]Queue{},
	}
}

// Error is returned by [Load] when the configuration could be read but is
// wrong. It lists every problem at once, each prefixed with the full key path
// (and the environment variable when one set the value), so an operator can
// fix everything in one pass.
type Error struct {
	// Source names where the configuration came from: the file path, or
	// "built-in defaults" when Load was given no file.
	Source string
	// Problems are "key.path: what is wrong" lines in a stable order.
	Problems []string
}

// Error renders the problems one per line under a header naming the source.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid configuration (%s):\n  %s", e.Source, strings.Join(e.Problems, "\n  "))
}

// Load reads the YAML file at path (none when path is ""), applies SIMPLEQ_*
// overrides looked up through getenv, resolves every queue against defaults
// and validates the result. getenv is injected, rather than os.Getenv being
// called, so callers decide which environment counts and tests stay
// hermetic; nil means an empty environment. It also resolves
// signingSecretEnv and signingSecretsEnv.
//
// A missing or unparsable file yields an error naming the file; anything
// else that is wrong yields one *[Error] listing every problem.
func Load(path string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	source := "built-in defaults"
	var data []byte
	if path != "" {
		source = path
		var err error
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: read file: %w", err)
		}
	}

	v := viper.NewWithOptions(viper.KeyDelimiter(keyDelim))
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("config: %s is not valid YAML: %w", source, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %s is not valid YAML: %w", source, err)
	}

	l := &loader{
		getenv:  getenv,
		keys:    map[string][]string{},
		fromEnv: map[string]string{},
		given:   map[string]bool{},
	}
	collectKeys(&doc, "", l.keys)

	c := Default()
	raw := v.AllSettings()
	rawQueues, hasQueues := raw["queues"]
	delete(raw, "queues")
	// schedules: is read from the YAML document itself (schedules.go).
	delete(raw, "schedules")
	// auth.keys is a list of mappings, decoded apart like queues (keys.go).
	var rawKeys any
	if auth, ok := raw["auth"].(map[string]any); ok {
		rawKeys = auth["keys"]
		delete(auth, "keys")
	}
	l.applyEnv(EnvPrefix, "", topSchema(c), raw)
	l.decodeSection("", "", topSchema(c), raw)
	l.decodeKeys(c, rawKeys)
	if hasQueues {
		l.decodeQueues(c, rawQueues)
	}
	l.decodeSchedules(c, &doc)
	l.validate(c)

	if len(l.problems) > 0 {
		return nil, &Error{Source: source, Problems: l.problems}
	}
	return c, nil
}

// Queue returns the resolved settings of the queue with exactly this name
// (case-sensitive), and whether it is configured.
func (c *Config) Queue(name string) (Queue, bool) {
	if c == nil {
		return Queue{}, false
	}
	q, ok := c.Queues[name]
	return q, ok
}

// QueueNames returns the configured queue names sorted, so callers that start
// one loop per queue, or print them, do so in a stable order.
func (c *Config) QueueNames() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.Queues))
	for name := range c.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// node describes one key of the file: either a leaf bound to the Go value it
// decodes into, or a section with children. The schema is read from the
// cfg tags of the configuration's structs (schemaOf), so a new setting is
// one tagged field: its decoding, its environment variable, its redaction
// and whether a reload can apply it all follow from the tag.
type node struct {
	name     string // spelling used in docs, messages and env names
	target   any    // *string, *[]string, *int, *int64, *float64, *bool, *time.Duration
	children []node // set for sections; target is then nil
	// secret marks a value that messages never echo (`cfg:"name,secret"`).
	secret bool
	// env marks a key that names an environment variable (`cfg:"name,env"`).
	env bool
}

// topSchema lists every top-level key except queues, which has dynamic keys.
func topSchema(c *Config) []node { return schemaOf(reflect.ValueOf(c).Elem()) }

// settingsSchema lists the keys allowed both under defaults and in a queue.
func settingsSchema(s *QueueSettings) []node { return schemaOf(reflect.ValueOf(s).Elem()) }

// queueSchema lists the keys of one queue: its own plus every setting.
func queueSchema(q *Queue) []node { return schemaOf(reflect.ValueOf(q).Elem()) }

// schemaOf lists the settings of the struct v (addressable), in field
// order, from their tags (tags.go): `cfg:"name"` is a key (a struct field a
// section), `cfg:"name,secret"` a secret one, `cfg:",inline"` splices a
// struct's keys in. Fields without a cfg tag, and those tagged apart
// (queues, auth.keys), are not read from the file this way; schedules are
// decoded apart too.
func schemaOf(v reflect.Value) []node {
	t := v.Type()
	out := make([]node, 0, t.NumField())
	for i := range t.NumField() {
		tag, ok := tagOf(t.Field(i))
		if !ok || tag.apart {
			continue
		}
		fv := v.Field(i)
		if tag.inline {
			out = append(out, schemaOf(fv)...)
			continue
		}
		n := node{name: tag.name, secret: tag.secret, env: tag.env}
		if fv.Kind() == reflect.Struct {
			n.children = schemaOf(fv)
		} else {
			n.target = fv.Addr().Interface()
		}
		out = append(out, n)
	}
	return out
}

// loader carries the state of one Load call: where keys were spelled how,
// which values came from the environment, and the problems found so far.
type loader struct {
	getenv func(string) string
	// keys maps a lowercased, keyDelim-joined mapping path to the keys of that
	// mapping as written in the file, in file order.
	keys map[string][]string
	// fromEnv maps a display path to the environment variable that set it.
	fromEnv map[string]string
	// given records the display paths set by the file or the environment, so
	// a queue is only blamed for values it chose rather than inherited.
	given    map[string]bool
	problems []string
}

// problemf records a problem at a display path, naming the environment
// variable when the value came from one.
func (l *loader) problemf(path, format string, args ...any) {
	if env, ok := l.fromEnv[path]; ok {
		path += " (from " + env + ")"
	}
	l.problems = append(l.problems, path+": "+fmt.Sprintf(format, args...))
}

// reported reports whether a problem has been recorded at path already.
func (l *loader) reported(path string) bool {
	return slices.ContainsFunc(l.problems, func(p string) bool {
		return strings.HasPrefix(p, path+": ") || strings.HasPrefix(p, path+" (from ")
	})
}

// collectKeys records, for every mapping in the YAML document, its keys as
// written. Merge keys ("<<") contribute the keys of the merged mappings.
func collectKeys(n *yaml.Node, path string, out map[string][]string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			collectKeys(c, path, out)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			collectKeys(n.Alias, path, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				if val.Kind == yaml.SequenceNode {
					for _, c := range val.Content {
						collectKeys(c, path, out)
					}
				} else {
					collectKeys(val, path, out)
				}
				continue
			}
			if !slices.Contains(out[path], k.Value) {
				out[path] = append(out[path], k.Value)
			}
			collectKeys(val, joinRaw(path, strings.ToLower(k.Value)), out)
		}
	}
}

// spelling returns key as the file wrote it under rawPath, falling back to
// viper's lowercased form when it came from elsewhere.
func (l *loader) spelling(rawPath, key string) string {
	for _, k := range l.keys[rawPath] {
		if strings.ToLower(k) == key {
			return k
		}
	}
	return key
}

func joinRaw(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + keyDelim + key
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// applyEnv overlays environment variables onto raw, one variable per leaf of
// schema named prefix_KEY (sections add _SECTION). Values are stored as
// strings; decoding converts them like any other scalar. An empty variable
// counts as unset because getenv cannot tell the two apart.
func (l *loader) applyEnv(prefix, path string, schema []node, raw map[string]any) {
	for _, n := range schema {
		envName := prefix + "_" + strings.ToUpper(n.name)
		key := strings.ToLower(n.name)
		p := joinPath(path, n.name)
		if n.children != nil {
			if raw[key] == nil {
				raw[key] = map[string]any{}
			}
			if sub, ok := raw[key].(map[string]any); ok {
				l.applyEnv(envName, p, n.children, sub)
			}
			continue
		}
		if val := l.getenv(envName); val != "" {
			raw[key] = val
			l.fromEnv[p] = envName
		}
	}
}

// envNames lists the variables applyEnv would consult for schema.
func envNames(prefix string, schema []node) []string {
	var names []string
	for _, n := range schema {
		envName := prefix + "_" + strings.ToUpper(n.name)
		if n.children != nil {
			names = append(names, envNames(envName, n.children)...)
			continue
		}
		names = append(names, envName)
	}
	return names
}

// decodeSection decodes raw (viper's lowercased view of the mapping at
// rawPath, displayed as path) into the targets of schema, reporting unknown
// keys and values of the wrong type.
func (l *loader) decodeSection(path, rawPath string, schema []node, raw map[string]any) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := raw[k]
		rp := joinRaw(rawPath, k)
		i := slices.IndexFunc(schema, func(n node) bool { return strings.ToLower(n.name) == k })
		if i < 0 {
			written := l.spelling(rawPath, k)
			if s := suggest(written, schema); s != "" {
				l.problemf(joinPath(path, written), "unknown key (did you mean %q?)", s)
			} else {
				l.problemf(joinPath(path, written), "unknown key")
			}
			continue
		}
		n := schema[i]
		p := joinPath(path, n.name)
		if val == nil {
			continue // "key:" with no value keeps the inherited value
		}
		if n.children != nil {
			sub, ok := val.(map[string]any)
			if !ok {
				l.problemf(p, "must be a mapping (got %s)", describe(val))
				continue
			}
			l.decodeSection(p, rp, n.children, sub)
			continue
		}
		l.given[p] = true
		l.decodeLeaf(p, n, val)
	}
}

// suggest returns the schema key closest to a misspelt key, or "" when none
// is close enough to be a plausible typo.
func suggest(key string, schema []node) string {
	names := make([]string, len(schema))
	for i, n := range schema {
		names[i] = n.name
	}
	return nearestName(key, names)
}

// nearestName returns the name in names closest to name, ignoring case, or
// "" when none is close enough to be a plausible typo.
func nearestName(name string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(name), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// decodeLeaf converts one scalar (or list) into n's target, reporting a
// problem at path when the value has the wrong type.
func (l *loader) decodeLeaf(path string, n node, val any) {
	target := n.target
	if n.secret {
		// Never echo a secret's value: these messages reach terminals and
		// logs (a rejected reload), and a numeric secret is still a secret.
		switch t := target.(type) {
		case *string:
			if s, ok := val.(string); ok {
				*t = s
			} else {
				l.problemf(path, "must be a string; quote it")
			}
			return
		case *[]string:
			if list, err := toStringList(val); err == nil {
				*t = list
			} else {
				l.problemf(path, "every item must be a string; quote them")
			}
			return
		}
	}
	switch t := target.(type) {
	case *string:
		s, ok := val.(string)
		if !ok {
			l.problemf(path, "must be a string (got %s); quote it", describe(val))
			return
		}
		*t = s
	case *[]string:
		list, err := toStringList(val)
		if err != nil {
			l.problemf(path, "%v", err)
			return
		}
		*t = list
	case *int:
		n, err := toInt(val)
		if err == nil && (n < math.MinInt || n > math.MaxInt) {
			err = errors.New("out of range")
		}
		if err != nil {
			l.problemf(path, "must be an integer (got %s)", describe(val))
			return
		}
		*t = int(n)
	case *int64:
		n, err := toInt(val)
		if err != nil {
			l.problemf(path, "must be an integer (got %s)", describe(val))
			return
		}
		*t = n
	case *float64:
		f, err := toFloat(val)
		if err != nil {
			l.problemf(path, "must be a number (got %s)", describe(val))
			return
		}
		*t = f
	case *bool:
		switch b := val.(type) {
		case bool:
			*t = b
		case string:
			parsed, err := strconv.ParseBool(strings.TrimSpace(b))
			if err != nil {
				l.problemf(path, "must be true or false (got %s)", describe(val))
				return
			}
			*t = parsed
		default:
			l.problemf(path, "must be true or false (got %s)", describe(val))
		}
	case *time.Duration:
		d, err := toDuration(val)
		if err != nil {
			l.problemf(path, "must be a duration like \"1500ms\" or \"2m\", or a number of seconds (got %s)", describe(val))
			return
		}
		*t = d
	default:
		panic(fmt.Sprintf("config: no decoder for %T at %s", target, path))
	}
}

// toStringList accepts a YAML list of strings, or one string holding a
// comma-separated list (which is what an environment variable can carry).
func toStringList(val any) ([]string, error) {
	switch v := val.(type) {
	case string:
		var out []string
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	case []any:
		out := make([]string, 0, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("item %d must be a string (got %s); quote it", i, describe(item))
			}
			out = append(out, s)
		}
		return out, nil
	case []string:
		return slices.Clone(v), nil
	default:
		return nil, fmt.Errorf("must be a list of strings (got %s)", describe(val))
	}
}

// toFloat accepts YAML numbers and numeric strings (an environment
// variable's value), but not NaN or infinities.
func toFloat(val any) (float64, error) {
	var f float64
	switch v := val.(type) {
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint64:
		f = float64(v)
	case float64:
		f = v
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return 0, err
		}
	default:
		return 0, errors.New("not a number")
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a finite number")
	}
	return f, nil
}

// toInt accepts YAML integers, integral floats and decimal strings.
func toInt(val any) (int64, error) {
	switch v := val.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, errors.New("out of range")
		}
		return int64(v), nil
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, errors.New("not an integer")
		}
		return int64(v), nil
	case string:
		return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	default:
		return 0, errors.New("not an integer")
	}
}

// toDuration accepts a Go duration string, or a number of seconds given as a
// YAML number or a numeric string (0.25 is 250ms).
func toDuration(val any) (time.Duration, error) {
	var secs float64
	switch v := val.(type) {
	case string:
		s := strings.TrimSpace(v)
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("parse duration %q: %w", s, err)
		}
		secs = f
	case int:
		secs = float64(v)
	case int64:
		secs = float64(v)
	case uint64:
		secs = float64(v)
	case float64:
		secs = v
	default:
		return 0, errors.New("not a duration")
	}
	ns := math.Round(secs * float64(time.Second))
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
		return 0, errors.New("duration out of range")
	}
	return time.Duration(ns), nil
}

// describe renders a raw value for "(got …)" in messages.
func describe(val any) string {
	switch v := val.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprint(v)
	}
}

// decodeQueues resolves every queue of the file: defaults overlaid with the
// queue's own keys and its SIMPLEQ_QUEUES_<NAME>_<KEY> variables.
func (l *loader) decodeQueues(c *Config, rawQueues any) {
	if rawQueues == nil {
		return
	}
	byLower, ok := rawQueues.(map[string]any)
	if !ok {
		l.problemf("queues", "must be a mapping of queue name to settings (got %s)", describe(rawQueues))
		return
	}
	names := l.keys["queues"]

	// Names viper cannot tell apart, and names whose environment variables
	// would collide, are found before any queue is decoded.
	lowerOwners := map[string][]string{}
	tokenOwners := map[string][]string{}
	for _, name := range names {
		lowerOwners[strings.ToLower(name)] = append(lowerOwners[strings.ToLower(name)], name)
		tokenOwners[envToken(name)] = append(tokenOwners[envToken(name)], name)
	}
	reportedTokens := map[string]bool{}

	for _, name := range names {
		p := joinPath("queues", name)
		if !queueNamePattern.MatchString(name) {
			l.problemf(p, "queue name %q must match %s", name, queueNamePattern.String())
			continue
		}
		if owners := lowerOwners[strings.ToLower(name)]; len(owners) > 1 {
			if owners[0] == name {
				l.problemf("queues", "names %s differ only in letter case, which is not supported", quoteAll(owners))
			}
			continue
		}

		q := Queue{Name: name, QueueSettings: c.Defaults}
		schema := queueSchema(&q)
		rawPath := joinRaw("queues", strings.ToLower(name))
		raw := map[string]any{}
		switch v := byLower[strings.ToLower(name)].(type) {
		case nil:
		case map[string]any:
			raw = v
		default:
			l.problemf(p, "must be a mapping of settings (got %s)", describe(v))
			continue
		}

		envPrefix := EnvPrefix + "_QUEUES_" + envToken(name)
		if owners := tokenOwners[envToken(name)]; len(owners) > 1 {
			if !reportedTokens[envToken(name)] {
				reportedTokens[envToken(name)] = true
				for _, env := range envNames(envPrefix, schema) {
					if l.getenv(env) != "" {
						l.problemf(env, "ambiguous: it would apply to queues %s", quoteAll(owners))
					}
				}
			}
		} else {
			l.applyEnv(envPrefix, p, schema, raw)
		}
		l.decodeSection(p, rawPath, schema, raw)
		l.resolveSecret(p, &q)
		c.Queues[name] = q
	}
}

// secretKeys are the four ways a queue names its signing secret, in the
// order messages list them; exactly one must be used.
var secretKeys = []string{"signingSecret", "signingSecretEnv", "signingSecrets", "signingSecretsEnv"}

// resolveSecret enforces exactly one of signingSecret, signingSecretEnv,
// signingSecrets and signingSecretsEnv, reads the env forms through getenv,
// and leaves SigningSecret holding the current (first) secret whichever
// form was used. A list form also fills SigningSecrets.
func (l *loader) resolveSecret(path string, q *Queue) {
	set := []string{}
	for i, isSet := range []bool{q.SigningSecret != "", q.SigningSecretEnv != "",
		q.SigningSecrets != nil, q.SigningSecretsEnv != ""} {
		if isSet {
			set = append(set, secretKeys[i])
		}
	}
	if len(set) > 1 {
		l.problemf(joinPath(path, set[1]), "cannot be combined with %s: set only one of %s",
			set[0], strings.Join(secretKeys, ", "))
		return
	}
	if len(set) == 1 && set[0] == "signingSecrets" {
		l.resolveSecretList(joinPath(path, "signingSecrets"), "", q.SigningSecrets, q)
		return
	}
	if len(set) == 1 && set[0] == "signingSecretsEnv" {
		envPath := joinPath(path, "signingSecretsEnv")
		// One variable holds the whole list, so a rotation changes the
		// secret store (a Kubernetes Secret, a vault entry) and not the file.
		list := strings.FieldsFunc(l.getenv(q.SigningSecretsEnv), func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
		})
		if len(list) == 0 {
			l.problemf(envPath, "environment variable %s is unset or empty", q.SigningSecretsEnv)
			return
		}
		l.resolveSecretList(envPath, "environment variable "+q.SigningSecretsEnv+": ", list, q)
		return
	}
	secretPath := joinPath(path, "signingSecret")
	envPath := joinPath(path, "signingSecretEnv")
	switch {
	case q.SigningSecretEnv != "":
		secret := l.getenv(q.SigningSecretEnv)
		if secret == "" {
			l.problemf(envPath, "environment variable %s is unset or empty", q.SigningSecretEnv)
			return
		}
		q.SigningSecret = secret
	case q.SigningSecret == "" && !slices.ContainsFunc(secretKeys, func(k string) bool { return l.reported(joinPath(path, k)) }):
		// (A key that was given but did not decode has been reported.)
		l.problemf(secretPath, "required (or signingSecretEnv naming an environment variable that holds it, "+
			"or signingSecrets / signingSecretsEnv listing several to rotate)")
	}
}

// resolveSecretList checks a list of secrets (from the file at path, or
// from an environment variable, then what prefixes messages) and stores
// it. Messages name positions, never values. A repeated secret is refused
// because it is always a copy-and-paste slip, most likely while rotating,
// where it would leave the receivers' new secret unused without a word.
func (l *loader) resolveSecretList(path, what string, list []string, q *Queue) {
	if len(list) == 0 {
		l.problemf(path, "must list at least one secret")
		return
	}
	ok := true
	for i, s := range list {
		if strings.TrimSpace(s) == "" {
			l.problemf(path, "%ssecret %d of %d is empty", what, i+1, len(list))
			ok = false
			continue
		}
		if j := slices.Index(list[:i], s); j >= 0 {
			l.problemf(path, "%ssecrets %d and %d are the same", what, j+1, i+1)
			ok = false
		}
	}
	if !ok {
		return
	}
	q.SigningSecrets = slices.Clone(list)
	q.SigningSecret = list[0]
}

// envToken turns a queue name into the part of an environment variable name
// that identifies it: upper case, with every other character than A-Z and
// 0-9 replaced by "_".
func envToken(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, name)
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, " and ")
}
