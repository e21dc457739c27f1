// Package daemon wires one simpleqd process: Redis (or the embedded store),
// the scripts, the HTTP API and /metrics, the dispatcher and the wake-up bus.
// It owns the order of start-up and shutdown, so main stays a thin command
// line.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/simpleq/simpleqd/internal/api"
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/console"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/events"
	"github.com/simpleq/simpleqd/internal/fastserve"
	"github.com/simpleq/simpleqd/internal/ingest"
	"github.com/simpleq/simpleqd/internal/metrics"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/queuesync"
	"github.com/simpleq/simpleqd/internal/redisconn"
	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/tracing"
	"github.com/simpleq/simpleqd/internal/wakeup"
)

// Redis timeouts: short enough that the API answers 503 quickly while Redis
// is away instead of hanging, long enough for a script over a large batch.
const (
	dialTimeout = time.Second
	ioTimeout   = 3 * time.Second
)

// Version is reported in the webhook User-Agent; set at build time with -ldflags.
var Version = "dev"

// Daemon is one running simpleqd.
type Daemon struct {
	log *zap.Logger
	// cfg is the running configuration, the file's (file, kept apart for
	// reloads); its Queues are the file's only. The queues created over
	// the API are in api, and lookupQueue and queueMap serve both kinds
	// (apiqueues.go).
	cfg  atomic.Pointer[config.Config]
	file atomic.Pointer[config.Config]
	api  apiQueues
	// sync keeps the API queues in step with Redis (package queuesync).
	sync  *queuesync.Syncer
	store queueparams.Store
	// ingest merges concurrent publishes per queue into one script call.
	ingest *ingest.Coalescer
	rdb    redis.UniversalClient
	mini   *miniredis.Miniredis
	disp   *dispatch.Dispatcher
	// deliverer is kept to hand it the webhooks policy on a reload.
	deliverer *dispatch.Deliverer
	bus       *wakeup.Bus
	// metrics is this daemon's Prometheus registry, served on /metrics.
	metrics *metrics.Metrics
	// events is this daemon's in-memory timeline of recent queue events
	// (GET /v1/queues/{queue}/events, the console's timeline).
	events *events.Log
	// sched fires schedules and syncs the file's (schedules.go).
	sched daemonSchedules
	// tracing exports delivery spans over OTLP/HTTP (nil: tracing off);
	// Run flushes it once the dispatcher has stopped.
	tracing *tracing.Provider

	listener net.Listener
	ready    atomic.Bool
	// stopping turns readiness off for good: the daemon is a lame duck.
	stopping atomic.Bool
	mu       sync.Mutex
}

