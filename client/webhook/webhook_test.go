package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The known-answer vector of api.md.
const (
	kaSecret = "whsec_test_secret"
	kaBody   = `{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`
	kaSig    = "sha256=121657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9"
)

func TestSignKnownAnswer(t *testing.T) {
	t.Parallel()
	require.Equal(t, kaSig, Sign(kaSecret, []byte(kaBody)))
	require.True(t, Verify([]string{kaSecret}, []byte(kaBody), kaSig))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(kaBody)
	cases := []struct {
		name    string
		secrets []string
		sig     string
		want    bool
	}{
		{"exact", []string{kaSecret}, kaSig, true},
		{"rotation: old secret first", []string{"whsec_old", kaSecret}, kaSig, true},
		{"rotation: new secret first", []string{kaSecret, "whsec_new"}, kaSig, true},
		{"uppercase hex and prefix", []string{kaSecret}, strings.ToUpper(kaSig), true},
		{"surrounding space", []string{kaSecret}, " " + kaSig + " ", true},
		{"wrong secret", []string{"whsec_other"}, kaSig, false},
		{"no secrets", nil, kaSig, false},
		{"empty secret is ignored", []string{""}, Sign("", body), false},
		{"missing", []string{kaSecret}, "", false},
		{"no prefix", []string{kaSecret}, strings.TrimPrefix(kaSig, "sha256="), false},
		{"other algorithm", []string{kaSecret}, "sha1=" + strings.TrimPrefix(kaSig, "sha256="), false},
		{"truncated", []string{kaSecret}, kaSig[:len(kaSig)-2], false},
		{"not hex", []string{kaSecret}, "sha256=" + strings.Repeat("z", 64), false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Verify(c.secrets, body, c.sig), c.name)
	}
	// One changed byte of the body invalidates the signature.
	tampered := []byte(strings.Replace(kaBody, "a@b.com", "a@b.org", 1))
	require.False(t, Verify([]string{kaSecret}, tampered, kaSig))
}

// post sends body signed with secret ("" = unsigned) to h, as simpleqd
// signs: x-simpleq-signature and the Standard Webhooks headers, now.
func post(t *testing.T, h http.Handler, body, secret string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		signBoth(req.Header, []string{secret}, "job_x:1", time.Now(), []byte(body))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// signBoth sets the headers simpleqd sends for body signed with secrets
// (the first signs x-simpleq-signature) at ts.
func signBoth(h http.Header, secrets []string, id string, ts time.Time, body []byte) {
	h.Set(SignatureHeader, Sign(secrets[0], body))
	h.Set(IDHeader, id)
	h.Set(TimestampHeader, strconv.FormatInt(ts.Unix(), 10))
	h.Set(StandardSignatureHeader, SignStandard(secrets, id, ts, body))
}

func TestHandlerDecodesVerifiedJob(t *testing.T) {
	t.Parallel()
	body := `{"id":"job_01abc_emails","queue":"emails","payload":{"b":1,"a":12345678901234567890},"attempt":2,"maxAttempts":5,"deferCount":3,"createdAt":"2026-01-01T00:00:00.123Z"}`
	var got *Job
	h := Handler([]string{"whsec_old", "whsec_new"}, func(ctx context.Context, job *Job, w http.ResponseWriter, r *http.Request) error {
		require.NotNil(t, ctx)
		got = job
		return nil
	})
	for _, secret := range []string{"whsec_old", "whsec_new"} {
		got = nil
		rec := post(t, h, body, secret)
		require.Equal(t, http.StatusOK, rec.Code, secret)
		require.NotNil(t, got)
	}
	require.Equal(t, "job_01abc_emails", got.ID)
	require.Equal(t, "emails", got.Queue)
	require.Equal(t, `{"b":1,"a":12345678901234567890}`, string(got.Payload), "payload bytes kept exactly")
	require.Equal(t, 2, got.Attempt)
	require.Equal(t, 5, got.MaxAttempts)
	require.Equal(t, 3, got.DeferCount)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 123e6, time.UTC), got.CreatedAt)
}

