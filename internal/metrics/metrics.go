package metrics

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/simpleq/simpleqd/internal/lua"
	"github.com/simpleq/simpleqd/internal/store"
)

// Label values of simpleqd_deliveries_total{outcome}.
const (
	OutcomeSuccess      = "success"
	OutcomeFailure      = "failure"
	OutcomeBackpressure = "backpressure"
	OutcomeTimeout      = "timeout"
	OutcomeReleased     = "released"
)

// Label values of simpleqd_probes_total{result}: what a probe's outcome does
// to its queue (reopen, hold again, or try the next job as the probe).
const (
	ProbeSuccess      = "success"
	ProbeBackpressure = "backpressure"
	ProbeFailure      = "failure"
)

var (
	outcomes     = []string{OutcomeSuccess, OutcomeFailure, OutcomeBackpressure, OutcomeTimeout, OutcomeReleased}
	probeResults = []string{ProbeSuccess, ProbeBackpressure, ProbeFailure}
	// deadReasons are semantics.md §1's; listed so a queue's series exist at
	// zero before the first death and rate() sees the first one.
	deadReasons = []string{"max_attempts_exhausted", "nacked", "defer_cap_exhausted",
		"retry_after_exceeds_lifetime", "lifetime_exceeded", "ack_timeout"}
	jobStatuses = []store.Status{store.StatusPending, store.StatusProcessing, store.StatusAwaitingAck, store.StatusDead}
	holdStates  = []store.HoldState{store.HoldOpen, store.HoldHeld, store.HoldProbing, store.HoldPaused}
)

// Histogram buckets, in seconds. Deliveries are bounded by the webhook
// timeout (15 s by default, configurable); publish-to-delivery includes
// `delay` (up to a day) and time spent behind holds, so its buckets reach far.
var (
	deliveryBuckets          = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60}
	publishToDeliveryBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400}
)

// scriptBuckets, in seconds: a script call takes well under a millisecond on
// a healthy Redis and is cut by the client's timeouts (a few seconds), so
// the buckets start at 100 µs, or a healthy Redis would fill one bucket.
var scriptBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// StatusFunc reads the live status of every configured queue. Scrapes call
// it at most once per StatusCacheTTL, one call at a time, and it must be
// bounded by ctx. It may return the statuses it could read together with an
// error for the rest.
type StatusFunc func(ctx context.Context) ([]store.QueueStatus, error)

// Scrape bounds. /metrics needs no key (api.md), and reading the gauges costs
// one Redis script per configured queue, so without them anyone who can
// reach the port could multiply that load by scraping in a loop (review
// finding 10): 1,000 queues would be 1,000 scripts per request.
const (
	// DefaultStatusCacheTTL is how long one read of the queues' status
	// serves every scrape. Prometheus scrapes every 15 s or so, and the
	// gauges are a second old at worst.
	DefaultStatusCacheTTL = time.Second
	// DefaultMaxScrapesInFlight bounds the scrapes served at once; past it
	// /metrics answers 503. A few Prometheus servers and a person with curl
	// need no more.
	DefaultMaxScrapesInFlight = 4
)

// Options configure Metrics. The zero value is usable (no gauges).
type Options struct {
	// Status feeds simpleqd_jobs and simpleqd_queue_hold_state at scrape
	// time. Nil leaves them out.
	Status StatusFunc
	// StatusTimeout bounds one scrape's Status call (default 5 s), so a hung
	// Redis makes the gauges go missing instead of the scrape hang.
	StatusTimeout time.Duration
	// StatusCacheTTL is how long one Status read (its answer or its error)
	// serves later scrapes; 0 means DefaultStatusCacheTTL, negative reads
	// at every scrape. Either way concurrent scrapes share one read.
	StatusCacheTTL time.Duration
	// MaxScrapesInFlight bounds the scrapes Handler serves at once, past it
	// answering 503; 0 means DefaultMaxScrapesInFlight, negative no bound.
	MaxScrapesInFlight int
	// Logger receives scrape errors. Nil means no logs.
	Logger *zap.Logger
	// Now is the clock for publish-to-delivery latency; nil means time.Now.
	Now func() time.Time
}

