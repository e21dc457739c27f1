package store

// record.go is the Go half of the job record codec; lua/record.lua is the
// other, and its header is the layout's one description: a record is meta
// JSON, "\n", the raw payload; the meta starts with c, s, x and st, fk
// and the trace context come right after st, a quoted member name is
// always structure; a record completed by settle's fast path carries no
// history entry. Everything in package store that reads a record's bytes
// is here, and nothing here writes one: only the scripts do. The golden
// files in testdata/records pin both halves to the same layout
// (record_golden_test.go).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// claimedRecord is what a delivery needs of a claimed job's record.
type claimedRecord struct {
	claimMeta
	FlowKey     string
	TraceParent string
	TraceState  string
	Payload     []byte
}

// readClaimedRecord reads a record as claim hands it over (undecoded, see
// lua/claim.lua): once per delivery, so without a full JSON decode.
func readClaimedRecord(rec string) (claimedRecord, error) {
	nl := strings.IndexByte(rec, '\n')
	if nl < 0 {
		return claimedRecord{}, errors.New("corrupt record")
	}
	m, err := readClaimMeta(rec[:nl])
	if err != nil {
		return claimedRecord{}, err
	}
	tp, ts := readTrace(rec[:nl])
	return claimedRecord{claimMeta: m, FlowKey: readFlowKey(rec[:nl]), TraceParent: tp, TraceState: ts,
		Payload: []byte(rec[nl+1:])}, nil
}

// claimMeta is the part of a job's meta a claimed delivery needs.
type claimMeta struct {
	C float64 `json:"c"`
	A int     `json:"a"`
	D int     `json:"d"`
}

// readClaimMeta reads c, a and d from a job's meta JSON without a full
// decode: every claim hands over whole records, and this runs once per
// delivery. A member name in quotes can only be structure here: inside a
// JSON string a quote is escaped. Anything unexpected falls back to
// encoding/json.
func readClaimMeta(meta string) (claimMeta, error) {
	num := func(name string) (int64, bool, bool) { // value, present, well-formed
		i := strings.Index(meta, `"`+name+`":`)
		if i < 0 {
			return 0, false, true
		}
		j := i + len(name) + 3
		k := j
		for k < len(meta) && meta[k] >= '0' && meta[k] <= '9' {
			k++
		}
		if k == j || k == len(meta) || (meta[k] != ',' && meta[k] != '}') {
			return 0, true, false
		}
		v, err := strconv.ParseInt(meta[j:k], 10, 64)
		return v, true, err == nil
	}
	c, cok, cgood := num("c")
	a, _, agood := num("a")
	d, _, dgood := num("d")
	if cok && cgood && agood && dgood {
		return claimMeta{C: float64(c), A: int(a), D: int(d)}, nil
	}
	var m claimMeta
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		return claimMeta{}, fmt.Errorf("decode meta: %w", err)
	}
	return m, nil
}

// readTrace finds the trace context members tp and ts (lua/record.lua) in a
// job's meta. It runs once per delivery, so a record without them costs
// one substring search and no allocation; a record with them costs two
// small copies (the claim's reply is not kept alive by a substring). As in
// readClaimMeta, a quoted member name can only be structure: inside a JSON
// string every quote is escaped. tp is only ever [0-9a-f-]; ts is JSON
// unescaped when it holds an escape.
func readTrace(meta string) (parent, state string) {
	const tpKey, tsKey = `,"tp":"`, `,"ts":"`
	i := strings.Index(meta, tpKey)
	if i < 0 {
		return "", ""
	}
	rest := meta[i+len(tpKey):]
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return "", ""
	}
	parent = strings.Clone(rest[:end])
	rest = rest[end+1:]
	if !strings.HasPrefix(rest, tsKey) {
		return parent, ""
	}
	// The string runs to the first quote not escaped by a backslash.
	raw := rest[len(tsKey)-1:] // from its opening quote
	for k := 1; k < len(raw); k++ {
		switch raw[k] {
		case '\\':
			k++
		case '"':
			if strings.IndexByte(raw[1:k], '\\') < 0 {
				return parent, strings.Clone(raw[1:k])
			}
			return parent, unquoteJSON(raw[:k+1])
		}
	}
	return parent, ""
}

// readFlowKey finds the flow key member fk, which record.lua writes right
// after st, in a job's meta ("" when the job has none). As in readTrace a
// quoted member name can only be structure, and a key holding an escape is
// JSON unescaped.
func readFlowKey(meta string) string {
	const fkKey = `,"fk":"`
	i := strings.Index(meta, fkKey)
	if i < 0 {
		return ""
	}
	raw := meta[i+len(fkKey)-1:]
	for k := 1; k < len(raw); k++ {
		switch raw[k] {
		case '\\':
			k++
		case '"':
			if strings.IndexByte(raw[1:k], '\\') < 0 {
				return strings.Clone(raw[1:k])
			}
			return unquoteJSON(raw[:k+1])
		}
	}
	return ""
}

