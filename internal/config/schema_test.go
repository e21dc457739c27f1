package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// schemaPaths lists the leaves of schema as display paths, in order, and
// the secret ones apart.
func schemaPaths(prefix string, schema []node, all, secret *[]string) {
	for _, n := range schema {
		p := joinPath(prefix, n.name)
		if n.children != nil {
			schemaPaths(p, n.children, all, secret)
			continue
		}
		*all = append(*all, p)
		if n.secret {
			*secret = append(*secret, p)
		}
	}
}

// The schema read from the structs' tags is the one the hand-written lists
// spelled before it, key for key and in the same order (which decides
// "did you mean" between equally close keys and so every environment
// variable's name), with the same secrets.
func TestSchemaFromTags(t *testing.T) {
	t.Parallel()
	var all, secret []string
	schemaPaths("", topSchema(Default()), &all, &secret)
	schemaPaths("queues.q", queueSchema(&Queue{}), &all, &secret)
	require.Equal(t, []string{
		"redis.url",
		"redis.addr",
		"redis.addrs",
		"redis.username",
		"redis.password",
		"redis.passwordEnv",
		"redis.db",
		"redis.prefix",
		"redis.durability",
		"redis.replicaTimeout",
		"redis.sentinel.masterName",
		"redis.sentinel.addrs",
		"redis.sentinel.username",
		"redis.sentinel.password",
		"redis.sentinel.passwordEnv",
		"redis.tls.enabled",
		"redis.tls.caFile",
		"redis.tls.certFile",
		"redis.tls.keyFile",
		"redis.tls.serverName",
		"redis.tls.insecureSkipVerify",
		"http.listen",
		"http.maxPayloadBytes",
		"http.maxConcurrentRequests",
		"shutdownGrace",
		"lameDuck",
		"auth.apiKeys",
		"log.format",
		"log.level",
		"dispatch.leaseMargin",
		"dispatch.claimBatch",
		"dispatch.linger",
		"dispatch.scheduleLease",
		"tracing.otlpEndpoint",
		"tracing.sampleRatio",
		"tracing.serviceName",
		"webhooks.allowedHosts",
		"webhooks.allowPrivateNetworks",
		"defaults.mode",
		"defaults.concurrency",
		"defaults.rateLimitMax",
		"defaults.rateLimitWindow",
		"defaults.maxAttempts",
		"defaults.maxDefers",
		"defaults.timeout",
		"defaults.ackTimeout",
		"defaults.ackTimeoutAction",
		"defaults.backoff.type",
		"defaults.backoff.base",
		"defaults.backoff.max",
		"defaults.backoff.jitter",
		"defaults.defaultRetryAfter",
		"defaults.jobLifetime",
		"defaults.retention",
		"defaults.breaker.failures",
		"defaults.breaker.holdFor",
		"defaults.flowKeys.concurrency",
		"defaults.flowKeys.rateLimitMax",
		"defaults.flowKeys.rateLimitWindow",
		"defaults.flowKeys.holdScope",
		"queues.q.webhookUrl",
		"queues.q.signingSecret",
		"queues.q.signingSecretEnv",
		"queues.q.signingSecrets",
		"queues.q.signingSecretsEnv",
		"queues.q.mode",
		"queues.q.concurrency",
		"queues.q.rateLimitMax",
		"queues.q.rateLimitWindow",
		"queues.q.maxAttempts",
		"queues.q.maxDefers",
		"queues.q.timeout",
		"queues.q.ackTimeout",
		"queues.q.ackTimeoutAction",
		"queues.q.backoff.type",
		"queues.q.backoff.base",
		"queues.q.backoff.max",
		"queues.q.backoff.jitter",
		"queues.q.defaultRetryAfter",
		"queues.q.jobLifetime",
		"queues.q.retention",
		"queues.q.breaker.failures",
		"queues.q.breaker.holdFor",
		"queues.q.flowKeys.concurrency",
		"queues.q.flowKeys.rateLimitMax",
		"queues.q.flowKeys.rateLimitWindow",
		"queues.q.flowKeys.holdScope",
	}, all)
	require.Equal(t, []string{"redis.url", "redis.password", "redis.sentinel.password", "auth.apiKeys", "queues.q.signingSecret", "queues.q.signingSecrets"}, secret)
	require.Contains(t, envNames(EnvPrefix, topSchema(Default())), "SIMPLEQ_REDIS_SENTINEL_PASSWORDENV")
}
