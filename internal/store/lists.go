package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Paging bounds of ListJobs (control.md §4).
const (
	DefaultJobsPage = 100
	MaxJobsPage     = 1000
	// MaxJobsPageBytes bounds the stored records one page returns, for the
	// reason MaxDeadPageBytes does: records carry whole payloads.
	MaxJobsPageBytes = MaxDeadPageBytes
	// jobsScanExtra is how many entries of another state one page may read
	// past its limit (lists.lua: a set shared by two states is filtered).
	// It bounds the page's Redis work at O(limit + jobsScanExtra + log n).
	jobsScanExtra = 1000
)

// ListJobsParams choose one page of ListJobs.
type ListJobsParams struct {
	// Status is the status listed.
	Status Status
	// FlowKey, when set, lists one lane's jobs only (keys.md).
	FlowKey string
	// Limit is the page size: <= 0 is DefaultJobsPage, above MaxJobsPage
	// it is capped.
	Limit int
	// Cursor is "" for the first page, else the cursor a page returned.
	Cursor string
}

// ListJobs returns one page of queue q's jobs in status p.Status, in the order of
// lists.lua's header (waiting jobs in delivery order, in-flight ones by
// lease deadline, completed and dead newest first), and the cursor of the
// next page ("" after the last). limit <= 0 means DefaultJobsPage, above
// MaxJobsPage it is capped. A cursor this method did not issue for q and st
// is an *InvalidCursorError.
//
// Every page is one read-only script call costing O(limit + log n) in
// Redis whatever the backlog. A page may hold fewer than limit jobs while a
// cursor says more may follow: entries of another state sharing the set
// (a pending list walks past retries) are skipped within a bounded scan,
// and a page ends early at MaxJobsPageBytes. Jobs that move while a client
// pages may be missed or seen twice, as with any cursor over live data.
//
// With p.FlowKey, a lane's pending jobs and retries are read from the
// lane's range of the keyed waiting set, O(log n + limit) per page; for the
// other statuses each job's flow key is compared within the same bounded
// scan, so a page of a rare key may hold few jobs while its cursor goes on.
func (s *Store) ListJobs(ctx context.Context, q QueueParams, p ListJobsParams) ([]*Job, string, error) {
	st, flowKey, limit, cursor := p.Status, p.FlowKey, p.Limit, p.Cursor
	if limit <= 0 {
		limit = DefaultJobsPage
	}
	if limit > MaxJobsPage {
		limit = MaxJobsPage
	}
	var c jobsCursor
	if cursor != "" {
		var err error
		if c, err = decodeJobsCursor(q.Name, st, cursor); err != nil {
			return nil, "", err
		}
		if c.phase == "L" && flowKey != "" && c.member != "" && !strings.HasPrefix(c.member, flowKey+"\x00") {
			return nil, "", &InvalidCursorError{Cursor: cursor, Reason: "cursor belongs to another flow key"}
		}
	}
	args := append(s.params(lua.Lists, q, 8), string(st), c.phase, c.score, c.member, limit, limit+jobsScanExtra, MaxJobsPageBytes, flowKey)
	res, err := s.run(ctx, lua.Lists, q, args)
	if err != nil {
		return nil, "", fmt.Errorf("list %s jobs of queue %s: %w", st, q.Name, err)
	}
	a := newReply(lua.Lists, q.Name, res, 3)
	a.want((a.len()-3)%4 == 0, "want 4 values per job after 3")
	next := ""
	if phase := a.str(0); phase != "" {
		next = jobsCursor{status: st, phase: phase, score: a.str(1), member: a.str(2)}.encode()
	}
	jobs := make([]*Job, 0, max(a.len()-3, 0)/4)
	for i := 3; i+3 < a.len(); i += 4 {
		id, rec, lease, hist := a.str(i), a.str(i+1), a.optStr(i+2), a.str(i+3)
		if err := a.err(); err != nil {
			return nil, "", err
		}
		j, err := decodeJob(q, id, []byte(rec), []byte(hist))
		if err != nil {
			return nil, "", err
		}
		if lease != "" && j.Status == StatusPending {
			j.Status = StatusProcessing // in flight: a lease overlays the record
		}
		jobs = append(jobs, j)
	}
	if err := a.err(); err != nil {
		return nil, "", err
	}
	return jobs, next, nil
}

// jobsCursor is the position after the last entry a page read: the status
// listed, the phase (the sorted set being walked, lists.lua) and the
// entry's score and member there. The score is Redis' own rendering of it,
// passed back as it came.
type jobsCursor struct {
	status               Status
	phase, score, member string
}

func (c jobsCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(c.status) + "\n" + c.phase + "\n" + c.score + "\n" + c.member))
}

// listPhases are the sorted sets lists.lua walks for each status, in order.
var listPhases = map[Status]string{
	StatusPending: "WL", StatusProcessing: "IWL", StatusAwaitingAck: "I", StatusCompleted: "P", StatusDead: "D",
}

// ListableStatus reports whether ListJobs can list st (every API status).
func ListableStatus(st Status) bool { _, ok := listPhases[st]; return ok }

// decodeJobsCursor parses a cursor ListJobs issued for queue and status.
func decodeJobsCursor(queue string, st Status, s string) (jobsCursor, error) {
	bad := func(reason string) (jobsCursor, error) {
		return jobsCursor{}, &InvalidCursorError{Cursor: s, Reason: reason}
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not a cursor returned by this endpoint")
	}
	parts := strings.SplitN(string(raw), "\n", 4)
	if len(parts) != 4 {
		return bad("not a cursor returned by this endpoint")
	}
	c := jobsCursor{status: Status(parts[0]), phase: parts[1], score: parts[2], member: parts[3]}
	if c.status != st {
		return bad("cursor belongs to another status")
	}
	if !strings.Contains(listPhases[st], c.phase) || len(c.phase) != 1 {
		return bad("not a cursor returned by this endpoint")
	}
	if c.member != "" {
		if _, err := strconv.ParseFloat(c.score, 64); err != nil && c.score != "inf" {
			return bad("not a cursor returned by this endpoint")
		}
		id := c.member
		if c.phase == "L" {
			// A keyed waiting job's member: flow key, NUL, order, NUL, id.
			i := strings.LastIndexByte(id, 0)
			if i < 0 {
				return bad("not a cursor returned by this endpoint")
			}
			id = id[i+1:]
		}
		// The in-flight set's placeholder is the only member that is no job id.
		if q, ok := QueueOfJob(id); ok && q != queue {
			return bad("cursor belongs to another queue")
		} else if !ok && !strings.HasPrefix(id, "~") {
			return bad("not a cursor returned by this endpoint")
		}
	}
	return c, nil
}
