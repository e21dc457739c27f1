package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisMode names how a daemon reaches Redis. Start-up logs, /readyz and
// `simpleqd check` show it (production.md §1), so an operator can tell a
// daemon on Sentinel from one pinned to a single node at a glance.
type RedisMode string

// The modes of [Endpoint.Mode].
const (
	// RedisEmbedded is the in-process store: no Redis configured.
	RedisEmbedded RedisMode = "embedded"
	// RedisSingle is one Redis node (redis.addr, or a URL without ?addr=).
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster (redis.addrs, or a URL with ?addr=).
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is a master found through Redis Sentinel.
	RedisSentinel RedisMode = "sentinel"
)

// Endpoint is the redis section resolved into where and as whom to
// connect: the URL's user, password, database and scheme merged with the
// keys that fill what the URL leaves out. Both the connection and its
// description are built from it, so they cannot disagree.
type Endpoint struct {
	Mode RedisMode
	// Addrs are host:port: the one node (single), the seeds (cluster) or
	// the sentinels (sentinel).
	Addrs []string
	// MasterName is the name the sentinels monitor (sentinel only).
	MasterName string
	// Username and Password authenticate to the data nodes.
	Username string
	Password string
	DB       int
	// TLS is redis.tls.enabled or a rediss:// URL.
	TLS bool
	// SentinelUsername and SentinelPassword authenticate to the sentinels.
	SentinelUsername string
	SentinelPassword string
}

// Endpoint resolves the section. It assumes a configuration [Load]
// accepted; the only error it can return is a URL go-redis cannot parse.
func (r Redis) Endpoint() (Endpoint, error) {
	e := Endpoint{Username: r.Username, Password: r.Password, DB: r.DB, TLS: r.TLS.Enabled}
	switch {
	case r.URL != "":
		p, err := parseRedisURL(r.URL)
		if err != nil {
			return Endpoint{}, err
		}
		e.Mode, e.Addrs = RedisSingle, p.addrs
		if p.cluster {
			e.Mode = RedisCluster
		}
		if p.user != "" {
			e.Username = p.user
		}
		if p.hasPassword {
			e.Password = p.password
		}
		if p.hasDB {
			e.DB = p.db
		}
		e.TLS = e.TLS || p.tls
	case r.Sentinel.Set():
		e.Mode, e.Addrs, e.MasterName = RedisSentinel, slices.Clone(r.Sentinel.Addrs), r.Sentinel.MasterName
		e.SentinelUsername, e.SentinelPassword = r.Sentinel.Username, r.Sentinel.Password
	case len(r.Addrs) > 0:
		e.Mode, e.Addrs = RedisCluster, slices.Clone(r.Addrs)
	case r.Addr != "":
		e.Mode, e.Addrs = RedisSingle, []string{r.Addr}
	default:
		e.Mode = RedisEmbedded
	}
	return e, nil
}

// redisURL is what a redis.url holds, as go-redis parses it.
type redisURL struct {
	addrs       []string
	cluster     bool
	user        string
	password    string
	hasPassword bool
	db          int
	hasDB       bool
	tls         bool
}

// parseRedisURL reads a redis:// or rediss:// URL with go-redis' own
// parsers (ParseURL, or ParseClusterURL when ?addr= lists more seeds), so
// the URL means here exactly what it means to go-redis. Its errors never
// repeat the URL, which may hold a password.
//
// Query parameters other than addr are refused rather than passed on:
// simpleqd sets its own timeouts and retries (docs/operations.md says why),
// and TLS verification belongs under redis.tls, where skipping it is seen.
func parseRedisURL(raw string) (redisURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return redisURL{}, fmt.Errorf("not a valid URL: %v", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return redisURL{}, fmt.Errorf("must start with redis:// or rediss:// (got %q)", u.Scheme+":")
	}
	if u.Hostname() == "" {
		return redisURL{}, errors.New("has no host (redis://[user:password@]host:port[/db])")
	}
	q := u.Query()
	params := make([]string, 0, len(q))
	for k := range q {
		params = append(params, k)
	}
	slices.Sort(params)
	for _, k := range params {
		switch k {
		case "addr":
		case "skip_verify":
			return redisURL{}, errors.New("query parameter skip_verify is not supported: use redis.tls.insecureSkipVerify")
		case "db":
			return redisURL{}, errors.New("query parameter db is not supported: give the database as the path (redis://host:6379/2)")
		default:
			return redisURL{}, fmt.Errorf("query parameter %q is not supported: simpleqd sets Redis timeouts, retries and pools itself (the only parameter is addr, for Redis Cluster seeds)", k)
		}
	}
	p := redisURL{tls: u.Scheme == "rediss"}
	if u.User != nil {
		p.user = u.User.Username()
		p.password, p.hasPassword = u.User.Password()
	}
	path := strings.Trim(u.Path, "/")
	if len(q["addr"]) > 0 {
		if path != "" && path != "0" {
			return redisURL{}, fmt.Errorf("database %q: a Redis Cluster URL (with ?addr=) has only database 0", path)
		}
		o, err := redis.ParseClusterURL(raw)
		if err != nil {
			return redisURL{}, err
		}
		p.addrs, p.cluster = o.Addrs, true
		return p, nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return redisURL{}, err
	}
	p.addrs, p.db, p.hasDB = []string{o.Addr}, o.DB, path != ""
	return p, nil
}