// New connects to Redis (or starts the embedded store) and prepares every
// component. It does not wait for Redis to answer: Run keeps retrying.
func New(cfg *config.Config, log *zap.Logger) (*Daemon, error) {
	d := &Daemon{log: log, api: apiQueues{conflicts: map[string]bool{}, known: map[string]bool{}}}
	d.cfg.Store(cfg)
	d.file.Store(cfg)
	for _, name := range cfg.QueueNames() {
		d.api.known[name] = true
	}
	rdb, mini, err := connect(cfg.Redis, log)
	if err != nil {
		return nil, err
	}
	d.rdb, d.mini = rdb, mini
	d.metrics = metrics.New(metrics.Options{Status: d.queueStatuses, Logger: log})
	d.metrics.InitQueues(cfg.QueueNames())
	// redis.durability: replicated makes the store follow every write the
	// API acknowledges, and every settle, with WAIT for one replica.
	st, err := store.New(rdb, store.Options{Prefix: cfg.Redis.Prefix, LeaseMargin: cfg.Dispatch.LeaseMargin,
		OnScript: d.metrics.ScriptCall, Replicated: cfg.Redis.Replicated(), ReplicaTimeout: cfg.Redis.ReplicaTimeout})
	if err != nil {
		return nil, fmt.Errorf("prepare scripts: %w", err)
	}
	d.store = queueparams.Wrap(st)
	d.ingest = ingest.New(d.store).WithCallTimeout(apiCallTimeout)
	d.events = events.New(events.DefaultCapacity)
	if d.tracing, err = tracing.New(context.Background(), cfg.Tracing, Version, log); err != nil {
		return nil, err
	}
	if d.tracing != nil {
		log.Info("tracing on: every delivery is a span, sent over OTLP/HTTP", zap.String("endpoint", d.tracing.Endpoint),
			zap.Float64("sampleRatio", cfg.Tracing.SampleRatio), zap.String("serviceName", cfg.Tracing.ServiceName))
	}
	// The webhooks policy holds API (Checked) queues only; file queues are
	// trusted and delivered unchecked.
	policy, err := cfg.Webhooks.Policy()
	if err != nil {
		return nil, err
	}
	d.deliverer = dispatch.NewDeliverer("simpleqd/" + Version).WithTracer(d.tracing.Tracer()).WithWebhookPolicy(policy)
	d.disp = dispatch.New(dispatch.Options{
		Store:      d.store.Store,
		Deliverer:  d.deliverer,
		Observer:   events.Observers(d.metrics, d.events),
		Logger:     log,
		ClaimBatch: cfg.Dispatch.ClaimBatch,
		Grace:      cfg.ShutdownGrace,
		Linger:     linger(cfg.Dispatch.Linger),
	})
	d.bus = wakeup.New(rdb, cfg.Redis.Prefix+":wake", d.disp.Wake, log)
	d.disp.SetBroadcast(d.bus)
	d.bus.SetAbortHandler(d.onAbort) // cancel in flight (cancel.go)
	d.initSchedules(cfg)
	d.disp.SetQueues(cfg.Queues)
	d.sync = queuesync.New(queuesync.Options{Source: st, Redis: rdb, Apply: d.applyDefs, Logger: log.Named("queuesync")})
	return d, nil
}

// connect builds the Redis client (package redisconn: single, Cluster or
// Sentinel's failover client, TLS) or starts the embedded store, and logs
// which mode is in effect with secrets redacted (production.md §1).
func connect(rc config.Redis, log *zap.Logger) (redis.UniversalClient, *miniredis.Miniredis, error) {
	mode := redisconn.Describe(rc)
	if rc.Embedded() {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, nil, fmt.Errorf("start embedded store: %w", err)
		}
		log.Warn("no redis.url, addr, addrs or sentinel: using an embedded in-memory store; nothing is persisted and only this process can use it (development only)",
			zap.String("addr", m.Addr()))
		log.Info("redis connection", zap.Object("redis", mode), zap.String("summary", mode.String()))
		return redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true}), m, nil
	}
	o, err := redisconn.Options(rc)
	if err != nil {
		return nil, nil, err
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = dialTimeout, ioTimeout, ioTimeout, ioTimeout
	o.MaxRetries = 1
	log.Info("redis connection", zap.Object("redis", mode), zap.String("summary", mode.String()))
	if rc.TLS.InsecureSkipVerify {
		log.Warn("INSECURE: redis.tls.insecureSkipVerify is true: the Redis server's certificate is NOT verified, " +
			"so anyone on the network path can pose as Redis and read or change every job; set redis.tls.caFile instead")
	}
	return redis.NewUniversalClient(o), nil, nil
}

// Listen binds the API address; separate from Run so callers (and tests) can
// learn the bound address before serving.
func (d *Daemon) Listen() (net.Addr, error) {
	l, err := net.Listen("tcp", d.cfg.Load().HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", d.cfg.Load().HTTP.Listen, err)
	}
	d.listener = l
	return l.Addr(), nil
}

