package test

// The OpenAPI drift guard: docs/openapi.json (served at GET /v1/openapi.json)
// is checked against a running daemon on a real redis-server. Every request
// the test sends and every answer it gets is validated against the document
// with kin-openapi's router and openapi3filter: an answer whose status the
// operation does not list, or whose body or headers its schema does not
// describe, fails the test. On top of the document as published, answers are
// also validated against a strict variant in which the schemas that allow
// additional members (a history entry, where simpleqd adds optional ones)
// allow none, so a member the code sends but the document does not name
// fails too. At the end, every status every operation lists must have been
// seen, except 500, which only a bug can cause.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/docs"
)

// oaAnyStatus as oaCall.want checks no status, only that the answer is
// described.
const oaAnyStatus = -1

// oaCall is one request of the test and what the daemon must answer.
type oaCall struct {
	method, path string
	body         string // "" sends none
	contentType  string // default application/json when there is a body
	noKey        bool
	key          string // a key other than the configured one
	host         string // a Host header other than the daemon's address
	want         int
	// field, for a 400, must be a member of fieldErrors; empty means
	// formErrors must say something.
	field string
	// docCannotTell marks a request the daemon refuses but the document
	// cannot (a cursor the daemon did not issue, a duplicate member name):
	// its validity against the document is not checked.
	docCannotTell bool
}

// oaValidator validates a daemon's exchanges against the document.
type oaValidator struct {
	t   *testing.T
	d   *Daemon
	key string
	// doc is the document as published; strict is its variant with no
	// undescribed members allowed anywhere.
	doc, strict          *openapi3.T
	docRouter, strRouter routers.Router

	mu   sync.Mutex
	seen map[string]map[string]bool // operationId → statuses answered
}

func oaLoad(t *testing.T, strict bool) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	if strict {
		for _, s := range doc.Components.Schemas {
			require.NoError(t, s.WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
				if ap := ref.Value.AdditionalProperties; ap.Has != nil && *ap.Has && ap.Schema == nil {
					no := false
					ref.Value.AdditionalProperties.Has = &no
				}
				return nil
			}))
		}
	}
	// The daemon listens on a port of the test's choosing, not the
	// document's example server; routing by path alone is what is checked.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return doc, router
}

func newOAValidator(t *testing.T, d *Daemon, key string) *oaValidator {
	v := &oaValidator{t: t, d: d, key: key, seen: map[string]map[string]bool{}}
	v.doc, v.docRouter = oaLoad(t, false)
	v.strict, v.strRouter = oaLoad(t, true)
	return v
}

// request builds c's request (again for each use: validation reads the body).
func (v *oaValidator) request(c oaCall) *http.Request {
	v.t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, v.d.URL+c.path, body)
	require.NoError(v.t, err)
	// A POST says JSON even without a body, as every client does: the API
	// refuses any other state change (api/browser.go).
	if c.body != "" || c.contentType != "" || c.method != http.MethodGet {
		ct := c.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.host != "" {
		req.Host = c.host
	}
	switch {
	case c.noKey:
	case c.key != "":
		req.Header.Set("Authorization", "Bearer "+c.key)
	default:
		req.Header.Set("Authorization", "Bearer "+v.key)
	}
	return req
}

// call sends c, checks its status and validates request and answer.
func (v *oaValidator) call(c oaCall) Response {
	v.t.Helper()
	r, err := v.send(c)
	require.NoError(v.t, err, "%s %s", c.method, c.path)
	v.check(c, r)
	return r
}

// send only sends c (so it may run on another goroutine than the test's).
func (v *oaValidator) send(c oaCall) (Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(v.request(c).WithContext(ctx))
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// check checks the status of c's answer r and validates the exchange.
func (v *oaValidator) check(c oaCall, r Response) {
	v.t.Helper()
	if c.want != oaAnyStatus {
		require.Equal(v.t, c.want, r.Status, "%s %s: %s", c.method, c.path, r.Body)
	}
	v.validate(c, r)
}

// authenticate is the document's bearerAuth as far as a request shows it: a
// Bearer token is present (whether it is a configured key only the daemon
// knows).
func oaAuthenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "bearerAuth" {
		return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return errors.New("no Bearer token")
	}
	return nil
}

