package store

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Job ids carry their queue: "job_" + 26 characters of a time-ordered,
// lowercase Crockford base32 ULID + "_" + queue name. The queue part lets any
// daemon find the job's hash-tagged keys (and so its Redis Cluster slot) from
// the id alone, without a global index that no script could update atomically
// on a cluster. The time-ordered part breaks ties between jobs due in the same
// millisecond in publish order (sorted sets order equal scores by member).
const (
	idPrefix  = "job_"
	ulidChars = ulid.EncodedSize
)

// crockford is the ULID alphabet in the lower case job ids use.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// IDGen mints job ids. It is monotonic within one process, so jobs a daemon
// publishes in the same millisecond keep their order (oklog/ulid's
// monotonic entropy), and so do jobs published after the clock stepped back.
// The zero value is ready to use.
type IDGen struct {
	mu      sync.Mutex
	lastMS  uint64
	entropy *ulid.MonotonicEntropy
}

// New returns a fresh job id for queue.
func (g *IDGen) New(queue string) string {
	g.mu.Lock()
	if g.entropy == nil {
		g.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	ms := max(ulid.Timestamp(time.Now()), g.lastMS)
	id, err := ulid.New(ms, g.entropy)
	if err != nil {
		// The random part ran out within this millisecond:
		// the next millisecond keeps the order.
		ms++
		id, err = ulid.New(ms, g.entropy)
	}
	g.lastMS = ms
	g.mu.Unlock()
	if err != nil {
		panic("store: job id: " + err.Error()) // crypto/rand failed
	}

	var text [ulid.EncodedSize]byte
	_ = id.MarshalTextTo(text[:]) // cannot fail: the buffer has the size
	for i, c := range text {
		if c >= 'A' && c <= 'Z' {
			text[i] = c + 'a' - 'A'
		}
	}
	var sb strings.Builder
	sb.Grow(len(idPrefix) + ulidChars + 1 + len(queue))
	sb.WriteString(idPrefix)
	sb.Write(text[:])
	sb.WriteByte('_')
	sb.WriteString(queue)
	return sb.String()
}

// QueueOfJob returns the queue a job id belongs to.
func QueueOfJob(id string) (queue string, ok bool) {
	if !strings.HasPrefix(id, idPrefix) || len(id) < len(idPrefix)+ulidChars+2 {
		return "", false
	}
	body := id[len(idPrefix):]
	for i := 0; i < ulidChars; i++ {
		if strings.IndexByte(crockford, body[i]) < 0 {
			return "", false
		}
	}
	if body[ulidChars] != '_' {
		return "", false
	}
	return body[ulidChars+1:], true
}
