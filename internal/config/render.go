package config

import (
	"bytes"
	"fmt"
	"net/url"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// redactedValue replaces secrets in [Config.Redacted]; it is a fixed marker
// rather than a hash so nothing about the secret leaks.
const redactedValue = "[redacted]"

// Redacted renders the effective configuration as YAML in the file's own
// layout, for `simpleqd check` and start-up logs: every default and override
// is visible, durations are Go duration strings, and every key tagged secret
// (API keys, the Redis password, signing secrets, …) is replaced by
// "[redacted]" (empty ones stay empty, so it still shows whether they are
// set); a list that may not repeat an item shows "[redacted 1 of 2]" and so
// on, so how many are active stays visible and the output loads again. A
// URL shows its password masked. A key whose value came from an environment
// variable (signingSecretEnv, passwordEnv, keyEnv) shows only the
// variable's name, so the output loads again as a config file.
//
// The layout is read from the structs' cfg tags (tags.go), so a new
// setting appears here, redacted if it is tagged secret, without an edit.
func (c *Config) Redacted() string {
	shownCfg := *c
	// db and tls.enabled show their effective values, which a URL may set.
	if e, err := c.Redis.Endpoint(); err == nil {
		shownCfg.Redis.DB, shownCfg.Redis.TLS.Enabled = e.DB, e.TLS
	}
	doc, err := renderStruct(reflect.ValueOf(shownCfg), listPlace{})
	if err != nil {
		return fmt.Sprintf("# config: render failed: %v\n", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2) // the layout of config.md
	if err := enc.Encode(doc); err != nil {
		return fmt.Sprintf("# config: render failed: %v\n", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Sprintf("# config: render failed: %v\n", err)
	}
	return buf.String()
}

// listPlace is an item's place in the nearest enclosing list (n is 0
// outside any), which numbered secrets show.
type listPlace struct{ i, n int }

// renderStruct renders the tagged fields of the struct v as a mapping in
// field order, leaving out what a set key resolves and empty omitempty
// keys.
func renderStruct(v reflect.Value, at listPlace) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	fs := fieldsOf(v)
	hide := hidden(fs)
	for _, f := range fs {
		fv := f.v
		if hide[f.tag.name] {
			fv = reflect.Zero(fv.Type())
		}
		if f.tag.omitempty && isEmpty(fv) {
			continue
		}
		val, err := renderValue(f.tag, fv, at)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.tag.name, err)
		}
		key, err := encodeNode(f.tag.name)
		if err != nil {
			return nil, err
		}
		m.Content = append(m.Content, key, val)
	}
	return m, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// renderValue renders one key's value by its type and tag.
func renderValue(t fieldTag, v reflect.Value, at listPlace) (*yaml.Node, error) {
	switch {
	case v.Type() == durationType:
		return encodeNode(time.Duration(v.Int()).String())
	case v.Kind() == reflect.String:
		return encodeNode(redactString(t, v.String(), at))
	case v.Kind() == reflect.Struct:
		return renderStruct(v, at)
	case v.Kind() == reflect.Map:
		// Through a Go map, so keys come out sorted as yaml sorts them.
		items := make(map[string]*yaml.Node, v.Len())
		for _, k := range v.MapKeys() {
			n, err := renderValue(t, v.MapIndex(k), listPlace{})
			if err != nil {
				return nil, err
			}
			items[k.String()] = n
		}
		return encodeNode(items)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := range v.Len() {
			n, err := renderStruct(v.Index(i), listPlace{i: i + 1, n: v.Len()})
			if err != nil {
				return nil, err
			}
			seq.Content = append(seq.Content, n)
		}
		if len(seq.Content) == 0 {
			seq.Style = yaml.FlowStyle
		}
		return seq, nil
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		items := make([]string, v.Len()) // never nil: an empty list shows as []
		for i := range v.Len() {
			items[i] = redactString(t, v.Index(i).String(), listPlace{i: i + 1, n: v.Len()})
		}
		return encodeNode(items)
	default:
		return encodeNode(v.Interface())
	}
}

// redactString is what check shows of one string value of a key tagged t.
func redactString(t fieldTag, s string, at listPlace) string {
	switch {
	case s == "":
		return ""
	case t.url:
		return redactURL(s)
	case !t.secret:
		return s
	case t.numbered && at.n > 0:
		return fmt.Sprintf("[redacted %d of %d]", at.i, at.n)
	default:
		return redactedValue
	}
}

// encodeNode renders a Go value through yaml's own encoder, so scalars are
// quoted exactly as yaml.Marshal quotes them.
func encodeNode(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return &n, nil
}

// redactURL hides a password embedded in a URL (as "xxxxx", the standard
// library's marker, since brackets would be percent-encoded).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
