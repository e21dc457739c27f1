// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with its own directory, so tests never share state and
// can run in parallel. Behaviour that matters is tested against real Redis
// (miniredis differs in Lua and cluster details); see test/ and store tests.
package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one running redis-server.
type Server struct {
	Addr string
	Dir  string
	cmd  *exec.Cmd
	args []string
	// password and tlsc are how the server's own helpers (readiness,
	// Client, Flush) reach it.
	password string
	tlsc     *tls.Config
}

// Options start a server other than Start's plain one.
type Options struct {
	// TLS serves TLS only (--port 0, --tls-port) with TLS's server
	// certificate, and verifies client certificates against its CA.
	TLS *Certs
	// RequireClientCert refuses TLS clients without a certificate signed
	// by the CA (tls-auth-clients yes); otherwise one is optional.
	RequireClientCert bool
	// Password is set as requirepass (the default user's password).
	Password string
	// Conf is written to a config file given to redis-server before the
	// arguments; Sentinel needs one, as it rewrites it.
	Conf string
	// Args are more config arguments, e.g. "--appendonly", "yes".
	Args []string
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// process the test starts next. It is picked at random below the kernel's
// ephemeral range (32768 and up on Linux): a port from that range, as
// listening on :0 gives, can be taken again in between by any test's
// httptest server or outgoing connection, which under parallel tests made a
// daemon fail to bind and another test's webhook receive its readiness
// probes. Below that range only another FreePort caller can collide, and
// only by drawing the same port at the same moment.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use
		}
		_ = l.Close()
		return port
	}
	t.Fatalf("free port: no free port in [%d, %d) after 100 tries", freePortLow, freePortHigh)
	return 0
}

// The range FreePort draws from: above the well-known and most registered
// service ports, below Linux' default ephemeral range.
const freePortLow, freePortHigh = 20000, 32000

// Binary returns the redis-server path, skipping the test when it is missing
// outside CI (CI installs it; see .ci/run) and failing it inside CI.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not installed: %v", err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server)")
	}
	return p
}

// Start runs a redis-server with extra config arguments (e.g. "--appendonly",
// "yes") and stops it when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return StartWith(t, Options{Args: extra})
}

// StartWith runs a redis-server as o says and stops it when the test ends.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	port := strconv.Itoa(FreePort(t))
	s := &Server{Addr: "127.0.0.1:" + port, Dir: dir, password: o.Password}
	if o.Conf != "" {
		conf := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(conf, []byte(o.Conf), 0o600); err != nil {
			t.Fatalf("redis config: %v", err)
		}
		s.args = append(s.args, conf)
	}
	s.args = append(s.args, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if o.TLS != nil {
		authClients := "optional"
		if o.RequireClientCert {
			authClients = "yes"
		}
		s.args = append(s.args, "--port", "0", "--tls-port", port,
			"--tls-cert-file", o.TLS.ServerCertFile, "--tls-key-file", o.TLS.ServerKeyFile,
			"--tls-ca-cert-file", o.TLS.CAFile, "--tls-auth-clients", authClients)
		s.tlsc = o.TLS.ClientTLS()
	} else {
		s.args = append(s.args, "--port", port)
	}
	if o.Password != "" {
		s.args = append(s.args, "--requirepass", o.Password)
	}
	s.args = append(s.args, o.Args...)
	s.start(t, bin)
	t.Cleanup(s.Stop)
	return s
}

// options are go-redis options that reach the server as its helpers do.
func (s *Server) options() *redis.Options {
	return &redis.Options{Addr: s.Addr, Password: s.password, TLSConfig: s.tlsc, ContextTimeoutEnabled: true}
}

func (s *Server) start(t testing.TB, bin string) {
	t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	// Die with the test process even if it is killed before its cleanup runs.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.cmd.Dir = s.Dir
	logf, err := os.Create(filepath.Join(s.Dir, "redis.log"))
	if err == nil {
		s.cmd.Stdout, s.cmd.Stderr = logf, logf
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	if err := s.waitReady(10 * time.Second); err != nil {
		s.Stop()
		log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		t.Fatalf("redis-server on %s: %v; its log:\n%s", s.Addr, err, log)
	}
}

// Restart starts the same server again (same port and directory) after Kill.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.start(t, Binary(t))
}

// Kill stops the server abruptly (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Signal sends sig to the running server. SIGSTOP freezes it (connections
// stay open, nothing is answered) until SIGCONT: Redis hung, not gone.
func (s *Server) Signal(sig os.Signal) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Stop ends the server; it is also registered as test cleanup.
func (s *Server) Stop() { s.Kill() }

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitReady pings the server, as its own clients reach it (TLS, password),
// until it answers PONG.
func (s *Server) waitReady(within time.Duration) error {
	o := s.options()
	o.DialTimeout, o.ReadTimeout, o.MaxRetries = 200*time.Millisecond, time.Second, -1
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if last = c.Ping(context.Background()).Err(); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %w", within, last)
}

// Flush empties the server between sub-tests that share it.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	c := redis.NewClient(s.options())
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("flushall: %v", err)
	}
}
