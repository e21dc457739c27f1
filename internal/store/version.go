package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis the scripts run on. Every script reads
// TIME and then writes, which Redis allows only when it replicates a
// script's effects rather than the script: the default from 5.0 and the only
// mode from 7.0. Before 5.0 the first write fails with "Write commands not
// allowed after non deterministic commands". Nothing else the scripts or
// this package send is newer: the newest form is HSET with several fields,
// from 4.0.
const MinRedisVersion = "5.0"

var minRedisVersion, _ = parseVersion(MinRedisVersion)

// ErrUnsupportedRedis marks a Redis simpleqd cannot run on: too old, or set
// to replicate scripts verbatim. Retrying cannot help.
var ErrUnsupportedRedis = errors.New("redis not supported")

// ErrVersionUnknown marks a Redis whose version could not be read (INFO
// denied, or a server that does not report redis_version): the caller may
// go on unchecked, since a script that cannot run still fails loudly.
var ErrVersionUnknown = errors.New("redis version unknown")

// CheckVersion reads redis_version from INFO server on the Redis, or on
// every master of a cluster (a script runs on the master of its queue's
// slot), and fails with ErrUnsupportedRedis when one is older than
// MinRedisVersion or, on 5.x and 6.x, has lua-replicate-commands turned off.
// Errors reaching a node are ErrUnavailable, like every call's. A cluster's
// errors are all returned, joined, so errors.Is finds an ErrUnsupportedRedis
// whatever else another node answered.
func (s *Store) CheckVersion(ctx context.Context) error {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var errs []error
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			if err := checkNodeVersion(ctx, n); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			errs = append(errs, wrap(fmt.Errorf("list cluster masters: %w", err)))
		}
		return errors.Join(errs...)
	case *redis.Client:
		return checkNodeVersion(ctx, c)
	default:
		return fmt.Errorf("%w: cannot check a %T", ErrVersionUnknown, s.rdb)
	}
}

func checkNodeVersion(ctx context.Context, c *redis.Client) error {
	addr := c.Options().Addr
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		err = wrap(fmt.Errorf("read the version of redis at %s: %w", addr, err))
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrVersionUnknown, err)
		}
		return err
	}
	found := infoField(info, "redis_version")
	if err := checkVersion(found); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	if v, _ := parseVersion(found); v[0] < 7 {
		// 7.0 dropped the setting: effects are the only mode there. A
		// server that refuses CONFIG (managed services often do) runs the
		// default, yes, unless its operator chose otherwise: not knowable.
		if cfg, err := c.ConfigGet(ctx, "lua-replicate-commands").Result(); err == nil && cfg["lua-replicate-commands"] == "no" {
			return fmt.Errorf("redis at %s: %w: version %s has lua-replicate-commands no; simpleqd's scripts write after reading TIME, which needs it yes (the default)",
				addr, ErrUnsupportedRedis, found)
		}
	}
	return nil
}

// checkVersion compares an INFO redis_version with MinRedisVersion.
func checkVersion(found string) error {
	if found == "" {
		return fmt.Errorf("%w: INFO server has no redis_version", ErrVersionUnknown)
	}
	v, ok := parseVersion(found)
	if !ok {
		return fmt.Errorf("%w: cannot read redis_version %q", ErrVersionUnknown, found)
	}
	if v.less(minRedisVersion) {
		return fmt.Errorf("%w: found version %s, simpleqd needs Redis %s or later", ErrUnsupportedRedis, found, MinRedisVersion)
	}
	return nil
}

// version is major, minor, patch.
type version [3]int

func (v version) less(w version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

// parseVersion reads "major[.minor[.patch]]"; missing parts are 0. A suffix
// after the digits of a part ("7.2.4-rc1") is ignored.
func parseVersion(s string) (version, bool) {
	var v version
	parts := strings.SplitN(strings.TrimSpace(s), ".", 3)
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		if end == 0 {
			return version{}, false
		}
		n, err := strconv.Atoi(p[:end])
		if err != nil {
			return version{}, false
		}
		v[i] = n
	}
	return v, true
}

// infoField returns one field of an INFO answer ("name:value" lines).
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok && k == name {
			return v
		}
	}
	return ""
}
