// Package redistest starts real redis-server processes for tests, each on a
// free loopback port with its own directory, so tests never share state and
// can run in parallel. Behaviour that matters is tested against real Redis
// (miniredis differs in Lua and cluster details); see test/ and store tests.
package redistest

import (
	"bufio"
	"context"
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
	bin := Binary(t)
	dir := t.TempDir()
	port := FreePort(t)
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir}
	s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no"}, extra...)
	s.start(t, bin)
	t.Cleanup(s.Stop)
	return s
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
	if err := waitReady(s.Addr, 10*time.Second); err != nil {
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
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitReady(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if rerr == nil && line == "+PONG\r\n" {
				return nil
			}
			last = fmt.Errorf("ping answered %q: %v", line, rerr)
		} else {
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %w", within, last)
}

// Flush empties the server between sub-tests that share it.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("flushall: %v", err)
	}
}
