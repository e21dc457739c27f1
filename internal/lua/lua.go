// Package lua holds simpleqd's Redis scripts, one file per atomic operation.
//
// Every change to a job or a queue happens inside one of these scripts, so a
// fleet of daemons sharing one Redis can never interleave half-done updates.
// lib.lua is a shared prelude (key layout, queue parameters, the transition
// functions) prepended to each script, so claim, settle and callback apply the
// same rules. Library packs the same prelude and bodies into one Redis
// Functions library, defined once per Redis rather than on every call.
// Package store is the only caller; nothing else sends scripts.
package lua

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Names of the scripts, one per atomic operation.
const (
	Publish  = "publish"
	Claim    = "claim"
	Settle   = "settle"
	Callback = "callback"
	Inspect  = "inspect"
	Control  = "control"
	Replay   = "replay"
	// QueueDef, QueueDrop and Registry manage queues created over the API
	// (runtime.md §1).
	QueueDef  = "queuedef"
	QueueDrop = "queuedrop"
	Registry  = "registry"
	// Cancel cancels one job or a bounded batch of a queue's jobs
	// (control.md §1).
	Cancel = "cancel"
	// Schedule runs a queue's schedules (create, pause, fire...) on the
	// queue's slot; SchedIndex is the fleet-wide index of when to look at
	// which queue (runtime.md §4).
	Schedule   = "schedule"
	SchedIndex = "schedindex"
	// Lists reads one page of a queue's jobs by status; Stats reads its
	// per-minute statistics (control.md §4, docs/control.md).
	Lists = "lists"
	Stats = "stats"
	// Keys reads and changes a queue's lanes (flow keys, keys.md §2-§5).
	Keys = "keys"
	// Conf writes a queue's settings, which every other script reads
	// from Redis (package store, conf.go).
	Conf = "conf"
)

// All lists every script, so start-up can load each one before serving.
var All = []string{Publish, Claim, Settle, Callback, Inspect, Control, Replay, QueueDef, QueueDrop, Registry, Cancel, Schedule, SchedIndex, Lists, Stats, Keys, Conf}

// The per-call values a script can receive in ARGV[1..ARG0] (lib.lua):
// what is the calling daemon's own rather than the queue's, which the
// scripts read from Redis.
const (
	// RandValue is a random value in [0,1) from Go: Lua's math.random is
	// deterministic. Backoff jitter draws on it.
	RandValue = "rand"
	// BatchValue is the maintenance batch: the most items one call reaps,
	// expires or purges.
	BatchValue = "batch"
	// LeaseValue is the delivery lease in ms: the claiming daemon's webhook
	// timeout plus its margin.
	LeaseValue = "lease"
)

// callValues are the per-call values each script reads, in ARGV order; a
// script not listed reads none, so its own arguments start at ARGV[1].
// lib.lua's P fails loudly on a value its script was not given.
var callValues = map[string][]string{
	// claim and settle claim, and a claim does the queue's maintenance
	// (reaping can retry a job, with jitter) and writes leases.
	Claim:  {RandValue, BatchValue, LeaseValue},
	Settle: {RandValue, BatchValue, LeaseValue},
	// A nack retries with jitter.
	Callback: {RandValue},
}

// CallValues returns the per-call values script name reads, in ARGV order.
func CallValues(name string) []string { return callValues[name] }

// prelude lists the files prepended to every script, in order: hold.lua
// (the hold machine, for a queue and a lane alike), record.lua (the job
// record's codec: the stored layout, the fast-path edits, the lease
// token), lib.lua (keys, parameters, the job transitions), lanes.lua
// (flow keys' lanes) and call.lua (call_begin, which starts every call).
var prelude = []string{"hold.lua", "record.lua", "lib.lua", "lanes.lua", "call.lua"}

// Source returns the full source of a script: the list of the per-call
// values it reads (CALL_VALUES, for lib.lua), the shared prelude, then the
// script's own body.
func Source(name string) (string, error) {
	body, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("read script %q: %w", name, err)
	}
	return withPrelude(callValues[name], string(body))
}

// WithPrelude returns body with the shared prelude before it, as Source
// builds every script, for a body that reads no per-call values: package
// store's golden tests run the record codec (record.lua) through it on a
// real Redis.
func WithPrelude(body string) (string, error) { return withPrelude(nil, body) }

func withPrelude(values []string, body string) (string, error) {
	var b strings.Builder
	// KEYS and ARGV are locals, so call_begin can set them in a library
	// (Library) and here alike.
	b.WriteString("local KEYS, ARGV = KEYS, ARGV\n")
	b.WriteString("local CALL_VALUES = " + luaList(values) + "\n")
	if err := writePrelude(&b); err != nil {
		return "", err
	}
	b.WriteString("call_begin(KEYS, ARGV, CALL_VALUES)\n")
	b.WriteString(body)
	b.WriteByte('\n')
	return pruneUnused(b.String()), nil
}

func writePrelude(b *strings.Builder) error {
	for _, f := range prelude {
		src, err := files.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read prelude %s: %w", f, err)
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return nil
}

// luaList is a Lua table constructor of the strings vs.
func luaList(vs []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("'" + v + "'")
	}
	b.WriteByte('}')
	return b.String()
}

