package store

import (
	"errors"
	"fmt"
)

// SettleWord says what a script did with one outcome: settle.lua with a
// delivery's, callback.lua with an ack-mode worker's, and claim
// housekeeping with a job no daemon was watching (Reaped). The words are
// the scripts'; Go compares only these constants, and a word a script
// answers that is not one of them is an ErrUnexpectedWord, never a new
// value passed on.
type SettleWord string

// Settle and callback words; see lua/settle.lua and lua/callback.lua.
const (
	// Completed: the job succeeded (a standard-mode 2xx or an ack).
	Completed SettleWord = "COMPLETED"
	// Reopened: the queue's probe succeeded and the queue reopened.
	Reopened SettleWord = "REOPENED"
	// Awaiting: an ack-mode 2xx; the worker's callback decides (Detail: the
	// ack deadline in ms).
	Awaiting SettleWord = "AWAITING"
	// Retry: the delivery failed and the job retries (Detail: due ms).
	Retry SettleWord = "RETRY"
	// Dead: the job was dead-lettered (Detail: the dead reason).
	Dead SettleWord = "DEAD"
	// Deferred: backpressure; the job waits (Detail: this defer's release ms).
	Deferred SettleWord = "DEFERRED"
	// Released: handed back untouched (graceful shutdown).
	Released SettleWord = "RELEASED"
	// Stale: the lease token (or, for a callback, the attempt) is no longer
	// the job's: nothing was written.
	Stale SettleWord = "STALE"
	// Acked: a repeated ack of a completed job (callback only).
	Acked SettleWord = "ACKED"
	// Repeated: a nack or defer sent again after its reply was lost: it was
	// applied once and changes nothing now (callback only).
	Repeated SettleWord = "REPEATED"
	// NotFound and Conflict: the callback's job does not exist, or is not
	// in flight or awaiting its ack (Detail: its state). Callback returns
	// them as ErrNotFound and ErrConflict.
	NotFound SettleWord = "NOTFOUND"
	Conflict SettleWord = "CONFLICT"
)

// ErrUnexpectedWord is a script answer that is not one of the words Go
// knows: a script and its Go side disagree, which must fail loudly.
var ErrUnexpectedWord = errors.New("unexpected word in a script reply")

// settleWords are the words settle.lua may answer.
var settleWords = map[SettleWord]bool{Completed: true, Reopened: true, Awaiting: true, Retry: true, Dead: true,
	Deferred: true, Released: true, Stale: true}

// callbackWords are the words callback.lua may answer: settle's for the
// applied outcome (except those only a delivery gives) and its own.
var callbackWords = map[SettleWord]bool{Completed: true, Reopened: true, Retry: true, Dead: true, Deferred: true,
	Stale: true, Acked: true, Repeated: true, NotFound: true, Conflict: true}

// reapedWords are the words housekeeping reports for a job it moved on.
var reapedWords = map[SettleWord]bool{Retry: true, Dead: true}

// claimWords are the words claim.lua may answer.
var claimWords = map[ClaimWord]bool{Claimed: true, Empty: true, Paused: true, Held: true, Probing: true, Busy: true,
	Rate: true}

// settleWord checks a word of a script reply against the words allowed.
func settleWord(v any, allowed map[SettleWord]bool) (SettleWord, error) {
	w := SettleWord(toStr(v))
	if !allowed[w] {
		return "", fmt.Errorf("%w: %q", ErrUnexpectedWord, string(w))
	}
	return w, nil
}

// claimWord checks the word of a claim reply.
func claimWord(v any) (ClaimWord, error) {
	w := ClaimWord(toStr(v))
	if !claimWords[w] {
		return "", fmt.Errorf("%w: %q", ErrUnexpectedWord, string(w))
	}
	return w, nil
}
