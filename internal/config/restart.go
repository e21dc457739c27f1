package config

import "reflect"

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
	return restartChanges(reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem())
}

// KeepRunning sets every restart setting of next to its value in old, the
// configuration the daemon runs with, so that a reloaded configuration says
// what is in effect; it returns RestartChanges(old, next) as it was. The
// daemon applies a reload through it, and package reload warns with
// RestartChanges, so the two cannot disagree.
func KeepRunning(old, next *Config) []string {
	return keepRunning(reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem())
}

// restartChanges is RestartChanges for any tagged struct (o, n of one type).
func restartChanges(o, n reflect.Value) []string {
	var out []string
	walkRestart("", o, n, func(path string, o, n reflect.Value, t fieldTag) {
		if !sameField(t, o, n) {
			out = append(out, path)
		}
	})
	return out
}

// keepRunning is KeepRunning for any tagged struct (n addressable).
func keepRunning(o, n reflect.Value) []string {
	changed := restartChanges(o, n)
	walkRestart("", o, n, func(_ string, o, n reflect.Value, _ fieldTag) { n.Set(o) })
	return changed
}

// walkRestart calls f with the path, the two values and the tag of every
// restart-tagged field of the structs o and n, recursing into the other
// sections (inline structs are spliced in by fieldsOf).
func walkRestart(prefix string, o, n reflect.Value, f func(path string, o, n reflect.Value, t fieldTag)) {
	nf := fieldsOf(n)
	for i, of := range fieldsOf(o) {
		path := joinPath(prefix, of.tag.name)
		switch {
		case of.tag.restart:
			f(path, of.v, nf[i].v, of.tag)
		case of.v.Kind() == reflect.Struct:
			walkRestart(path, of.v, nf[i].v, f)
		}
	}
}
