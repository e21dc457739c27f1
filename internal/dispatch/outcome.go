package dispatch

import (
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/store"
)

// Settled is the one place an applied outcome goes: a delivery's, from a
// pump's settle loop, and an ack-mode worker's callback, from the API.
// Both are one typed store.Settlement, logged here (structured, with queue,
// job and flow key), counted and timelined by the Observer, and woken on:
// a callback frees a slot (and may reopen the queue), a delivery reopens
// its queue only as a probe's success, and the fleet's pumps are told.
func (d *Dispatcher) Settled(s store.Settlement) {
	d.settled(d.log.With(zap.String("queue", s.Queue)), s)
}

// settled is Settled with log already naming the queue (a pump's logger).
func (d *Dispatcher) settled(log *zap.Logger, s store.Settlement) {
	if s.Source == store.FromCallback {
		logCallback(log, s)
	} else {
		logDelivery(log, s)
	}
	if o := d.opts.Observer; o != nil {
		o.Settled(s)
	}
	if wakes(s) && d.opts.Broadcast != nil {
		d.opts.Broadcast.NotifyState(s.Queue)
	}
}

// wakes says whether an applied outcome can let the fleet's pumps of its
// queue deliver again. A delivery's freed slot is its own pump's business;
// only a probe's success that reopened the queue concerns every daemon. A
// callback ends a delivery another daemon may have made: its slot, and
// perhaps a reopened queue, concern the fleet (a repeated ack changes
// nothing).
func wakes(s store.Settlement) bool {
	if s.Source == store.FromCallback {
		return s.Result.Word != store.Acked
	}
	return s.Result.Word == store.Reopened
}

// logDelivery logs a delivery's outcome.
func logDelivery(log *zap.Logger, s store.Settlement) {
	o, r := s.Outcome, s.Result
	// The common outcomes are logged at debug level only: skip building
	// their fields when that level is off.
	if (r.Word == store.Completed || r.Word == store.Awaiting) && !log.Core().Enabled(zap.DebugLevel) {
		return
	}
	fields := []zap.Field{zap.String("job", s.JobID), zap.String("outcome", string(o.Kind)), zap.String("result", string(r.Word))}
	if s.FlowKey != "" {
		fields = append(fields, zap.String("flowKey", s.FlowKey), zap.Bool("laneProbe", s.LaneProbe))
	}
	if o.StatusCode > 0 {
		fields = append(fields, zap.Int("status", o.StatusCode))
	}
	switch r.Word {
	case store.Dead:
		log.Info("job dead-lettered", append(fields, zap.String("reason", r.Detail), zap.String("error", o.Error))...)
	case store.Deferred:
		if !r.LaneUntil.IsZero() {
			log.Info("backpressure: lane held", append(fields, zap.Duration("retryAfter", o.RetryAfter), ReleaseField(r.Detail), zap.Bool("probe", s.Probe))...)
			break
		}
		log.Info("backpressure: queue held", append(fields, zap.Duration("retryAfter", o.RetryAfter), ReleaseField(r.Detail), zap.Bool("probe", s.Probe))...)
	case store.Reopened:
		log.Info("probe succeeded: queue reopened", fields...)
	case store.Retry:
		if s.Probe {
			log.Info("probe failed: the queue stays probing with the next job", append(fields, zap.String("error", o.Error))...)
			break
		}
		log.Debug("delivery failed; will retry", append(fields, zap.String("error", o.Error))...)
	case store.Stale:
		log.Info("outcome ignored: the job moved on (lease expired or a callback settled it)", fields...)
	case store.Released:
		log.Info("delivery handed back at shutdown", fields...)
	default:
		log.Debug("delivery recorded", fields...)
	}
}

// logCallback logs an ack-mode callback's outcome.
func logCallback(log *zap.Logger, s store.Settlement) {
	cb, r := s.Callback, s.Result
	log.Debug("callback applied", zap.String("job", s.JobID), zap.String("kind", string(cb.Kind)), zap.String("result", string(r.Word)))
	switch r.Word {
	case store.Dead:
		log.Info("job dead-lettered", zap.String("job", s.JobID), zap.String("reason", r.Detail))
	case store.Deferred:
		msg := "backpressure: queue held (defer callback)"
		if cb.Scope == store.ScopeJob {
			msg = "backpressure: job deferred (defer callback, scope job)"
		} else if !r.LaneUntil.IsZero() {
			msg = "backpressure: lane held (defer callback, scope key)"
		}
		// r.Detail is this defer's release time in ms on Redis' clock; the
		// queue holds until the latest release any defer asked for.
		log.Info(msg, zap.String("job", s.JobID), zap.String("scope", string(cb.Scope)),
			zap.Duration("retryAfter", cb.RetryAfter), ReleaseField(r.Detail))
	case store.Reopened:
		log.Info("probe acked: queue reopened", zap.String("job", s.JobID))
	}
}
