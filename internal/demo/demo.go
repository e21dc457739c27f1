// Package demo is "simpleqd demo": one command, no set-up, that shows
// rate-aware backpressure in about half a minute. It runs a real daemon
// in-process on the embedded store, points one queue at a simulated provider
// that answers 429 with Retry-After for a while and then recovers, publishes
// a few hundred jobs through the HTTP API, and shows live what the queue
// does: held until the release time, one probe per round, then full speed.
// It closes with what the rate limit cost, next to what per-job retrying
// would have cost.
//
// Everything the view shows is observed, not assumed: deliveries and 429s
// are counted by the provider, the hold state comes from GET
// /v1/queues/demo, and probes from the daemon's /metrics.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
)

// QueueName is the demo's one queue.
const QueueName = "demo"

// maxBatch is the API's limit on jobs per batch publish.
const maxBatch = 1000

// Options shape one demo run. The zero value of a field means its default
// (DefaultOptions).
type Options struct {
	// Jobs to publish, and the queue's concurrency.
	Jobs, Concurrency int
	// Latency is how long the provider takes per request.
	Latency time.Duration
	// Warmup is how long the provider answers normally after the first
	// delivery before its rate limit kicks in.
	Warmup time.Duration
	// LimitFor is how long it then answers 429, and RetryAfter what its
	// Retry-After header asks for.
	LimitFor, RetryAfter time.Duration
	// DurationLimit stops a run that has not finished by then.
	DurationLimit time.Duration
	// Refresh is the interval between two frames of the live view; a
	// plain (non-terminal) view prints a line every PlainEvery.
	Refresh, PlainEvery time.Duration
	// Out receives the view and the summary.
	Out io.Writer
	// TTY redraws the view in place with ANSI escapes; otherwise the view
	// is a plain line every PlainEvery, fit for a log or a pipe.
	TTY bool
	// Logger receives the daemon's logs. The demo's view owns the terminal,
	// so logs go to a file (Main) or nowhere (nil).
	Logger *zap.Logger
}

// DefaultOptions are tuned so the whole demo takes about 15 seconds: a short
// healthy start, a 9-second rate limit with 2-second Retry-After (five
// rounds), then the backlog drains at full concurrency.
func DefaultOptions() Options {
	return Options{
		Jobs:          300,
		Concurrency:   20,
		Latency:       150 * time.Millisecond,
		Warmup:        500 * time.Millisecond,
		LimitFor:      9 * time.Second,
		RetryAfter:    2 * time.Second,
		DurationLimit: 2 * time.Minute,
		Refresh:       200 * time.Millisecond,
		PlainEvery:    time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&o.Jobs, d.Jobs)
	set(&o.Concurrency, d.Concurrency)
	setD(&o.Latency, d.Latency)
	setD(&o.Warmup, d.Warmup)
	setD(&o.LimitFor, d.LimitFor)
	setD(&o.RetryAfter, d.RetryAfter)
	setD(&o.DurationLimit, d.DurationLimit)
	setD(&o.Refresh, d.Refresh)
	setD(&o.PlainEvery, d.PlainEvery)
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o
}

// Summary is what a run observed.
type Summary struct {
	Jobs int
	// Completed jobs (each answered 200 by the provider).
	Completed int
	// Deliveries the provider received, and how many it answered 429.
	Deliveries, Limited int
	// FirstRound is how many 429s went to deliveries that were already out
	// when the limit hit; Rounds is how many rounds of 429s there were
	// (each round holds the queue once).
	FirstRound, Rounds int
	// Probes the daemon sent (its simpleqd_probes_total).
	Probes int
	// WaitingAtFirst429 is how many jobs were not yet done when the limit hit.
	WaitingAtFirst429 int
	// PerJobEstimate is what per-job retrying would have cost: every
	// waiting job hitting the limit once per round, plus one successful
	// delivery per job.
	PerJobEstimate int
	Elapsed        time.Duration
	// Finished is false when the run was stopped (DurationLimit, Ctrl-C).
	Finished bool
}

// Line is the closing sentence of the demo.
func (s Summary) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "simpleqd: %s deliveries, %s of them 429s", thousands(s.Deliveries), thousands(s.Limited))
	if s.Rounds > 0 {
		fmt.Fprintf(&b, " (%s already in flight when the limit hit, then one probe per round; %d rounds)",
			thousands(s.FirstRound), s.Rounds)
	}
	b.WriteString(".")
	if s.Rounds > 0 {
		fmt.Fprintf(&b, " Per-job retry would have made ~%s deliveries (%s waiting jobs × %d rounds + %s).",
			thousands(s.PerJobEstimate), thousands(s.WaitingAtFirst429), s.Rounds, thousands(s.Jobs))
	}
	return b.String()
}