// validateRedis resolves passwordEnv and checks the redis section: one way
// to name the Redis, nothing said twice (in the URL and in a key), Sentinel
// complete, TLS settings only when TLS is on. Certificate files are read
// when the connection is built (package redisconn), not here, so a reload
// never fails on a file only start-up uses.
func (l *loader) validateRedis(c *Config) {
	r := &c.Redis
	if len(r.Sentinel.Addrs) == 0 {
		// "addrs: []" (as Redacted writes it) and no key load the same.
		r.Sentinel.Addrs = nil
	}
	l.resolvePassword("redis", &r.Password, r.PasswordEnv)
	l.resolvePassword("redis.sentinel", &r.Sentinel.Password, r.Sentinel.PasswordEnv)

	urlTLS, cluster := false, len(r.Addrs) > 0
	if r.URL != "" {
		for _, other := range []struct {
			key string
			set bool
		}{{"redis.addr", r.Addr != ""}, {"redis.addrs", len(r.Addrs) > 0}, {"redis.sentinel", r.Sentinel.Set()}} {
			if other.set {
				l.problemf("redis.url and "+other.key, "set at most one")
			}
		}
		if p, err := parseRedisURL(r.URL); err != nil {
			l.problemf("redis.url", "%v", err)
		} else {
			urlTLS, cluster = p.tls, p.cluster
			if p.user != "" && r.Username != "" {
				l.problemf("redis.url and redis.username", "the URL holds a user already; give it in one place")
			}
			if p.hasPassword && r.PasswordEnv != "" {
				l.problemf("redis.url and redis.passwordEnv", "the URL holds a password already; give it in one place")
			} else if p.hasPassword && r.Password != "" {
				l.problemf("redis.url and redis.password", "the URL holds a password already; give it in one place")
			}
			// The same database in both is no conflict: Redacted writes both.
			if p.hasDB && l.given["redis.db"] && r.DB != p.db {
				l.problemf("redis.url and redis.db", "the URL holds database %d already; give it in one place", p.db)
			}
		}
	}

	switch {
	case r.Addr != "" && len(r.Addrs) > 0:
		l.problemf("redis.addr and redis.addrs", "set at most one")
	case r.Addr != "":
		l.checkHostPort("redis.addr", r.Addr)
	}
	for i, addr := range r.Addrs {
		l.checkHostPort(fmt.Sprintf("redis.addrs[%d]", i), addr)
	}

	if s := r.Sentinel; s.Set() {
		if r.Addr != "" {
			l.problemf("redis.sentinel and redis.addr", "set at most one: with Sentinel the sentinels name the master (redis.sentinel.addrs lists the sentinels)")
		}
		if len(r.Addrs) > 0 {
			l.problemf("redis.sentinel and redis.addrs", "set at most one: Redis Cluster does not use Sentinel (redis.sentinel.addrs lists the sentinels)")
		}
		if s.MasterName == "" {
			l.problemf("redis.sentinel.masterName", "required with redis.sentinel: the name the sentinels monitor (sentinel monitor <name> …)")
		}
		if len(s.Addrs) == 0 {
			l.problemf("redis.sentinel.addrs", "required with redis.sentinel: the sentinels' host:port")
		}
		for i, addr := range s.Addrs {
			l.checkHostPort(fmt.Sprintf("redis.sentinel.addrs[%d]", i), addr)
		}
	}

	if r.DB < 0 {
		l.problemf("redis.db", "must be ≥ 0 (got %d)", r.DB)
	} else if r.DB != 0 && cluster {
		key := "redis.addrs"
		if r.URL != "" {
			key = "a cluster redis.url"
		}
		l.problemf("redis.db", "must be 0 with %s: Redis Cluster has only database 0 (got %d)", key, r.DB)
	}
	if r.Prefix == "" {
		l.problemf("redis.prefix", "must not be empty")
	} else if strings.ContainsAny(r.Prefix, "{}") {
		l.problemf("redis.prefix", "must not contain { or }, which would change Redis Cluster hash slots (got %q)", r.Prefix)
	}

	l.validateTLS(r, urlTLS)
}

// validateTLS checks redis.tls against whether TLS is on at all.
func (l *loader) validateTLS(r *Redis, urlTLS bool) {
	t := r.TLS
	on := t.Enabled || urlTLS
	if l.given["redis.tls.enabled"] && !t.Enabled && urlTLS {
		l.problemf("redis.tls.enabled", "false, but redis.url starts with rediss://, which turns TLS on; drop one")
	}
	if !on {
		for _, k := range []struct {
			key string
			set bool
		}{{"caFile", t.CAFile != ""}, {"certFile", t.CertFile != ""}, {"keyFile", t.KeyFile != ""},
			{"serverName", t.ServerName != ""}, {"insecureSkipVerify", t.InsecureSkipVerify}} {
			if k.set {
				l.problemf("redis.tls."+k.key, "set, but TLS is off (set redis.tls.enabled: true, or use a rediss:// URL)")
			}
		}
		return
	}
	if r.Embedded() {
		l.problemf("redis.tls.enabled", "the embedded store has no TLS; set redis.url, addr, addrs or sentinel to use a Redis")
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		l.problemf("redis.tls.keyFile", "required with redis.tls.certFile: the client certificate's private key")
	case t.KeyFile != "" && t.CertFile == "":
		l.problemf("redis.tls.certFile", "required with redis.tls.keyFile: the client certificate for that key")
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		l.problemf("redis.tls.insecureSkipVerify", "set with redis.tls.caFile, which it leaves unused: nothing is verified; drop one")
	}
}

// resolvePassword enforces at most one of section.password and
// section.passwordEnv and reads the latter through getenv into *password.
func (l *loader) resolvePassword(section string, password *string, env string) {
	switch {
	case env == "":
	case *password != "":
		l.problemf(section+".password and "+section+".passwordEnv", "set at most one")
	default:
		v := l.getenv(env)
		if v == "" {
			l.problemf(section+".passwordEnv", "environment variable %s is unset or empty", env)
			return
		}
		*password = v
	}
}
