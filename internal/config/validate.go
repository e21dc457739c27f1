package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// Validation: the rules of config.md over the decoded values, each problem
// recorded at its key's path so Load reports them all at once.

// validate checks the decoded values against the rules of config.md.
func (l *loader) validate(c *Config) {
	l.validateRedis(c)             // redis.go
	l.validateDurability(&c.Redis) // durability.go

	// http, auth
	listenOK := l.checkHostPort("http.listen", c.HTTP.Listen)
	loopback := false
	if listenOK {
		host, _, _ := net.SplitHostPort(c.HTTP.Listen)
		loopback = isLoopback(host)
	}
	if c.HTTP.MaxPayloadBytes < 1024 {
		l.problemf("http.maxPayloadBytes", "must be ≥ 1024 (got %d)", c.HTTP.MaxPayloadBytes)
	}
	if c.HTTP.MaxConcurrentRequests < 1 {
		l.problemf("http.maxConcurrentRequests", "must be ≥ 1 (got %d)", c.HTTP.MaxConcurrentRequests)
	}
	// Keys with a reach count as keys: a daemon that has any is not open.
	if len(c.Auth.APIKeys) == 0 && len(c.Auth.Keys) == 0 && listenOK && !loopback {
		l.problemf("auth.apiKeys", "required when http.listen is not a loopback address (or auth.keys)")
	}
	for i, k := range c.Auth.APIKeys {
		if strings.TrimSpace(k) == "" {
			l.problemf(fmt.Sprintf("auth.apiKeys[%d]", i), "must not be empty")
		}
	}
	l.checkDuplicateKeys(c.Auth) // keys.go

	if c.ShutdownGrace < 0 {
		l.problemf("shutdownGrace", "must be ≥ 0 (got %s)", c.ShutdownGrace)
	}
	if c.LameDuck < 0 || c.LameDuck > MaxLameDuck {
		l.problemf("lameDuck", "must be between 0 and %s (got %s)", MaxLameDuck, c.LameDuck)
	}

	// log, dispatch
	if c.Log.Format != "json" && c.Log.Format != "console" {
		l.problemf("log.format", "must be \"json\" or \"console\" (got %q)", c.Log.Format)
	}
	if _, err := zapcore.ParseLevel(c.Log.Level); err != nil || c.Log.Level == "" {
		l.problemf("log.level", "must be one of debug, info, warn, error, dpanic, panic, fatal (got %q)", c.Log.Level)
	}
	if c.Dispatch.ClaimBatch < 1 || c.Dispatch.ClaimBatch > 1000 {
		l.problemf("dispatch.claimBatch", "must be between 1 and 1000 (got %d)", c.Dispatch.ClaimBatch)
	}
	if c.Dispatch.ScheduleLease < 100*time.Millisecond || c.Dispatch.ScheduleLease > time.Minute {
		l.problemf("dispatch.scheduleLease", "must be between 100ms and 1m (got %s)", c.Dispatch.ScheduleLease)
	}
	if c.Dispatch.Linger < 0 || c.Dispatch.Linger > 100*time.Millisecond {
		l.problemf("dispatch.linger", "must be between 0 and 100ms (got %s)", c.Dispatch.Linger)
	}
	if c.Dispatch.LeaseMargin < 0 {
		l.problemf("dispatch.leaseMargin", "must be ≥ 0 (got %s)", c.Dispatch.LeaseMargin)
	}

	// tracing
	if e := c.Tracing.OTLPEndpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.problemf("tracing.otlpEndpoint", "must be an absolute http:// or https:// URL of an OTLP/HTTP collector, or empty for no tracing (got %q)", e)
		}
		if strings.TrimSpace(c.Tracing.ServiceName) == "" {
			l.problemf("tracing.serviceName", "must not be empty when tracing.otlpEndpoint is set")
		}
	}
	if r := c.Tracing.SampleRatio; r < 0 || r > 1 {
		l.problemf("tracing.sampleRatio", "must be between 0 and 1 (got %v)", r)
	}
	l.validateWebhooks(&c.Webhooks) // webhooks.go

	// defaults, then each queue for the values it set itself: a bad default
	// is reported once under defaults, not once per queue inheriting it.
	for _, pr := range checkSettings(c.Defaults) {
		l.problemf(joinPath("defaults", pr.keys[0]), "%s", pr.msg)
	}
	for _, name := range c.QueueNames() {
		q := c.Queues[name]
		p := joinPath("queues", name)
		l.checkWebhookURL(joinPath(p, "webhookUrl"), q.WebhookURL)
		for _, pr := range checkSettings(q.QueueSettings) {
			if slices.ContainsFunc(pr.keys, func(k string) bool { return l.given[joinPath(p, k)] }) {
				l.problemf(joinPath(p, pr.keys[0]), "%s", pr.msg)
			}
		}
	}
}

// settingsProblem is one broken rule of QueueSettings. keys are relative to
// the settings (e.g. "backoff.max"); the first is the one reported, the
// others also involved, so a queue is blamed when it set any of them.
type settingsProblem struct {
	keys []string
	msg  string
}

