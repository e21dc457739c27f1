package store

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrUnexpectedReply marks a script reply of a shape its decoder does not
// expect: a short array, a value of the wrong type, a word it does not
// know. It means the scripts and this package disagree (a half-rolled
// deploy, a bug), so it is never read as zero or "" and never retried.
var ErrUnexpectedReply = errors.New("unexpected script reply")

// reply reads one script reply, an array of strings and integers, by
// position. The first value of a shape it does not expect is remembered
// and every later read gives the zero value, so a decoder reads straight
// through and checks err once at its end.
type reply struct {
	script, queue string
	a             []any
	bad           error
}

// newReply checks that v is an array of at least min values.
func newReply(script, queue string, v any, min int) *reply {
	r := &reply{script: script, queue: queue}
	a, ok := v.([]any)
	switch {
	case !ok:
		r.fail("want an array, got %T", v)
	case len(a) < min:
		r.fail("want at least %d values, got %d", min, len(a))
	}
	r.a = a
	return r
}

// fail records the first unexpected shape.
func (r *reply) fail(format string, args ...any) {
	if r.bad == nil {
		r.bad = fmt.Errorf("%w: script %s on queue %s: %s", ErrUnexpectedReply, r.script, r.queue, fmt.Sprintf(format, args...))
	}
}

// err is the first unexpected shape met, or nil.
func (r *reply) err() error { return r.bad }

// len is the number of values.
func (r *reply) len() int { return len(r.a) }

// want records a failure unless cond holds.
func (r *reply) want(cond bool, what string) {
	if !cond {
		r.fail("%s (%d values)", what, len(r.a))
	}
}

func (r *reply) at(i int) (any, bool) {
	if i < 0 || i >= len(r.a) {
		r.fail("no value %d of %d", i+1, len(r.a))
		return nil, false
	}
	return r.a[i], true
}

// str reads value i as a string; a Lua number answers as an integer.
func (r *reply) str(i int) string {
	v, ok := r.at(i)
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	r.fail("value %d: want a string, got %T", i+1, v)
	return ""
}

// optStr reads value i as a string where the script may answer false
// (nil) for none: that reads as "".
func (r *reply) optStr(i int) string {
	if v, ok := r.at(i); ok && v == nil {
		return ""
	}
	return r.str(i)
}

// int reads value i as an integer (or a string holding one).
func (r *reply) int(i int) int64 {
	v, ok := r.at(i)
	if !ok {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err == nil {
			return n
		}
	}
	r.fail("value %d: want an integer, got %T %v", i+1, v, v)
	return 0
}

// optInt reads value i as an integer where the script answers "" (or
// false) for none: that reads as 0.
func (r *reply) optInt(i int) int64 {
	if v, ok := r.at(i); ok && (v == nil || v == "") {
		return 0
	}
	return r.int(i)
}

// unknown records that value i is a word the decoder does not know.
func (r *reply) unknown(i int) {
	r.fail("value %d: unexpected word %q", i+1, r.str(i))
}

// cmdInt reads an integer field of a plain command's reply (HMGET): nil,
// a missing field, is 0; anything else must be an integer.
func cmdInt(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: want an integer field, got %T %v", ErrUnexpectedReply, v, v)
}

// cmdStr reads a string field of a plain command's reply: nil is "".
func cmdStr(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fmt.Errorf("%w: want a string field, got %T", ErrUnexpectedReply, v)
}
