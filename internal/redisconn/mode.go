package redisconn

import (
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/internal/config"
)

// Mode says how a daemon reaches Redis with every secret left out:
// production.md §1 has start-up logs, /readyz and `simpleqd check` show
// it, so an operator can confirm a daemon is on TLS, on Sentinel, or as
// which user, without reading the file or any password.
type Mode struct {
	// Mode is single, cluster, sentinel or embedded.
	Mode config.RedisMode
	// Addrs are the node (single), the seeds (cluster) or the sentinels.
	Addrs []string
	// MasterName is the master the sentinels are asked for.
	MasterName string
	// TLS is "off", "on" or "mutual" (a client certificate is presented).
	TLS string
	// CAFile is the CA bundle the server is verified against ("" is the
	// system's roots); ServerName the name it must be valid for.
	CAFile     string
	ServerName string
	// InsecureSkipVerify means the server is not verified at all.
	InsecureSkipVerify bool
	// User is the ACL user ("" is Redis' default user).
	User string
	// Password says where the password comes from, never what it is:
	// "" (none), "set", "in the URL" or "from $NAME".
	Password string
	// SentinelUser and SentinelPassword are the same for the sentinels.
	SentinelUser     string
	SentinelPassword string
	DB               int
	// Durability is redis.durability: local or replicated.
	Durability string
}

// The values of [Mode.TLS].
const (
	TLSOff    = "off"
	TLSOn     = "on"
	TLSMutual = "mutual"
)

// Describe says how r connects. r is a configuration config.Load
// accepted; a URL it could not parse (impossible then) shows as single.
func Describe(r config.Redis) Mode {
	e, _ := r.Endpoint()
	m := Mode{Mode: e.Mode, Addrs: e.Addrs, MasterName: e.MasterName, TLS: TLSOff, User: e.Username,
		SentinelUser: e.SentinelUsername, DB: e.DB, Durability: r.Durability}
	if m.Mode == "" {
		m.Mode = config.RedisSingle
	}
	if e.TLS {
		m.TLS = TLSOn
		if r.TLS.CertFile != "" {
			m.TLS = TLSMutual
		}
		m.CAFile, m.ServerName, m.InsecureSkipVerify = r.TLS.CAFile, r.TLS.ServerName, r.TLS.InsecureSkipVerify
	}
	switch {
	case r.PasswordEnv != "":
		m.Password = "from $" + r.PasswordEnv
	case r.Password != "":
		m.Password = "set"
	case e.Password != "":
		m.Password = "in the URL"
	}
	switch {
	case r.Sentinel.PasswordEnv != "":
		m.SentinelPassword = "from $" + r.Sentinel.PasswordEnv
	case r.Sentinel.Password != "":
		m.SentinelPassword = "set"
	}
	return m
}

// String is the one-line form `simpleqd check` prints, e.g. "sentinel
// (master mymaster via 3 sentinels: a:26379, b:26379, c:26379), TLS
// mutual (CA /etc/redis/ca.pem), user app, password from $REDIS_PASSWORD,
// db 0, durability local".
func (m Mode) String() string {
	if m.Mode == config.RedisEmbedded {
		return "embedded in-memory store (development only: nothing persisted, one process), durability " + m.Durability
	}
	var b strings.Builder
	b.WriteString(string(m.Mode))
	switch m.Mode {
	case config.RedisSentinel:
		fmt.Fprintf(&b, " (master %s via %d sentinels: %s)", m.MasterName, len(m.Addrs), strings.Join(m.Addrs, ", "))
	case config.RedisCluster:
		fmt.Fprintf(&b, " (seeds %s)", strings.Join(m.Addrs, ", "))
	default:
		fmt.Fprintf(&b, " (%s)", strings.Join(m.Addrs, ", "))
	}
	b.WriteString(", TLS " + m.TLS)
	if m.TLS != TLSOff {
		var detail []string
		switch {
		case m.InsecureSkipVerify:
			detail = append(detail, "server NOT verified: insecureSkipVerify")
		case m.CAFile != "":
			detail = append(detail, "CA "+m.CAFile)
		default:
			detail = append(detail, "system CAs")
		}
		if m.ServerName != "" {
			detail = append(detail, "server name "+m.ServerName)
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(detail, ", "))
	}
	b.WriteString(", " + who("user", m.User, m.Password))
	if m.Mode == config.RedisSentinel {
		b.WriteString(", sentinels as " + who("user", m.SentinelUser, m.SentinelPassword))
	}
	if m.Mode != config.RedisCluster {
		fmt.Fprintf(&b, ", db %d", m.DB)
	}
	b.WriteString(", durability " + m.Durability)
	return b.String()
}

// who renders a user and where its password comes from.
func who(label, user, password string) string {
	if user == "" {
		user = "default"
	}
	s := label + " " + user
	if password == "" {
		return s + ", no password"
	}
	return s + ", password " + password
}

// MarshalLogObject writes the mode as fields of the start-up log line, so
// log queries can filter on redis.mode or redis.tls.
func (m Mode) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("mode", string(m.Mode))
	if len(m.Addrs) > 0 {
		_ = enc.AddArray("addrs", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, addr := range m.Addrs {
				a.AppendString(addr)
			}
			return nil
		}))
	}
	if m.MasterName != "" {
		enc.AddString("masterName", m.MasterName)
	}
	if m.Mode != config.RedisEmbedded {
		enc.AddString("tls", m.TLS)
		if m.CAFile != "" {
			enc.AddString("caFile", m.CAFile)
		}
		if m.ServerName != "" {
			enc.AddString("serverName", m.ServerName)
		}
		if m.InsecureSkipVerify {
			enc.AddBool("insecureSkipVerify", true)
		}
		enc.AddString("user", orDefault(m.User))
		enc.AddString("password", orNone(m.Password))
		if m.Mode == config.RedisSentinel {
			enc.AddString("sentinelUser", orDefault(m.SentinelUser))
			enc.AddString("sentinelPassword", orNone(m.SentinelPassword))
		}
		if m.Mode != config.RedisCluster {
			enc.AddInt("db", m.DB)
		}
	}
	enc.AddString("durability", m.Durability)
	return nil
}

func orDefault(user string) string {
	if user == "" {
		return "default"
	}
	return user
}

func orNone(password string) string {
	if password == "" {
		return "none"
	}
	return password
}
