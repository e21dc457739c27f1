package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shape a Sentinel set; the zero value is one master, one
// replica and three sentinels without passwords.
type SentinelOptions struct {
	// Replicas is how many replicas follow the master (default 1).
	Replicas int
	// Sentinels is how many sentinels watch it (default 3, quorum 2).
	Sentinels int
	// Password protects the data nodes (requirepass and masterauth); the
	// sentinels are told it (sentinel auth-pass).
	Password string
	// SentinelPassword protects the sentinels themselves (their
	// requirepass, which they also use with each other).
	SentinelPassword string
	// DownAfter is how long the master must be silent before a sentinel
	// calls it down (default 500ms, so a failover takes seconds).
	DownAfter time.Duration
	// TLS makes every node and sentinel serve TLS only, replication and the
	// sentinels' own connections included; RequireClientCert as Options.
	TLS               *Certs
	RequireClientCert bool
}

// SentinelSet is a master, its replicas and the sentinels watching them, all
// on loopback: what a daemon on Sentinel and a failover test need.
type SentinelSet struct {
	// MasterName is the name the sentinels monitor.
	MasterName string
	// Nodes are the data nodes; Nodes[0] started as the master. Which one
	// is master now is for Master to say.
	Nodes []*Server
	// Sentinels are the sentinel processes.
	Sentinels []*Server

	opts SentinelOptions
}

// StartSentinelSet starts the data nodes and sentinels and returns once
// every sentinel sees the master, its replicas and the other sentinels, so
// a failover can be voted at once.
func StartSentinelSet(t testing.TB, o SentinelOptions) *SentinelSet {
	t.Helper()
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.DownAfter == 0 {
		o.DownAfter = 500 * time.Millisecond
	}
	s := &SentinelSet{MasterName: "mymaster", opts: o}
	node := func(extra ...string) Options {
		n := Options{Password: o.Password, TLS: o.TLS, RequireClientCert: o.RequireClientCert}
		if o.Password != "" {
			n.Args = append(n.Args, "--masterauth", o.Password)
		}
		if o.TLS != nil {
			n.Args = append(n.Args, "--tls-replication", "yes")
		}
		n.Args = append(n.Args, extra...)
		return n
	}
	master := StartWith(t, node())
	s.Nodes = append(s.Nodes, master)
	host, port, _ := net.SplitHostPort(master.Addr)
	for range o.Replicas {
		s.Nodes = append(s.Nodes, StartWith(t, node("--replicaof", host, port)))
	}

	var conf strings.Builder
	fmt.Fprintf(&conf, "sentinel monitor %s %s %s %d\n", s.MasterName, host, port, o.Sentinels/2+1)
	fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", s.MasterName, o.DownAfter.Milliseconds())
	// failover-timeout also spaces retries of a failed failover (2×).
	fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", s.MasterName, 5*o.DownAfter.Milliseconds())
	fmt.Fprintf(&conf, "sentinel parallel-syncs %s 1\n", s.MasterName)
	if o.Password != "" {
		fmt.Fprintf(&conf, "sentinel auth-pass %s %s\n", s.MasterName, o.Password)
	}
	if o.TLS != nil {
		// Sentinels reach the data nodes, and each other, over TLS.
		conf.WriteString("tls-replication yes\n")
	}
	for range o.Sentinels {
		s.Sentinels = append(s.Sentinels, StartWith(t, Options{Conf: conf.String(), Password: o.SentinelPassword,
			TLS: o.TLS, RequireClientCert: o.RequireClientCert, Args: []string{"--sentinel"}}))
	}
	s.waitFormed(t, 20*time.Second)
	return s
}

// SentinelAddrs are the sentinels' host:port, as redis.sentinel.addrs.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr
	}
	return out
}

// Master returns the master's address as the first sentinel that answers
// says it.
func (s *SentinelSet) Master(t testing.TB) string {
	t.Helper()
	var last error
	for _, sn := range s.Sentinels {
		addr, err := s.askMaster(sn)
		if err == nil {
			return addr
		}
		last = err
	}
	t.Fatalf("sentinel: no sentinel names the master of %s: %v", s.MasterName, last)
	return ""
}

// MasterServer returns the data node that is master now.
func (s *SentinelSet) MasterServer(t testing.TB) *Server {
	t.Helper()
	addr := s.Master(t)
	for _, n := range s.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("sentinel: master %s is none of the set's nodes", addr)
	return nil
}

// KillMaster kills the current master with SIGKILL, as a crash would, and
// returns its address (to hand to WaitNewMaster).
func (s *SentinelSet) KillMaster(t testing.TB) string {
	t.Helper()
	m := s.MasterServer(t)
	m.Kill()
	return m.Addr
}

// Failover asks a sentinel for a failover without waiting for the master
// to fail (SENTINEL FAILOVER); the old master becomes a replica.
func (s *SentinelSet) Failover(t testing.TB) string {
	t.Helper()
	old := s.Master(t)
	c := redis.NewSentinelClient(s.Sentinels[0].options())
	defer c.Close()
	if err := c.Failover(context.Background(), s.MasterName).Err(); err != nil {
		t.Fatalf("sentinel failover: %v", err)
	}
	return old
}

// WaitNewMaster waits until every sentinel that answers names a master
// other than old, and that node says it is master, and returns it.
func (s *SentinelSet) WaitNewMaster(t testing.TB, old string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		if addr, ok := s.agreedMaster(); ok && addr != old && s.isMaster(addr) {
			return addr
		} else {
			last = addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sentinel: no new master replaced %s within %s (last seen %q)", old, within, last)
	return ""
}

// agreedMaster is the master every answering sentinel names, if they agree.
func (s *SentinelSet) agreedMaster() (string, bool) {
	agreed := ""
	for _, sn := range s.Sentinels {
		addr, err := s.askMaster(sn)
		if err != nil {
			continue
		}
		if agreed != "" && addr != agreed {
			return addr, false
		}
		agreed = addr
	}
	return agreed, agreed != ""
}

func (s *SentinelSet) askMaster(sn *Server) (string, error) {
	c := redis.NewSentinelClient(sn.options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hp, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name answered %q", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

func (s *SentinelSet) isMaster(addr string) bool {
	for _, n := range s.Nodes {
		if n.Addr != addr {
			continue
		}
		c := redis.NewClient(n.options())
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		role, err := c.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}
	return false
}

// waitFormed waits until each sentinel knows the master, every replica and
// every other sentinel (they find each other through the master's hello
// channel, every 2 s).
func (s *SentinelSet) waitFormed(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(sn.options())
		for {
			m, err := c.Master(context.Background(), s.MasterName).Result()
			others, _ := strconv.Atoi(m["num-other-sentinels"])
			replicas, _ := strconv.Atoi(m["num-slaves"])
			if err == nil && others == len(s.Sentinels)-1 && replicas == len(s.Nodes)-1 {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("sentinel %s: set not formed within %s: %v %v", sn.Addr, within, err, m)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
}
