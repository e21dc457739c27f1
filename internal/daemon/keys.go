package daemon

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// The lanes of a queue for the keys endpoints (keys.md §2, §3, §5): reads
// and writes go to the store, one script call each. The API wakes the
// fleet's pumps after a change (Waker), since an override or a resume may
// let a lane start.

// GetKey reads one lane.
func (b backend) GetKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.GetKey(ctx, q, flowKey)
}

// ListKeys reads one page of a queue's lanes.
func (b backend) ListKeys(ctx context.Context, q config.Queue, state store.KeyState, cursor string, limit int) ([]store.Key, string, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.ListKeys(ctx, q, store.ListKeysParams{State: state, Cursor: cursor, Limit: limit})
}

// PutKey sets a lane's override, shared by the fleet at once.
func (b backend) PutKey(ctx context.Context, q config.Queue, flowKey string, o store.KeyOverride) (store.Key, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	k, err := b.d.store.PutKey(ctx, q, flowKey, o)
	if err == nil {
		b.d.log.Info("lane override set", zap.String("queue", q.Name), zap.String("flowKey", flowKey),
			zap.Int("concurrency", k.Concurrency), zap.Int("rateLimitMax", k.RateLimitMax), zap.Int("weight", k.Weight))
	}
	return k, err
}

// DeleteKey removes a lane's override.
func (b backend) DeleteKey(ctx context.Context, q config.Queue, flowKey string) error {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	_, err := b.d.store.DeleteKey(ctx, q, flowKey)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		b.d.log.Info("lane override removed", zap.String("queue", q.Name), zap.String("flowKey", flowKey))
	}
	return err
}

// ResumeKey ends a lane's hold early into probing.
func (b backend) ResumeKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	k, err := b.d.store.ResumeKey(ctx, q, flowKey)
	if err == nil {
		b.d.log.Info("lane resumed by operator", zap.String("queue", q.Name), zap.String("flowKey", flowKey),
			zap.String("hold", string(k.Hold.State)))
	}
	return k, err
}
