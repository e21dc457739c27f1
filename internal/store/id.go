package store

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

// Job ids carry their queue: "job_" + 26 characters of a time-ordered,
// lowercase Crockford base32 ULID + "_" + queue name. The queue part lets any
// daemon find the job's hash-tagged keys (and so its Redis Cluster slot) from
// the id alone, without a global index that no script could update atomically
// on a cluster. The time-ordered part breaks ties between jobs due in the same
// millisecond in publish order (sorted sets order equal scores by member).
const (
	idPrefix  = "job_"
	ulidChars = 26
)

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// IDGen mints job ids. It is monotonic within one process, so jobs a daemon
// publishes in the same millisecond keep their order.
type IDGen struct {
	mu       sync.Mutex
	lastMS   uint64
	lastRand [10]byte
}

// New returns a fresh job id for queue.
func (g *IDGen) New(queue string) string {
	g.mu.Lock()
	ms := uint64(time.Now().UnixMilli())
	if ms <= g.lastMS {
		ms = g.lastMS
		// increment the 80-bit random part
		for i := 9; i >= 0; i-- {
			g.lastRand[i]++
			if g.lastRand[i] != 0 {
				break
			}
		}
	} else {
		g.lastMS = ms
		_, _ = rand.Read(g.lastRand[:])
	}
	var b [16]byte
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	copy(b[6:], g.lastRand[:])
	g.mu.Unlock()

	var sb strings.Builder
	sb.Grow(len(idPrefix) + ulidChars + 1 + len(queue))
	sb.WriteString(idPrefix)
	// 128 bits → 26 base32 chars (first char carries 3 bits).
	var acc uint64
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	for i := 0; i < ulidChars; i++ {
		shift := uint(125 - 5*i) // bit offset of this char from the top of 130 bits
		switch {
		case shift >= 64:
			acc = hi >> (shift - 64)
		case shift > 59:
			acc = hi<<(64-shift) | lo>>shift
		default:
			acc = lo >> shift
		}
		sb.WriteByte(crockford[acc&31])
	}
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
