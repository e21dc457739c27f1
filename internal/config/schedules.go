package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/simpleq/simpleqd/internal/cronspec"
)

// Schedule is one entry of the file's schedules: (runtime.md §4), the same
// members as POST /v1/schedules; id is required, since a reload tells its
// schedules apart by id.
type Schedule struct {
	ID       string
	Queue    string
	Cron     string
	Timezone string
	// Payload is the job payload as JSON, converted from the YAML mapping
	// with its keys as written (case and order) and its numbers' digits.
	Payload json.RawMessage
	// Priority (0-9) is carried to every job (lua/schedule.lua). FlowKey is
	// stored and returned; it is carried to the jobs once flow keys exist.
	FlowKey  *string
	Priority int
}

// scheduleFields are the members of one schedules entry, in message order.
var scheduleFields = []string{"id", "queue", "cron", "timezone", "payload", "flowKey", "priority"}

// decodeSchedules reads schedules: from the YAML document itself, not
// viper's view, which lowercases mapping keys (a payload's keys must stay
// as written). Every problem names the entry by index
// (schedules[2].cron) and all are reported at once.
func (l *loader) decodeSchedules(c *Config, doc *yaml.Node) {
	node := topLevel(doc, "schedules")
	if node == nil || node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return
	}
	if node.Kind != yaml.SequenceNode {
		l.problemf("schedules", "must be a list of {id, queue, cron, timezone, payload, flowKey, priority}")
		return
	}
	seen := map[string]int{}
	for i, item := range node.Content {
		p := fmt.Sprintf("schedules[%d]", i)
		if item.Kind != yaml.MappingNode {
			l.problemf(p, "must be a mapping of id, queue, cron, timezone, payload, flowKey and priority")
			continue
		}
		sc := Schedule{Timezone: "UTC"}
		given := map[string]bool{}
		for k := 0; k+1 < len(item.Content); k += 2 {
			key, val := item.Content[k].Value, item.Content[k+1]
			known := false
			for _, f := range scheduleFields {
				if f == key {
					known = true
				}
			}
			if !known {
				if s := nearestName(key, scheduleFields); s != "" {
					l.problemf(p+"."+key, "unknown key (did you mean %q?)", s)
				} else {
					l.problemf(p+"."+key, "unknown key")
				}
				continue
			}
			given[key] = true
			switch key {
			case "payload":
				if val.Kind != yaml.MappingNode {
					l.problemf(p+".payload", "must be a mapping (the job's JSON object)")
					continue
				}
				var buf bytes.Buffer
				if err := yamlToJSON(&buf, val); err != nil {
					l.problemf(p+".payload", "%v", err)
					continue
				}
				sc.Payload = buf.Bytes()
			case "priority":
				n, err := strconv.Atoi(val.Value)
				if val.Kind != yaml.ScalarNode || err != nil || n < 0 || n > 9 {
					l.problemf(p+".priority", "must be an integer from 0 to 9 (got %q)", val.Value)
					continue
				}
				sc.Priority = n
			default:
				if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
					l.problemf(p+"."+key, "must be a string")
					continue
				}
				s := val.Value
				switch key {
				case "id":
					sc.ID = s
				case "queue":
					sc.Queue = s
				case "cron":
					sc.Cron = s
				case "timezone":
					sc.Timezone = s
				case "flowKey":
					sc.FlowKey = &s
				}
			}
		}
		ok := true
		for _, req := range []string{"id", "queue", "cron", "payload"} {
			if !given[req] {
				l.problemf(p+"."+req, "is required")
				ok = false
			}
		}
		if given["id"] {
			if !queueNamePattern.MatchString(sc.ID) {
				l.problemf(p+".id", "%q must match %s", sc.ID, queueNamePattern.String())
				ok = false
			} else if j, dup := seen[sc.ID]; dup {
				l.problemf(p+".id", "%q is also the id of schedules[%d]", sc.ID, j)
				ok = false
			} else {
				seen[sc.ID] = i
			}
		}
		if given["queue"] {
			if _, exists := c.Queues[sc.Queue]; !exists {
				l.problemf(p+".queue", "%q is not a queue of this file's queues", sc.Queue)
				ok = false
			}
		}
		if _, err := cronspec.LoadZone(sc.Timezone); err != nil {
			l.problemf(p+".timezone", "%v", err)
			ok = false
		} else if given["cron"] {
			if _, err := cronspec.Parse(sc.Cron, sc.Timezone); err != nil {
				l.problemf(p+".cron", "%v", err)
				ok = false
			}
		}
		if sc.FlowKey != nil && (len(*sc.FlowKey) == 0 || len(*sc.FlowKey) > 255) {
			l.problemf(p+".flowKey", "must be 1 to 255 characters")
			ok = false
		}
		if ok {
			c.Schedules = append(c.Schedules, sc)
		}
	}
}

// topLevel returns the value node of a top-level key of the document, or nil.
func topLevel(doc *yaml.Node, key string) *yaml.Node {
	if doc == nil || len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// yamlToJSON writes a YAML value as JSON: mappings keep their keys' order
// and case, integers and floats their digits.
func yamlToJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return yamlToJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := yamlToJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := yamlToJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			buf.WriteString("null")
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return fmt.Errorf("bad boolean %q", n.Value)
			}
			buf.WriteString(strconv.FormatBool(b))
		case "!!int", "!!float":
			if json.Valid([]byte(n.Value)) {
				buf.WriteString(n.Value) // the digits as written
				return nil
			}
			var f float64
			if err := n.Decode(&f); err != nil {
				return fmt.Errorf("bad number %q", n.Value)
			}
			b, err := json.Marshal(f)
			if err != nil {
				return fmt.Errorf("number %q has no JSON form", n.Value)
			}
			buf.Write(b)
		default:
			s, _ := json.Marshal(n.Value)
			buf.Write(s)
		}
	default:
		return fmt.Errorf("unsupported YAML value")
	}
	return nil
}