// Metrics holds one daemon's Prometheus series in its own registry. All
// methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	log *zap.Logger
	now func() time.Time
	// maxScrapes is promhttp's MaxRequestsInFlight (0: no bound).
	maxScrapes int
	// status reads the gauges at scrape time (nil without Options.Status).
	status *statusCollector

	published         *prometheus.CounterVec
	deliveries        *prometheus.CounterVec
	probes            *prometheus.CounterVec
	holdsStarted      *prometheus.CounterVec
	breakerHolds      *prometheus.CounterVec
	laneHolds         *prometheus.CounterVec
	laneProbes        *prometheus.CounterVec
	dead              *prometheus.CounterVec
	deliveryDuration  *prometheus.HistogramVec
	publishToDelivery *prometheus.HistogramVec
	scriptDuration    *prometheus.HistogramVec
	scriptErrors      *prometheus.CounterVec

	// Children of the vectors above on the publish and delivery paths, by
	// label values (see seriesCache).
	publishedBy         seriesCache[string, prometheus.Counter]
	deliveriesBy        seriesCache[[2]string, prometheus.Counter]
	deliveryDurationBy  seriesCache[string, prometheus.Observer]
	publishToDeliveryBy seriesCache[string, prometheus.Observer]
	scriptDurationBy    seriesCache[string, prometheus.Observer]
}

// seriesCache remembers a metric vector's children by label values.
// WithLabelValues hashes its values and takes a lock on every call, and a
// publish and a delivery made up to three such calls: ~1 µs of the daemon's
// CPU per publish. A child is created on first use, as WithLabelValues
// does, and never deleted (InitQueues), so a remembered one stays valid.
type seriesCache[K comparable, M any] struct{ m sync.Map }

func (c *seriesCache[K, M]) get(key K, create func() M) M {
	if v, ok := c.m.Load(key); ok {
		return v.(M)
	}
	v, _ := c.m.LoadOrStore(key, create())
	return v.(M)
}

// New builds the series and registers them, with the Go runtime and process
// collectors, in a registry of its own.
func New(opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.StatusTimeout <= 0 {
		opts.StatusTimeout = 5 * time.Second
	}
	switch {
	case opts.StatusCacheTTL == 0:
		opts.StatusCacheTTL = DefaultStatusCacheTTL
	case opts.StatusCacheTTL < 0:
		opts.StatusCacheTTL = 0
	}
	switch {
	case opts.MaxScrapesInFlight == 0:
		opts.MaxScrapesInFlight = DefaultMaxScrapesInFlight
	case opts.MaxScrapesInFlight < 0:
		opts.MaxScrapesInFlight = 0
	}
	m := &Metrics{
		reg:        prometheus.NewRegistry(),
		log:        opts.Logger,
		now:        opts.Now,
		maxScrapes: opts.MaxScrapesInFlight,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_jobs_published_total",
			Help: "New jobs stored by this daemon's API (idempotent repeats are not counted).",
		}, []string{"queue"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_deliveries_total",
			Help: "Webhook deliveries this daemon made, by outcome: success (2xx), failure (other status, connection error), " +
				"timeout (no answer within the queue's timeout), backpressure (429/503/529), released (handed back at shutdown).",
		}, []string{"queue", "outcome"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_probes_total",
			Help: "Probe deliveries after a hold, by result: success (queue reopens), backpressure (held again), " +
				"failure (the next job probes). Ack-mode probes resolve on the daemon that receives the callback.",
		}, []string{"queue", "result"}),
		holdsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_holds_started_total",
			Help: "Queue-scope backpressure holds started (the queue was open or probing) by defers and breaker trips " +
				"this daemon recorded, as Redis reported them: a defer that extends a hold is not a start.",
		}, []string{"queue"}),
		breakerHolds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_breaker_holds_total",
			Help: "Holds started by the breaker (semantics.md §4b: breaker.failures consecutive failed deliveries, " +
				"or a failed probe after a breaker hold) on outcomes this daemon recorded; also counted in " +
				"simpleqd_holds_started_total.",
		}, []string{"queue"}),
		// Lanes (flow keys, keys.md §5) are counted per queue, never per
		// key: a queue may have 100,000 lanes.
		laneHolds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_lane_holds_total",
			Help: "Lane holds asked for by outcomes and callbacks this daemon recorded (keyed jobs' 429/503/529 and " +
				"key-scope defers, keys.md §3): one per answer, so a burst of 429s in one lane counts each; the " +
				"queue's own holds are simpleqd_holds_started_total.",
		}, []string{"queue"}),
		laneProbes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_lane_probes_total",
			Help: "Probes of held lanes this daemon started (one per lane hold that ended, fleet-wide, plus one " +
				"after each failed lane probe); the queue's own probes are simpleqd_probes_total.",
		}, []string{"queue"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_jobs_dead_total",
			Help: "Jobs dead-lettered by outcomes and callbacks this daemon recorded, by reason (deaths found by " +
				"Redis housekeeping, such as lifetime_exceeded while waiting, are not seen here; see simpleqd_jobs).",
		}, []string{"queue", "reason"}),
		deliveryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "simpleqd_delivery_duration_seconds",
			Help:    "Time from the start of a delivery until its outcome was recorded in Redis (webhook call plus settle).",
			Buckets: deliveryBuckets,
		}, []string{"queue"}),
		publishToDelivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "simpleqd_publish_to_delivery_seconds",
			Help: "Time from a job's creation to the start of its first delivery (includes any publish delay and " +
				"time spent behind holds; a replayed job counts again from its original creation).",
			Buckets: publishToDeliveryBuckets,
		}, []string{"queue"}),
		// Labelled by script, not by queue: Redis' latency is the server's
		// and the network's, and 16 buckets per queue would multiply the
		// series of a daemon with a thousand queues.
		scriptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "simpleqd_redis_script_duration_seconds",
			Help: "Round trip of each Redis script call as this daemon saw it, by script (publish, claim, settle, ...): " +
				"Redis running the script plus the network and any wait for a CPU on either side. Compare with Redis' " +
				"INFO commandstats (usec_per_call of evalsha), which counts only the running.",
			Buckets: scriptBuckets,
		}, []string{"script"}),
		scriptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "simpleqd_redis_script_errors_total",
			Help: "Redis script calls that failed (Redis unreachable, timed out, or answered with an error), by script.",
		}, []string{"script"}),
	}
	for _, name := range lua.All {
		m.scriptDuration.WithLabelValues(name)
		m.scriptErrors.WithLabelValues(name)
	}
	m.reg.MustRegister(m.published, m.deliveries, m.probes, m.holdsStarted, m.breakerHolds, m.laneHolds, m.laneProbes, m.dead,
		m.deliveryDuration, m.publishToDelivery, m.scriptDuration, m.scriptErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Status != nil {
		m.status = newStatusCollector(opts.Status, opts.StatusTimeout, opts.StatusCacheTTL, opts.Logger)
		m.reg.MustRegister(m.status)
	}
	return m
}

