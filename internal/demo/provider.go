package demo

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// provider is the simulated downstream: an in-process webhook that does
// the work in latency, but for limitFor (starting warmup after the first
// delivery) answers every request 429 with Retry-After, like an API whose
// rate limit window is exhausted. It counts what it sees, so the demo's
// numbers are the downstream's, not the daemon's.
type provider struct {
	jobs       int
	latency    time.Duration
	warmup     time.Duration
	limitFor   time.Duration
	retryAfter time.Duration

	mu         sync.Mutex
	start      time.Time // first delivery
	deliveries int
	limited    int // 429 answers
	inflight   int
	done       map[string]bool
	// limitedAt are the arrival times of the requests answered 429, to
	// split them into rounds afterwards.
	limitedAt []time.Time
	// waitingAtFirst429 is how many jobs were not yet done when the first
	// 429 was answered.
	waitingAtFirst429 int
}

func newProvider(o Options) *provider {
	return &provider{jobs: o.Jobs, latency: o.Latency, warmup: o.Warmup, limitFor: o.LimitFor,
		retryAfter: o.RetryAfter, done: map[string]bool{}, waitingAtFirst429: -1}
}

// phase says what the provider does to a request arriving at t.
type phase int

const (
	phaseIdle phase = iota // nothing delivered yet
	phaseHealthy
	phaseLimiting
	phaseRecovered
)

// phaseAt must be called with p.mu held.
func (p *provider) phaseAt(t time.Time) phase {
	switch {
	case p.start.IsZero():
		return phaseIdle
	case t.Before(p.start.Add(p.warmup)):
		return phaseHealthy
	case t.Before(p.start.Add(p.warmup + p.limitFor)):
		return phaseLimiting
	default:
		return phaseRecovered
	}
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	id := r.Header.Get("X-Simpleq-Job-Id")
	p.mu.Lock()
	if p.start.IsZero() {
		p.start = arrived
	}
	limit := p.phaseAt(arrived) == phaseLimiting
	p.inflight++
	p.mu.Unlock()

	// The provider takes its time either way, as a real API does before
	// deciding; a shutdown (the request's context) cuts it short.
	select {
	case <-time.After(p.latency):
	case <-r.Context().Done():
	}

	p.mu.Lock()
	p.inflight--
	p.deliveries++
	if limit {
		if p.limited == 0 {
			p.waitingAtFirst429 = p.jobs - len(p.done)
		}
		p.limited++
		p.limitedAt = append(p.limitedAt, arrived)
	} else if id != "" {
		p.done[id] = true
	}
	p.mu.Unlock()

	if limit {
		secs := strconv.FormatFloat(p.retryAfter.Seconds(), 'f', -1, 64)
		w.Header().Set("Retry-After", secs)
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":"rate limited","retryAfter":%s}`, secs)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// providerStats is a snapshot of what the provider has seen.
type providerStats struct {
	Deliveries int
	Limited    int
	Done       int
	Phase      phase
	// LimitEnds is when the provider stops answering 429 (zero before the
	// first delivery).
	LimitEnds time.Time
}

func (p *provider) stats(now time.Time) providerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := providerStats{Deliveries: p.deliveries, Limited: p.limited, Done: len(p.done), Phase: p.phaseAt(now)}
	if !p.start.IsZero() {
		s.LimitEnds = p.start.Add(p.warmup + p.limitFor)
	}
	return s
}

// rounds splits the 429 answers into rounds: requests that arrived close
// together form one round, and a quiet gap (the queue being held) starts the
// next. The first round is the deliveries that were already out when the
// limit hit; every later round should be a single probe.
func (p *provider) rounds() []int {
	p.mu.Lock()
	at := append([]time.Time(nil), p.limitedAt...)
	p.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	gap := p.retryAfter / 2
	var out []int
	for i, t := range at {
		if i == 0 || t.Sub(at[i-1]) >= gap {
			out = append(out, 0)
		}
		out[len(out)-1]++
	}
	return out
}
