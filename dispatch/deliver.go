package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/config"
	"github.com/simpleq/simpleqd/hold"
	"github.com/simpleq/simpleqd/store"
)

// errorBodyLimit bounds how much of a webhook's answer is read into lastError;
// drainLimit bounds how much more is read to keep the connection reusable.
const (
	errorBodyLimit = 512
	drainLimit     = 64 << 10
)

// NewHTTPClient returns the client deliveries use: redirects are never
// followed (a 3xx is a failure), environment proxies are ignored, and
// connections are pooled per webhook host.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Deliverer POSTs one job to its queue's webhook and classifies the answer.
type Deliverer struct {
	Client    *http.Client
	UserAgent string
}

// Deliver makes one delivery. It returns the outcome to record; a cancelled
// ctx (shutdown past its grace period) yields a release, which spends nothing.
func (d *Deliverer) Deliver(ctx context.Context, q config.Queue, j store.ClaimedJob) store.Outcome {
	out := store.Outcome{ID: j.ID, Token: j.Token}
	body := Envelope(q.Name, q.MaxAttempts, j)
	rctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, q.WebhookURL, bytes.NewReader(body))
	if err != nil {
		out.Kind, out.Error = store.OutcomeFail, "bad webhook URL: "+err.Error()
		return out
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.UserAgent)
	h.Set("X-Simpleq-Signature", Sign(q.SigningSecret, body))
	h.Set("X-Simpleq-Job-Id", j.ID)
	h.Set("X-Simpleq-Attempt", strconv.Itoa(j.Attempt))
	h.Set("X-Simpleq-Queue", q.Name)

	resp, err := d.Client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			out.Kind = store.OutcomeRelease
		case errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil:
			out.Kind, out.Error = store.OutcomeFail, fmt.Sprintf("timeout after %s", q.Timeout)
		default:
			out.Kind, out.Error = store.OutcomeFail, "connection error: "+trimErr(err)
		}
		return out
	}
	defer resp.Body.Close()
	out.StatusCode = resp.StatusCode
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		out.Kind = store.OutcomeOK
		if q.Mode == "ack" {
			out.Kind = store.OutcomeDelivered
		}
	case hold.IsBackpressure(code):
		out.Kind = store.OutcomeDefer
		ra := resp.Header.Get("Retry-After")
		wait, ok := hold.ParseRetryAfter(ra, time.Now())
		if !ok {
			wait = q.DefaultRetryAfter
		}
		out.RetryAfter = wait
		out.Reason = fmt.Sprintf("webhook responded %d", code)
		if ra != "" {
			out.Reason += " (Retry-After: " + trimTo(ra, 64) + ")"
		}
	case code >= 300 && code < 400:
		out.Kind, out.Error = store.OutcomeFail, fmt.Sprintf("webhook responded %d (redirects are not followed)", code)
	default:
		out.Kind = store.OutcomeFail
		out.Error = fmt.Sprintf("webhook responded %d", code)
		if s := strings.TrimSpace(string(snippet)); s != "" {
			out.Error += ": " + trimTo(s, 200)
		}
	}
	return out
}

func trimErr(err error) string {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) {
		if inner := uerr.Unwrap(); inner != nil {
			return trimTo(inner.Error(), 300)
		}
	}
	return trimTo(err.Error(), 300)
}

func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
