package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters only, on loopback ports.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns the seed addresses of every node.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts masters redis-server processes with cluster mode on and
// joins them with `redis-cli --cluster create`, waiting until the cluster
// reports state ok on every node.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return StartClusterWith(t, masters, Options{})
}

// StartClusterWith is StartCluster with every node started as o says; with
// o.TLS the cluster bus and clients use TLS too (tls-cluster yes).
func StartClusterWith(t testing.TB, masters int, o Options) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Binary(t) // same skip/fail policy as redis-server
		t.Fatalf("redis-cli not installed: %v", err)
	}
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		// The cluster bus gets its own port: by default it is the client
		// port + 10000, which lands in the kernel's ephemeral range, where
		// any test's connection may hold it (see FreePort).
		node := o
		node.Args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(FreePort(t))}, o.Args...)
		if o.TLS != nil {
			node.Args = append(node.Args, "--tls-cluster", "yes", "--tls-replication", "yes")
		}
		c.Nodes = append(c.Nodes, StartWith(t, node))
	}
	var args []string
	if o.TLS != nil {
		args = append(args, "--tls", "--cacert", o.TLS.CAFile, "--cert", o.TLS.ClientCertFile, "--key", o.TLS.ClientKeyFile)
	}
	if o.Password != "" {
		args = append(args, "--no-auth-warning", "-a", o.Password)
	}
	args = append(append(args, "--cluster", "create"), c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		rc := redis.NewClient(n.options())
		for {
			info, err := rc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				rc.Close()
				t.Fatalf("cluster node %s never reached state ok: %v %s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		rc.Close()
	}
	return c
}