// Registry exposes the registry, to gather in tests or to add collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus' text format. A failing
// collector (Redis down) does not fail the scrape: the counters are still
// served, and the error is logged. Past MaxScrapesInFlight scrapes at once
// it answers 503 at once, so a flood of scrapes queues no work behind it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(m.log.Named("metrics")),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: m.maxScrapes,
	})
}

// InitQueues creates every series of the named queues at zero, so the first
// event shows in rate() and dashboards list queues that have seen none.
// Call it with the file's queues at start and after a reload; series of
// removed queues stay until restart (they no longer change).
//
// The daemon does not call it for queues created over the API: 10,000 of
// them would be 200,000 series, some 10 KiB of its memory per queue, for
// queues that may never see a job on this daemon. Their series are made
// at first use, each when an event first touches it, like any series not
// initialised here (so the event that creates a counter counts in it).
func (m *Metrics) InitQueues(names []string) {
	for _, q := range names {
		m.published.WithLabelValues(q)
		m.holdsStarted.WithLabelValues(q)
		m.breakerHolds.WithLabelValues(q)
		m.laneHolds.WithLabelValues(q)
		m.laneProbes.WithLabelValues(q)
		for _, o := range outcomes {
			m.deliveries.WithLabelValues(q, o)
		}
		for _, r := range probeResults {
			m.probes.WithLabelValues(q, r)
		}
		for _, r := range deadReasons {
			m.dead.WithLabelValues(q, r)
		}
		m.deliveryDuration.WithLabelValues(q)
		m.publishToDelivery.WithLabelValues(q)
	}
}

// ScriptCall records one Redis script call: how long it took as this
// daemon saw it, or that it failed. It is store.Options.OnScript.
func (m *Metrics) ScriptCall(script string, took time.Duration, err error) {
	if err != nil {
		m.scriptErrors.WithLabelValues(script).Inc()
		return
	}
	m.scriptDurationBy.get(script, func() prometheus.Observer { return m.scriptDuration.WithLabelValues(script) }).
		Observe(took.Seconds())
}

// Published counts n new jobs stored on queue (not idempotent repeats).
func (m *Metrics) Published(queue string, n int) {
	if n > 0 {
		m.publishedBy.get(queue, func() prometheus.Counter { return m.published.WithLabelValues(queue) }).Add(float64(n))
	}
}

// Dead counts one job dead-lettered on queue for reason. Settled calls it
// for the deaths it sees; call it directly only for deaths
// seen some other way, or they are counted twice.
func (m *Metrics) Dead(queue, reason string) {
	if reason == "" {
		reason = "unknown"
	}
	m.dead.WithLabelValues(queue, reason).Inc()
}

