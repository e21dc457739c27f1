package demo

// The flow keys part of the demo (keys.md): one queue, two tenants that
// call the same provider with their own API keys. The provider rate-limits
// one tenant (429 with Retry-After) for a while and never the other. The
// limited tenant's lane is held and probes once per round; the other
// tenant's lane keeps delivering, and the queue itself is never held.
//
// As in the first part, everything shown is observed: deliveries and 429s
// per tenant by the provider, each lane's hold from GET
// /v1/queues/tenants/keys/{flowKey}, the queue's hold from GET
// /v1/queues/tenants, lane probes from simpleqd_lane_probes_total.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
)

// KeysQueue is the flow keys part's one queue; LimitedTenant and
// FlowingTenant are its two flow keys.
const (
	KeysQueue     = "tenants"
	LimitedTenant = "acme"
	FlowingTenant = "globex"
)

// KeysOptions shape the flow keys part. The zero value of a field means its
// default (DefaultKeysOptions).
type KeysOptions struct {
	// JobsPerTenant are published for each tenant (the limited one's
	// first), and Concurrency is the queue's, shared by the two lanes.
	JobsPerTenant, Concurrency int
	// Latency is how long the provider takes per request; Warmup how long
	// after the first delivery it starts limiting the limited tenant,
	// LimitFor for how long, and RetryAfter what its 429s ask for.
	Latency, Warmup, LimitFor, RetryAfter time.Duration
	// DurationLimit stops a run that has not finished by then.
	DurationLimit time.Duration
	// Refresh and PlainEvery pace the view, as in Options.
	Refresh, PlainEvery time.Duration
	Out                 io.Writer
	TTY                 bool
	Logger              *zap.Logger
}

// DefaultKeysOptions take about ten seconds: the limited tenant is held
// for five seconds in rounds of 1.5 s while the other tenant's backlog
// drains at the queue's whole concurrency.
func DefaultKeysOptions() KeysOptions {
	return KeysOptions{
		JobsPerTenant: 300,
		Concurrency:   10,
		Latency:       100 * time.Millisecond,
		Warmup:        500 * time.Millisecond,
		LimitFor:      5 * time.Second,
		RetryAfter:    1500 * time.Millisecond,
		DurationLimit: 2 * time.Minute,
		Refresh:       200 * time.Millisecond,
		PlainEvery:    time.Second,
	}
}

