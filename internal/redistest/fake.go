package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Fake is a stand-in for a Redis this machine cannot run, such as an old
// version: it answers PING, INFO and CONFIG GET from fixed values and every
// other command with "unknown command", in RESP2 and refusing HELLO as Redis
// before 6.0 does. It is enough for a start-up check, nothing more; anything
// that matters beyond that is tested against a real redis-server (Start).
type Fake struct {
	Addr string
}

// StartFake serves info (INFO's "name:value" fields, e.g. redis_version)
// and config (CONFIG GET's parameters) on a loopback port until the test
// ends.
func StartFake(t testing.TB, info, config map[string]string) *Fake {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake redis: %v", err)
	}
	f := &Fake{Addr: l.Addr().String()}
	names := make([]string, 0, len(info))
	for k := range info {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("# Server\r\n")
	for _, k := range names {
		b.WriteString(k + ":" + info[k] + "\r\n")
	}
	infoText := b.String()

	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serveFake(c, infoText, config)
			}()
		}
	}()
	// A connection's goroutine ends when its client closes it.
	t.Cleanup(func() { _ = l.Close() })
	return f
}

func serveFake(c net.Conn, info string, config map[string]string) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		if len(args) == 0 {
			continue
		}
		switch name := strings.ToUpper(args[0]); {
		case name == "PING":
			w.WriteString("+PONG\r\n")
		case name == "INFO":
			fmt.Fprintf(w, "$%d\r\n%s\r\n", len(info), info)
		case name == "CONFIG" && len(args) == 3 && strings.EqualFold(args[1], "GET"):
			if v, ok := config[args[2]]; ok {
				fmt.Fprintf(w, "*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(args[2]), args[2], len(v), v)
			} else {
				w.WriteString("*0\r\n")
			}
		default:
			fmt.Fprintf(w, "-ERR unknown command '%s'\r\n", args[0])
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings, as clients send.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, n)
	for range n {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:size]))
	}
	return args, nil
}

func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if len(line) < 2 || line[0] != kind {
		return 0, errors.New("fake redis: unexpected input " + strconv.Quote(line))
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 1<<20 {
		return 0, errors.New("fake redis: bad length " + strconv.Quote(line))
	}
	return n, nil
}