// Reaped counts dead letters made by housekeeping (lost deliveries, ack
// timeouts, lifetimes that ended while waiting), which no settle reports.
// The lost deliveries themselves are not counted here: another daemon,
// perhaps a dead one, made them.
func (m *Metrics) Reaped(queue string, r store.Reaped) {
	if r.Word == store.Dead {
		m.Dead(queue, r.Detail)
	}
}

// Claimed is called by the dispatcher for every job it takes for delivery.
// A first delivery (attempt 1, never deferred) observes publish-to-delivery
// latency; a lane's probe is counted.
func (m *Metrics) Claimed(queue string, j store.ClaimedJob) {
	now := m.now()
	if j.LaneProbe {
		m.laneProbes.WithLabelValues(queue).Inc()
	}
	if j.Attempt == 1 && j.DeferCount == 0 && !j.CreatedAt.IsZero() {
		// CreatedAt is on Redis' clock, now on ours: clamp small skew.
		m.publishToDeliveryBy.get(queue, func() prometheus.Observer { return m.publishToDelivery.WithLabelValues(queue) }).
			Observe(max(0, now.Sub(j.CreatedAt).Seconds()))
	}
}

// Settled is called by the dispatcher for every applied outcome: a
// delivery's (s.Source FromDelivery; s.Took the time since it started) or
// an ack-mode callback's (FromCallback).
//
// Delivery outcome labels follow the settle word, refined by the outcome
// kind: COMPLETED, REOPENED and AWAITING (ack mode: the worker has it) are
// success; RETRY and DEAD after a failed delivery are failure, or timeout
// when the error says so; DEFERRED, and DEAD after a 429/503/529 (defer
// budget or lifetime spent), are backpressure; RELEASED is released. STALE
// (the outcome was ignored because the job moved on) is labelled by what
// the webhook did.
//
// For both: deaths, lane holds, and, from what the script reported with
// Redis' times (store.Settled Hold and ProbeEnded), holds started by
// queue-scope defers and the breaker and the result of the queue's probe:
// exact on whichever daemon recorded the outcome, an ack-mode probe's on
// the one that received its callback.
func (m *Metrics) Settled(s store.Settlement) {
	queue, r := s.Queue, s.Result
	callback := s.Source == store.FromCallback
	if !callback {
		outcome := classify(s.Outcome, r)
		m.deliveriesBy.get([2]string{queue, outcome}, func() prometheus.Counter { return m.deliveries.WithLabelValues(queue, outcome) }).Inc()
		if outcome != OutcomeReleased {
			m.deliveryDurationBy.get(queue, func() prometheus.Observer { return m.deliveryDuration.WithLabelValues(queue) }).
				Observe(s.Took.Seconds())
		}
	}
	if r.Word == store.Dead {
		m.Dead(queue, r.Detail)
	}
	if callback && (r.Word == store.Acked || r.Word == "") {
		return // a repeated ack changes nothing
	}
	if !r.LaneUntil.IsZero() {
		m.laneHolds.WithLabelValues(queue).Inc()
	}
	// What the outcome did to the queue's hold is reported by the script
	// that applied it, on Redis' clock (store.Settled.Hold): a start is a
	// start fleet-wide, whichever daemon recorded the outcome.
	if r.Hold.Change == store.HoldStarted {
		m.holdsStarted.WithLabelValues(queue).Inc()
		if !r.BreakerUntil.IsZero() {
			m.breakerHolds.WithLabelValues(queue).Inc()
		}
	}
	if !r.ProbeEnded {
		return // not the queue's probe, or an ack-mode probe awaiting its callback
	}
	switch {
	case r.Word == store.Completed || r.Word == store.Reopened:
		m.probes.WithLabelValues(queue, ProbeSuccess).Inc()
	case r.Word == store.Released || r.Word == store.Stale:
		// No result; a new probe is chosen by the next claim.
	case r.Hold.Change != "" && r.BreakerUntil.IsZero():
		m.probes.WithLabelValues(queue, ProbeBackpressure).Inc() // a queue-scope defer held it again
	default:
		// A failure, a nack, a job- or lane-scope defer: the next job probes.
		m.probes.WithLabelValues(queue, ProbeFailure).Inc()
	}
}