func (o KeysOptions) withDefaults() KeysOptions {
	d := DefaultKeysOptions()
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
	set(&o.JobsPerTenant, d.JobsPerTenant)
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

// TenantSummary is what the provider saw of one tenant.
type TenantSummary struct {
	Jobs, Completed, Deliveries, Limited int
	// FirstRound is how many 429s went to deliveries already out when the
	// limit hit; Rounds how many rounds of 429s there were (each holds
	// the tenant's lane once).
	FirstRound, Rounds int
}

// KeysSummary is what a run of the flow keys part observed.
type KeysSummary struct {
	Limited, Flowing TenantSummary
	// FlowingWhileLimited counts the flowing tenant's jobs completed while
	// the provider was limiting the other tenant.
	FlowingWhileLimited int
	// LaneProbes the daemon sent (simpleqd_lane_probes_total).
	LaneProbes int
	// LaneHeldSeen says the view saw the limited tenant's lane held;
	// QueueHeldSeen says it ever saw the queue itself not open.
	LaneHeldSeen, QueueHeldSeen bool
	Elapsed                     time.Duration
	Finished                    bool
}

// Line is the closing sentence of the flow keys part.
func (s KeysSummary) Line() string {
	queue := "the queue itself was never held"
	if s.QueueHeldSeen {
		queue = "the queue itself was held too"
	}
	return fmt.Sprintf("flow keys: %s's lane was held %d times (%s 429s: %s in flight when its limit hit, then one probe per round) "+
		"while %s delivered %s jobs meanwhile; %s.",
		LimitedTenant, s.Limited.Rounds, thousands(s.Limited.Limited), thousands(s.Limited.FirstRound),
		FlowingTenant, thousands(s.FlowingWhileLimited), queue)
}

// tenantProvider is the simulated provider of the flow keys part: each
// tenant calls it with its own API key (the x-simpleq-flow-key header
// stands for it), and it limits LimitedTenant only.
type tenantProvider struct {
	o KeysOptions

	mu      sync.Mutex
	start   time.Time
	tenants map[string]*tenantCount
	// flowingWhileLimited: FlowingTenant's successes that arrived while
	// LimitedTenant was being limited.
	flowingWhileLimited int
}

type tenantCount struct {
	deliveries, limited int
	done                map[string]bool
	limitedAt           []time.Time
}

func newTenantProvider(o KeysOptions) *tenantProvider {
	p := &tenantProvider{o: o, tenants: map[string]*tenantCount{}}
	for _, t := range []string{LimitedTenant, FlowingTenant} {
		p.tenants[t] = &tenantCount{done: map[string]bool{}}
	}
	return p
}

// limitingAt says whether LimitedTenant's requests arriving at t get 429;
// p.mu must be held.
func (p *tenantProvider) limitingAt(t time.Time) bool {
	return !p.start.IsZero() && !t.Before(p.start.Add(p.o.Warmup)) && t.Before(p.start.Add(p.o.Warmup+p.o.LimitFor))
}

func (p *tenantProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	id := r.Header.Get("X-Simpleq-Job-Id")
	tenant := r.Header.Get("X-Simpleq-Flow-Key")
	p.mu.Lock()
	if p.start.IsZero() {
		p.start = arrived
	}
	limiting := p.limitingAt(arrived)
	limit := tenant == LimitedTenant && limiting
	p.mu.Unlock()

	select {
	case <-time.After(p.o.Latency):
	case <-r.Context().Done():
	}

	p.mu.Lock()
	c := p.tenants[tenant]
	if c == nil {
		c = &tenantCount{done: map[string]bool{}}
		p.tenants[tenant] = c
	}
	c.deliveries++
	if limit {
		c.limited++
		c.limitedAt = append(c.limitedAt, arrived)
	} else if id != "" {
		c.done[id] = true
		if tenant == FlowingTenant && limiting {
			p.flowingWhileLimited++
		}
	}
	p.mu.Unlock()

	if limit {
		secs := strconv.FormatFloat(p.o.RetryAfter.Seconds(), 'f', -1, 64)
		w.Header().Set("Retry-After", secs)
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":"rate limited for this API key","retryAfter":%s}`, secs)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// tenant returns a snapshot of one tenant's counts.
func (p *tenantProvider) tenant(name string) TenantSummary {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.tenants[name]
	s := TenantSummary{Jobs: p.o.JobsPerTenant, Completed: len(c.done), Deliveries: c.deliveries, Limited: c.limited}
	at := append([]time.Time(nil), c.limitedAt...)
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	var rounds []int
	for i, t := range at {
		if i == 0 || t.Sub(at[i-1]) >= p.o.RetryAfter/2 {
			rounds = append(rounds, 0)
		}
		rounds[len(rounds)-1]++
	}
	s.Rounds = len(rounds)
	if len(rounds) > 0 {
		s.FirstRound = rounds[0]
	}
	return s
}

func (p *tenantProvider) limitingNow(now time.Time) (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		return false, time.Time{}
	}
	return p.limitingAt(now), p.start.Add(p.o.Warmup + p.o.LimitFor)
}

// laneStatus is GET /v1/queues/{q}/keys/{flowKey}, the parts shown.
type laneStatus struct {
	Hold struct {
		State      string  `json:"state"`
		Until      *string `json:"until"`
		ProbeJobID *string `json:"probeJobId"`
	} `json:"hold"`
}

// keysSnapshot is one frame of the flow keys part.
type keysSnapshot struct {
	at, limitEnds time.Time
	elapsed       time.Duration
	limited, flow TenantSummary
	limiting      bool
	lane          map[string]snapshot // hold, until, probe per tenant ("" hold: no lane, all done)
	queueHold     string
	queueIdle     bool
	laneProbes    int
}

// RunKeys plays the flow keys part and returns what it observed; errors as
// Run's.
func RunKeys(ctx context.Context, opts KeysOptions) (KeysSummary, error) {
	o := opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.DurationLimit)
	defer cancel()

	prov := newTenantProvider(o)
	provSrv := httptest.NewServer(prov)
	defer provSrv.Close()

	d, base, err := startKeysDaemon(o, provSrv.URL)
	if err != nil {
		return KeysSummary{}, err
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
		return KeysSummary{}, err
	}
	fmt.Fprintf(o.Out, "\nflow keys: one queue (concurrency %d), two tenants calling one provider with their own API keys.\n", o.Concurrency)
	fmt.Fprintf(o.Out, "%d jobs each, %s's published first. After %s the provider answers %s 429 with Retry-After: %s for %s;\n",
		o.JobsPerTenant, LimitedTenant, short(o.Warmup), LimitedTenant, short(o.RetryAfter), short(o.LimitFor))
	fmt.Fprintf(o.Out, "%s is never limited. The queue has flowKeys: {holdScope: key}, so a 429 holds the tenant's lane only.\n\n", FlowingTenant)
	if o.TTY {
		fmt.Fprint(o.Out, hideCursor)
	}
	began := time.Now()
	for _, tenant := range []string{LimitedTenant, FlowingTenant} {
		if err := publishKeyed(ctx, hc, base, tenant, o.JobsPerTenant); err != nil {
			return KeysSummary{}, err
		}
	}

	s := KeysSummary{}
	ticker := time.NewTicker(o.Refresh)
	defer ticker.Stop()
	drawn := 0
	var printed time.Time
	var last keysSnapshot
	for {
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
		snap := sampleKeys(ctx, hc, base, prov, began)
		if snap.lane[LimitedTenant].hold == "held" {
			s.LaneHeldSeen = true
		}
		if snap.queueHold != "" && snap.queueHold != "open" {
			s.QueueHeldSeen = true
		}
		if snap.laneProbes < 0 {
			snap.laneProbes = last.laneProbes
		}
		last = snap
		s.Finished = snap.limited.Completed >= o.JobsPerTenant && snap.flow.Completed >= o.JobsPerTenant && snap.queueIdle
		final := s.Finished || ctx.Err() != nil
		if o.TTY {
			lines := keysLines(o, snap)
			var b strings.Builder
			if drawn > 0 {
				fmt.Fprintf(&b, lineUp, drawn)
			}
			for _, l := range lines {
				b.WriteString(clearLine + l + "\n")
			}
			drawn = len(lines)
			fmt.Fprint(o.Out, b.String())
		} else if final || printed.IsZero() || snap.at.Sub(printed) >= o.PlainEvery {
			printed = snap.at
			fmt.Fprintln(o.Out, keysPlainLine(o, snap))
		}
		if final {
			break
		}
	}
	if o.TTY {
		fmt.Fprint(o.Out, showCursor)
	}
	s.Limited, s.Flowing = prov.tenant(LimitedTenant), prov.tenant(FlowingTenant)
	prov.mu.Lock()
	s.FlowingWhileLimited = prov.flowingWhileLimited
	prov.mu.Unlock()
	s.LaneProbes = last.laneProbes
	s.Elapsed = time.Since(began)
	status := "all done"
	if !s.Finished {
		status = "stopped"
	}
	fmt.Fprintf(o.Out, "\n%s: %s %d/%d and %s %d/%d jobs completed in %s; %d lane probes.\n", status,
		LimitedTenant, s.Limited.Completed, o.JobsPerTenant, FlowingTenant, s.Flowing.Completed, o.JobsPerTenant, short(s.Elapsed), s.LaneProbes)
	fmt.Fprintln(o.Out, s.Line())
	if !s.Finished {
		if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
			return s, fmt.Errorf("flow keys part stopped after the duration limit (%s)", o.DurationLimit)
		}
		return s, fmt.Errorf("flow keys part stopped: %w", ctx.Err())
	}
	return s, nil
}