// Reload applies a new configuration: queue settings, new queues and API keys
// take effect at once; the settings that need a restart (Redis, the
// listener, logging, dispatcher tuning, tracing: config.KeepRunning) keep
// their running values.
func (d *Daemon) Reload(cfg *config.Config) {
	old := d.file.Load()
	// Every setting tagged reload:"restart" keeps its running value: the
	// very list package reload warns about (config.RestartChanges), so the
	// warning is logged there, once, with every key.
	if kept := config.KeepRunning(old, cfg); len(kept) > 0 {
		d.log.Debug("reload: kept the running values of settings that need a restart", zap.Strings("keys", kept))
	}
	d.file.Store(cfg)
	if policy, err := cfg.Webhooks.Policy(); err == nil { // Load validated it
		d.deliverer.SetWebhookPolicy(policy)
	}
	// The file's queues and the API's, applied together (apiqueues.go).
	d.rebuild()
	d.reloadSchedules(cfg)
	// package reload logs what changed at info; this line only confirms.
	d.log.Debug("configuration applied", zap.Int("queues", len(cfg.Queues)))
}

// Component is one long-running part of a process that Run supervises
// beside its own: it returns nil once its context ends, and an error only
// when it cannot go on, which stops the whole daemon. The serve command
// hands Run the reload watcher this way.
type Component func(ctx context.Context) error

// httpShutdown bounds how long the API's requests still being served when
// the listener closes may take to finish.
const httpShutdown = 5 * time.Second

// Run serves until ctx ends or one of its components fails, and then stops
// in order. Every component (the HTTP server, the dispatcher, the wake-up
// bus, the queue and schedule syncs, and extra) runs in one errgroup: the
// first to fail stops the others, and Run returns its error.
//
// When ctx ends, the daemon stops claiming at once and its deliveries in
// flight get shutdownGrace (the rest are handed back); meanwhile it is a
// lame duck for lameDuck: /readyz answers 503 so load balancers take it out
// of rotation, while the API still answers the requests that reach it. Then
// the listener closes. The wake-up bus runs until the HTTP server and the
// dispatcher are done, so their last state signals reach the fleet; then
// the delivery spans still batched are sent and Redis is closed. After a
// failure there is no lame duck: the daemon stops at once.
func (d *Daemon) Run(ctx context.Context, extra ...Component) error {
	if d.listener == nil {
		if _, err := d.Listen(); err != nil {
			return err
		}
	}
	cfg := d.cfg.Load()
	srv := newHTTPServer(d.handler(), cfg.HTTP.MaxPayloadBytes, d.log)
	d.log.Info("simpleqd listening", zap.String("addr", d.listener.Addr().String()),
		zap.Int("queues", len(cfg.Queues)), zap.String("version", Version))

	// failed ends when a component fails; stopping also when ctx ends (no
	// more claims, the lame duck begins); serving when the lame duck is
	// over (the listener closes); wakes once the HTTP server and the
	// dispatcher are both done.
	g, failed := errgroup.WithContext(context.WithoutCancel(ctx))
	stopping, stop := context.WithCancel(failed)
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	serving, closeHTTP := context.WithCancel(failed)
	defer closeHTTP()
	wakes, endWakes := context.WithCancel(failed)
	defer endWakes()
	var draining sync.WaitGroup // the HTTP server and the dispatcher
	draining.Add(2)

	g.Go(func() error {
		<-stopping.Done()
		d.stopping.Store(true)
		d.lameDuck(failed)
		closeHTTP()
		return nil
	})
	g.Go(func() error {
		err := srv.Serve(d.listener)
		if err == nil && serving.Err() == nil {
			// fasthttp returns nil when its listener is closed under it.
			err = errors.New("the listener closed")
		}
		if err != nil {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer draining.Done()
		<-serving.Done()
		sctx, cancel := context.WithTimeout(context.Background(), httpShutdown)
		defer cancel()
		err := srv.Shutdown(sctx)
		// A failure at start-up (an old Redis) can end the group before
		// Serve has begun: Shutdown then finds no listener to close, and
		// Serve would serve forever. Closing it here ends Serve either way.
		_ = d.listener.Close()
		return err
	})
	// The dispatcher starts once the scripts are loaded.
	g.Go(func() error {
		defer draining.Done()
		if ok, err := d.loadScripts(stopping); !ok {
			return err
		}
		// The queues created over the API, before the first request is
		// ready to be served; the syncer keeps them in step from then on.
		if err := d.sync.Load(stopping); err != nil && stopping.Err() == nil {
			d.log.Warn("could not read the queues created over the API yet; retrying", zap.Error(err))
		}
		g.Go(func() error { return d.sync.Run(serving) })
		d.ready.Store(true)
		d.startSchedules(stopping, g)
		g.Go(func() error { return d.bus.Run(wakes, d.disp.WakeAll) })
		return d.disp.Run(stopping)
	})
	g.Go(func() error {
		draining.Wait()
		endWakes()
		return nil
	})
	for _, c := range extra {
		g.Go(func() error { return c(stopping) })
	}
	err := g.Wait()
	d.flushSpans()
	_ = d.rdb.Close()
	if d.mini != nil {
		d.mini.Close()
	}
	d.log.Info("simpleqd stopped")
	return err
}

// lameDuck keeps the API serving, with /readyz answering 503, for the
// configured lameDuck, unless a component has failed (failed ended).
func (d *Daemon) lameDuck(failed context.Context) {
	wait := d.cfg.Load().LameDuck
	if wait <= 0 || failed.Err() != nil {
		return
	}
	d.log.Info("lame duck: /readyz answers 503 while the API keeps serving; then the listener closes",
		zap.Duration("lameDuck", wait))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-failed.Done():
	}
}

