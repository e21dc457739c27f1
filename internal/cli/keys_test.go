package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const heldKeyBody = `{"flowKey":"tenant-a","counts":{"pending":12,"processing":1,"awaitingAck":0},` +
	`"hold":{"state":"held","until":"2026-11-30T07:06:14.200Z","probeJobId":null,"reason":"webhook responded 429"},` +
	`"concurrency":2,"rateLimitMax":0,"weight":3}`

const openKeyBody = `{"flowKey":"tenant-b","counts":{"pending":4,"processing":2,"awaitingAck":1},` +
	`"hold":{"state":"open","until":null,"probeJobId":null,"reason":null},"concurrency":0,"rateLimitMax":10,"weight":1}`

func TestKeysList(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"GET /v1/queues/emails/keys": {200, `{"keys":[` + heldKeyBody + `,` + openKeyBody + `],"nextCursor":"17"}`},
		"GET /v1/queues/empty/keys":  {200, `{"keys":[],"nextCursor":null}`},
	})
	r := runCLI(t, f, "", "keys", "list", "emails", "--state", "held", "--limit", "2", "--cursor", "5")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "cursor=5&limit=2&state=held", f.requests()[0].Query)
	lines := strings.Split(r.stdout, "\n")
	require.Regexp(t, `^FLOW KEY\s+PENDING\s+PROCESSING\s+AWAITING ACK\s+CONCURRENCY\s+RATE LIMIT\s+WEIGHT\s+STATE$`, lines[0])
	require.Regexp(t, `^tenant-a\s+12\s+1\s+0\s+2\s+none\s+3\s+held until 2026-11-30T07:06:14.200Z \(in 4.2s\)$`, lines[1])
	require.Regexp(t, `^tenant-b\s+4\s+2\s+1\s+none\s+10\s+1\s+open$`, lines[2])
	require.Contains(t, r.stdout, "more: simpleqd keys list emails --state held --limit 2 --cursor 17\n")

	r = runCLI(t, f, "", "keys", "list", "empty")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "no lanes in empty on this page\n", r.stdout)
	require.Equal(t, "limit=100", f.requests()[1].Query)

	r = runCLI(t, f, "", "keys", "list", "emails", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"nextCursor":"17"`)

	for _, args := range [][]string{
		{"keys", "list"}, // no queue
		{"keys", "list", "emails", "--state", "open"}, // not a state
		{"keys", "list", "emails", "--limit", "0"},
		{"keys", "list", "emails", "--weight", "2"}, // a set flag
		{"keys", "list", "a", "b"},
		{"keys", "show", "emails", "k"},
		{"keys", "get", "emails"},
		{"keys", "get", "emails", "k", "--state", "held"},
		{"keys", "set", "emails", "k"}, // nothing to set
		{"keys", "set", "emails", "k", "--weight", "0"},
		{"keys", "set", "emails", "k", "--weight", "101"},
		{"keys", "set", "emails", "k", "--concurrency", "-1"},
		{"keys", "set", "emails", "k", "--rate-limit-max", "-1"},
		{"keys", "delete", "emails", ""},
	} {
		r := runCLI(t, f, "", args[0], args[1:]...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stdout)
	}
	require.Len(t, f.requests(), 3, "nothing sent for a usage error")
}

// keysAPI is a fake API that records each request's path as sent
// (escaped), to show a flow key travels as one path segment.
func keysAPI(t *testing.T) (*fakeAPI, func() []string) {
	var mu sync.Mutex
	var paths []string
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.EscapedPath())
		f.mu.Lock()
		f.reqs = append(f.reqs, request{Method: r.Method, Path: r.URL.Path, Body: b})
		f.mu.Unlock()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/keys/gone"):
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"Key not found"}`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/resume"):
			_, _ = io.WriteString(w, strings.Replace(heldKeyBody, `"state":"held"`, `"state":"probing"`, 1))
		default:
			_, _ = io.WriteString(w, heldKeyBody)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

func TestKeysGetSetDeleteResume(t *testing.T) {
	f, paths := keysAPI(t)
	r := runCLI(t, f, "", "keys", "get", "emails", "tenant/a b")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^flowKey\s+tenant-a$`, r.stdout)
	require.Regexp(t, `(?m)^state\s+held until 2026-11-30T07:06:14.200Z \(in 4.2s\)$`, r.stdout)
	require.Regexp(t, `(?m)^hold reason\s+webhook responded 429$`, r.stdout)
	require.Regexp(t, `(?m)^weight\s+3$`, r.stdout)

	r = runCLI(t, f, "", "keys", "set", "emails", "tenant-a", "--weight", "3", "--concurrency", "0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "set the override of lane tenant-a on emails")
	require.JSONEq(t, `{"concurrency":0,"weight":3}`, string(f.requests()[1].Body))

	r = runCLI(t, f, "", "keys", "delete", "emails", "tenant-a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed the override of lane tenant-a on emails")

	r = runCLI(t, f, "", "keys", "resume", "emails", "tenant-a")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "resumed lane tenant-a on emails: now probing (the lane's next ready job is the probe)\n", r.stdout)

	r = runCLI(t, f, "", "keys", "resume", "emails", "gone")
	require.Equal(t, ExitNotFound, r.code, r.stdout)
	require.Contains(t, r.stderr, "Key not found")

	require.Equal(t, []string{
		"GET /v1/queues/emails/keys/tenant%2Fa%20b",
		"PUT /v1/queues/emails/keys/tenant-a",
		"DELETE /v1/queues/emails/keys/tenant-a",
		"POST /v1/queues/emails/keys/tenant-a/resume",
		"POST /v1/queues/emails/keys/gone/resume",
	}, paths())
}

func TestPublishFlowKey(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/jobs": {201, `{"id":"job_01_emails","status":"pending","createdAt":"2026-11-30T07:06:13.034Z"}`},
	})
	r := runCLI(t, f, "", "publish", "emails", "--flow-key", "tenant \"a\"")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, `{"payload":{},"flowKey":"tenant \"a\""}`, string(f.requests()[0].Body))
	r = runCLI(t, f, "", "publish", "emails", "--flow-key", "")
	require.Equal(t, ExitUsage, r.code)
	require.Len(t, f.requests(), 1)
}
