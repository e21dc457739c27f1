package store

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

func TestCheckVersionCompares(t *testing.T) {
	t.Parallel()
	for found, want := range map[string]error{
		"5.0":         nil,
		"5.0.0":       nil,
		"5.0.14":      nil,
		"6.2.14":      nil,
		"7.0.15":      nil,
		"10.0.0":      nil,
		"255.255.255": nil, // an unstable build
		"7.2.4-rc1":   nil,
		"4.0.14":      ErrUnsupportedRedis,
		"4.99.99":     ErrUnsupportedRedis,
		"3.2.12":      ErrUnsupportedRedis,
		"4":           ErrUnsupportedRedis,
		"":            ErrVersionUnknown,
		"v7.0.0":      ErrVersionUnknown,
		"7..1":        ErrVersionUnknown,
	} {
		err := checkVersion(found)
		if want == nil {
			require.NoError(t, err, found)
			continue
		}
		require.ErrorIs(t, err, want, found)
		if want == ErrUnsupportedRedis {
			require.ErrorContains(t, err, "found version "+found+", simpleqd needs Redis 5.0 or later")
		}
	}
	require.False(t, version{5, 0, 0}.less(version{5, 0, 0}))
	require.True(t, version{4, 9, 9}.less(version{5, 0, 0}))
	require.True(t, version{5, 0, 0}.less(version{5, 0, 1}))
	require.False(t, version{6, 0, 0}.less(version{5, 9, 9}))
	require.Equal(t, "7.0.15", infoField("# Server\r\nredis_git_sha1:00000000\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", "redis_version"))
	require.Equal(t, "", infoField("# Server\r\nredis_version_x:1\r\n", "redis_version"))
}

func versionStore(t *testing.T, rdb redis.UniversalClient) *Store {
	t.Helper()
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Options{})
	require.NoError(t, err)
	return s
}

// TestCheckVersionOnServers: a real redis-server passes; Redis 4 and a 6.2
// replicating scripts verbatim are refused with the node, the version found
// and what is needed; a server whose version cannot be read is "unknown",
// and one that cannot be reached is unavailable (the daemon retries).
func TestCheckVersionOnServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := exec.LookPath("redis-server"); err == nil {
		srv := redistest.Start(t)
		require.NoError(t, versionStore(t, srv.Client(t)).CheckVersion(ctx))
	}

	old := redistest.StartFake(t, map[string]string{"redis_version": "4.0.14", "redis_mode": "standalone"}, nil)
	err := versionStore(t, redis.NewClient(&redis.Options{Addr: old.Addr})).CheckVersion(ctx)
	require.ErrorIs(t, err, ErrUnsupportedRedis)
	require.EqualError(t, err, "redis at "+old.Addr+": redis not supported: found version 4.0.14, simpleqd needs Redis 5.0 or later")

	verbatim := redistest.StartFake(t, map[string]string{"redis_version": "6.2.14"}, map[string]string{"lua-replicate-commands": "no"})
	err = versionStore(t, redis.NewClient(&redis.Options{Addr: verbatim.Addr})).CheckVersion(ctx)
	require.ErrorIs(t, err, ErrUnsupportedRedis)
	require.ErrorContains(t, err, "lua-replicate-commands no")
	require.ErrorContains(t, err, verbatim.Addr)

	effects := redistest.StartFake(t, map[string]string{"redis_version": "6.2.14"}, map[string]string{"lua-replicate-commands": "yes"})
	require.NoError(t, versionStore(t, redis.NewClient(&redis.Options{Addr: effects.Addr})).CheckVersion(ctx))
	noConfig := redistest.StartFake(t, map[string]string{"redis_version": "5.0.14"}, nil) // CONFIG refused, as managed services do
	require.NoError(t, versionStore(t, redis.NewClient(&redis.Options{Addr: noConfig.Addr})).CheckVersion(ctx))

	// miniredis answers no INFO server: nothing to compare.
	mr := miniredis.RunT(t)
	err = versionStore(t, redis.NewClient(&redis.Options{Addr: mr.Addr()})).CheckVersion(ctx)
	require.ErrorIs(t, err, ErrVersionUnknown)
	require.NotErrorIs(t, err, ErrUnsupportedRedis)
	require.NotErrorIs(t, err, ErrUnavailable)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := l.Addr().String()
	require.NoError(t, l.Close())
	err = versionStore(t, redis.NewClient(&redis.Options{Addr: gone, MaxRetries: -1})).CheckVersion(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
	require.False(t, errors.Is(err, ErrUnsupportedRedis) || errors.Is(err, ErrVersionUnknown))
}

// TestCheckVersionOnEveryClusterMaster: in a cluster the check reads INFO
// on each master, since a script runs on whichever master owns its queue.
func TestCheckVersionOnEveryClusterMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, n := range cl.Nodes {
		require.NoError(t, n.Client(t).ConfigResetStat(ctx).Err())
	}
	require.NoError(t, versionStore(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})).CheckVersion(ctx))
	for _, n := range cl.Nodes {
		stats, err := n.Client(t).Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		require.True(t, strings.Contains(stats, "cmdstat_info:calls=1,"), "master %s was asked once: %s", n.Addr, stats)
	}
}