func (v *oaValidator) validate(c oaCall, r Response) {
	v.t.Helper()
	what := fmt.Sprintf("%s %s → %d %s", c.method, c.path, r.Status, r.Body)
	for i, router := range []routers.Router{v.docRouter, v.strRouter} {
		req := v.request(c)
		route, params, err := router.FindRoute(req)
		require.NoError(v.t, err, "%s: not an operation of the document", what)
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: oaAuthenticate, MultiError: true}}
		reqErr := openapi3filter.ValidateRequest(context.Background(), in)
		if i == 0 { // the request side against the document as published
			switch {
			case r.Status >= 200 && r.Status < 300:
				require.NoError(v.t, reqErr, "%s: the daemon accepted a request the document refuses", what)
			case (r.Status == 400 || r.Status == 415) && !c.docCannotTell:
				require.Error(v.t, reqErr, "%s: the daemon refused a request the document allows", what)
			case r.Status == 401 && c.noKey:
				require.Error(v.t, reqErr, "%s: the document does not ask for a key", what)
			}
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		out.SetBodyBytes(r.Body)
		err = openapi3filter.ValidateResponse(context.Background(), out)
		if i == 0 {
			require.NoError(v.t, err, "%s: the answer is not what the document describes", what)
		} else {
			require.NoError(v.t, err, "%s: the answer has a member the document does not name", what)
		}
		if i == 0 {
			v.mu.Lock()
			op := route.Operation.OperationID
			if v.seen[op] == nil {
				v.seen[op] = map[string]bool{}
			}
			v.seen[op][strconv.Itoa(r.Status)] = true
			v.mu.Unlock()
		}
	}
	if r.Status == 400 {
		var body struct {
			Error struct {
				FormErrors  []string            `json:"formErrors"`
				FieldErrors map[string][]string `json:"fieldErrors"`
			} `json:"error"`
		}
		require.NoError(v.t, json.Unmarshal(r.Body, &body), what)
		if c.field != "" {
			require.Contains(v.t, body.Error.FieldErrors, c.field, "%s: the 400 names the field", what)
		} else {
			require.NotEmpty(v.t, body.Error.FormErrors, what)
		}
	}
}

// refused checks an answer to a request that is no operation of the
// document (an unknown path, a wrong method): the router agrees, and the
// body is the document's ErrorMessage.
func (v *oaValidator) refused(method, path string, want int, routeErr error) {
	v.t.Helper()
	r := v.d.Do(method, path, nil, "Authorization", "Bearer "+v.key)
	require.Equal(v.t, want, r.Status, string(r.Body))
	req := v.request(oaCall{method: method, path: path})
	_, _, err := v.docRouter.FindRoute(req)
	require.ErrorIs(v.t, err, routeErr, "%s %s", method, path)
	require.Equal(v.t, "application/json", r.Header.Get("Content-Type"))
	v.schemaValid("ErrorMessage", r.Body)
	if want == http.StatusMethodNotAllowed {
		require.NotEmpty(v.t, r.Header.Get("Allow"))
	}
}

// schemaValid validates raw JSON against a component schema of both variants.
func (v *oaValidator) schemaValid(name string, raw []byte) {
	v.t.Helper()
	var value any
	require.NoError(v.t, json.Unmarshal(raw, &value), string(raw))
	for _, doc := range []*openapi3.T{v.doc, v.strict} {
		s := doc.Components.Schemas[name]
		require.NotNil(v.t, s, name)
		require.NoError(v.t, s.Value.VisitJSON(value, openapi3.EnableJSONSchema2020()), "%s: %s", name, raw)
	}
}

// delivery validates a webhook request against the document's jobDelivery
// webhook: its headers and envelope.
func (v *oaValidator) delivery(dl Delivery) {
	v.t.Helper()
	for _, doc := range []*openapi3.T{v.doc, v.strict} {
		op := doc.Webhooks["jobDelivery"].Post
		for _, p := range op.Parameters {
			require.Equal(v.t, "header", p.Value.In)
			raw := dl.Header.Get(p.Value.Name)
			if raw == "" {
				require.False(v.t, p.Value.Required, "delivery header %s missing", p.Value.Name)
				continue
			}
			var value any = raw
			if p.Value.Schema.Value.Type.Is("integer") {
				n, err := strconv.Atoi(raw)
				require.NoError(v.t, err, "delivery header %s: %q", p.Value.Name, raw)
				value = float64(n)
			}
			require.NoError(v.t, p.Value.Schema.Value.VisitJSON(value, openapi3.EnableJSONSchema2020()),
				"delivery header %s: %q", p.Value.Name, raw)
		}
		var body any
		require.NoError(v.t, json.Unmarshal(dl.Body, &body))
		schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
		require.NoError(v.t, schema.VisitJSON(body, openapi3.EnableJSONSchema2020()), "delivery %s", dl.Body)
	}
}

// coverage requires every status of every operation to have been answered,
// except those in unexercised: a status ("500", for every operation) or an
// operation and a status ("metrics 503").
func (v *oaValidator) coverage(unexercised ...string) {
	v.t.Helper()
	skip := map[string]bool{}
	for _, s := range unexercised {
		skip[s] = true
	}
	var missing []string
	for path, item := range v.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if !skip[status] && !skip[op.OperationID+" "+status] && !v.seen[op.OperationID][status] && !oaCoveredElsewhere[op.OperationID] && !oaKeysOps[op.OperationID] {
					missing = append(missing, fmt.Sprintf("%s %s (%s) %s", method, path, op.OperationID, status))
				}
			}
		}
	}
	sort.Strings(missing)
	require.Empty(v.t, missing, "documented answers the test never saw: exercise them or say why not")
}