// checkSettings applies the rules shared by defaults and queues.
func checkSettings(s QueueSettings) []settingsProblem {
	var out []settingsProblem
	add := func(msg string, keys ...string) { out = append(out, settingsProblem{keys: keys, msg: msg}) }
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add(fmt.Sprintf("must be > 0 (got %s)", d), key)
		}
	}

	if s.Mode != "standard" && s.Mode != "ack" {
		add(fmt.Sprintf("must be \"standard\" or \"ack\" (got %q)", s.Mode), "mode")
	}
	if s.Concurrency < 1 {
		add(fmt.Sprintf("must be ≥ 1 (got %d)", s.Concurrency), "concurrency")
	}
	if s.RateLimitMax < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %d)", s.RateLimitMax), "rateLimitMax")
	}
	switch {
	case s.RateLimitWindow < 0:
		add(fmt.Sprintf("must be ≥ 0 (got %s)", s.RateLimitWindow), "rateLimitWindow")
	case s.RateLimitMax > 0 && s.RateLimitWindow <= 0:
		add(fmt.Sprintf("must be > 0 when rateLimitMax > 0 (got %s)", s.RateLimitWindow), "rateLimitWindow", "rateLimitMax")
	}
	if s.MaxAttempts < 1 {
		add(fmt.Sprintf("must be ≥ 1 (got %d)", s.MaxAttempts), "maxAttempts")
	}
	if s.MaxDefers < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %d)", s.MaxDefers), "maxDefers")
	}
	positive("timeout", s.Timeout)
	positive("ackTimeout", s.AckTimeout)
	if s.AckTimeoutAction != "retry" && s.AckTimeoutAction != "dead" {
		add(fmt.Sprintf("must be \"retry\" or \"dead\" (got %q)", s.AckTimeoutAction), "ackTimeoutAction")
	}
	if s.Backoff.Type != "exponential" && s.Backoff.Type != "fixed" {
		add(fmt.Sprintf("must be \"exponential\" or \"fixed\" (got %q)", s.Backoff.Type), "backoff.type")
	}
	positive("backoff.base", s.Backoff.Base)
	// max only caps the exponential schedule; a fixed one never reads it.
	if s.Backoff.Type == "exponential" && s.Backoff.Base > 0 && s.Backoff.Max < s.Backoff.Base {
		add(fmt.Sprintf("must be ≥ backoff.base %s (got %s)", s.Backoff.Base, s.Backoff.Max), "backoff.max", "backoff.base", "backoff.type")
	}
	if s.DefaultRetryAfter < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %s)", s.DefaultRetryAfter), "defaultRetryAfter")
	}
	positive("jobLifetime", s.JobLifetime)
	positive("retention", s.Retention)
	if s.Breaker.Failures < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %d; 0 turns the breaker off)", s.Breaker.Failures), "breaker.failures")
	}
	if s.Breaker.Failures > 0 && s.Breaker.HoldFor <= 0 {
		add(fmt.Sprintf("must be > 0 when breaker.failures > 0 (got %s)", s.Breaker.HoldFor), "breaker.holdFor", "breaker.failures")
	} else if s.Breaker.HoldFor < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %s)", s.Breaker.HoldFor), "breaker.holdFor")
	}
	if s.FlowKeys.Concurrency < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %d; 0 means no per-lane cap)", s.FlowKeys.Concurrency), "flowKeys.concurrency")
	}
	if s.FlowKeys.RateLimitMax < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %d; 0 means no per-lane rate limit)", s.FlowKeys.RateLimitMax), "flowKeys.rateLimitMax")
	}
	if s.FlowKeys.RateLimitMax > 0 && s.FlowKeys.RateLimitWindow <= 0 {
		add(fmt.Sprintf("must be > 0 when flowKeys.rateLimitMax > 0 (got %s)", s.FlowKeys.RateLimitWindow), "flowKeys.rateLimitWindow", "flowKeys.rateLimitMax")
	} else if s.FlowKeys.RateLimitWindow < 0 {
		add(fmt.Sprintf("must be ≥ 0 (got %s)", s.FlowKeys.RateLimitWindow), "flowKeys.rateLimitWindow")
	}
	if s.FlowKeys.HoldScope != "key" && s.FlowKeys.HoldScope != "queue" {
		add(fmt.Sprintf("must be \"key\" or \"queue\" (got %q)", s.FlowKeys.HoldScope), "flowKeys.holdScope")
	}
	return out
}

// checkHostPort reports whether addr is host:port with a port, recording a
// problem otherwise.
func (l *loader) checkHostPort(path, addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		l.problemf(path, "must be host:port (got %q)", addr)
		return false
	}
	return true
}

// checkWebhookURL requires an absolute http(s) URL with a host.
func (l *loader) checkWebhookURL(path, raw string) {
	if raw == "" {
		l.problemf(path, "required")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.problemf(path, "must be an absolute http:// or https:// URL (got %q)", raw)
	}
}

// isLoopback reports whether a listen host only accepts local connections.
// An empty host listens on every interface and so is not loopback; other
// host names are not resolved, so only "localhost" counts.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