// thousands renders n with comma separators: 2700 → "2,700".
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Run plays the demo and returns what it observed. It returns an error if
// the daemon cannot start or the run does not finish (ctx ends, or
// DurationLimit passes); the summary is then still filled in as far as it
// got, and printed.
func Run(ctx context.Context, opts Options) (Summary, error) {
	o := opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.DurationLimit)
	defer cancel()

	prov := newProvider(o)
	provSrv := httptest.NewServer(prov)
	defer provSrv.Close()

	d, base, err := startDaemon(o, provSrv.URL)
	if err != nil {
		return Summary{Jobs: o.Jobs}, err
	}
	dctx, stopDaemon := context.WithCancel(context.Background())
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Run(dctx) }()
	defer func() {
		stopDaemon()
		<-daemonDone
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	if err := waitReady(ctx, hc, base); err != nil {
		return Summary{Jobs: o.Jobs}, err
	}
	v := newView(o, prov)
	v.header()
	began := time.Now()
	if err := publish(ctx, hc, base, o.Jobs); err != nil {
		return Summary{Jobs: o.Jobs}, err
	}

	ticker := time.NewTicker(o.Refresh)
	defer ticker.Stop()
	finished := false
	for !finished {
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
		snap := sample(ctx, hc, base, prov, began)
		finished = snap.prov.Done >= o.Jobs && snap.queueIdle
		v.frame(snap, finished || ctx.Err() != nil)
		if ctx.Err() != nil {
			break
		}
	}

	st := prov.stats(time.Now())
	rounds := prov.rounds()
	s := Summary{Jobs: o.Jobs, Completed: st.Done, Deliveries: st.Deliveries, Limited: st.Limited,
		Rounds: len(rounds), Probes: v.last.probes, Elapsed: time.Since(began), Finished: finished}
	if len(rounds) > 0 {
		s.FirstRound = rounds[0]
		prov.mu.Lock()
		s.WaitingAtFirst429 = prov.waitingAtFirst429
		prov.mu.Unlock()
	}
	s.PerJobEstimate = s.WaitingAtFirst429*s.Rounds + s.Jobs
	v.summary(s)
	if !finished {
		if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
			return s, fmt.Errorf("stopped after the duration limit (%s) with %d of %d jobs done", o.DurationLimit, s.Completed, s.Jobs)
		}
		return s, fmt.Errorf("stopped with %d of %d jobs done: %w", s.Completed, s.Jobs, ctx.Err())
	}
	return s, nil
}

// startDaemon builds the one-queue configuration and a daemon on the
// embedded store (redis.addr empty), listening on a free loopback port.
func startDaemon(o Options, webhook string) (*daemon.Daemon, string, error) {
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = time.Second
	cfg.LameDuck = 0 // no load balancer to leave
	cfg.Log.Format = "console"
	s := cfg.Defaults
	s.Concurrency = o.Concurrency
	s.Timeout = o.Latency + 10*time.Second
	// A job may be out when the limit hits and then be the probe of every
	// round; it must not run out of defers during the show.
	s.MaxDefers = 1000
	s.Backoff = config.Backoff{Type: "fixed", Base: 100 * time.Millisecond, Max: 100 * time.Millisecond}
	cfg.Queues = map[string]config.Queue{QueueName: {Name: QueueName, WebhookURL: webhook, SigningSecret: randomSecret(), QueueSettings: s}}
	d, err := daemon.New(cfg, o.Logger)
	if err != nil {
		return nil, "", fmt.Errorf("start the demo daemon: %w", err)
	}
	addr, err := d.Listen()
	if err != nil {
		return nil, "", fmt.Errorf("start the demo daemon: %w", err)
	}
	return d, "http://" + addr.String(), nil
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "whsec_demo_" + hex.EncodeToString(b)
}

func waitReady(ctx context.Context, hc *http.Client, base string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the demo daemon never became ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// publish sends the jobs through the batch endpoint, as a publisher would.
func publish(ctx context.Context, hc *http.Client, base string, n int) error {
	for start := 0; start < n; start += maxBatch {
		var b bytes.Buffer
		b.WriteString(`{"jobs":[`)
		for i := start; i < min(start+maxBatch, n); i++ {
			if i > start {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"payload":{"n":%d}}`, i+1)
		}
		b.WriteString(`]}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/queues/"+QueueName+"/jobs/batch", &b)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("publish: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
	return nil
}

// snapshot is one frame's worth of observations.
type snapshot struct {
	at      time.Time
	elapsed time.Duration
	prov    providerStats
	// hold is the queue's hold state as the API reports it ("" if the read
	// failed), until its release time, probe its probe job.
	hold      string
	until     time.Time
	probe     string
	queueIdle bool
	probes    int
}

type queueStatus struct {
	Counts struct {
		Pending, Processing, AwaitingAck int64
	} `json:"counts"`
	Hold struct {
		State      string  `json:"state"`
		Until      *string `json:"until"`
		ProbeJobID *string `json:"probeJobId"`
	} `json:"hold"`
}

// sample reads the queue, the daemon's probe counter and the provider's
// counters. The two HTTP reads go out together so a frame stays cheap.
func sample(ctx context.Context, hc *http.Client, base string, prov *provider, began time.Time) snapshot {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s := snapshot{probes: -1}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var q queueStatus
		if getJSON(rctx, hc, base+"/v1/queues/"+QueueName, &q) != nil {
			return
		}
		s.hold = q.Hold.State
		if q.Hold.Until != nil {
			s.until, _ = time.Parse(time.RFC3339Nano, *q.Hold.Until)
		}
		if q.Hold.ProbeJobID != nil {
			s.probe = *q.Hold.ProbeJobID
		}
		s.queueIdle = q.Counts.Pending+q.Counts.Processing+q.Counts.AwaitingAck == 0
	}()
	go func() {
		defer wg.Done()
		s.probes = scrapeProbes(rctx, hc, base)
	}()
	wg.Wait()
	s.at = time.Now()
	s.elapsed = s.at.Sub(began)
	s.prov = prov.stats(s.at)
	return s
}

func getJSON(ctx context.Context, hc *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// scrapeProbes sums simpleqd_probes_total for the demo queue over all
// results; -1 when /metrics cannot be read.
func scrapeProbes(ctx context.Context, hc *http.Client, base string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	return sumCounter(string(body), "simpleqd_probes_total", `queue="`+QueueName+`"`)
}

// sumCounter adds up the samples of a counter whose labels contain label,
// from Prometheus' text format.
func sumCounter(text, name, label string) int {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			total += v
		}
	}
	return int(total)
}