func TestHandlerRefusesBadRequests(t *testing.T) {
	t.Parallel()
	called := false
	h := Handler([]string{kaSecret}, func(context.Context, *Job, http.ResponseWriter, *http.Request) error {
		called = true
		return nil
	})
	require.Equal(t, http.StatusUnauthorized, post(t, h, kaBody, "").Code, "missing signature")
	require.Equal(t, http.StatusUnauthorized, post(t, h, kaBody, "whsec_wrong").Code, "wrong secret")
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(kaBody+" "))
	signBoth(req.Header, []string{kaSecret}, "job_x:1", time.Now(), []byte(kaBody)) // signatures of other bytes
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "signature over different bytes")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/webhook", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "POST", rec.Header().Get("Allow"))

	require.Equal(t, http.StatusBadRequest, post(t, h, `{"hello":"world"}`, kaSecret).Code, "signed but no envelope")
	require.Equal(t, http.StatusBadRequest, post(t, h, `not json`, kaSecret).Code)
	require.False(t, called, "fn must never see an unverified or undecodable delivery")

	require.Equal(t, http.StatusOK, post(t, h, kaBody, kaSecret).Code)
	require.True(t, called)
}

func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	provider429 := func() *http.Response {
		return &http.Response{StatusCode: 429, Status: "429 Too Many Requests",
			Header: http.Header{"Retry-After": {"7"}}, Body: io.NopCloser(strings.NewReader("slow down"))}
	}
	cases := []struct {
		name       string
		err        error
		write      func(http.ResponseWriter)
		wantStatus int
		wantRA     string
	}{
		{name: "nil is 200", wantStatus: 200},
		{name: "error is 500", err: errors.New("db down: password=hunter2"), wantStatus: 500},
		{name: "backpressure 429", err: NewBackpressure(429, 30*time.Second), wantStatus: 429, wantRA: "30"},
		{name: "backpressure 503 sub-second", err: NewBackpressure(503, 250*time.Millisecond), wantStatus: 503, wantRA: "0.25"},
		{name: "backpressure 529 fallback", err: BackpressureFrom(&http.Response{StatusCode: 529, Header: http.Header{}}, 10*time.Second), wantStatus: 529, wantRA: "10"},
		{name: "relayed provider 429", err: BackpressureFrom(provider429(), time.Second), wantStatus: 429, wantRA: "7"},
		{name: "wrapped backpressure", err: errors.Join(errors.New("call failed"), NewBackpressure(429, 2*time.Second)), wantStatus: 429, wantRA: "2"},
		{name: "typed nil backpressure is a failure", err: (*Backpressure)(nil), wantStatus: 500},
		{name: "handler answers itself", write: func(w http.ResponseWriter) { w.WriteHeader(202) }, err: errors.New("ignored"), wantStatus: 202},
		{name: "handler writes a body", write: func(w http.ResponseWriter) { _, _ = io.WriteString(w, "done") }, wantStatus: 200},
	}
	for _, c := range cases {
		h := Handler([]string{kaSecret}, func(_ context.Context, _ *Job, w http.ResponseWriter, _ *http.Request) error {
			if c.write != nil {
				c.write(w)
			}
			return c.err
		})
		rec := post(t, h, kaBody, kaSecret)
		require.Equal(t, c.wantStatus, rec.Code, c.name)
		require.Equal(t, c.wantRA, rec.Header().Get("Retry-After"), c.name)
		require.NotContains(t, rec.Body.String(), "hunter2", "error text must not leak to the dispatcher")
	}
}