// startKeysDaemon is startDaemon for the flow keys part: one queue whose
// keyed 429s hold the job's lane.
func startKeysDaemon(o KeysOptions, webhook string) (*daemon.Daemon, string, error) {
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = time.Second
	cfg.LameDuck = 0
	cfg.Log.Format = "console"
	s := cfg.Defaults
	s.Concurrency = o.Concurrency
	s.Timeout = o.Latency + 10*time.Second
	s.MaxDefers = 1000
	s.Backoff = config.Backoff{Type: "fixed", Base: 100 * time.Millisecond, Max: 100 * time.Millisecond}
	s.FlowKeys = config.FlowKeys{HoldScope: "key", RateLimitWindow: time.Second}
	cfg.Queues = map[string]config.Queue{KeysQueue: {Name: KeysQueue, WebhookURL: webhook, SigningSecret: randomSecret(), QueueSettings: s}}
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

// publishKeyed publishes n jobs with flowKey tenant through the batch endpoint.
func publishKeyed(ctx context.Context, hc *http.Client, base, tenant string, n int) error {
	for start := 0; start < n; start += maxBatch {
		var b bytes.Buffer
		b.WriteString(`{"jobs":[`)
		for i := start; i < min(start+maxBatch, n); i++ {
			if i > start {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"flowKey":%q,"payload":{"tenant":%q,"n":%d}}`, tenant, tenant, i+1)
		}
		b.WriteString(`]}`)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/queues/"+KeysQueue+"/jobs/batch", &b)
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

// sampleKeys reads both lanes, the queue and the lane probe counter
// together, and the provider's counts.
func sampleKeys(ctx context.Context, hc *http.Client, base string, prov *tenantProvider, began time.Time) keysSnapshot {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s := keysSnapshot{lane: map[string]snapshot{}, laneProbes: -1}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tenant := range []string{LimitedTenant, FlowingTenant} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l laneStatus
			one := snapshot{}
			err := getJSON(rctx, hc, base+"/v1/queues/"+KeysQueue+"/keys/"+url.PathEscape(tenant), &l)
			switch {
			case err == nil:
				one.hold = l.Hold.State
				if l.Hold.Until != nil {
					one.until, _ = time.Parse(time.RFC3339Nano, *l.Hold.Until)
				}
				if l.Hold.ProbeJobID != nil {
					one.probe = *l.Hold.ProbeJobID
				}
			case strings.Contains(err.Error(), "HTTP 404"):
				one.hold = "empty" // a lane with no jobs occupies nothing
			}
			mu.Lock()
			s.lane[tenant] = one
			mu.Unlock()
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		var q queueStatus
		if getJSON(rctx, hc, base+"/v1/queues/"+KeysQueue, &q) != nil {
			return
		}
		mu.Lock()
		s.queueHold = q.Hold.State
		s.queueIdle = q.Counts.Pending+q.Counts.Processing+q.Counts.AwaitingAck == 0
		mu.Unlock()
	}()
	go func() {
		defer wg.Done()
		n := scrapeCounter(rctx, hc, base, "simpleqd_lane_probes_total", KeysQueue)
		mu.Lock()
		s.laneProbes = n
		mu.Unlock()
	}()
	wg.Wait()
	s.at = time.Now()
	s.elapsed = s.at.Sub(began)
	s.limited, s.flow = prov.tenant(LimitedTenant), prov.tenant(FlowingTenant)
	s.limiting, s.limitEnds = prov.limitingNow(s.at)
	return s
}

// scrapeCounter sums a counter of queue from /metrics; -1 when unreadable.
func scrapeCounter(ctx context.Context, hc *http.Client, base, name, queue string) int {
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
	return sumCounter(string(body), name, `queue="`+queue+`"`)
}

// lanePhrase says what a tenant's lane is doing, with the release countdown.
func lanePhrase(s snapshot, at time.Time) string {
	s.at = at
	switch s.hold {
	case "empty":
		return "done"
	case "probing":
		if s.probe != "" {
			return "probing: one job is out as the probe"
		}
		return "probing: its next job is the probe"
	}
	return holdPhrase(s)
}

func keysLines(o KeysOptions, s keysSnapshot) []string {
	bar := func(done int) string {
		filled := barWidth * done / max(o.JobsPerTenant, 1)
		return strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled)
	}
	provider := "healthy for both"
	switch {
	case s.limiting:
		provider = fmt.Sprintf("429 for %s, Retry-After %s (%s left); %s fine", LimitedTenant, short(o.RetryAfter),
			short(s.limitEnds.Sub(s.at)), FlowingTenant)
	case !s.limitEnds.IsZero() && s.at.After(s.limitEnds):
		provider = LimitedTenant + " recovered"
	}
	probes := "-"
	if s.laneProbes >= 0 {
		probes = fmt.Sprint(s.laneProbes)
	}
	return []string{
		fmt.Sprintf("  %-9s [%s] %d/%d  lane %s", LimitedTenant, bar(s.limited.Completed), s.limited.Completed, o.JobsPerTenant,
			lanePhrase(s.lane[LimitedTenant], s.at)),
		fmt.Sprintf("  %-9s [%s] %d/%d  lane %s", FlowingTenant, bar(s.flow.Completed), s.flow.Completed, o.JobsPerTenant,
			lanePhrase(s.lane[FlowingTenant], s.at)),
		"  queue     " + holdPhrase(snapshot{hold: s.queueHold, at: s.at}),
		"  provider  " + provider,
		fmt.Sprintf("  probes    %s lane probes; %d answered 429 to %s", probes, s.limited.Limited, LimitedTenant),
		fmt.Sprintf("  elapsed   %s", short(s.elapsed)),
	}
}

func keysPlainLine(o KeysOptions, s keysSnapshot) string {
	probes := "?"
	if s.laneProbes >= 0 {
		probes = fmt.Sprint(s.laneProbes)
	}
	return fmt.Sprintf("[%6s] %s %d/%d lane %s | %s %d/%d lane %s | queue %s | lane probes %s | %s 429s %d",
		short(s.elapsed), LimitedTenant, s.limited.Completed, o.JobsPerTenant, lanePhrase(s.lane[LimitedTenant], s.at),
		FlowingTenant, s.flow.Completed, o.JobsPerTenant, lanePhrase(s.lane[FlowingTenant], s.at),
		holdPhrase(snapshot{hold: s.queueHold, at: s.at}), probes, LimitedTenant, s.limited.Limited)
}