// classify maps a settled delivery to its simpleqd_deliveries_total outcome.
func classify(o store.Outcome, s store.Settled) string {
	switch s.Word {
	case store.Completed, store.Reopened, store.Awaiting:
		return OutcomeSuccess
	case store.Deferred:
		return OutcomeBackpressure
	case store.Released:
		return OutcomeReleased
	}
	// RETRY, DEAD, STALE: what the webhook did decides.
	switch o.Kind {
	case store.OutcomeOK, store.OutcomeDelivered:
		return OutcomeSuccess
	case store.OutcomeDefer:
		return OutcomeBackpressure
	case store.OutcomeRelease:
		return OutcomeReleased
	}
	if strings.HasPrefix(o.Error, "timeout") {
		return OutcomeTimeout
	}
	return OutcomeFailure
}

// statusCollector reads queue status from Redis at scrape time. One read
// serves every scrape for ttl, and scrapes that find no fresh read share the
// one in progress (singleflight), so scraping in a loop or from many clients
// costs Redis at most one round of inspect scripts per ttl, one at a time.
type statusCollector struct {
	status  StatusFunc
	timeout time.Duration
	ttl     time.Duration // 0: no cache, but still one read at a time
	log     *zap.Logger
	jobs    *prometheus.Desc
	hold    *prometheus.Desc
	held    *prometheus.Desc
	up      *prometheus.Desc

	flight singleflight.Group
	mu     sync.Mutex
	last   *statusRead // the latest read, nil before the first
	// beforeRead, when set (tests only), runs when a scrape found no fresh
	// read, just before it starts or joins one.
	beforeRead func()
}

// statusRead is one StatusFunc call's result and when it started (the
// statuses are at least that fresh).
type statusRead struct {
	statuses []store.QueueStatus
	err      error
	at       time.Time
}

func newStatusCollector(status StatusFunc, timeout, ttl time.Duration, log *zap.Logger) *statusCollector {
	return &statusCollector{
		status:  status,
		timeout: timeout,
		ttl:     ttl,
		log:     log,
		jobs: prometheus.NewDesc("simpleqd_jobs",
			"Jobs of the queue by status, read from Redis at scrape time (fleet-wide: every daemon reports the same; "+
				"at most a second old).",
			[]string{"queue", "status"}, nil),
		hold: prometheus.NewDesc("simpleqd_queue_hold_state",
			"1 for the queue's current delivery state (open, held, probing, paused), 0 for the others; read from Redis "+
				"at scrape time (at most a second old).",
			[]string{"queue", "state"}, nil),
		held: prometheus.NewDesc("simpleqd_held_keys",
			"Lanes (flow keys, keys.md) of the queue that are held or probing, read from Redis at scrape time "+
				"(fleet-wide; at most a second old). One series per queue, never one per key.",
			[]string{"queue"}, nil),
		up: prometheus.NewDesc("simpleqd_queue_status_up",
			"1 when this scrape read every configured queue's status from Redis, 0 when any read failed "+
				"(the gauges of the queues that failed are missing).", nil, nil),
	}
}

// fresh returns the latest read if it started less than ttl ago.
func (c *statusCollector) fresh() *statusRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && c.ttl > 0 && time.Since(c.last.at) < c.ttl {
		return c.last
	}
	return nil
}

// read returns a fresh read, starting one or joining the one in progress.
// The flight checks freshness again: a scrape that missed the cache just as
// a flight ended must not start a second read.
func (c *statusCollector) read() *statusRead {
	if r := c.fresh(); r != nil {
		return r
	}
	if c.beforeRead != nil {
		c.beforeRead()
	}
	v, _, _ := c.flight.Do("status", func() (any, error) {
		if r := c.fresh(); r != nil {
			return r, nil
		}
		// Not any one scrape's context: the read is shared, and a scraper
		// that hangs up must not fail it for the others.
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		r := &statusRead{at: time.Now()}
		r.statuses, r.err = c.status(ctx)
		if r.err != nil {
			c.log.Warn("metrics: reading queue status from Redis failed", zap.Error(r.err))
		}
		c.mu.Lock()
		c.last = r
		c.mu.Unlock()
		return r, nil
	})
	return v.(*statusRead)
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.hold
	ch <- c.held
	ch <- c.up
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.read()
	up := 1.0
	if r.err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	for _, st := range r.statuses {
		counts := map[store.Status]int64{
			store.StatusPending:     st.Counts.Pending,
			store.StatusProcessing:  st.Counts.Processing,
			store.StatusAwaitingAck: st.Counts.AwaitingAck,
			store.StatusDead:        st.Counts.Dead,
		}
		for _, s := range jobStatuses {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(counts[s]), st.Name, string(s))
		}
		state := st.Hold.State
		if state == "" {
			state = store.HoldOpen
		}
		for _, h := range holdStates {
			v := 0.0
			if h == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.hold, prometheus.GaugeValue, v, st.Name, string(h))
		}
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(st.Counts.HeldKeys), st.Name)
	}
}