// spanFlush bounds how long a stopping daemon spends sending the delivery
// spans still batched to the collector: a collector that is away must not
// hold the shutdown (the spans are then lost, and the log says so).
const spanFlush = 5 * time.Second

// flushSpans sends the spans still batched and stops the exporter. It runs
// after the dispatcher has returned, when every delivery's outcome is
// recorded and so every delivery span has ended.
func (d *Daemon) flushSpans() {
	if d.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), spanFlush)
	defer cancel()
	if err := d.tracing.Shutdown(ctx); err != nil {
		d.log.Warn("tracing: delivery spans still batched at shutdown were not all sent", zap.Error(err))
	}
}

// HTTP server limits: a client that trickles its headers (slowloris) is cut
// off after readHeaderTimeout, a slow body after readTimeout, and an idle
// keep-alive connection after idleTimeout, so slow or stuck clients cannot
// hold connections and goroutines without bound. maxHeaderBytes is also the
// read buffer a connection holds while a request arrives (fasthttp needs
// the whole header in it), so it bounds what a slow client can pin: 16 KiB,
// as Node.js allows, is far above what API clients and browsers send.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 16 << 10
)

// newHTTPServer serves the API on fasthttp's connection handling (package
// fastserve says why); maxBody is http.maxPayloadBytes.
func newHTTPServer(h http.Handler, maxBody int64, log *zap.Logger) *fastserve.Server {
	if maxBody <= 0 {
		maxBody = api.DefaultMaxPayloadBytes
	}
	return fastserve.New(h, fastserve.Limits{
		HeaderTimeout:  readHeaderTimeout,
		BodyTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		MaxBodyBytes:   int(maxBody),
	}, log)
}

