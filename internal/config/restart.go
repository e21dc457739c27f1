package config

import (
	"reflect"
	"strings"
)

// A setting tagged `reload:"restart"` is read once, when the daemon starts
// (a connection, the listener, the logger, the dispatcher's tuning, the
// tracing exporter): a reload cannot apply it. The tag on a section covers
// the whole section. RestartChanges and KeepRunning read the tags, so the
// reload log and the daemon agree on what needs a restart.

// RestartChanges lists the settings that differ between old and next but
// take effect only after a restart, as display paths in the file's order: a
// tagged section is one entry ("redis"), a tagged key its path
// ("http.listen").
func RestartChanges(old, next *Config) []string {
	var out []string
	walkRestart("", reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), func(path string, o, n reflect.Value) {
		if !sameValue(o, n) {
			out = append(out, path)
		}
	})
	return out
}

// KeepRunning sets every restart setting of next to its value in old, the
// configuration the daemon runs with, so that a reloaded configuration says
// what is in effect; it returns RestartChanges(old, next) as it was.
func KeepRunning(old, next *Config) []string {
	changed := RestartChanges(old, next)
	walkRestart("", reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem(), func(_ string, o, n reflect.Value) {
		n.Set(o)
	})
	return changed
}

// walkRestart calls f with the path and the two values of every
// restart-tagged field of the structs o and n, recursing into the
// untagged sections.
func walkRestart(prefix string, o, n reflect.Value, f func(path string, o, n reflect.Value)) {
	t := o.Type()
	for i := range t.NumField() {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("cfg")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		path := joinPath(prefix, name)
		switch {
		case field.Tag.Get("reload") == "restart":
			f(path, o.Field(i), n.Field(i))
		case field.Type.Kind() == reflect.Struct:
			walkRestart(path, o.Field(i), n.Field(i), f)
		}
	}
}

// sameValue compares two settings values; an empty list and no list are
// the same ("addrs: []" and no key load alike).
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
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
	default:
		return a.Interface() == b.Interface()
	}
}
