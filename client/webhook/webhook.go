package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// SignatureHeader is the request header that carries a delivery's signature.
// It is exported so hand-written handlers and tests name it the same way.
const SignatureHeader = "X-Simpleq-Signature"

// signaturePrefix precedes the hex digest in SignatureHeader; it names the
// algorithm so a future one can be told apart.
const signaturePrefix = "sha256="

// MaxBodyBytes bounds how much of a delivery the Handler reads. It is far
// above any sane maxPayloadBytes (1 MiB by default) plus the envelope, and
// exists only so a misdirected or hostile request cannot exhaust memory.
const MaxBodyBytes = 64 << 20

// Job is a delivery's envelope, decoded. It mirrors the wire body field for
// field so a handler needs no map lookups or float conversions.
type Job struct {
	// ID is the job id; pass it to the client's Ack, Nack or Defer.
	ID string `json:"id"`
	// Queue is the queue the job was published to.
	Queue string `json:"queue"`
	// Payload is the publisher's JSON object, byte for byte.
	Payload json.RawMessage `json:"payload"`
	// Attempt is the 1-based number of this attempt. A redelivery after a
	// defer carries the same number; pass it to callbacks so a late callback
	// from an earlier delivery is refused instead of applied.
	Attempt int `json:"attempt"`
	// MaxAttempts is the queue's failure budget, so a handler can tell its
	// last chance (Attempt == MaxAttempts).
	MaxAttempts int `json:"maxAttempts"`
	// DeferCount is how many defers this job has reported so far.
	DeferCount int `json:"deferCount"`
	// CreatedAt is the publish time.
	CreatedAt time.Time `json:"createdAt"`
}

// Sign returns the x-simpleq-signature value for body: "sha256=" plus the
// lowercase hex HMAC-SHA256 of the raw bytes keyed with secret. It is
// exported for tests and for proxies that re-sign.
func Sign(secret string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, body))
}

func mac(secret string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}

// Verify reports whether signature (the header value) is a valid signature
// of body under any of secrets. Every comparison is constant time
// (hmac.Equal) and every secret is tried, so timing reveals neither the
// expected digest nor which secret matched. Empty secrets are ignored: an
// empty key would make signatures forgeable by anyone who guesses it.
func Verify(secrets []string, body []byte, signature string) bool {
	sig := strings.TrimSpace(signature)
	if len(sig) < len(signaturePrefix) || !strings.EqualFold(sig[:len(signaturePrefix)], signaturePrefix) {
		return false
	}
	got, err := hex.DecodeString(sig[len(signaturePrefix):])
	if err != nil || len(got) != sha256.Size {
		return false
	}
	ok := false
	for _, s := range secrets {
		if s == "" {
			continue
		}
		if hmac.Equal(got, mac(s, body)) {
			ok = true
		}
	}
	return ok
}

// HandlerFunc is the work of one delivery. ctx is the request's context. It
// may write the response itself (then the Handler adds nothing); otherwise
// its result decides the answer: nil → 200, a *Backpressure → its status and
// Retry-After, any other error → 500.
type HandlerFunc func(ctx context.Context, job *Job, w http.ResponseWriter, r *http.Request) error

// Handler returns an http.Handler for a queue's webhook URL. It answers 405
// to anything but POST, 401 when the delivery does not verify (see
// Verifier: checked over the raw body before anything is parsed, a stale
// webhook-timestamp included), 413 for a body over MaxBodyBytes and 400
// for a signed body that is not an envelope; otherwise it calls fn and
// answers as HandlerFunc describes.
//
// secrets lists the accepted signing secrets, normally one; list two while
// rotating. It is Verifier{Secrets: secrets}.Handler(fn): the default
// tolerance, and no delivery without the Standard Webhooks headers. It
// panics when no secret is non-empty, because such a handler could only
// ever answer 401 and that is a configuration mistake best seen at
// start-up.
func Handler(secrets []string, fn HandlerFunc) http.Handler {
	return Verifier{Secrets: secrets}.Handler(fn)
}

// Handler is the package's Handler with this Verifier's secrets,
// tolerance and policy. The 401's body names what failed (no secret
// appears in it), which the dispatcher records as the attempt's error, so
// an operator sees "timestamp outside tolerance" rather than guessing.
func (v Verifier) Handler(fn HandlerFunc) http.Handler {
	v.Secrets = nonEmpty(v.Secrets)
	if len(v.Secrets) == 0 {
		panic("webhook.Handler: no signing secret given")
	}
	if fn == nil {
		panic("webhook.Handler: nil HandlerFunc")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "could not read body", http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		job, err := DecodeJob(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tw := &trackingWriter{ResponseWriter: w}
		ferr := fn(r.Context(), job, tw, r)
		if tw.wrote {
			return // the handler answered itself
		}
		WriteError(w, ferr)
	})
}

// DecodeJob decodes an envelope (already verified) into a Job. It is
// exported for handlers that verify by hand, e.g. behind a framework that
// reads the body itself.
func DecodeJob(body []byte) (*Job, error) {
	var job Job
	if err := json.Unmarshal(body, &job); err != nil {
		return nil, fmt.Errorf("not a simpleq envelope: %w", err)
	}
	if job.ID == "" || len(job.Payload) == 0 {
		return nil, errors.New("not a simpleq envelope: id or payload missing")
	}
	return &job, nil
}

// WriteError writes the answer for a handler's result when the handler did
// not write one: nil → 200, a *Backpressure → its status with Retry-After,
// anything else → 500 with a generic body (error text can hold secrets and
// the dispatcher only records it as lastError). It is exported for handlers
// that do not use Handler.
func WriteError(w http.ResponseWriter, err error) {
	if err == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	var bp *Backpressure
	if errors.As(err, &bp) && bp != nil {
		w.Header().Set("Retry-After", FormatRetryAfter(bp.RetryAfter))
		http.Error(w, http.StatusText(bp.status()), bp.status())
		return
	}
	http.Error(w, "handler failed", http.StatusInternalServerError)
}

// trackingWriter remembers whether the handler started a response, so the
// Handler never writes a second status line.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