func TestHandlerPanicsWithoutSecret(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, *Job, http.ResponseWriter, *http.Request) error { return nil }
	require.Panics(t, func() { Handler(nil, fn) })
	require.Panics(t, func() { Handler([]string{""}, fn) })
	require.Panics(t, func() { Handler([]string{"s"}, nil) })
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	gemini := `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`
	cases := []struct {
		name string
		h    http.Header
		body string
		want time.Duration
		ok   bool
	}{
		{"seconds", hdr("Retry-After", "30"), "", 30 * time.Second, true},
		{"decimal seconds", hdr("Retry-After", "1.5"), "", 1500 * time.Millisecond, true},
		{"zero", hdr("Retry-After", "0"), "", 0, true},
		{"past date", hdr("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"), "", 0, true},
		{"retry-after-ms", hdr("retry-after-ms", "250"), "", 250 * time.Millisecond, true},
		{"ms wins over seconds", hdr("Retry-After", "1", "retry-after-ms", "1200"), "", 1200 * time.Millisecond, true},
		{"bad ms falls back to seconds", hdr("Retry-After", "3", "retry-after-ms", "soon"), "", 3 * time.Second, true},
		{"gemini body", nil, gemini, 7 * time.Second, true},
		{"gemini body wrapped in an array", nil, "[" + gemini + "]", 7 * time.Second, true},
		{"gemini fractional", nil, `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.250s"}]}}`, 250 * time.Millisecond, true},
		{"header wins over body", hdr("Retry-After", "2"), gemini, 2 * time.Second, true},
		{"huge is capped, not overflowed", hdr("Retry-After", "1e300"), "", maxWait, true},
		{"negative", hdr("Retry-After", "-1"), "", 0, false},
		{"garbage", hdr("Retry-After", "soon"), "", 0, false},
		{"NaN", hdr("Retry-After", "NaN"), "", 0, false},
		{"bad retryDelay", nil, `{"error":{"details":[{"retryDelay":"7 seconds"}]}}`, 0, false},
		{"not json", nil, `retryDelay: 7s`, 0, false},
		{"nothing", nil, "", 0, false},
	}
	for _, c := range cases {
		d, ok := RetryAfter(c.h, []byte(c.body))
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.want, d, c.name)
	}
	// A future HTTP-date: the time until then.
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	d, ok := RetryAfter(hdr("Retry-After", future), nil)
	require.True(t, ok)
	require.InDelta(t, 90*time.Second, d, float64(2*time.Second))
}

func TestBackpressureFrom(t *testing.T) {
	t.Parallel()
	require.Nil(t, BackpressureFrom(nil, time.Second))
	require.Nil(t, BackpressureFrom(&http.Response{StatusCode: 500}, time.Second), "a 500 is a failure, not backpressure")

	body := `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"4s"}]}}`
	resp := &http.Response{StatusCode: 429, Status: "429 Too Many Requests", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(body))}
	bp := BackpressureFrom(resp, time.Second)
	require.Equal(t, 429, bp.Status)
	require.Equal(t, 4*time.Second, bp.RetryAfter)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, body, string(rest), "the body is still readable after inspection")
	require.NoError(t, resp.Body.Close())
	require.Contains(t, bp.Error(), "429")

	bp = BackpressureFrom(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"oops"}}}, 12*time.Second)
	require.Equal(t, 503, bp.Status)
	require.Equal(t, 12*time.Second, bp.RetryAfter, "unusable Retry-After → fallback")
}

func TestNewBackpressureAndFormat(t *testing.T) {
	t.Parallel()
	require.Equal(t, 429, NewBackpressure(500, time.Second).Status, "a non-backpressure status must not burn an attempt")
	require.Equal(t, 529, NewBackpressure(529, time.Second).Status)
	require.Equal(t, time.Duration(0), NewBackpressure(429, -time.Second).RetryAfter)
	cause := errors.New("provider said no")
	bp := &Backpressure{Status: 429, Cause: cause}
	require.ErrorIs(t, bp, cause)

	for d, want := range map[time.Duration]string{
		0:                                   "0",
		-time.Second:                        "0",
		time.Second:                         "1",
		90 * time.Second:                    "90",
		1500 * time.Millisecond:             "1.5",
		250 * time.Millisecond:              "0.25",
		time.Microsecond:                    "0.001",
		1999999 * time.Microsecond:          "2",
		7*time.Second + 10*time.Millisecond: "7.01",
	} {
		require.Equal(t, want, FormatRetryAfter(d), d.String())
	}
}
