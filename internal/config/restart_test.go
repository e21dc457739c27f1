package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RestartChanges names, in the file's order, the changed settings a reload
// cannot apply (a section as one key), and KeepRunning puts their running
// values back while leaving every live setting as reloaded.
func TestRestartChangesFromTags(t *testing.T) {
	t.Parallel()
	old := Default()
	next := Default()
	require.Empty(t, RestartChanges(old, next))
	next.Redis.Addr = "10.0.0.1:6379"
	next.Redis.Sentinel.Addrs = []string{} // the same as none
	next.HTTP.Listen = "0.0.0.0:8080"
	next.Log.Level = "debug"
	next.Dispatch.ScheduleLease = 5 * time.Second
	next.Tracing.SampleRatio = 0.5
	next.ShutdownGrace = time.Minute
	// Live settings.
	next.LameDuck = 0
	next.HTTP.MaxPayloadBytes = old.HTTP.MaxPayloadBytes // unchanged
	next.Auth.APIKeys = []string{"k"}
	next.Defaults.Concurrency = 3
	next.Webhooks.AllowPrivateNetworks = true
	want := []string{"redis", "http.listen", "shutdownGrace", "log.level", "dispatch.scheduleLease", "tracing"}
	require.Equal(t, want, RestartChanges(old, next))

	require.Equal(t, want, KeepRunning(old, next))
	require.Empty(t, RestartChanges(old, next))
	require.Equal(t, old.Redis, next.Redis)
	require.Equal(t, old.Tracing, next.Tracing)
	require.Equal(t, "127.0.0.1:8080", next.HTTP.Listen)
	require.Equal(t, time.Duration(0), next.LameDuck, "live settings stay as reloaded")
	require.Equal(t, []string{"k"}, next.Auth.APIKeys)
	require.Equal(t, 3, next.Defaults.Concurrency)
	require.True(t, next.Webhooks.AllowPrivateNetworks)
}
