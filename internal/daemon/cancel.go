package daemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Cancel (control.md §1): the API's api.Canceller. A job cancelled while its
// delivery is under way is dead in Redis at once; the abort message goes to
// every daemon (package wakeup), and the one holding the delivery closes its
// request (dispatch.Deliverer.Abort). Its late outcome is STALE, and that
// settle frees the slot the delivery kept until then.

// Cancel cancels one job and returns it as it is now.
func (b backend) Cancel(ctx context.Context, q config.Queue, id, reason string) (*store.Job, error) {
	cctx, cancel := apiCtx(ctx)
	defer cancel()
	res, err := b.d.store.Cancel(cctx, q, store.CancelParams{ID: id, Reason: reason})
	if err != nil {
		return nil, err
	}
	b.d.log.Info("job cancelled", zap.String("queue", q.Name), zap.String("job", id),
		zap.String("was", string(res.Status())), zap.Bool("inFlight", res.Token != ""), zap.String("reason", reason))
	if res.Token != "" {
		b.abort(q, store.Abort{ID: id, Token: res.Token})
	}
	// A cancelled probe hands the probe on, an awaiting job frees its slot.
	b.d.bus.NotifyState(q.Name)
	return b.d.store.GetJob(cctx, q, id)
}

// CancelBulk cancels the jobs f matches, batch after batch, until the scan is
// done or until has passed, aborting the deliveries under way it cancels.
func (b backend) CancelBulk(ctx context.Context, q config.Queue, f store.CancelFilter, reason string, until time.Time) (int, bool, error) {
	p := store.BulkCancelParams{Filter: f, Reason: reason, Cursor: store.StartCancel}
	total := 0
	for !p.Cursor.Done() {
		if time.Now().After(until) {
			b.logBulk(q, total, false, nil)
			return total, false, nil
		}
		cctx, cancel := apiCtx(ctx)
		step, err := b.d.store.BulkCancelStep(cctx, q, p)
		cancel()
		if err != nil {
			b.logBulk(q, total, false, err)
			return total, false, err
		}
		total += step.Cancelled
		for _, a := range step.Aborts {
			b.abort(q, a)
		}
		p.Cursor = step.Next
	}
	b.logBulk(q, total, true, nil)
	return total, true, nil
}

func (b backend) logBulk(q config.Queue, n int, done bool, err error) {
	if n == 0 && err == nil {
		return
	}
	b.d.log.Info("jobs cancelled in bulk", zap.String("queue", q.Name), zap.Int("cancelled", n), zap.Bool("done", done), zap.Error(err))
}

// abort tells the fleet (this daemon directly) to abort a cancelled job's
// delivery. A lost message leaves the request to run to its end; its
// outcome changes nothing all the same.
func (b backend) abort(q config.Queue, a store.Abort) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.d.bus.Abort(ctx, a.Token, a.ID); err != nil {
		b.d.log.Warn("abort message not sent: the cancelled delivery runs to its end (its outcome is ignored)",
			zap.String("queue", q.Name), zap.String("job", a.ID), zap.Error(err))
	}
}

// onAbort is the wake-up bus's abort handler: abort the delivery if it is
// this daemon's.
func (d *Daemon) onAbort(token, jobID string) {
	if d.deliverer.Abort(token) {
		d.log.Info("delivery aborted: its job was cancelled", zap.String("job", jobID))
	}
}
