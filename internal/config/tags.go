package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The configuration's schema is its structs' tags, read by reflection, so a
// setting is one tagged field and every mechanism that walks the settings
// (decoding and SIMPLEQ_ variables in config.go, check's rendering in
// render.go, the reload diff here, what needs a restart in restart.go)
// picks it up without another list to edit:
//
//	cfg:"name"            a key of the file; a struct field is a section
//	cfg:",inline"         the struct's keys spliced into the enclosing ones
//	cfg:"name,secret"     never echoed: not in messages, "[redacted]" in
//	                      check's output, named without values in the diff
//	cfg:"name,url"        a URL that may carry a password: shown with it
//	                      masked, named without values in the diff
//	cfg:"name,numbered"   (a secret) redacted as "[redacted i of n]" by its
//	                      place in the nearest list, for lists that may not
//	                      repeat an item, so check's output loads again
//	cfg:"name,env"        names an environment variable holding the value
//	                      of the keys it resolves (below); such variables
//	                      are read, so not stray, and API queues may not set
//	                      them
//	cfg:"name,set"        a list whose order and repeats mean nothing
//	cfg:"name,omitempty"  left out of check's output when empty
//	cfg:"name,apart"      decoded by its own code, not the schema walk
//	                      (queues, auth.keys), but rendered and compared
//	resolves:"a,b"        when this key is set, sibling keys a and b hold
//	                      what it resolved (a secret read from a variable,
//	                      the first of a list): check's output leaves them
//	                      empty, and the diff reports an env key's change
//	                      as a's
//	reload:"restart"      read once at start-up; a reload keeps the
//	                      running value (restart.go)

// fieldTag is one field's parsed tags.
type fieldTag struct {
	name                                               string
	inline, secret, url, numbered, env, set, omitempty bool
	apart, restart                                     bool
	resolves                                           []string
}

// tagOf parses f's tags; ok is false for a field that is no setting.
func tagOf(f reflect.StructField) (t fieldTag, ok bool) {
	raw, ok := f.Tag.Lookup("cfg")
	if !ok {
		return t, false
	}
	parts := strings.Split(raw, ",")
	t.name = parts[0]
	for _, opt := range parts[1:] {
		switch opt {
		case "inline":
			t.inline = true
		case "secret":
			t.secret = true
		case "url":
			t.url = true
		case "numbered":
			t.numbered = true
		case "env":
			t.env = true
		case "set":
			t.set = true
		case "omitempty":
			t.omitempty = true
		case "apart":
			t.apart = true
		default:
			panic("config: unknown cfg tag option " + opt + " on " + f.Name)
		}
	}
	if r := f.Tag.Get("resolves"); r != "" {
		t.resolves = strings.Split(r, ",")
	}
	t.restart = f.Tag.Get("reload") == "restart"
	return t, true
}

// hidesValue reports whether check's output must not show a key's value
// (nor the diff its old and new values).
func (t fieldTag) hidesValue() bool { return t.secret || t.url }

// field is one tagged field of a struct value, inline structs flattened.
type field struct {
	tag fieldTag
	v   reflect.Value
}

// fieldsOf lists the tagged fields of the struct v in order, splicing in
// inline structs' fields.
func fieldsOf(v reflect.Value) []field {
	t := v.Type()
	var out []field
	for i := range t.NumField() {
		tag, ok := tagOf(t.Field(i))
		if !ok {
			continue
		}
		if tag.inline {
			out = append(out, fieldsOf(v.Field(i))...)
			continue
		}
		out = append(out, field{tag: tag, v: v.Field(i)})
	}
	return out
}

// hidden lists the keys of fs that a set key resolves (tag resolves), so
// check's output shows where a value came from and not the value.
func hidden(fs []field) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		if len(f.tag.resolves) > 0 && !isEmpty(f.v) {
			for _, k := range f.tag.resolves {
				out[k] = true
			}
		}
	}
	return out
}

// isEmpty is omitempty's test: a zero scalar or an empty list or map.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	default:
		return v.IsZero()
	}
}

// ChangedSettings lists the settings that differ between a and b, two
// values of the same tagged struct type (a [Queue], a section), as the
// reload log shows them: "key old→new" in field order, nested keys as
// "backoff.max", a secret or URL by its name only, and a change of an env
// key as a change of the secret it resolves. It is derived from the tags,
// so a new setting shows up in the reload log without an edit here.
func ChangedSettings(a, b any) []string {
	var out []string
	changedIn("", reflect.ValueOf(a), reflect.ValueOf(b), &out)
	return out
}

func changedIn(prefix string, a, b reflect.Value, out *[]string) {
	bf := fieldsOf(b)
	for i, f := range fieldsOf(a) {
		g := bf[i]
		path := joinPath(prefix, f.tag.name)
		if f.v.Kind() == reflect.Struct {
			changedIn(path, f.v, g.v, out)
			continue
		}
		if sameField(f.tag, f.v, g.v) {
			continue
		}
		switch {
		case f.tag.env && len(f.tag.resolves) > 0:
			// The variable's name is not secret, but a new variable is a
			// new secret: say that, as a change of the secret, once.
			if p := joinPath(prefix, f.tag.resolves[0]); !slices.Contains(*out, p) {
				*out = append(*out, p)
			}
		case f.tag.hidesValue() || !plain(f.v):
			if !slices.Contains(*out, path) {
				*out = append(*out, path)
			}
		default:
			*out = append(*out, path+" "+shown(f.v)+"→"+shown(g.v))
		}
	}
}

// plain reports whether a value may be shown in the diff as it is: a
// scalar or a list of scalars, never a list of sections or a map (which
// may hold secrets of their own).
func plain(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		k := v.Type().Elem().Kind()
		return k != reflect.Struct && k != reflect.Map && k != reflect.Slice
	case reflect.Map, reflect.Struct, reflect.Interface, reflect.Pointer:
		return false
	default:
		return true
	}
}

// shown renders a plain value for the diff (a duration as "1m0s").
func shown(v reflect.Value) string { return fmt.Sprint(v.Interface()) }

// SameSettings reports whether a and b, two values of the same tagged
// struct type, hold the same settings: lists tagged set compare as sets,
// and an empty list equals none.
func SameSettings(a, b any) bool {
	return sameValue(reflect.ValueOf(a), reflect.ValueOf(b))
}

// sameField compares one field's two values by its tag.
func sameField(t fieldTag, a, b reflect.Value) bool {
	if t.set && a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.String {
		return sameSet(a.Interface().([]string), b.Interface().([]string))
	}
	return sameValue(a, b)
}

// sameValue compares two settings values, by their tags inside structs;
// an empty list and no list are the same ("addrs: []" and no key load
// alike).
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range a.NumField() {
			tag, _ := tagOf(t.Field(i))
			if !sameField(tag, a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	default:
		return a.Interface() == b.Interface()
	}
}

// sameSet reports whether two lists hold the same items, in any order and
// number.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// envVariables lists the environment variables that the env-tagged keys of
// the struct v (and its sections, lists and maps) name, so StrayEnv knows
// they are read.
func envVariables(v reflect.Value) []string {
	var out []string
	switch v.Kind() {
	case reflect.Struct:
		for _, f := range fieldsOf(v) {
			if f.tag.env && f.v.Kind() == reflect.String {
				if s := f.v.String(); s != "" {
					out = append(out, s)
				}
				continue
			}
			out = append(out, envVariables(f.v)...)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				out = append(out, envVariables(v.Index(i))...)
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, envVariables(v.MapIndex(k))...)
		}
	}
	return out
}
