package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client"
)

// request is what the fake API received.
type request struct {
	Method, Path, Query, Auth, ContentType string
	Body                                   []byte
}

// fakeAPI answers each "METHOD /path" with a canned status and body and
// records every request.
type fakeAPI struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	answers map[string]answer
}

type answer struct {
	status int
	body   string
}

func newFakeAPI(t *testing.T, answers map[string]answer) *fakeAPI {
	f := &fakeAPI{answers: answers}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: b})
		f.mu.Unlock()
		a, ok := f.answers[r.Method+" "+r.URL.Path]
		if !ok {
			a = answer{404, `{"error":"Queue 'nope' not found"}`}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body+"\n")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

var fixedNow = time.Date(2026, 11, 30, 7, 6, 10, 0, time.UTC)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, f *fakeAPI, stdin string, name string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Getenv: func(k string) string {
			switch k {
			case EnvURL:
				if f != nil {
					return f.srv.URL
				}
				return "http://127.0.0.1:1"
			case EnvAPIKey:
				return "sk_test"
			}
			return ""
		},
		Now: func() time.Time { return fixedNow },
	}
	code := Run(context.Background(), name, args, env)
	return result{code, out.String(), errb.String()}
}

const jobBody = `{"id":"job_01_emails","queue":"emails","status":"dead","attempts":3,"maxAttempts":3,"deferCount":1,` +
	`"idempotencyKey":null,"payload":{"to":"a@b.com","n":12345678901234567890},"scheduledFor":"2026-11-30T07:06:00.000Z",` +
	`"expiresAt":"2026-12-01T07:06:00.000Z","lastError":"webhook responded 500: boom","deadReason":"max_attempts_exhausted",` +
	`"history":[{"attempt":1,"status":"deferred","error":null,"webhookStatusCode":429,"timestamp":"2026-11-30T07:06:01.000Z",` +
	`"probe":true,"retryAfter":2,"scope":"queue","reason":"webhook responded 429"},` +
	`{"attempt":1,"status":"failed","error":"webhook responded 500: boom","webhookStatusCode":500,"timestamp":"2026-11-30T07:06:03.000Z"}],` +
	`"createdAt":"2026-11-30T07:06:00.000Z","completedAt":"2026-11-30T07:06:09.000Z","priority":0,"flowKey":"tenant-7"}`

const queueBody = `{"name":"emails","mode":"ack","webhookUrl":"http://127.0.0.1:9000/hook","concurrency":5,"rateLimitMax":50,` +
	`"rateLimitWindow":60,"maxAttempts":5,"maxDefers":50,"counts":{"pending":12,"processing":3,"awaitingAck":1,"dead":2},` +
	`"hold":{"state":"held","until":"2026-11-30T07:06:14.200Z","probeJobId":null,"reason":"webhook responded 429"}}`

func TestPublishSendsPayloadBytesAndKey(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/jobs": {201, `{"id":"job_01_emails","status":"pending","createdAt":"2026-11-30T07:06:13.034Z"}`},
	})
	// Flags after the positional argument, and a big integer that must not
	// be rounded by a decode/encode round trip.
	r := runCLI(t, f, "", "publish", "emails", "--payload", ` {"n":12345678901234567890,"b":1} `,
		"--idempotency-key", "order-1", "--delay", "1.5")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "published job_01_emails to emails (pending)\n", r.stdout)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "Bearer sk_test", reqs[0].Auth)
	require.Equal(t, "application/json", reqs[0].ContentType)
	require.Equal(t, `{"payload":{"n":12345678901234567890,"b":1},"idempotencyKey":"order-1","delay":1.5}`, string(reqs[0].Body))
}

func TestPublishDefaultsAndSources(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/jobs": {200, `{"id":"job_01_emails","status":"completed","createdAt":"2026-11-30T07:06:13.034Z"}`},
	})
	r := runCLI(t, f, "", "publish", "emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "already published with this idempotency key (completed)")
	require.Equal(t, `{"payload":{}}`, string(f.requests()[0].Body))

	r = runCLI(t, f, `{"from":"stdin"}`, "publish", "--payload-file", "-", "emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, `{"payload":{"from":"stdin"}}`, string(f.requests()[1].Body))

	path := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(path, []byte("{\"from\":\"file\"}\n"), 0o600))
	r = runCLI(t, f, "", "publish", "emails", "--payload-file", path, "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, `{"id":"job_01_emails","status":"completed","createdAt":"2026-11-30T07:06:13.034Z"}`+"\n", r.stdout)
	require.Equal(t, `{"payload":{"from":"file"}}`, string(f.requests()[2].Body))
}

func TestUsageErrorsSendNothing(t *testing.T) {
	f := newFakeAPI(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"publish"}, "missing argument"},
		{[]string{"publish", "emails", "extra"}, `unexpected argument "extra"`},
		{[]string{"publish", "emails", "--payload", "[1]"}, "must be a JSON object"},
		{[]string{"publish", "emails", "--payload", "{"}, "must be a JSON object"},
		{[]string{"publish", "emails", "--payload", "{}", "--payload-file", "x"}, "not both"},
		{[]string{"publish", "emails", "--payload-file", "/does/not/exist"}, "--payload-file"},
		{[]string{"publish", "emails", "--delay", "-1"}, "--delay"},
		{[]string{"publish", "emails", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"dead", "emails", "--limit", "0"}, "--limit"},
		{[]string{"replay", "emails"}, "--all or at least one job id"},
		{[]string{"replay", "emails", "--all", "job_1"}, "not both"},
		{[]string{"queues", "--url", "localhost:8080"}, "is not an http:// or https:// URL"},
		{[]string{"queues", "x"}, `unexpected argument "x"`},
	} {
		r := runCLI(t, f, "", tc.args[0], tc.args[1:]...)
		require.Equal(t, ExitUsage, r.code, "%v", tc.args)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		require.Contains(t, r.stderr, "usage: simpleqd "+tc.args[0], "%v", tc.args)
	}
	require.Empty(t, f.requests())
}

