package throttle

import (
	"sync"
	"time"
)

// RateCap holds the copy's threads, together, to at most Rate rows a second
// (--max-copy-rate). Each chunk's rows take their share of the time from
// the chunk's start on (or from the end of the share the chunks before it
// took, if that is later), and the thread sleeps until that share ends: a
// virtual clock (GCRA), so that two threads whose chunks end together sleep
// one after the other's share, not both for their own.
//
// Why a rate and not a duty: what a copy costs the application on a small
// machine is mostly the bytes it writes (redo, binlog, the page cache's
// write-back 30 s later), and those follow the rows, not the share of time
// a copy thread spends in chunks (docs/benchmarks.md, sessions 12 and 14).
type RateCap struct {
	mu   sync.Mutex
	rate float64   // rows a second; 0: no cap
	tat  time.Time // when the rows granted so far have had their time
}

// NewRateCap returns a cap of rate rows a second (0: none).
func NewRateCap(rate float64) *RateCap { return &RateCap{rate: rate} }

// SetRate changes the cap (0: none). The time granted to chunks so far is
// forgotten: a new rate counts from the next chunk on (a thread already
// sleeping finishes its sleep).
func (r *RateCap) SetRate(rate float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rate, r.tat = rate, time.Time{}
}

// Rate is the cap in rows a second (0: none).
func (r *RateCap) Rate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rate
}

// PauseFor is the sleep after a chunk of rows rows that took took and ended
// at now: until the rows' share of time has passed. With no cap, 0.
func (r *RateCap) PauseFor(rows int64, took time.Duration, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rate <= 0 || rows <= 0 {
		return 0
	}
	start := now.Add(-took)
	if r.tat.Before(start) {
		r.tat = start // no credit for time the copy did not use
	}
	r.tat = r.tat.Add(time.Duration(float64(rows) / r.rate * float64(time.Second)))
	return max(r.tat.Sub(now), 0)
}