// Library returns every script as one Redis Functions library (Redis 7):
// its name, the name of each script's function, and its source for
// FUNCTION LOAD. A script sent with EVALSHA defines its whole prelude on
// every call (a closure per function it reaches, the lane machine's when it
// touches a keyed job); a library defines it once, and each call runs only
// its script's body, after call_begin (docs/performance.md, round 21).
// Redis runs a library's top level with nothing but its registration API
// (no string, math or setmetatable), so the prelude and the bodies are
// defined by the first call of any of its functions, in define, and each
// registered function calls its body from the table define fills (bodies). The
// names carry a hash of the source, so daemons of two versions sharing one
// Redis during a rolling upgrade each call their own.
func Library() (name string, functions map[string]string, src string, err error) {
	var defs strings.Builder
	defs.WriteString("local KEYS, ARGV\n")
	if err := writePrelude(&defs); err != nil {
		return "", nil, "", err
	}
	for _, n := range All {
		body, err := files.ReadFile(n + ".lua")
		if err != nil {
			return "", nil, "", fmt.Errorf("read script %q: %w", n, err)
		}
		// The body's own top-level locals become its function's.
		fmt.Fprintf(&defs, "do\nlocal values = %s\ndefined['%s'] = function(keys, argv)\ncall_begin(keys, argv, values)\n%s\nend\nend\n",
			luaList(callValues[n]), n, body)
	}
	sum := sha1.Sum([]byte(defs.String()))
	name = "simpleqd_" + hex.EncodeToString(sum[:])[:12]
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n")
	b.WriteString("local bodies = nil\nlocal function define()\nlocal defined = {}\n")
	b.WriteString(defs.String())
	// Set at the end, so a define that fails leaves bodies nil and the
	// next call defines them again.
	b.WriteString("bodies = defined\nend\n")
	functions = make(map[string]string, len(All))
	for _, n := range All {
		fn := name + "_" + n
		functions[n] = fn
		fmt.Fprintf(&b, "redis.register_function('%s', function(keys, argv)\nif not bodies then define() end\nreturn bodies['%s'](keys, argv)\nend)\n", fn, n)
	}
	return name, functions, b.String(), nil
}

// pruneUnused blanks the prelude's top-level local functions that the
// script's code cannot reach (named by no line outside a function, nor by a
// function that is reached): a script's prelude creates a closure
// for every function it defines on every call, so a function a script
// never reaches costs it on each call (docs/performance.md, round 18).
// A function is a line "local function name(" at column 0 up to the next
// line "end" at column 0 (or that one line, when it ends with "end"); its
// lines become empty, so the line numbers in Redis' error messages stay
// those of the files. A name that appears anywhere else but in a line
// that is all comment (in code, a string, or a comment after code) keeps
// its function: the pruning can only keep too much, never too little.
func pruneUnused(src string) string {
	lines := strings.Split(src, "\n")
	type fn struct {
		name     string
		from, to int
	}
	var fns []fn
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "local function ") {
			continue
		}
		name, _, ok := strings.Cut(strings.TrimPrefix(l, "local function "), "(")
		if !ok || !isName(name) {
			continue
		}
		to := -1
		if strings.HasSuffix(strings.TrimRight(l, " "), " end") {
			to = i
		} else {
			for j := i + 1; j < len(lines); j++ {
				if strings.HasPrefix(lines[j], "local function ") {
					break // not the layout this relies on: keep it
				}
				if strings.TrimRight(lines[j], " ") == "end" {
					to = j
					break
				}
			}
		}
		if to >= 0 {
			fns = append(fns, fn{name, i, to})
		}
	}
	// Which block each line is in (-1: none), and the blocks by name.
	in := make([]int, len(lines))
	for i := range in {
		in[i] = -1
	}
	byName := map[string][]int{}
	for k, f := range fns {
		for i := f.from; i <= f.to; i++ {
			in[i] = k
		}
		byName[f.name] = append(byName[f.name], k)
	}
	// The names each block names, and those the rest of the source names
	// (the roots): the functions reachable from the roots stay.
	refs := make([][]string, len(fns))
	var roots []string
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "--") {
			continue
		}
		words := names(l)
		if k := in[i]; k >= 0 {
			if i == fns[k].from {
				// Its own name on its first line is the definition.
				words = slices.DeleteFunc(words, func(w string) bool { return w == fns[k].name })
			}
			refs[k] = append(refs[k], words...)
		} else {
			roots = append(roots, words...)
		}
	}
	used := make([]bool, len(fns))
	queue := roots
	for len(queue) > 0 {
		w := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, k := range byName[w] {
			if !used[k] {
				used[k] = true
				queue = append(queue, refs[k]...)
			}
		}
	}
	for k, f := range fns {
		if !used[k] {
			for i := f.from; i <= f.to; i++ {
				lines[i] = ""
			}
		}
	}
	return strings.Join(lines, "\n")
}

// names lists the names (identifier-like words) of line l, in order.
func names(l string) []string {
	var out []string
	for i := 0; i < len(l); {
		if !isNameByte(l[i]) {
			i++
			continue
		}
		j := i
		for j < len(l) && isNameByte(l[j]) {
			j++
		}
		if c := l[i]; c < '0' || c > '9' {
			out = append(out, l[i:j])
		}
		i = j
	}
	return out
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