func TestHelpExitsZero(t *testing.T) {
	r := runCLI(t, nil, "", "dead", "--help")
	require.Equal(t, ExitOK, r.code)
	require.Contains(t, r.stdout, "usage: simpleqd dead QUEUE")
	require.Contains(t, r.stdout, "-cursor")
}

func TestAPIErrors(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/jobs": {400, `{"error":{"formErrors":[],"fieldErrors":{"payload":["Expected object, received string"],"delay":["Number must be less than or equal to 86400"]}}}`},
		"GET /v1/queues":              {401, `{"error":"unauthorized"}`},
		"GET /v1/jobs/job_1_emails":   {404, `{"error":"Job not found"}`},
		"GET /v1/queues/emails":       {503, `<html>bad gateway</html>`},
	})
	r := runCLI(t, f, "", "publish", "emails", "--delay", "999999")
	require.Equal(t, ExitError, r.code)
	require.Equal(t, "simpleqd publish: invalid request (HTTP 400)\n  delay: Number must be less than or equal to 86400\n"+
		"  payload: Expected object, received string\n", r.stderr)

	r = runCLI(t, f, "", "queues")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "unauthorized (HTTP 401); set SIMPLEQ_API_KEY")

	r = runCLI(t, f, "", "job", "job_1_emails", "--json")
	require.Equal(t, ExitNotFound, r.code)
	require.Equal(t, "simpleqd job: Job not found (HTTP 404)\n", r.stderr)
	require.Empty(t, r.stdout, "errors never go to stdout, also with --json")

	r = runCLI(t, f, "", "queue", "nope")
	require.Equal(t, ExitNotFound, r.code)
	require.Contains(t, r.stderr, "Queue 'nope' not found (HTTP 404)")

	r = runCLI(t, f, "", "queue", "emails")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "Service Unavailable (HTTP 503)")
}

func TestNetworkError(t *testing.T) {
	f := newFakeAPI(t, nil)
	f.srv.Close()
	r := runCLI(t, f, "", "queues")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "simpleqd queues: cannot reach simpleqd at "+f.srv.URL)
}

func TestJobTable(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{"GET /v1/jobs/job_01_emails": {200, jobBody}})
	r := runCLI(t, f, "", "job", "job_01_emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	for _, want := range []string{
		"status          dead\n",
		"attempts        3 of 3\n",
		"idempotencyKey  -\n",
		"flowKey         tenant-7\n",
		"replaceKey      -\n",
		"deadReason      max_attempts_exhausted\n",
		`payload         {"to":"a@b.com","n":12345678901234567890}`,
		"ATTEMPT  STATUS    CODE  PROBE  RETRY AFTER  TIME                      DETAIL\n",
		"1        deferred  429   yes    2s (queue)   2026-11-30T07:06:01.000Z  webhook responded 429\n",
		"1        failed    500          -            2026-11-30T07:06:03.000Z  webhook responded 500: boom\n",
	} {
		require.Contains(t, r.stdout, want)
	}

	r = runCLI(t, f, "", "job", "--json", "job_01_emails")
	require.Equal(t, jobBody+"\n", r.stdout, "--json prints the API's bytes")
}

func TestQueuesAndQueue(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"GET /v1/queues": {200, `{"queues":[` + queueBody + `,{"name":"sms","mode":"standard","webhookUrl":"http://x","concurrency":10,` +
			`"rateLimitMax":0,"rateLimitWindow":1,"maxAttempts":5,"maxDefers":50,"counts":{"pending":0,"processing":0,"awaitingAck":0,"dead":0},` +
			`"hold":{"state":"probing","until":null,"probeJobId":"job_9_sms","reason":null}}]}`},
		"GET /v1/queues/emails": {200, queueBody},
	})
	r := runCLI(t, f, "", "queues")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, ""+
		"NAME    MODE      PENDING  PROCESSING  AWAITING ACK  DEAD  CONCURRENCY  RATE LIMIT   STATE\n"+
		"emails  ack       12       3           1             2     5            50 per 1m0s  held until 2026-11-30T07:06:14.200Z (in 4.2s)\n"+
		"sms     standard  0        0           0             0     10           none         probing with job_9_sms\n", r.stdout)

	r = runCLI(t, f, "", "queue", "emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "state         held until 2026-11-30T07:06:14.200Z (in 4.2s)\n")
	require.Contains(t, r.stdout, "hold reason   webhook responded 429\n")
	require.Contains(t, r.stdout, "rate limit    50 per 1m0s\n")
	require.Contains(t, r.stdout, "dead          2\n")
}

