package test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// oaKeysOps are the keys endpoints' operations (keys.md §5), driven by
// TestOpenAPIKeys on a daemon of its own: its lanes must be held by a
// webhook's 429s, and a publisher key must be refused the writes.
var oaKeysOps = map[string]bool{"listKeys": true, "getKey": true, "putKey": true, "deleteKey": true, "resumeKey": true}

// TestOpenAPIKeys drives the keys endpoints through every answer the
// document gives them (but 500, a bug, and 429, the API's own overload
// that TestOpenAPI drives route by route), validating each exchange
// against docs/openapi.json: lanes held by their own 429s, listed by state
// over pages, overrides set and removed, a held lane resumed into probing.
func TestOpenAPIKeys(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	// Lanes whose key starts with "slow" answer 429 for a minute; the rest
	// succeed, slowly enough for "fast" to be seen in flight.
	hook := NewWebhook(t, func(dl Delivery) Reply {
		if strings.HasPrefix(dl.Header.Get("x-simpleq-flow-key"), "slow") {
			return Reply{Status: 429, RetryAfter: "60"}
		}
		return Reply{Status: 200}
	})
	const key, publisher, outsider = "oa_keys_key", "oa_keys_publisher", "oa_keys_outsider"
	yaml := fmt.Sprintf(`auth:
  apiKeys: [%s]
  keys:
    - key: %s
      role: publisher
      queues: ["*"]
    - key: %s
      role: admin
      queues: ["other-*"]
queues:
  lanes:
    webhookUrl: %s
    signingSecret: whsec_oa
    maxDefers: 100
    flowKeys:
      concurrency: 4
`, key, publisher, outsider, hook.URL)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info",
		Env: []string{"SIMPLEQ_HTTP_MAXPAYLOADBYTES=4096"}})
	v := newOAValidator(t, d, key)
	call := func(method, path, body string, want int) Response {
		t.Helper()
		return v.call(oaCall{method: method, path: path, body: body, want: want})
	}
	hold := func(fk string) map[string]any {
		t.Helper()
		return call("GET", "/v1/queues/lanes/keys/"+fk, "", 200).JSON(t)["hold"].(map[string]any)
	}

	// Two lanes held by their own 429s ("slow/2" travels as slow%2F2);
	// "fast" keeps delivering.
	call("POST", "/v1/queues/lanes/jobs", `{"payload":{"n":1},"flowKey":"slow"}`, 201)
	call("POST", "/v1/queues/lanes/jobs/batch", `{"jobs":[{"payload":{"n":2},"flowKey":"slow/2"},{"payload":{"n":3},"flowKey":"slow/2"}]}`, 200)
	fast := call("POST", "/v1/queues/lanes/jobs", `{"payload":{"n":4},"flowKey":"fast"}`, 201).JSON(t)["id"].(string)
	for _, fk := range []string{"slow", "slow%2F2"} {
		require.Eventually(t, func() bool { return hold(fk)["state"] == "held" }, 10*time.Second, 20*time.Millisecond, "lane %s never held", fk)
	}
	require.Eventually(t, func() bool {
		return call("GET", "/v1/jobs/"+fast, "", 200).JSON(t)["status"] == "completed"
	}, 10*time.Second, 20*time.Millisecond, "lane fast's job never completed")
	h := hold("slow%2F2")
	require.NotNil(t, h["until"])
	require.NotNil(t, h["reason"])
	r := call("GET", "/v1/queues/lanes/keys/slow%2F2", "", 200)
	require.Equal(t, "slow/2", r.JSON(t)["flowKey"])
	require.EqualValues(t, 2, r.JSON(t)["counts"].(map[string]any)["pending"], "one deferred, one waiting behind the hold")
	require.EqualValues(t, 2, call("GET", "/v1/queues/lanes", "", 200).JSON(t)["counts"].(map[string]any)["heldKeys"])

	// Lists: held over pages of one, probing (none), active, all.
	r = call("GET", "/v1/queues/lanes/keys?state=held&limit=1", "", 200)
	require.Len(t, r.JSON(t)["keys"], 1)
	cursor := r.JSON(t)["nextCursor"].(string)
	r = call("GET", "/v1/queues/lanes/keys?state=held&limit=1&cursor="+cursor, "", 200)
	require.Len(t, r.JSON(t)["keys"], 1)
	require.Nil(t, r.JSON(t)["nextCursor"])
	r = call("GET", "/v1/queues/lanes/keys?state=probing", "", 200)
	require.Empty(t, r.JSON(t)["keys"])
	// "fast" has no jobs left and no override: it occupies nothing.
	r = call("GET", "/v1/queues/lanes/keys?state=active", "", 200)
	require.Empty(t, r.JSON(t)["keys"])
	call("GET", "/v1/queues/lanes/keys/fast", "", 404)
	r = call("GET", "/v1/queues/lanes/keys", "", 200)
	require.Len(t, r.JSON(t)["keys"], 2)

	// Overrides: set (a lane with no jobs may have one), replace, remove.
	r = call("PUT", "/v1/queues/lanes/keys/fast", `{"concurrency":2,"rateLimitMax":50,"weight":5}`, 200)
	require.EqualValues(t, 5, r.JSON(t)["weight"])
	r = call("GET", "/v1/queues/lanes/keys?state=active", "", 200)
	require.Len(t, r.JSON(t)["keys"], 1, "an override keeps a lane")
	r = call("PUT", "/v1/queues/lanes/keys/fast", `{"weight":null,"concurrency":1}`, 200)
	require.EqualValues(t, 1, r.JSON(t)["weight"])
	require.EqualValues(t, 0, r.JSON(t)["rateLimitMax"])
	call("DELETE", "/v1/queues/lanes/keys/fast", "", 204)
	call("DELETE", "/v1/queues/lanes/keys/fast", `{}`, 204)
	call("GET", "/v1/queues/lanes/keys/fast", "", 404)

	// Resume: a held lane goes to probing (its probe is answered 429 again).
	r = call("POST", "/v1/queues/lanes/keys/slow/resume", "", 200)
	require.Contains(t, []any{"probing", "held"}, r.JSON(t)["hold"].(map[string]any)["state"])
	call("POST", "/v1/queues/lanes/keys/slow%2F2/resume", `{}`, 200)
	call("POST", "/v1/queues/lanes/keys/none/resume", "", 404)

	// 400: the flow key in the path, the query, the body.
	bad := func(method, path, body, field string) {
		t.Helper()
		v.call(oaCall{method: method, path: path, body: body, want: 400, field: field})
	}
	for _, m := range []struct{ method, suffix, body string }{
		{"GET", "", ""}, {"PUT", "", `{"weight":2}`}, {"DELETE", "", ""}, {"POST", "/resume", ""},
	} {
		// The router validates the path as sent (percent-encoded), so the
		// document's pattern cannot see the decoded control byte.
		v.call(oaCall{method: m.method, path: "/v1/queues/lanes/keys/a%00b" + m.suffix, body: m.body, want: 400, field: "flowKey", docCannotTell: true})
		bad(m.method, "/v1/queues/lanes/keys/"+strings.Repeat("k", 256)+m.suffix, m.body, "flowKey")
	}
	bad("GET", "/v1/queues/lanes/keys?state=open", "", "state")
	bad("GET", "/v1/queues/lanes/keys?limit=1001", "", "limit")
	bad("GET", "/v1/queues/lanes/keys?cursor=abc", "", "cursor")
	bad("PUT", "/v1/queues/lanes/keys/fast", `{"weight":0}`, "weight")
	bad("PUT", "/v1/queues/lanes/keys/fast", `{"weight":101}`, "weight")
	bad("PUT", "/v1/queues/lanes/keys/fast", `{"concurrency":-1}`, "concurrency")
	bad("PUT", "/v1/queues/lanes/keys/fast", `{"rateLimitMax":1.5}`, "rateLimitMax")
	bad("PUT", "/v1/queues/lanes/keys/fast", `{"holdScope":"key"}`, "holdScope")
	bad("PUT", "/v1/queues/lanes/keys/fast", `[]`, "")
	bad("DELETE", "/v1/queues/lanes/keys/fast", `{"x":1}`, "x")
	bad("POST", "/v1/queues/lanes/keys/slow/resume", `{"reason":"x"}`, "reason")

	// 401, 403 (a publisher reads lanes but may not change them; a key
	// outside its reach may do neither), 404 for an unknown queue, 413, 415.
	type target struct{ method, path, body string }
	targets := []target{
		{"GET", "/v1/queues/%s/keys", ""},
		{"GET", "/v1/queues/%s/keys/slow", ""},
		{"PUT", "/v1/queues/%s/keys/fast", `{"weight":2}`},
		{"DELETE", "/v1/queues/%s/keys/fast", `{}`},
		{"POST", "/v1/queues/%s/keys/slow/resume", `{}`},
	}
	tooBig := `{"x":"` + strings.Repeat("a", 5000) + `"}`
	for _, tg := range targets {
		p := fmt.Sprintf(tg.path, "lanes")
		v.call(oaCall{method: tg.method, path: p, body: tg.body, noKey: true, want: 401})
		v.call(oaCall{method: tg.method, path: fmt.Sprintf(tg.path, "nope"), body: tg.body, want: 404})
		v.call(oaCall{method: tg.method, path: p, body: tg.body, key: outsider, want: 403})
		if tg.method == "GET" {
			v.call(oaCall{method: tg.method, path: p, key: publisher, want: 200})
			continue
		}
		v.call(oaCall{method: tg.method, path: p, body: tg.body, key: publisher, want: 403})
		v.call(oaCall{method: tg.method, path: p, body: tooBig, want: 413})
		v.call(oaCall{method: tg.method, path: p, body: tg.body, contentType: "text/plain", want: 415})
	}
	// 503: Redis gone.
	rs.Kill()
	for _, tg := range targets {
		require.Eventually(t, func() bool {
			return v.call(oaCall{method: tg.method, path: fmt.Sprintf(tg.path, "lanes"), body: tg.body, want: oaAnyStatus}).Status == 503
		}, 15*time.Second, 50*time.Millisecond, "%s %s never answered 503", tg.method, tg.path)
	}

	var missing []string
	for _, item := range v.doc.Paths.Map() {
		for _, op := range item.Operations() {
			if !oaKeysOps[op.OperationID] {
				continue
			}
			for status := range op.Responses.Map() {
				if status != "500" && status != "429" && !v.seen[op.OperationID][status] {
					missing = append(missing, op.OperationID+" "+status)
				}
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "documented answers the test never saw")
}
