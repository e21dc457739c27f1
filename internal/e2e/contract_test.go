package test

// Contract tests: every request and response shape of shared/spec/api.md,
// checked against a running daemon on a real redis-server. Each answer is
// normalized (job ids, timestamps, cursors and loopback ports replaced by
// placeholders, key order kept) and compared with a golden file under
// testdata/contract/; `go test ./test -run TestContract -update` rewrites
// them. Independently of the goldens, ctShape checks each body's member
// names and order against api.md, so regenerating a golden cannot silently
// accept a shape change. Deviations from SimpleQ's shapes are listed in
// docs/coming-from-simpleq.md.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

// ctUpdateFlag is registered in init, and only if no other file of the
// package registered -update already (package-level flag variables are
// initialized before any init runs), so two golden-file suites can share it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/ instead of comparing")
	}
}

// ctUpdate reports whether golden files are to be rewritten.
func ctUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// ---- order-preserving JSON, normalized ----

// ctNode is a JSON value that keeps object member order, so golden files
// show members in the order the daemon sends them.
type ctNode struct {
	obj    []ctMember // object (isObj)
	arr    []*ctNode  // array (isArr)
	scalar any        // string, json.Number, bool or nil
	isObj  bool
	isArr  bool
}

type ctMember struct {
	key string
	val *ctNode
}

func ctParse(t *testing.T, b []byte) *ctNode {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := ctParseValue(dec)
	require.NoError(t, err, "invalid JSON: %s", b)
	_, err = dec.Token()
	require.ErrorIs(t, err, io.EOF, "trailing data after JSON: %s", b)
	return n
}

