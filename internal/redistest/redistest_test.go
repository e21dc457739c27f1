package redistest

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS server made with NewCerts answers clients with the client
// certificate, and with RequireClientCert refuses clients without one.
func TestStartTLS(t *testing.T) {
	t.Parallel()
	certs := NewCerts(t)
	s := StartWith(t, Options{TLS: certs, RequireClientCert: true, Password: "pw"})
	ctx := context.Background()
	if err := s.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("client with certificate: %v", err)
	}
	noCert := certs.ClientTLS()
	noCert.Certificates = nil
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "pw", TLSConfig: noCert, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "pw", MaxRetries: -1, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plaintext client was answered")
	}
	other := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "pw", MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: NewCerts(t).pool, MinVersion: tls.VersionTLS12}})
	defer other.Close()
	if err := other.Ping(ctx).Err(); err == nil {
		t.Fatal("a server certificate from another CA verified")
	}
}

// A Sentinel set elects a new master after the old one is killed.
func TestSentinelSetFailsOver(t *testing.T) {
	t.Parallel()
	set := StartSentinelSet(t, SentinelOptions{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	if got := set.Master(t); got != set.Nodes[0].Addr {
		t.Fatalf("master is %s, want %s", got, set.Nodes[0].Addr)
	}
	old := set.KillMaster(t)
	next := set.WaitNewMaster(t, old, 20*time.Second)
	if next != set.Nodes[1].Addr {
		t.Fatalf("new master %s, want the replica %s", next, set.Nodes[1].Addr)
	}
	if err := set.MasterServer(t).Client(t).Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("write to the new master: %v", err)
	}
}

// A TLS cluster answers a TLS cluster client on every master.
func TestStartClusterTLS(t *testing.T) {
	t.Parallel()
	certs := NewCerts(t)
	cl := StartClusterWith(t, 3, Options{TLS: certs, RequireClientCert: true})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()[:1], TLSConfig: certs.ClientTLS()})
	defer c.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	var masters atomic.Int32
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		masters.Add(1)
		return n.Ping(ctx).Err()
	}); err != nil || masters.Load() != 3 {
		t.Fatalf("masters: %d, %v", masters.Load(), err)
	}
}

// A Sentinel set on mutual TLS forms, replicates and answers a TLS
// failover client.
func TestSentinelSetTLS(t *testing.T) {
	t.Parallel()
	certs := NewCerts(t)
	set := StartSentinelSet(t, SentinelOptions{TLS: certs, RequireClientCert: true})
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: set.MasterName, SentinelAddrs: set.SentinelAddrs(),
		TLSConfig: certs.ClientTLS()})
	defer c.Close()
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("set through the sentinels: %v", err)
	}
}
