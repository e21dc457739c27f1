package daemon

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

func redisConfig(addr string) *config.Config {
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = time.Second
	cfg.Redis.Addr = addr
	return cfg
}

// TestRefusesOldRedis: on a Redis older than the scripts need, Run ends at
// start-up with an error naming the server, the version found and the one
// required, instead of serving with every script failing.
func TestRefusesOldRedis(t *testing.T) {
	t.Parallel()
	old := redistest.StartFake(t, map[string]string{"redis_version": "4.0.14"}, nil)
	d, err := New(redisConfig(old.Addr), zap.NewNop())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = d.Run(ctx)
	require.ErrorIs(t, err, store.ErrUnsupportedRedis)
	require.ErrorContains(t, err, "redis at "+old.Addr)
	require.ErrorContains(t, err, "found version 4.0.14, simpleqd needs Redis "+store.MinRedisVersion+" or later")
	require.NoError(t, ctx.Err(), "refused at start-up, not after waiting")
}

// TestStartsOnSupportedRedis: a real redis-server passes the check and the
// daemon becomes ready.
func TestStartsOnSupportedRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	d, err := New(redisConfig(srv.Addr), zap.NewNop())
	require.NoError(t, err)
	addr, err := d.Listen()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr.String() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
}