// TestOpenAPI drives every endpoint of a daemon, successes and every error
// it sends, and validates each exchange against docs/openapi.json.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const key = "oa_key_1"

	stdHook := NewWebhook(t, nil)
	var bpMu sync.Mutex
	bpCalls := 0
	bpHook := NewWebhook(t, func(Delivery) Reply {
		bpMu.Lock()
		bpCalls++
		n := bpCalls
		bpMu.Unlock()
		switch n {
		case 1:
			return Reply{Status: 429, RetryAfter: "1"}
		case 2: // the probe, slow enough to be seen
			return Reply{Status: 200, Delay: 700 * time.Millisecond}
		}
		return Reply{Status: 200}
	})
	diesHook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "boom"} })
	ackHook := NewWebhook(t, nil)
	idleHook := NewWebhook(t, nil)
	yaml := fmt.Sprintf(`auth:
  apiKeys: [%s]
defaults:
  backoff: {type: fixed, base: 20ms, jitter: false}
queues:
  std:
    webhookUrl: %s
    signingSecret: whsec_oa
    maxAttempts: 3
  bp:
    webhookUrl: %s
    signingSecret: whsec_oa
  dies:
    webhookUrl: %s
    signingSecret: whsec_oa
    maxAttempts: 1
  ack:
    webhookUrl: %s
    signingSecret: whsec_oa
    mode: ack
    concurrency: 2
  idle:
    webhookUrl: %s
    signingSecret: whsec_oa
    rateLimitMax: 10
    rateLimitWindow: 1500ms
schedules:
  - id: fromfile
    queue: idle
    cron: "0 0 1 1 *"
    payload: {}
`, key, stdHook.URL, bpHook.URL, diesHook.URL, ackHook.URL, idleHook.URL)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info",
		Env: []string{"SIMPLEQ_HTTP_MAXPAYLOADBYTES=4096", "SIMPLEQ_HTTP_MAXCONCURRENTREQUESTS=1"}})
	v := newOAValidator(t, d, key)
	call := func(method, path, body string, want int) Response {
		t.Helper()
		return v.call(oaCall{method: method, path: path, body: body, want: want})
	}
	idOf := func(r Response) string { return r.JSON(t)["id"].(string) }
	waitStatus := func(id, status string) Response {
		t.Helper()
		var r Response
		require.Eventually(t, func() bool {
			r = call("GET", "/v1/jobs/"+id, "", 200)
			return r.JSON(t)["status"] == status
		}, 10*time.Second, 20*time.Millisecond, "job %s never reached %s", id, status)
		return r
	}

	// ---- the document itself, and the probes, without a key ----
	r := v.call(oaCall{method: "GET", path: "/v1/openapi.json", noKey: true, want: 200})
	require.Equal(t, string(docs.OpenAPI()), string(r.Body), "the daemon serves docs/openapi.json as committed")
	v.call(oaCall{method: "GET", path: "/v1/openapi.json", key: "not-a-key", want: 200})
	v.call(oaCall{method: "GET", path: "/healthz", noKey: true, want: 200})
	v.call(oaCall{method: "GET", path: "/readyz", noKey: true, want: 200})

	// ---- publishing and reading jobs ----
	r = call("POST", "/v1/queues/std/jobs", `{"payload":{"to":"a@b.com","n":12345678901234567890},"idempotencyKey":"oa-1"}`, 201)
	first := idOf(r)
	r = call("POST", "/v1/queues/std/jobs", `{"payload":{"other":true},"idempotencyKey":"oa-1","delay":null}`, 200)
	require.Equal(t, first, idOf(r))
	r = call("POST", "/v1/queues/std/jobs/batch",
		`{"jobs":[{"payload":{"i":1}},{"payload":{"i":2},"idempotencyKey":"oa-1"},{"payload":{"i":3},"delay":3600.5}]}`, 200)
	delayed := r.JSON(t)["jobs"].([]any)[2].(map[string]any)["id"].(string)
	waitStatus(first, "completed")
	call("GET", "/v1/jobs/"+delayed, "", 200)
	require.Eventually(t, func() bool { return stdHook.Count() >= 2 }, 10*time.Second, 10*time.Millisecond)
	for _, dl := range stdHook.Deliveries() {
		v.delivery(dl)
	}

	// ---- backpressure: held, probing, reopened; the events of it ----
	bpID := idOf(call("POST", "/v1/queues/bp/jobs", `{"payload":{"p":1}}`, 201))
	for _, state := range []string{"held", "probing"} {
		require.Eventually(t, func() bool {
			hold := call("GET", "/v1/queues/bp", "", 200).JSON(t)["hold"].(map[string]any)
			return hold["state"] == state
		}, 10*time.Second, 20*time.Millisecond, "queue bp never %s", state)
	}
	r = waitStatus(bpID, "completed")
	require.Len(t, r.JSON(t)["history"], 2, "a deferred entry and the probe's success")
	r = call("GET", "/v1/queues/bp/events?limit=100", "", 200)
	kinds := map[string]bool{}
	for _, e := range r.JSON(t)["events"].([]any) {
		kinds[e.(map[string]any)["kind"].(string)] = true
	}
	require.Subset(t, keysOf(kinds), []string{"delivery", "hold", "probe", "reopen"})
	for _, dl := range bpHook.Deliveries() {
		v.delivery(dl)
	}

	// ---- dead letters: the list, its pages, replay ----
	dead1 := idOf(call("POST", "/v1/queues/dies/jobs", `{"payload":{"d":1}}`, 201))
	waitStatus(dead1, "dead")
	dead2 := idOf(call("POST", "/v1/queues/dies/jobs", `{"payload":{"d":2}}`, 201))
	waitStatus(dead2, "dead")
	r = call("GET", "/v1/queues/dies/dead?limit=1", "", 200)
	cursor := r.JSON(t)["nextCursor"].(string)
	r = call("GET", "/v1/queues/dies/dead?limit=1&cursor="+cursor, "", 200)
	require.Nil(t, r.JSON(t)["nextCursor"])
	call("GET", "/v1/queues/dies/dead", "", 200)
	diesHook.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	call("POST", "/v1/queues/dies/dead/replay", `{"ids":["`+dead1+`"],"all":null}`, 200)
	waitStatus(dead1, "completed")
	call("POST", "/v1/queues/dies/dead/replay", `{"all":true}`, 200)
	waitStatus(dead2, "completed")
	call("GET", "/v1/queues/dies/events", "", 200)

	// ---- ack mode: ack, a repeated ack, defer, nack, a stale attempt ----
	ack1 := idOf(call("POST", "/v1/queues/ack/jobs", `{"payload":{"a":1}}`, 201))
	waitStatus(ack1, "awaiting_ack")
	call("POST", "/v1/jobs/"+ack1+"/ack", `{}`, 200)
	call("POST", "/v1/jobs/"+ack1+"/ack", "", 200)
	waitStatus(ack1, "completed")
	ack2 := idOf(call("POST", "/v1/queues/ack/jobs", `{"payload":{"a":2}}`, 201))
	waitStatus(ack2, "awaiting_ack")
	call("POST", "/v1/jobs/"+ack2+"/defer", `{"retryAfter":0.05,"scope":"job","reason":"provider 429","attempt":1}`, 200)
	require.Eventually(t, func() bool { return ackHook.Count() == 3 }, 10*time.Second, 10*time.Millisecond)
	waitStatus(ack2, "awaiting_ack")
	call("POST", "/v1/jobs/"+ack2+"/nack", `{"retryable":true,"reason":"flaky","attempt":1}`, 200)
	require.Eventually(t, func() bool { return ackHook.Count() == 4 }, 10*time.Second, 10*time.Millisecond)
	waitStatus(ack2, "awaiting_ack")
	v.call(oaCall{method: "POST", path: "/v1/jobs/" + ack2 + "/ack", body: `{"attempt":1}`, want: 409}) // stale
	v.call(oaCall{method: "POST", path: "/v1/jobs/" + ack2 + "/defer", body: `{"retryAfter":1,"attempt":1}`, want: 409})
	call("POST", "/v1/jobs/"+ack2+"/nack", `{"retryable":false,"reason":"bad input","attempt":2}`, 200)
	waitStatus(ack2, "dead")
	v.call(oaCall{method: "POST", path: "/v1/jobs/" + ack1 + "/nack", body: `{}`, want: 409}) // completed
	for _, dl := range ackHook.Deliveries() {
		v.delivery(dl)
	}
	ack3 := idOf(call("POST", "/v1/queues/ack/jobs", `{"payload":{"a":3}}`, 201))
	waitStatus(ack3, "awaiting_ack") // stays so: the target of the error cases below

	// ---- job lists by status, with pages; statistics (docs/control.md) ----
	r = call("GET", "/v1/queues/std/jobs?status=completed&limit=1", "", 200)
	require.Len(t, r.JSON(t)["jobs"], 1)
	cursor = r.JSON(t)["nextCursor"].(string)
	call("GET", "/v1/queues/std/jobs?status=completed&limit=1000&cursor="+cursor, "", 200)
	r = call("GET", "/v1/queues/std/jobs?status=pending", "", 200)
	require.Equal(t, delayed, r.JSON(t)["jobs"].([]any)[0].(map[string]any)["id"], "the delayed job waits")
	call("GET", "/v1/queues/std/jobs?status=processing&limit=10", "", 200)
	r = call("GET", "/v1/queues/ack/jobs?status=awaiting_ack", "", 200)
	require.Equal(t, ack3, r.JSON(t)["jobs"].([]any)[0].(map[string]any)["id"])
	call("GET", "/v1/queues/ack/jobs?status=dead", "", 200)
	r = call("GET", "/v1/queues/std/jobs?status=pending&flowKey=tenant-a", "", 200)
	require.Empty(t, r.JSON(t)["jobs"], "no job has a flow key yet")
	r = call("GET", "/v1/queues/bp/stats", "", 200)
	totals := r.JSON(t)["totals"].(map[string]any)
	require.EqualValues(t, 1, totals["http429"])
	require.EqualValues(t, 1, totals["probes"])
	require.NotEmpty(t, r.JSON(t)["holds"])
	until := time.Now().UTC().Add(time.Minute).Format("2006-01-02T15:04:05.000Z")
	r = call("GET", "/v1/queues/std/stats?since="+time.Now().UTC().Add(-10*time.Minute).Format(time.RFC3339)+"&until="+until, "", 200)
	require.Len(t, r.JSON(t)["buckets"], 11, "ten minutes back to now, whole minutes")

	// ---- queues: all, one, pause, resume ----
	call("GET", "/v1/queues", "", 200)
	call("GET", "/v1/queues/std", "", 200)
	r = call("POST", "/v1/queues/idle/pause", `{"reason":"maintenance"}`, 200)
	require.Equal(t, "paused", r.JSON(t)["hold"].(map[string]any)["state"])
	call("POST", "/v1/queues/idle/pause", "", 200)
	call("POST", "/v1/queues/idle/resume", "", 200)
	call("POST", "/v1/queues/idle/resume", `{}`, 200)
	call("GET", "/v1/queues/idle/events?limit=2", "", 200)
	v.call(oaCall{method: "GET", path: "/metrics", noKey: true, want: 200})

	// ---- schedules: create, replace, read, list, pause, resume, delete; a
	// tick's job carries scheduleId ----
	call("POST", "/v1/schedules", `{"queue":"std","cron":"@every 1s","payload":{"tick":true},"id":"oa-tick"}`, 201)
	var tickJob string
	require.Eventually(t, func() bool {
		j, _ := call("GET", "/v1/schedules/oa-tick", "", 200).JSON(t)["lastJobId"].(string)
		tickJob = j
		return j != ""
	}, 10*time.Second, 50*time.Millisecond, "the schedule never fired")
	require.Equal(t, "oa-tick", call("GET", "/v1/jobs/"+tickJob, "", 200).JSON(t)["scheduleId"])
	call("DELETE", "/v1/schedules/oa-tick", "", 204)
	sched := `{"queue":"idle","cron":"0 9 * * 1-5","timezone":"Europe/Paris","payload":{"s":1},"flowKey":"fk","priority":3,"id":"idle"}`
	call("POST", "/v1/schedules", sched, 201)
	call("POST", "/v1/schedules", sched, 200)
	call("POST", "/v1/schedules", `{"queue":"idle","cron":"*/5 * * * * *","payload":{},"timezone":null,"flowKey":null,"priority":null,"id":null}`, 201)
	call("GET", "/v1/schedules", "", 200)
	call("GET", "/v1/schedules?queue=idle", "", 200)
	call("GET", "/v1/schedules/idle", "", 200)
	call("GET", "/v1/schedules/fromfile", "", 200)
	call("POST", "/v1/schedules/idle/pause", "", 200)
	call("POST", "/v1/schedules/idle/resume", `{}`, 200)
	v.call(oaCall{method: "DELETE", path: "/v1/schedules/fromfile", want: 409})
	v.call(oaCall{method: "POST", path: "/v1/schedules", body: `{"queue":"idle","cron":"@every 1h","payload":{},"id":"fromfile"}`, want: 409})
	v.call(oaCall{method: "POST", path: "/v1/schedules", body: `{"queue":"nope","cron":"@every 1h","payload":{}}`, want: 404})
	v.call(oaCall{method: "GET", path: "/v1/schedules?queue=nope", want: 404})

	// ---- replace a pending job; cancel one and in bulk (docs/control.md) ----
	rk := idOf(call("POST", "/v1/queues/idle/jobs", `{"payload":{"v":1},"replaceKey":"oa-latest","delay":60}`, 201))
	r = call("POST", "/v1/queues/idle/jobs", `{"payload":{"v":2},"replaceKey":"oa-latest","idempotencyKey":null}`, 200)
	require.Equal(t, true, r.JSON(t)["replaced"])
	r = call("POST", "/v1/queues/idle/jobs/batch", `{"jobs":[{"payload":{"v":3},"replaceKey":"oa-latest"},{"payload":{},"replaceKey":null,"delay":60}]}`, 200)
	require.Equal(t, true, r.JSON(t)["jobs"].([]any)[0].(map[string]any)["replaced"])
	other := r.JSON(t)["jobs"].([]any)[1].(map[string]any)["id"].(string)
	require.Equal(t, "oa-latest", call("GET", "/v1/jobs/"+rk, "", 200).JSON(t)["replaceKey"])
	r = call("POST", "/v1/jobs/"+rk+"/cancel", `{"reason":"oa"}`, 200)
	require.Equal(t, "cancelled", r.JSON(t)["deadReason"])
	call("POST", "/v1/jobs/"+other+"/cancel", "", 200)
	v.call(oaCall{method: "POST", path: "/v1/jobs/" + rk + "/cancel", body: `{}`, want: 409})
	r = call("POST", "/v1/queues/idle/cancel", `{"status":["pending","processing","awaiting_ack"],"createdBefore":"2000-01-01T00:00:00.000Z","reason":null}`, 200)
	require.EqualValues(t, 0, r.JSON(t)["cancelled"])
	call("POST", "/v1/queues/idle/cancel", `{"flowKey":"fk","all":true,"status":null}`, 200)

	// ---- 400: each operation's validation, naming the field ----
	bad := func(method, path, body, field string) {
		t.Helper()
		v.call(oaCall{method: method, path: path, body: body, want: 400, field: field})
	}
	pub := "/v1/queues/std/jobs"
	bad("POST", pub, `{"payload":`, "")
	bad("POST", pub, `[]`, "")
	bad("POST", pub, `{"payload":[],"idempotencyKey":1,"delay":"x","extra":true}`, "payload")
	bad("POST", pub, `{"payload":{},"idempotencyKey":1}`, "idempotencyKey")
	bad("POST", pub, `{"payload":{},"idempotencyKey":""}`, "idempotencyKey")
	bad("POST", pub, `{"payload":{},"delay":86401}`, "delay")
	bad("POST", pub, `{"payload":{},"extra":true}`, "extra")
	bad("POST", pub, `{}`, "payload")
	v.call(oaCall{method: "POST", path: pub, body: `{"payload":{},"payload":{}}`, want: 400, field: "payload", docCannotTell: true})
	bad("POST", pub+"/batch", `{"jobs":[{"payload":{}},{"payload":1,"delay":-1}]}`, "jobs.1.payload")
	bad("POST", pub+"/batch", `{"jobs":[]}`, "jobs")
	bad("POST", "/v1/jobs/"+ack3+"/ack", `{"attempt":0}`, "attempt")
	bad("POST", "/v1/jobs/"+ack3+"/ack", `{"attempt":1.5}`, "attempt")
	bad("POST", "/v1/jobs/"+ack3+"/nack", `{"retryable":"yes"}`, "retryable")
	bad("POST", "/v1/jobs/"+ack3+"/nack", `{"reason":"`+strings.Repeat("r", 501)+`"}`, "reason")
	bad("POST", "/v1/jobs/"+ack3+"/defer", `{"scope":"all","reason":7}`, "retryAfter")
	bad("POST", "/v1/jobs/"+ack3+"/defer", `{"retryAfter":1,"scope":"all"}`, "scope")
	bad("POST", "/v1/jobs/"+ack3+"/defer", `{"retryAfter":-1}`, "retryAfter")
	bad("POST", "/v1/jobs/"+ack3+"/defer", "", "retryAfter")
	bad("GET", "/v1/queues/dies/dead?limit=5000", "", "limit")
	bad("GET", "/v1/queues/dies/dead?limit=abc", "", "limit")
	v.call(oaCall{method: "GET", path: "/v1/queues/dies/dead?cursor=bm90LWEtY3Vyc29y", want: 400, field: "cursor", docCannotTell: true})
	bad("POST", "/v1/queues/dies/dead/replay", `{}`, "ids")
	bad("POST", "/v1/queues/dies/dead/replay", `{"ids":["x"],"all":true}`, "ids")
	bad("POST", "/v1/queues/dies/dead/replay", `{"all":false}`, "all")
	bad("POST", "/v1/queues/dies/dead/replay", `{"ids":[""]}`, "ids.0")
	bad("POST", "/v1/queues/idle/pause", `{"reason":7}`, "reason")
	bad("POST", "/v1/queues/idle/resume", `{"reason":"x"}`, "reason")
	bad("POST", "/v1/jobs/"+rk+"/cancel", `{"reason":"`+strings.Repeat("r", 501)+`"}`, "reason")
	bad("POST", "/v1/queues/idle/cancel", `{}`, "")
	bad("POST", "/v1/queues/idle/cancel", `{"status":["dead"]}`, "status")
	bad("POST", "/v1/queues/idle/cancel", `{"all":false}`, "all")
	bad("POST", "/v1/queues/idle/cancel", `{"createdBefore":"soon"}`, "createdBefore")
	bad("POST", pub, `{"payload":{},"replaceKey":""}`, "replaceKey")
	bad("GET", "/v1/queues/std/events?limit=0", "", "limit")
	bad("GET", "/v1/queues/std/events?limit=257", "", "limit")
	bad("GET", "/v1/queues/std/jobs", "", "status")
	bad("GET", "/v1/queues/std/jobs?status=waiting", "", "status")
	bad("GET", "/v1/queues/std/jobs?status=dead&limit=1001", "", "limit")
	bad("GET", "/v1/queues/std/jobs?status=dead&flowKey="+strings.Repeat("k", 256), "", "flowKey")
	v.call(oaCall{method: "GET", path: "/v1/queues/std/jobs?status=dead&flowKey=a%01b", want: 400, field: "flowKey", docCannotTell: true})
	v.call(oaCall{method: "GET", path: "/v1/queues/std/jobs?status=dead&cursor=bm90LWEtY3Vyc29y", want: 400, field: "cursor", docCannotTell: true})
	bad("GET", "/v1/queues/std/stats?since=yesterday", "", "since")
	v.call(oaCall{method: "GET", path: "/v1/queues/std/stats?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", want: 400, field: "since", docCannotTell: true})
	v.call(oaCall{method: "POST", path: "/v1/schedules", body: `{"queue":"idle","cron":"61 * * * *","payload":{}}`, want: 400, field: "cron", docCannotTell: true})
	v.call(oaCall{method: "POST", path: "/v1/schedules", body: `{"queue":"idle","cron":"@every 1h","timezone":"Mars/Base","payload":{}}`, want: 400, field: "timezone", docCannotTell: true})
	bad("POST", "/v1/schedules", `{"queue":"idle","cron":"@every 1h","payload":{},"priority":10}`, "priority")
	bad("POST", "/v1/schedules", `{"queue":"idle","cron":"@every 1h","payload":{},"id":"a b"}`, "id")
	bad("POST", "/v1/schedules", `{"cron":"@every 1h","payload":{}}`, "queue")
	bad("POST", "/v1/schedules", `{"queue":"idle","cron":"@every 1h"}`, "payload")
	v.call(oaCall{method: "GET", path: "/v1/schedules?queue=idle&queue=std", want: 400, field: "queue", docCannotTell: true})
	bad("DELETE", "/v1/schedules/idle", `{"x":1}`, "x")
	bad("POST", "/v1/schedules/idle/pause", `{"x":1}`, "x")
	bad("POST", "/v1/schedules/idle/resume", `{"x":1}`, "x")

	// ---- 409: callbacks on a standard-mode queue ----
	for _, cb := range []string{"ack", "nack", "defer"} {
		v.call(oaCall{method: "POST", path: "/v1/jobs/" + first + "/" + cb, body: `{"retryAfter":1}`, want: 409})
	}

	// ---- 401, 404, 413, 415 on every operation that can answer them ----
	unknownJob := "job_" + strings.Repeat("0", 26) + "_ack" // well-formed, never issued
	type target struct {
		method, path, body string // path with %s for the queue or job id
		byJob              bool
		backend            bool // reads Redis: 503 without it
	}
	targets := []target{
		{"POST", "/v1/queues/%s/jobs", `{"payload":{}}`, false, true},
		{"POST", "/v1/queues/%s/jobs/batch", `{"jobs":[{"payload":{}}]}`, false, true},
		{"GET", "/v1/jobs/%s", "", true, true},
		{"POST", "/v1/jobs/%s/ack", `{}`, true, true},
		{"POST", "/v1/jobs/%s/nack", `{}`, true, true},
		{"POST", "/v1/jobs/%s/defer", `{"retryAfter":1}`, true, true},
		{"GET", "/v1/queues", "", false, true},
		{"GET", "/v1/queues/%s", "", false, true},
		{"GET", "/v1/queues/%s/dead", "", false, true},
		{"POST", "/v1/queues/%s/dead/replay", `{"all":true}`, false, true},
		{"POST", "/v1/queues/%s/pause", `{}`, false, true},
		{"POST", "/v1/queues/%s/resume", `{}`, false, true},
		{"POST", "/v1/jobs/%s/cancel", `{}`, true, true},
		{"POST", "/v1/queues/%s/cancel", `{"all":true}`, false, true},
		{"GET", "/v1/queues/%s/events", "", false, false},
		{"GET", "/v1/queues/%s/jobs?status=pending", "", false, true},
		{"GET", "/v1/queues/%s/stats", "", false, true},
		// The schedule called "idle" (and "nope", which does not exist).
		{"POST", "/v1/schedules", `{"queue":"idle","cron":"@every 1h","payload":{},"id":"idle"}`, false, true},
		{"GET", "/v1/schedules", "", false, true},
		{"GET", "/v1/schedules/%s", "", false, true},
		{"DELETE", "/v1/schedules/%s", `{}`, false, true},
		{"POST", "/v1/schedules/%s/pause", `{}`, false, true},
		{"POST", "/v1/schedules/%s/resume", `{}`, false, true},
	}
	at := func(tg target, queue, job string) string {
		if !strings.Contains(tg.path, "%s") {
			return tg.path
		}
		if tg.byJob {
			return fmt.Sprintf(tg.path, job)
		}
		return fmt.Sprintf(tg.path, queue)
	}
	tooBig := `{"payload":{"x":"` + strings.Repeat("a", 5000) + `"}}`
	for _, tg := range targets {
		p := at(tg, "idle", ack3)
		v.call(oaCall{method: tg.method, path: p, body: tg.body, noKey: true, want: 401})
		v.call(oaCall{method: tg.method, path: p, body: tg.body, key: "wrong", want: 401})
		if strings.Contains(tg.path, "%s") {
			v.call(oaCall{method: tg.method, path: at(tg, "nope", unknownJob), body: tg.body, want: 404})
		}
		if tg.body != "" {
			v.call(oaCall{method: tg.method, path: p, body: tooBig, want: 413})
			v.call(oaCall{method: tg.method, path: p, body: tg.body, contentType: "text/plain", want: 415})
		}
	}
	// ---- 403: a daemon without keys refuses a foreign Host (DNS rebinding) ----
	keyless := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: fmt.Sprintf(`queues:
  idle:
    webhookUrl: %s
    signingSecret: whsec_oa
`, idleHook.URL)})
	withKeys := v.d
	v.d = keyless
	for _, tg := range targets {
		v.call(oaCall{method: tg.method, path: at(tg, "idle", ack3), body: tg.body, noKey: true,
			host: "rebound.example:8080", want: 403})
	}
	v.d = withKeys

	v.call(oaCall{method: "GET", path: "/v1/jobs/not-a-job-id", want: 404})
	v.call(oaCall{method: "GET", path: "/v1/jobs/" + strings.Repeat("0", 26) + "_std", want: 404})

	// Not operations: an unknown path, a wrong method.
	v.refused("GET", "/v1/nope", http.StatusNotFound, routers.ErrPathNotFound)
	v.refused("DELETE", "/v1/queues/std/dead", http.StatusMethodNotAllowed, routers.ErrMethodNotAllowed)
	v.refused("PUT", "/v1/openapi.json", http.StatusMethodNotAllowed, routers.ErrMethodNotAllowed)

	// ---- 429: Redis frozen, one request holds the only slot ----
	rs.Signal(syscall.SIGSTOP)
	var holder sync.WaitGroup
	holding := oaCall{method: "GET", path: "/v1/queues/std", want: 503} // once the daemon's Redis call times out
	var held []Response
	var heldErrs []error
	// hold starts a request that holds the only slot until the daemon's
	// Redis call times out, and returns once a probe is shed. The probe is
	// an unknown path: it needs no Redis, so a probe that takes the slot
	// itself gives it back at once; a holder that lost the slot to a probe
	// (429) is not one, and another is started.
	hold := func() {
		t.Helper()
		holder.Wait()
		for try := 1; ; try++ {
			require.Less(t, try, 10, "the slot was never taken")
			ended := make(chan struct{})
			holder.Add(1)
			go func() {
				defer holder.Done()
				defer close(ended)
				r, err := v.send(holding)
				if err == nil && r.Status == http.StatusTooManyRequests {
					return
				}
				held, heldErrs = append(held, r), append(heldErrs, err)
			}()
			for again := false; !again; {
				r, err := v.send(oaCall{method: "GET", path: "/v1/nope", want: oaAnyStatus})
				require.NoError(t, err)
				if r.Status == http.StatusTooManyRequests {
					return
				}
				select {
				case <-ended:
					again = true // ended (or was shed) before a probe saw it: again
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	hold()
	for _, tg := range targets {
		for try := 1; ; try++ {
			r := v.call(oaCall{method: tg.method, path: at(tg, "idle", ack3), body: tg.body, want: oaAnyStatus})
			if r.Status == 429 {
				require.Equal(t, "1", r.Header.Get("Retry-After"))
				break
			}
			require.Less(t, try, 3, "%s %s: never shed", tg.method, tg.path)
			hold() // the holder's request ended first: take the slot again
		}
	}
	holder.Wait()
	for i, r := range held {
		require.NoError(t, heldErrs[i])
		v.check(holding, r)
	}
	// Public paths are never shed (and the probes answer while Redis is frozen).
	v.call(oaCall{method: "GET", path: "/v1/openapi.json", noKey: true, want: 200})

	// ---- 503: Redis gone ----
	rs.Signal(syscall.SIGCONT)
	rs.Kill()
	for _, tg := range targets {
		if !tg.backend {
			continue
		}
		require.Eventually(t, func() bool {
			r := v.call(oaCall{method: tg.method, path: at(tg, "idle", ack3), body: tg.body, want: oaAnyStatus})
			if r.Status == 503 {
				require.NotEmpty(t, r.Header.Get("Retry-After"))
			}
			return r.Status == 503
		}, 15*time.Second, 50*time.Millisecond, "%s %s never answered 503", tg.method, tg.path)
	}
	require.Eventually(t, func() bool {
		return v.call(oaCall{method: "GET", path: "/readyz", noKey: true, want: oaAnyStatus}).Status == 503
	}, 10*time.Second, 50*time.Millisecond)
	v.call(oaCall{method: "GET", path: "/healthz", noKey: true, want: 200})

	// 500 is the one documented answer no request can provoke: it is a bug
	// (a handler's panic, an undecodable stored job), never bad input.
	// A 503 from /metrics needs more concurrent scrapes than the bound, each
	// stuck on a frozen Redis: metrics/scrape_test.go shows it.
	v.coverage("500", "metrics 503")
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
