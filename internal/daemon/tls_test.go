package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// TestStopsOnUnverifiedCertificate: a Redis whose certificate does not
// verify against redis.tls.caFile ends Run at start-up with the file and
// the reason, instead of retrying behind a 503 for ever.
func TestStopsOnUnverifiedCertificate(t *testing.T) {
	t.Parallel()
	certs, other := redistest.NewCerts(t), redistest.NewCerts(t)
	srv := redistest.StartWith(t, redistest.Options{TLS: certs})
	cfg := redisConfig("")
	cfg.Redis.URL = "rediss://" + srv.Addr
	cfg.Redis.TLS.CAFile = other.CAFile
	core, logs := observer.New(zapcore.InfoLevel)
	d, err := New(cfg, zap.New(core))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = d.Run(ctx)
	require.ErrorContains(t, err, "redis.tls.caFile "+other.CAFile+": x509: certificate signed by unknown authority")
	require.NoError(t, ctx.Err(), "refused at start-up, not after waiting")

	line := logs.FilterMessage("redis connection").All()
	require.Len(t, line, 1)
	require.Contains(t, line[0].ContextMap()["summary"], "single ("+srv.Addr+"), TLS on (CA "+other.CAFile+")")
}

// TestWarnsOfInsecureSkipVerify: skipping verification is allowed, and said
// loudly at start-up.
func TestWarnsOfInsecureSkipVerify(t *testing.T) {
	t.Parallel()
	cfg := redisConfig("127.0.0.1:1")
	cfg.Redis.TLS.Enabled, cfg.Redis.TLS.InsecureSkipVerify = true, true
	core, logs := observer.New(zapcore.WarnLevel)
	_, err := New(cfg, zap.New(core))
	require.NoError(t, err)
	require.Len(t, logs.FilterMessageSnippet("INSECURE: redis.tls.insecureSkipVerify is true").All(), 1)
}