func ctParseValue(dec *json.Decoder) (*ctNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &ctNode{isObj: true, obj: []ctMember{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := ctParseValue(dec)
				if err != nil {
					return nil, err
				}
				n.obj = append(n.obj, ctMember{kt.(string), val})
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &ctNode{isArr: true, arr: []*ctNode{}}
			for dec.More() {
				val, err := ctParseValue(dec)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, val)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	default:
		return &ctNode{scalar: v}, nil
	}
}

// get returns an object member (nil when absent).
func (n *ctNode) get(key string) *ctNode {
	for _, m := range n.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

func (n *ctNode) keys() []string {
	out := make([]string, len(n.obj))
	for i, m := range n.obj {
		out[i] = m.key
	}
	return out
}

func (n *ctNode) str() string {
	s, _ := n.scalar.(string)
	return s
}

// render writes n as indented JSON (two spaces, like the golden files).
func (n *ctNode) render(b *bytes.Buffer, indent string) {
	switch {
	case n.isObj:
		if len(n.obj) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, m := range n.obj {
			k, _ := json.Marshal(m.key)
			b.WriteString(indent + "  ")
			b.Write(k)
			b.WriteString(": ")
			m.val.render(b, indent+"  ")
			if i < len(n.obj)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case n.isArr:
		if len(n.arr) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, v := range n.arr {
			b.WriteString(indent + "  ")
			v.render(b, indent+"  ")
			if i < len(n.arr)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(n.scalar)
		b.Truncate(b.Len() - 1) // Encode's newline
	}
}

var (
	ctTimeRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	ctJobIDRE = regexp.MustCompile(`job_[0-9a-hjkmnp-tv-z]{26}_([A-Za-z0-9._-]+)`)
)

// ctNormalizer replaces what differs between runs with stable placeholders.
// Job ids get a number in order of first appearance over the whole test, so
// "the repeat returned the same job" stays visible in the goldens.
type ctNormalizer struct {
	mu    sync.Mutex
	ids   map[string]int
	subs  []string        // old, new pairs applied to every string first
	names map[string]bool // golden files compared (or written) so far
}

func (nz *ctNormalizer) label(id string) string {
	nz.mu.Lock()
	defer nz.mu.Unlock()
	if nz.ids == nil {
		nz.ids = map[string]int{}
	}
	n, ok := nz.ids[id]
	if !ok {
		n = len(nz.ids) + 1
		nz.ids[id] = n
	}
	return "job_<" + strconv.Itoa(n) + ">"
}

func (nz *ctNormalizer) text(s string) string {
	for i := 0; i+1 < len(nz.subs); i += 2 {
		s = strings.ReplaceAll(s, nz.subs[i], nz.subs[i+1])
	}
	if ctTimeRE.MatchString(s) {
		return "<timestamp>"
	}
	return ctJobIDRE.ReplaceAllStringFunc(s, func(id string) string {
		q := ctJobIDRE.FindStringSubmatch(id)[1]
		return nz.label(id) + "_" + q
	})
}

func (nz *ctNormalizer) node(n *ctNode, key string) {
	switch {
	case n.isObj:
		for _, m := range n.obj {
			nz.node(m.val, m.key)
		}
	case n.isArr:
		for _, v := range n.arr {
			nz.node(v, key)
		}
	default:
		if s, ok := n.scalar.(string); ok {
			if key == "nextCursor" {
				n.scalar = "<cursor>"
				return
			}
			n.scalar = nz.text(s)
		}
	}
}

// ctHeaders are the response headers the contract speaks about.
var ctHeaders = []string{"Content-Type", "Retry-After", "Www-Authenticate", "Allow"}

// ctGolden compares (status, selected headers, normalized body) with
// testdata/contract/<name>.json, or writes it with -update.
func ctGolden(t *testing.T, nz *ctNormalizer, name string, status int, header http.Header, headerNames []string, body []byte) *ctNode {
	t.Helper()
	parsed := ctParse(t, body)
	raw := ctParse(t, body) // unnormalized, for the caller's checks
	nz.node(parsed, "")
	nz.mu.Lock()
	if nz.names == nil {
		nz.names = map[string]bool{}
	}
	nz.names[name] = true
	nz.mu.Unlock()
	doc := &ctNode{isObj: true}
	if status != 0 { // 0: a delivery, which is a request
		doc.obj = append(doc.obj, ctMember{"status", &ctNode{scalar: json.Number(strconv.Itoa(status))}})
	}
	hdr := &ctNode{isObj: true, obj: []ctMember{}}
	for _, h := range headerNames {
		if v := header.Get(h); v != "" {
			hdr.obj = append(hdr.obj, ctMember{h, &ctNode{scalar: nz.text(v)}})
		}
	}
	doc.obj = append(doc.obj, ctMember{"headers", hdr}, ctMember{"body", parsed})
	var got bytes.Buffer
	doc.render(&got, "")
	got.WriteByte('\n')

	path := filepath.Join("testdata", "contract", name+".json")
	if ctUpdate() {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
		return raw
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing; run: go test ./test -run TestContract -update")
	require.Equal(t, string(want), got.String(), "%s differs from the golden file (run with -update to accept a deliberate change)", path)
	return raw
}

// ctCheck compares an API answer with its golden file and checks its status.
func ctCheck(t *testing.T, nz *ctNormalizer, name string, r Response, wantStatus int) *ctNode {
	t.Helper()
	require.Equal(t, wantStatus, r.Status, "%s: %s", name, r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"), name)
	return ctGolden(t, nz, name, r.Status, r.Header, ctHeaders, r.Body)
}

// ---- shapes of api.md, independent of the goldens ----

// ctShape is a body's member names in api.md order; optional members (the
// simpleqd additions emitted only when set) may follow, in their order.
type ctShape struct {
	required []string
	optional []string
}

var (
	ctPublished = ctShape{required: []string{"id", "status", "createdAt"}}
	ctJob       = ctShape{required: []string{"id", "queue", "status", "attempts", "maxAttempts", "deferCount",
		"idempotencyKey", "payload", "scheduledFor", "expiresAt", "lastError", "deadReason", "history",
		"createdAt", "completedAt"}, optional: []string{"scheduleId", "priority", "replaceKey", "flowKey"}}
	ctAttempt  = ctShape{required: []string{"attempt", "status", "error", "webhookStatusCode", "timestamp"}, optional: []string{"probe", "acked", "retryAfter", "scope", "reason"}}
	ctAccepted = ctShape{required: []string{"id", "accepted"}}
	ctQueue    = ctShape{required: []string{"name", "mode", "webhookUrl", "concurrency", "rateLimitMax",
		"rateLimitWindow", "maxAttempts", "maxDefers", "counts", "hold"}, optional: []string{"source", "signingSecretHint", "flowKeys"}}
	ctCounts   = ctShape{required: []string{"pending", "processing", "awaitingAck", "dead"}, optional: []string{"heldKeys"}}
	ctHold     = ctShape{required: []string{"state", "until", "probeJobId", "reason"}}
	ctError    = ctShape{required: []string{"error"}}
	ctInvalid  = ctShape{required: []string{"formErrors", "fieldErrors"}}
	ctEnvelope = ctShape{required: []string{"id", "queue", "payload", "attempt", "maxAttempts", "deferCount", "createdAt"}}
)

func (s ctShape) check(t *testing.T, what string, n *ctNode) {
	t.Helper()
	require.True(t, n.isObj, "%s is not an object", what)
	keys := n.keys()
	require.GreaterOrEqual(t, len(keys), len(s.required), "%s members %v, want %v", what, keys, s.required)
	require.Equal(t, s.required, keys[:len(s.required)], "%s members", what)
	rest, opt := keys[len(s.required):], s.optional
	for _, k := range rest {
		for len(opt) > 0 && opt[0] != k {
			opt = opt[1:]
		}
		require.NotEmpty(t, opt, "%s has undocumented member %q (members %v)", what, k, keys)
		opt = opt[1:]
	}
}

func ctCheckJob(t *testing.T, n *ctNode) {
	t.Helper()
	ctJob.check(t, "Job", n)
	for _, a := range n.get("history").arr {
		ctAttempt.check(t, "Attempt", a)
		require.Contains(t, []string{"success", "failed", "nacked", "deferred"}, a.get("status").str(), "SimpleQ's JobAttemptStatus only")
	}
	require.Contains(t, []string{"pending", "processing", "awaiting_ack", "completed", "dead"}, n.get("status").str())
	for _, k := range []string{"scheduledFor", "expiresAt", "createdAt"} {
		require.Regexp(t, ctTimeRE, n.get(k).str(), k)
	}
}

func ctCheckQueue(t *testing.T, n *ctNode) {
	t.Helper()
	ctQueue.check(t, "Queue", n)
	ctCounts.check(t, "Queue.counts", n.get("counts"))
	ctHold.check(t, "Queue.hold", n.get("hold"))
	require.Contains(t, []string{"open", "held", "probing", "paused"}, n.get("hold").get("state").str())
}

func ctCheckError(t *testing.T, n *ctNode) {
	t.Helper()
	ctError.check(t, "error body", n)
	e := n.get("error")
	if e.isObj {
		ctInvalid.check(t, "validation error", e)
		require.True(t, e.get("formErrors").isArr)
		require.True(t, e.get("fieldErrors").isObj)
		return
	}
	_, isString := e.scalar.(string)
	require.True(t, isString, "error must be a string or {formErrors, fieldErrors}")
}

// ---- the tests ----

const (
	ctKey    = "ct_key_1"
	ctSecret = "whsec_contract"
)

// TestContractSignatureVector: the known-answer vector of api.md, through
// the daemon's envelope builder and signer and through the webhook package.
func TestContractSignatureVector(t *testing.T) {
	t.Parallel()
	const body = `{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`
	const sig = "sha256=121657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9"
	env := dispatch.Envelope("emails", 3, store.ClaimedJob{ID: "job_123", Attempt: 1, DeferCount: 0,
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Payload: []byte(`{"to":"a@b.com"}`)})
	require.Equal(t, body, string(env), "the daemon builds the vector's body byte for byte")
	require.Equal(t, sig, dispatch.Sign("whsec_test_secret", env))
	require.Equal(t, sig, webhook.Sign("whsec_test_secret", []byte(body)))
	require.True(t, webhook.Verify([]string{"whsec_test_secret"}, []byte(body), sig))
	require.False(t, webhook.Verify([]string{"whsec_test_secre"}, []byte(body), sig))
	ctEnvelope.check(t, "envelope", ctParse(t, env))
}

// TestContractAPI walks every endpoint of api.md on one daemon, in an order
// that makes every answer deterministic.
func TestContractAPI(t *testing.T) {
	t.Parallel()
	rs := Redis(t)

	var dlMu sync.Mutex
	var stdDeliveries []Delivery
	// The first std delivery is held until the repeat publish has been
	// answered, so the repeat deterministically sees "processing".
	firstStarted, releaseFirst := make(chan struct{}), make(chan struct{})
	stdHook := NewWebhook(t, func(dl Delivery) Reply {
		dlMu.Lock()
		stdDeliveries = append(stdDeliveries, dl)
		n := len(stdDeliveries)
		dlMu.Unlock()
		if n == 1 {
			close(firstStarted)
			<-releaseFirst
		}
		return Reply{Status: 200}
	})
	t.Cleanup(func() {
		select {
		case <-releaseFirst:
		default:
			close(releaseFirst)
		}
	})
	var bpCalls int
	bpHook := NewWebhook(t, func(Delivery) Reply {
		dlMu.Lock()
		defer dlMu.Unlock()
		bpCalls++
		if bpCalls == 1 {
			return Reply{Status: 429, RetryAfter: "0.1", Body: "rate limited"}
		}
		return Reply{Status: 200}
	})
	diesHook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "boom"} })
	ackHook := NewWebhook(t, nil)
	idleHook := NewWebhook(t, nil)

	nz := &ctNormalizer{}
	for name, h := range map[string]*Webhook{"std": stdHook, "bp": bpHook, "dies": diesHook, "ack": ackHook, "idle": idleHook} {
		nz.subs = append(nz.subs, strings.TrimSuffix(h.URL, "/hook"), "http://webhook.test/"+name)
	}
	yaml := fmt.Sprintf(`auth:
  apiKeys: [%s]
defaults:
  backoff: {type: fixed, base: 20ms, jitter: false}
queues:
  std:
    webhookUrl: %s
    signingSecret: %s
    maxAttempts: 3
  bp:
    webhookUrl: %s
    signingSecret: %s
  dies:
    webhookUrl: %s
    signingSecret: %s
    maxAttempts: 1
  ack:
    webhookUrl: %s
    signingSecret: %s
    mode: ack
    concurrency: 2
  idle:
    webhookUrl: %s
    signingSecret: %s
    rateLimitMax: 10
    rateLimitWindow: 1500ms
`, ctKey, stdHook.URL, ctSecret, bpHook.URL, ctSecret, diesHook.URL, ctSecret, ackHook.URL, ctSecret, idleHook.URL, ctSecret)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info",
		Env: []string{"SIMPLEQ_HTTP_MAXPAYLOADBYTES=4096"}})
	auth := []string{"Authorization", "Bearer " + ctKey}
	do := func(method, path string, body any, extra ...string) Response {
		t.Helper()
		return d.Do(method, path, body, append(append([]string{}, auth...), extra...)...)
	}
	getJob := func(id string) Response { return do("GET", "/v1/jobs/"+id, nil) }
	waitStatus := func(id, status string) {
		t.Helper()
		require.Eventually(t, func() bool {
			r := getJob(id)
			return r.Status == 200 && r.JSON(t)["status"] == status
		}, 10*time.Second, 10*time.Millisecond, "job %s never reached %s", id, status)
	}
	idOf := func(n *ctNode) string { return n.get("id").str() }

	// ---- publish: 201, then 200 for the same key ----
	n := ctCheck(t, nz, "publish_201", do("POST", "/v1/queues/std/jobs",
		`{"payload":{"to":"a@b.com","n":12345678901234567890},"idempotencyKey":"contract-1"}`), 201)
	ctPublished.check(t, "publish answer", n)
	first := idOf(n)
	require.Equal(t, "pending", n.get("status").str())
	select {
	case <-firstStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the first delivery never started")
	}
	n = ctCheck(t, nz, "publish_200_repeat", do("POST", "/v1/queues/std/jobs",
		`{"payload":{"other":true},"idempotencyKey":"contract-1","delay":5}`), 200)
	ctPublished.check(t, "publish repeat answer", n)
	require.Equal(t, first, idOf(n), "a repeat returns the existing job")
	close(releaseFirst)

	// ---- delivery envelope and headers ----
	waitStatus(first, "completed")
	dlMu.Lock()
	require.Len(t, stdDeliveries, 1)
	dl := stdDeliveries[0]
	dlMu.Unlock()
	require.True(t, webhook.Verify([]string{ctSecret}, dl.Body, dl.Header.Get("X-Simpleq-Signature")), "delivery signature")
	require.Equal(t, dispatch.Sign(ctSecret, dl.Body), dl.Header.Get("X-Simpleq-Signature"))
	require.Regexp(t, `^simpleqd/\S+$`, dl.Header.Get("User-Agent"))
	dh := dl.Header.Clone()
	dh.Set("X-Simpleq-Signature", "<valid: sha256= + hex HMAC-SHA256 of the body>")
	dh.Set("User-Agent", "simpleqd/<version>")
	env := ctGolden(t, nz, "delivery_standard", 0, dh, []string{"Content-Type", "X-Simpleq-Signature",
		"X-Simpleq-Job-Id", "X-Simpleq-Attempt", "X-Simpleq-Queue", "User-Agent"}, dl.Body)
	ctEnvelope.check(t, "envelope", env)
	require.Contains(t, string(dl.Body), `"payload":{"to":"a@b.com","n":12345678901234567890}`)

	// ---- job: completed, with its history ----
	n = ctCheck(t, nz, "job_completed", getJob(first), 200)
	ctCheckJob(t, n)

	// ---- batch publish (simpleqd) ----
	n = ctCheck(t, nz, "publish_batch", do("POST", "/v1/queues/std/jobs/batch",
		`{"jobs":[{"payload":{"i":1}},{"payload":{"i":2},"idempotencyKey":"contract-1"},{"payload":{"i":3},"delay":3600}]}`), 200)
	require.Len(t, n.get("jobs").arr, 3)
	for _, j := range n.get("jobs").arr {
		ctShape{required: []string{"id", "status", "createdAt", "duplicate"}}.check(t, "batch item", j)
	}
	require.Equal(t, first, idOf(n.get("jobs").arr[1]))
	batchFirst, delayed := idOf(n.get("jobs").arr[0]), idOf(n.get("jobs").arr[2])
	waitStatus(batchFirst, "completed")
	n = ctCheck(t, nz, "job_pending_delayed", getJob(delayed), 200)
	ctCheckJob(t, n)

	// ---- backpressure from a 429: deferred, then the probe succeeds ----
	n = ctCheck(t, nz, "publish_201_bp", do("POST", "/v1/queues/bp/jobs", `{"payload":{"p":1}}`), 201)
	bpID := idOf(n)
	waitStatus(bpID, "completed")
	n = ctCheck(t, nz, "job_backpressure_then_success", getJob(bpID), 200)
	ctCheckJob(t, n)

	// ---- failures to dead letters, the dead list and replay ----
	n = ctCheck(t, nz, "publish_201_dies_1", do("POST", "/v1/queues/dies/jobs", `{"payload":{"d":1}}`), 201)
	dead1 := idOf(n)
	waitStatus(dead1, "dead")
	n = ctCheck(t, nz, "publish_201_dies_2", do("POST", "/v1/queues/dies/jobs", `{"payload":{"d":2}}`), 201)
	dead2 := idOf(n)
	waitStatus(dead2, "dead")
	n = ctCheck(t, nz, "job_dead", getJob(dead1), 200)
	ctCheckJob(t, n)
	n = ctCheck(t, nz, "dead_page_1", do("GET", "/v1/queues/dies/dead?limit=1", nil), 200)
	ctShape{required: []string{"jobs", "nextCursor"}}.check(t, "dead page", n)
	require.Equal(t, dead2, idOf(n.get("jobs").arr[0]), "newest first")
	cursor := n.get("nextCursor").str()
	require.NotEmpty(t, cursor)
	n = ctCheck(t, nz, "dead_page_2", do("GET", "/v1/queues/dies/dead?limit=1&cursor="+cursor, nil), 200)
	require.Equal(t, dead1, idOf(n.get("jobs").arr[0]))
	require.Nil(t, n.get("nextCursor").scalar)
	for _, j := range n.get("jobs").arr {
		ctCheckJob(t, j)
	}
	diesHook.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	n = ctCheck(t, nz, "replay_ids", do("POST", "/v1/queues/dies/dead/replay", map[string]any{"ids": []string{dead1}}), 200)
	ctShape{required: []string{"replayed"}}.check(t, "replay answer", n)
	waitStatus(dead1, "completed")
	n = ctCheck(t, nz, "job_replayed_completed", getJob(dead1), 200)
	ctCheckJob(t, n)
	ctCheck(t, nz, "replay_all", do("POST", "/v1/queues/dies/dead/replay", `{"all":true}`), 200)
	waitStatus(dead2, "completed")

	// ---- ack mode: ack, idempotent ack, defer, nack, stale attempt ----
	n = ctCheck(t, nz, "publish_201_ack_1", do("POST", "/v1/queues/ack/jobs", `{"payload":{"a":1}}`), 201)
	ack1 := idOf(n)
	waitStatus(ack1, "awaiting_ack")
	n = ctCheck(t, nz, "job_awaiting_ack", getJob(ack1), 200)
	ctCheckJob(t, n)
	n = ctCheck(t, nz, "ack_200", do("POST", "/v1/jobs/"+ack1+"/ack", `{}`), 200)
	ctAccepted.check(t, "ack answer", n)
	n = ctCheck(t, nz, "ack_200_repeat", do("POST", "/v1/jobs/"+ack1+"/ack", nil), 200)
	ctAccepted.check(t, "repeated ack answer", n)
	n = ctCheck(t, nz, "job_acked", getJob(ack1), 200)
	ctCheckJob(t, n)
	n = ctCheck(t, nz, "error_409_nack_completed", do("POST", "/v1/jobs/"+ack1+"/nack", `{}`), 409)
	ctCheckError(t, n)

	n = ctCheck(t, nz, "publish_201_ack_2", do("POST", "/v1/queues/ack/jobs", `{"payload":{"a":2}}`), 201)
	ack2 := idOf(n)
	waitStatus(ack2, "awaiting_ack")
	n = ctCheck(t, nz, "defer_200", do("POST", "/v1/jobs/"+ack2+"/defer",
		`{"retryAfter":0.05,"scope":"job","reason":"provider 429","attempt":1}`), 200)
	ctAccepted.check(t, "defer answer", n)
	require.Eventually(t, func() bool { return ackHook.Count() == 3 }, 10*time.Second, 10*time.Millisecond, "redelivery after the defer")
	waitStatus(ack2, "awaiting_ack")
	n = ctCheck(t, nz, "nack_200", do("POST", "/v1/jobs/"+ack2+"/nack", `{"retryable":true,"reason":"flaky","attempt":1}`), 200)
	ctAccepted.check(t, "nack answer", n)
	require.Eventually(t, func() bool { return ackHook.Count() == 4 }, 10*time.Second, 10*time.Millisecond, "redelivery after the nack")
	waitStatus(ack2, "awaiting_ack")
	n = ctCheck(t, nz, "error_409_stale_attempt", do("POST", "/v1/jobs/"+ack2+"/ack", `{"attempt":1}`), 409)
	ctCheckError(t, n)
	n = ctCheck(t, nz, "nack_200_not_retryable", do("POST", "/v1/jobs/"+ack2+"/nack", `{"retryable":false,"reason":"bad input","attempt":2}`), 200)
	ctAccepted.check(t, "nack answer", n)
	n = ctCheck(t, nz, "job_nacked_dead", getJob(ack2), 200)
	ctCheckJob(t, n)

	// ---- queues (simpleqd): one, pause, resume, all ----
	n = ctCheck(t, nz, "queue_std", do("GET", "/v1/queues/std", nil), 200)
	ctCheckQueue(t, n)
	n = ctCheck(t, nz, "queue_paused", do("POST", "/v1/queues/idle/pause", `{"reason":"maintenance"}`), 200)
	ctCheckQueue(t, n)
	require.Equal(t, "paused", n.get("hold").get("state").str())
	n = ctCheck(t, nz, "queue_resumed", do("POST", "/v1/queues/idle/resume", nil), 200)
	ctCheckQueue(t, n)
	n = ctCheck(t, nz, "queues", do("GET", "/v1/queues", nil), 200)
	ctShape{required: []string{"queues"}}.check(t, "queue list", n)
	require.Len(t, n.get("queues").arr, 5)
	for _, q := range n.get("queues").arr {
		ctCheckQueue(t, q)
	}

	// ---- every error body ----
	errCase := func(name string, r Response, status int) {
		t.Helper()
		ctCheckError(t, ctCheck(t, nz, name, r, status))
	}
	pub := "/v1/queues/std/jobs"
	errCase("error_400_invalid_json", do("POST", pub, `{"payload":`), 400)
	errCase("error_400_not_an_object", do("POST", pub, `[]`), 400)
	errCase("error_400_fields", do("POST", pub, `{"payload":[],"idempotencyKey":1,"delay":"x","extra":true}`), 400)
	errCase("error_400_payload_required", do("POST", pub, `{}`), 400)
	errCase("error_400_delay_range", do("POST", pub, `{"payload":{},"delay":86401}`), 400)
	errCase("error_400_duplicate_field", do("POST", pub, `{"payload":{},"payload":{}}`), 400)
	errCase("error_400_batch_fields", do("POST", pub+"/batch", `{"jobs":[{"payload":{}},{"payload":1,"delay":-1}]}`), 400)
	errCase("error_400_defer_fields", do("POST", "/v1/jobs/"+ack1+"/defer", `{"scope":"all","reason":7}`), 400)
	errCase("error_400_replay_fields", do("POST", "/v1/queues/dies/dead/replay", `{}`), 400)
	errCase("error_400_dead_limit", do("GET", "/v1/queues/dies/dead?limit=5000", nil), 400)
	errCase("error_401_missing_key", d.Do("POST", pub, `{"payload":{}}`), 401)
	errCase("error_401_wrong_key", d.Do("GET", "/v1/jobs/"+first, nil, "Authorization", "Bearer nope"), 401)
	errCase("error_404_queue", do("POST", "/v1/queues/nope/jobs", `{"payload":{}}`), 404)
	unknownStd := "job_" + strings.Repeat("0", 26) + "_std" // well-formed, never issued
	unknownAck := "job_" + strings.Repeat("0", 26) + "_ack"
	errCase("error_404_job", do("GET", "/v1/jobs/"+unknownStd, nil), 404)
	errCase("error_404_job_callback", do("POST", "/v1/jobs/"+unknownAck+"/ack", `{}`), 404)
	errCase("error_409_standard_queue", do("POST", "/v1/jobs/"+first+"/ack", `{}`), 409)
	errCase("error_413", do("POST", pub, `{"payload":{"x":"`+strings.Repeat("a", 5000)+`"}}`), 413)
	errCase("error_415", do("POST", pub, `{"payload":{}}`, "Content-Type", "text/plain"), 415)
	errCase("error_405", do("DELETE", "/v1/queues/std/pause", nil), 405)

	// None of that reached a webhook twice or logged an internal error.
	require.NotContains(t, d.Log(), `"level":"error"`)
	ctNoStaleGoldens(t, nz, "contract", "error_503")
}

// TestContractUnavailable: with Redis gone, the API answers 503 with
// Retry-After and the error body, never a 500 or a hang.
func TestContractUnavailable(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("std", hook.URL), LogLevel: "info"})
	rs.Kill()
	var r Response
	require.Eventually(t, func() bool {
		r = d.Do("POST", "/v1/queues/std/jobs", `{"payload":{}}`)
		return r.Status == 503
	}, 10*time.Second, 50*time.Millisecond)
	nz := &ctNormalizer{}
	ctCheckError(t, ctCheck(t, nz, "error_503", r, 503))
	require.NotEmpty(t, r.Header.Get("Retry-After"))
}

// ctNoStaleGoldens fails when testdata/<dir> holds a golden file that this
// test neither compared nor wrote (other names lists those of other tests),
// so a renamed case cannot leave a stale file behind.
func ctNoStaleGoldens(t *testing.T, nz *ctNormalizer, dir string, other ...string) {
	t.Helper()
	known := map[string]bool{}
	for _, n := range other {
		known[n] = true
	}
	nz.mu.Lock()
	for n := range nz.names {
		known[n] = true
	}
	nz.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join("testdata", dir))
	require.NoError(t, err)
	var stale []string
	for _, e := range entries {
		if !known[strings.TrimSuffix(e.Name(), ".json")] {
			stale = append(stale, e.Name())
		}
	}
	sort.Strings(stale)
	require.Empty(t, stale, "golden files no test uses; delete them")
}