func TestDeadPaging(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"GET /v1/queues/emails/dead": {200, `{"jobs":[` + jobBody + `],"nextCursor":"abc"}`},
		"GET /v1/queues/empty/dead":  {200, `{"jobs":[],"nextCursor":null}`},
	})
	r := runCLI(t, f, "", "dead", "emails", "--limit", "1", "--cursor", "xyz")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "cursor=xyz&limit=1", f.requests()[0].Query)
	require.Contains(t, r.stdout, "job_01_emails  max_attempts_exhausted  3         1")
	require.Contains(t, r.stdout, "more: simpleqd dead emails --limit 1 --cursor abc\n")

	r = runCLI(t, f, "", "dead", "empty")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "no dead jobs in empty\n", r.stdout)
	require.Equal(t, "limit=50", f.requests()[1].Query)
}

func TestReplayPauseResume(t *testing.T) {
	paused := strings.Replace(queueBody, `"state":"held","until":"2026-11-30T07:06:14.200Z","probeJobId":null,"reason":"webhook responded 429"`,
		`"state":"paused","until":null,"probeJobId":null,"reason":"deploy"`, 1)
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/dead/replay": {200, `{"replayed":1}`},
		"POST /v1/queues/emails/pause":       {200, paused},
		"POST /v1/queues/emails/resume":      {200, queueBody},
	})
	r := runCLI(t, f, "", "replay", "emails", "job_1_emails", "job_2_emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "replayed 1 of 2 job(s) of emails (1 skipped: not dead jobs of this queue)\n", r.stdout)
	require.JSONEq(t, `{"ids":["job_1_emails","job_2_emails"]}`, string(f.requests()[0].Body))

	r = runCLI(t, f, "", "replay", "--all", "emails")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "replayed 1 dead job(s) of emails\n", r.stdout)
	require.Equal(t, `{"all":true}`, string(f.requests()[1].Body))

	r = runCLI(t, f, "", "pause", "emails", "--reason", "deploy")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "paused emails: now paused (deploy)\n", r.stdout)
	require.JSONEq(t, `{"reason":"deploy"}`, string(f.requests()[2].Body))

	r = runCLI(t, f, "", "resume", "emails", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var q map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &q))
	require.Equal(t, "emails", q["name"])
}

func TestReplayChunksLongIDLists(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{"POST /v1/queues/emails/dead/replay": {200, `{"replayed":2}`}})
	args := []string{"emails"}
	for i := 0; i < 1500; i++ {
		args = append(args, "job_x_emails")
	}
	r := runCLI(t, f, "", "replay", args...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Len(t, f.requests(), 2)
	require.Contains(t, r.stdout, "replayed 4 of 1500 job(s)")
}

func TestURLFlagOverridesEnvAndTrailingSlash(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{"GET /v1/queues": {200, `{"queues":[]}`}})
	var out, errb bytes.Buffer
	code := Run(context.Background(), "queues", []string{"--url", f.srv.URL + "/"}, Env{Stdout: &out, Stderr: &errb,
		Getenv: func(string) string { return "" }})
	require.Equal(t, ExitOK, code, errb.String())
	require.Equal(t, "no queues configured\n", out.String())
	require.Equal(t, "/v1/queues", f.requests()[0].Path)
	require.Empty(t, f.requests()[0].Auth, "no key in the environment: no Authorization header")
}

func TestIsCommandAndUsage(t *testing.T) {
	for _, c := range []string{"publish", "job", "queues", "queue", "dead", "replay", "pause", "resume"} {
		require.True(t, IsCommand(c), c)
	}
	require.False(t, IsCommand("serve"))
	var b bytes.Buffer
	Usage(&b)
	require.Contains(t, b.String(), "simpleqd replay QUEUE (--all | ID...)")
}

// A breaker hold names itself in the one-line state, so an operator reads
// "the webhook keeps failing", not "rate limited".
func TestHoldTextNamesTheBreaker(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 6, 10, 0, time.UTC)
	until := now.Add(30 * time.Second)
	q := client.Queue{Hold: client.Hold{State: client.HoldHeld, Until: &until, Reason: "breaker: 5 consecutive failures; last: webhook responded 401"}}
	require.Equal(t, "held by breaker until 2026-11-30T07:06:40.000Z (in 30s)", holdText(q, now))
	q.Hold.Reason = "webhook responded 429"
	require.Equal(t, "held until 2026-11-30T07:06:40.000Z (in 30s)", holdText(q, now))
}
