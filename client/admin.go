package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
)

// The operator's calls below are simpleqd additions to SimpleQ's API: they
// exist because a self-hosted daemon has no vendor dashboard, so the queue
// state, dead letters and an emergency stop must be reachable from code.

// Queue reads one queue's settings, counts and hold state.
func (c *Client) Queue(ctx context.Context, name string) (*Queue, error) {
	return c.queueCall(ctx, request{method: http.MethodGet, path: "/v1/queues/" + seg(name)})
}

// Queues lists every configured queue, sorted by name.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	req := request{method: http.MethodGet, path: "/v1/queues"}
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out struct {
		Queues []Queue `json:"queues"`
	}
	if err := decode(req, ans, &out); err != nil {
		return nil, err
	}
	if out.Queues == nil {
		out.Queues = []Queue{}
	}
	return out.Queues, nil
}

// Pause stops every delivery of the queue, fleet-wide, until Resume; jobs
// keep being accepted and wait. reason (≤ 500 characters, may be empty) is
// shown in Queue.Hold.Reason. Pausing again replaces the reason.
func (c *Client) Pause(ctx context.Context, name, reason string) (*Queue, error) {
	var body []byte
	if reason != "" {
		body, _ = marshal(map[string]string{"reason": reason})
	} else {
		body = []byte("{}")
	}
	return c.queueCall(ctx, request{method: http.MethodPost, path: "/v1/queues/" + seg(name) + "/pause", body: body})
}

// Resume ends a pause. On a queue held by backpressure it cuts the hold
// short: the queue goes to probing, so it still reopens only through one
// successful delivery.
func (c *Client) Resume(ctx context.Context, name string) (*Queue, error) {
	return c.queueCall(ctx, request{method: http.MethodPost, path: "/v1/queues/" + seg(name) + "/resume", body: []byte("{}")})
}

func (c *Client) queueCall(ctx context.Context, req request) (*Queue, error) {
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var q Queue
	if err := decode(req, ans, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// DeadJobsOptions pages through a dead-letter list.
type DeadJobsOptions struct {
	// Limit is the page size, 1..1000; 0 means the daemon's default (50).
	Limit int
	// Cursor is a NextCursor from the previous page; "" is the first page.
	Cursor string
}

// DeadJobsPage is one page of dead jobs, newest death first.
type DeadJobsPage struct {
	// Jobs are the page's dead jobs with their history and deadReason.
	Jobs []Job
	// NextCursor fetches the next page; "" on the last one.
	NextCursor string
}

// DeadJobs reads one page of the queue's dead-letter list. opts may be nil.
func (c *Client) DeadJobs(ctx context.Context, queue string, opts *DeadJobsOptions) (*DeadJobsPage, error) {
	q := url.Values{}
	if opts != nil {
		if opts.Limit != 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
		if opts.Cursor != "" {
			q.Set("cursor", opts.Cursor)
		}
	}
	req := request{method: http.MethodGet, path: "/v1/queues/" + seg(queue) + "/dead", query: q}
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out struct {
		Jobs       []Job   `json:"jobs"`
		NextCursor *string `json:"nextCursor"`
	}
	if err := decode(req, ans, &out); err != nil {
		return nil, err
	}
	if out.Jobs == nil {
		out.Jobs = []Job{}
	}
	return &DeadJobsPage{Jobs: out.Jobs, NextCursor: str(out.NextCursor)}, nil
}

// Replay moves the listed dead jobs (up to 1,000) back to pending: each
// keeps its id and history and gets its attempts, defer count and lifetime
// reset. Ids that are not dead jobs of the queue are skipped, so a repeated
// (or retried) call is harmless. It returns how many moved.
func (c *Client) Replay(ctx context.Context, queue string, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, errors.New("simpleq: Replay needs at least one id (ReplayAll replays every dead job)")
	}
	body, err := marshal(map[string]any{"ids": ids})
	if err != nil {
		return 0, err
	}
	return c.replay(ctx, queue, body)
}

// ReplayAll moves every dead job of the queue back to pending.
func (c *Client) ReplayAll(ctx context.Context, queue string) (int, error) {
	return c.replay(ctx, queue, []byte(`{"all":true}`))
}

func (c *Client) replay(ctx context.Context, queue string, body []byte) (int, error) {
	req := request{method: http.MethodPost, path: "/v1/queues/" + seg(queue) + "/dead/replay", body: body}
	ans, err := c.do(ctx, req)
	if err != nil {
		return 0, err
	}
	var out struct {
		Replayed int `json:"replayed"`
	}
	if err := decode(req, ans, &out); err != nil {
		return 0, err
	}
	return out.Replayed, nil
}