// loadScripts retries until Redis answers; meanwhile /readyz says 503. It
// gives up with an error, which ends Run, only on a Redis the scripts cannot
// run on, or a TLS handshake that cannot succeed (a certificate that does
// not verify: redisconn.StartupError): waiting would not change that, and
// a daemon that looked alive but failed every call would hide it.
func (d *Daemon) loadScripts(ctx context.Context) (bool, error) {
	delay := 100 * time.Millisecond
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.checkVersion(lctx)
		if err == nil {
			err = d.store.Load(lctx)
		}
		cancel()
		if errors.Is(err, store.ErrUnsupportedRedis) {
			return false, err
		}
		if terr := redisconn.StartupError(d.cfg.Load().Redis, err); terr != nil {
			return false, terr
		}
		if err == nil {
			mode := "scripts (EVALSHA)"
			if d.store.UsesFunctions() {
				mode = "functions (FCALL)"
			}
			d.log.Info("redis scripts loaded", zap.String("calls", mode))
			d.checkPersistence(ctx)
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		d.log.Warn("redis not reachable; retrying", zap.Error(err), zap.Duration("in", delay))
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// checkVersion refuses a Redis older than store.MinRedisVersion. A version
// that cannot be read (INFO denied) is only warned about: the scripts may
// still run, and if they cannot, every call says why.
func (d *Daemon) checkVersion(ctx context.Context) error {
	if d.mini != nil {
		return nil // the embedded store is miniredis, which reports no version
	}
	err := d.store.CheckVersion(ctx)
	if err == nil || errors.Is(err, store.ErrUnsupportedRedis) || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	d.log.Warn("could not read the Redis version; starting without checking it",
		zap.String("required", store.MinRedisVersion+" or later"), zap.Error(err))
	return nil
}

// checkPersistence warns about Redis settings that can lose jobs.
func (d *Daemon) checkPersistence(ctx context.Context) {
	if d.mini != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if v, err := d.rdb.ConfigGet(cctx, "appendonly").Result(); err == nil && v["appendonly"] == "no" {
		d.log.Warn("redis has appendonly no: a Redis crash loses every job written since the last snapshot (see docs/operations.md)")
	}
	if v, err := d.rdb.ConfigGet(cctx, "maxmemory-policy").Result(); err == nil {
		if p := v["maxmemory-policy"]; p != "" && p != "noeviction" {
			d.log.Warn("redis maxmemory-policy is not noeviction: Redis may silently evict jobs under memory pressure",
				zap.String("policy", p))
		}
	}
}

func (d *Daemon) handler() http.Handler {
	srv := api.New(api.Options{
		Backend:               backend{d},
		Waker:                 d.bus,
		Queues:                d.queueMap,
		Queue:                 d.lookupQueue,
		Auth:                  func() *config.Auth { return &d.cfg.Load().Auth },
		MaxPayloadBytes:       d.cfg.Load().HTTP.MaxPayloadBytes,
		MaxConcurrentRequests: d.cfg.Load().HTTP.MaxConcurrentRequests,
		Logger:                d.log.Named("api"),
		Events:                d.events,
		Redis:                 readyzMode(d.cfg.Load().Redis),
		Schedules:             d.sched.svc,
	})
	// /metrics sits beside the API rather than inside it: it needs no key
	// (api.md) and is Prometheus text, not the API's JSON.
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.metrics.Handler())
	// The web console's static files need no key either: they hold no data,
	// and the page calls the API with the operator's key (see package console).
	console.Mount(mux)
	apiHandler := srv.Handler()
	mux.Handle("/", apiHandler)
	// Clean API paths skip this mux: its routing (a path clean and a pattern
	// match) was 4% of the daemon's CPU per single publish. A path with dot
	// or empty segments still goes through it, to be redirected to its clean
	// form before the API's key check, which may not be the API's path.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, apiPrefix) && !strings.Contains(p, "/.") && !strings.Contains(p, "//") {
			apiHandler.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// readyzMode is the part of the Redis mode /readyz shows: it needs no key,
// so no addresses, users or files.
func readyzMode(r config.Redis) *api.RedisMode {
	m := redisconn.Describe(r)
	return &api.RedisMode{Mode: string(m.Mode), TLS: m.TLS, Durability: m.Durability}
}

// apiPrefix starts every API path (api.md); nothing else is mounted under it.
const apiPrefix = "/v1/"

// queueStatuses reads every configured queue's status for the metrics
// gauges at scrape time. Queues that cannot be read are left out and
// reported in the error; the others are still returned.
func (d *Daemon) queueStatuses(ctx context.Context) ([]store.QueueStatus, error) {
	names := d.queueNames()
	out := make([]store.QueueStatus, 0, len(names))
	var errs []error
	for _, name := range names {
		q, ok := d.lookupQueue(name)
		if !ok {
			continue // deleted meanwhile
		}
		if q.Name == "" {
			q.Name = name
		}
		st, err := d.store.QueueStatus(ctx, q)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

// backend adapts the store for the API: callbacks that free a slot or reopen
// a queue wake the fleet's pumps, and readiness includes script loading.
type backend struct{ d *Daemon }

// apiCallTimeout bounds each Redis call made for an API request. Without it
// a frozen Redis (accepting connections, answering nothing) holds a request
// for the client's read timeout and then again for its retry (over 6 s);
// with it the API answers 503 within about 4 s.
const apiCallTimeout = 4 * time.Second

func apiCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, apiCallTimeout)
}

func (b backend) Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
	// The ingest call carries apiCallTimeout (one timer per Redis call, not
	// per request); a client that goes away ends its own wait.
	res, err := b.d.ingest.Publish(ctx, q, jobs)
	if err == nil {
		n := 0
		for _, p := range res {
			if !p.Duplicate {
				n++
			}
		}
		b.d.metrics.Published(q.Name, n)
	}
	return res, err
}

func (b backend) GetJob(ctx context.Context, q config.Queue, id string) (*store.Job, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.GetJob(ctx, q, id)
}

func (b backend) Callback(ctx context.Context, q config.Queue, cb store.Callback) error {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	res, err := b.d.store.Callback(ctx, q, cb)
	if err != nil {
		return err
	}
	// The one outcome pipeline of deliveries and callbacks: logged,
	// counted, timelined and woken on (dispatch.Dispatcher.Settled).
	b.d.disp.Settled(store.Settlement{Queue: q.Name, JobID: cb.JobID, Source: store.FromCallback, Callback: cb,
		Attempt: cb.Attempt, Result: res})
	return nil
}

func (b backend) QueueStatus(ctx context.Context, q config.Queue) (store.QueueStatus, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.QueueStatus(ctx, q)
}

// The administration calls forward to the store; the API wakes the fleet's
// pumps itself (Waker) after a replay or resume.

func (b backend) ListDead(ctx context.Context, q config.Queue, limit int, cursor string) ([]*store.Job, string, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.ListDead(ctx, q, store.ListDeadParams{Limit: limit, Cursor: cursor})
}

func (b backend) Replay(ctx context.Context, q config.Queue, ids []string) (int, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	n, err := b.d.store.Replay(ctx, q, ids)
	if err == nil {
		b.d.log.Info("dead jobs replayed", zap.String("queue", q.Name), zap.Int("requested", len(ids)), zap.Int("replayed", n))
	}
	return n, err
}

func (b backend) ReplayAll(ctx context.Context, q config.Queue) (int, error) {
	n, err := b.d.store.ReplayAll(ctx, q)
	if err == nil {
		b.d.log.Info("all dead jobs replayed", zap.String("queue", q.Name), zap.Int("replayed", n))
	} else if n > 0 {
		b.d.log.Warn("replay of all dead jobs interrupted", zap.String("queue", q.Name), zap.Int("replayed", n), zap.Error(err))
	}
	return n, err
}

func (b backend) Pause(ctx context.Context, q config.Queue, reason string) error {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	err := b.d.store.Pause(ctx, q, reason)
	if err == nil {
		b.d.log.Info("queue paused by operator", zap.String("queue", q.Name), zap.String("reason", reason))
	}
	return err
}

func (b backend) Resume(ctx context.Context, q config.Queue) error {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	err := b.d.store.Resume(ctx, q)
	if err == nil {
		b.d.log.Info("queue resumed by operator", zap.String("queue", q.Name))
	}
	return err
}

func (b backend) Ping(ctx context.Context) error {
	if b.d.stopping.Load() {
		return fmt.Errorf("%w: shutting down", store.ErrUnavailable)
	}
	if !b.d.ready.Load() {
		return fmt.Errorf("%w: scripts not loaded yet", store.ErrUnavailable)
	}
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.Ping(ctx)
}

// linger maps the config's "0: off" to the dispatcher's "negative: off".
func linger(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