// unquoteJSON decodes a JSON string literal, or gives "" when it is not one.
func unquoteJSON(lit string) string {
	var v string
	if err := json.Unmarshal([]byte(lit), &v); err != nil {
		return ""
	}
	return v
}

// meta mirrors the job meta JSON of lua/record.lua (its header lists the
// fields).
type meta struct {
	C  float64  `json:"c"`
	S  float64  `json:"s"`
	X  float64  `json:"x"`
	St string   `json:"st"`
	A  int      `json:"a"` // omitted by lib.lua while 0
	D  int      `json:"d"`
	K  *string  `json:"k"`
	E  *string  `json:"e"`
	Dr *string  `json:"dr"`
	Ca float64  `json:"ca"`
	Sc *float64 `json:"sc"`
	H  int      `json:"h"`
	// Sid is the schedule that published the job (schedule.lua).
	Sid *string `json:"sid"`
	// Pri is the job's priority (lib.lua wait_score; absent: 0).
	Pri int `json:"pri"`
	// Rk is the job's replace key (publish.lua; control.md §3).
	Rk *string `json:"rk"`
	// Fk is the job's flow key (keys.md; lanes.lua).
	Fk *string `json:"fk"`
}

type histEntry struct {
	Attempt    float64  `json:"attempt"`
	Status     string   `json:"status"`
	Error      *string  `json:"error"`
	Code       *float64 `json:"code"`
	TS         float64  `json:"ts"`
	Probe      bool     `json:"probe"`
	Acked      bool     `json:"acked"`
	RetryAfter *float64 `json:"retryAfter"`
	Scope      string   `json:"scope"`
	Reason     *string  `json:"reason"`
}

// apiStatus is the API status of a record's state st (record.lua).
func apiStatus(st string) Status {
	switch st {
	case "p":
		return StatusPending
	case "r", "f":
		return StatusProcessing
	case "w":
		return StatusAwaitingAck
	case "c":
		return StatusCompleted
	case "d":
		return StatusDead
	}
	return Status(st)
}

// decodeJob reads a job's record and history (K_JOBS and K_HIST, as
// record.lua writes them) into the API's Job.
func decodeJob(q QueueParams, id string, rec, hist []byte) (*Job, error) {
	i := bytes.IndexByte(rec, '\n')
	if i < 0 {
		return nil, fmt.Errorf("job %s: corrupt record", id)
	}
	var m meta
	if err := json.Unmarshal(rec[:i], &m); err != nil {
		return nil, fmt.Errorf("job %s: decode meta: %w", id, err)
	}
	j := &Job{
		ID: id, Queue: q.Name, Status: apiStatus(m.St), Attempts: m.A, MaxAttempts: q.MaxAttempts,
		DeferCount: m.D, IdempotencyKey: m.K, Payload: rec[i+1:],
		ScheduledFor: fromMS(int64(m.S)), ExpiresAt: fromMS(int64(m.X)),
		LastError: m.E, DeadReason: m.Dr, CreatedAt: fromMS(int64(m.C)), History: []Attempt{},
		ScheduleID: m.Sid, Priority: m.Pri, ReplaceKey: m.Rk, FlowKey: m.Fk,
	}
	if m.Ca > 0 {
		t := fromMS(int64(m.Ca))
		j.CompletedAt = &t
	}
	if len(hist) > 0 {
		var entries []histEntry
		buf := make([]byte, 0, len(hist)+2)
		buf = append(append(append(buf, '['), hist...), ']')
		if err := json.Unmarshal(buf, &entries); err != nil {
			return nil, fmt.Errorf("job %s: decode history: %w", id, err)
		}
		for _, e := range entries {
			a := Attempt{Attempt: int(e.Attempt), Status: e.Status, Error: e.Error,
				Timestamp: fromMS(int64(e.TS)), Probe: e.Probe, Acked: e.Acked, RetryAfter: e.RetryAfter,
				Scope: e.Scope, Reason: e.Reason}
			if a.Status == "acked" {
				// Stored before acks were written as SimpleQ's "success":
				// read back as what they are, nothing rewritten.
				a.Status, a.Acked = "success", true
			}
			if e.Code != nil {
				c := int(*e.Code)
				a.WebhookStatusCode = &c
			}
			j.History = append(j.History, a)
		}
	} else if m.St == "c" && m.A == 1 && m.D == 0 && m.H == 0 && m.Ca > 0 {
		// settle.lua's fast path writes no history for a job delivered
		// successfully at its first attempt: the record says it all.
		a := Attempt{Attempt: 1, Status: "success", Timestamp: fromMS(int64(m.Ca))}
		if m.Sc != nil {
			c := int(*m.Sc)
			a.WebhookStatusCode = &c
		}
		j.History = append(j.History, a)
	}
	return j, nil
}
