package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
)

// ErrSwapped ends the reader once the binlog shows the cut-over's RENAME
// while the pump is armed.
var ErrSwapped = errors.New("table swapped")

// Pump moves stream events into the applier and flushes it: it owns the
// reader loop (Read), the flusher loop (Flush), back-pressure, the freeze
// used by the checksum (Align) and the arm/hold used by the cut-over
// (Arm, Disarm, Swapped).
type Pump struct {
	stream *binlog.Stream
	ap     *Applier

	mu      sync.Mutex
	frozen  bool             // the reader takes no new event...
	upTo    *binlog.Position // ...except those at or before upTo
	taken   binlog.Event     // the last event the reader took (Rows cleared)
	armed   bool
	held    []binlog.Event // row events seen while armed
	swapped chan struct{}
	lost    atomic.Int64

	// delay, if set, is an extra wait between windows (NewPump); applied
	// counts the row changes applied.
	delay   func() time.Duration
	applied atomic.Int64

	def *Deferrer // lock-free copy: holds changes to ranges being copied (defer.go)

	windowTime time.Duration // WindowTime; tests change it
}

// NewPump returns the pump between stream and ap. delay, if set, is an
// extra wait between windows (the replicas cannot keep up); it is asked
// once per window and once per event under back-pressure, so it must be cheap.
func NewPump(stream *binlog.Stream, ap *Applier, delay func() time.Duration) *Pump {
	return &Pump{stream: stream, ap: ap, swapped: make(chan struct{}), delay: delay, windowTime: WindowTime}
}

// Swapped is closed when the reader saw the swap's RENAME while armed.
func (p *Pump) Swapped() <-chan struct{} { return p.swapped }

// Lost is the number of row changes held when the swap was seen (rows
// written to the old table after the drain point: must be 0).
func (p *Pump) Lost() int64 { return p.lost.Load() }

// HeldRows is the number of row changes held now: read while armed, after
// the drain point, and neither applied nor counted Lost yet.
func (p *Pump) HeldRows() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return countRows(p.held)
}

// AppliedChanges is the number of row changes the applier has written.
func (p *Pump) AppliedChanges() int64 { return p.applied.Load() }

// Arm holds every row change from now on (the cut-over's lock is taken).
func (p *Pump) Arm() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

// Disarm: the RENAME failed, T is still the original; rows held meanwhile
// are ordinary changes to apply.
func (p *Pump) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	for _, ev := range p.held {
		p.add(ev)
	}
	p.held = nil
}

const maxPending = 40000

// slowPending replaces maxPending while the throttle delays the applier (the
// replicas cannot absorb even the applier's writes): each window then
// applies at most this many changes, so the apply rate falls to at most
// slowPending per (delay + flush). A delay alone would only have batched
// the same writes into bigger windows (under sysbench at 1,360 tps the
// replica's lag grew to 55 s while the applier, "slowed" by 1 s per window,
// still applied everything).
const slowPending = 100

// Align implements checksum.Config.Align: freeze the reader, open the source
// snapshot at P, let the applier reach exactly P, open the ghost snapshot,
// unfreeze. The binlog can deliver a transaction before it is visible to a
// snapshot, so the reader may already have taken events beyond P: then the
// source snapshot is taken again, a moment later.
func (p *Pump) Align(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
	defer func() {
		p.mu.Lock()
		p.frozen, p.upTo = false, nil
		p.mu.Unlock()
	}()
	var pos binlog.Position
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		p.frozen, p.upTo = true, nil
		p.mu.Unlock()
		var err error
		if pos, err = openSource(); err != nil {
			return err
		}
		p.mu.Lock()
		ahead := p.taken.After(pos)
		if !ahead {
			p.upTo = &pos
		} else {
			p.frozen = false
		}
		p.mu.Unlock()
		if !ahead {
			break
		}
		if attempt == 50 {
			return fmt.Errorf("the stream stays ahead of the source snapshot (%s > %s)", p.taken.Pos, pos)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.ap.WaitApplied(wctx, pos); err != nil {
		return fmt.Errorf("the applier did not reach %s: %w", pos, err)
	}
	if got := p.ap.Applied(); got.Compare(pos) != 0 {
		return fmt.Errorf("internal: the applier is at %s, not at the snapshot's %s", got, pos)
	}
	if err := openGhost(); err != nil {
		return err
	}
	// Both snapshots are at pos and the reader holds back everything after
	// it: every row the applier writes from now on is verified again
	// before the swap (package verify).
	p.ap.StartTracking()
	return nil
}

// gate blocks while the reader is frozen and ev lies beyond what it may take.
func (p *Pump) gate(ctx context.Context, ev binlog.Event) error {
	for {
		p.mu.Lock()
		ok := !p.frozen || (p.upTo != nil && !ev.After(*p.upTo))
		if ok {
			p.taken = binlog.Event{Pos: ev.Pos, Boundary: ev.Boundary} // under the same lock as the check: Align relies on it
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (p *Pump) Read(ctx context.Context) error {
	for {
		ev, err := p.stream.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("binlog stream: %w", err)
		}
		if err := p.gate(ctx, ev); err != nil {
			return nil
		}
		p.mu.Lock()
		armed, frozen := p.armed, p.frozen
		switch {
		case ev.DDL != "" && armed:
			p.lost.Store(int64(countRows(p.held)))
			p.mu.Unlock()
			close(p.swapped)
			return ErrSwapped
		case ev.DDL != "":
			p.mu.Unlock()
			return fmt.Errorf("the table's definition changed during the migration (%q at %s): aborting; the original table is untouched", ev.DDL, ev.Pos)
		case armed && (len(ev.Rows) > 0 || len(p.held) > 0):
			// Once a row is held, everything after it is held too (its
			// boundaries included): the applied position must not pass a
			// row that is not applied.
			p.held = append(p.held, ev)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		p.add(ev)
		limit := maxPending
		if !frozen && p.delay != nil && p.delay() > 0 { // see currentDelay
			limit = slowPending
		}
		for p.ap.Pending() >= limit { // backpressure: the stream waits for the applier
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Millisecond):
			}
		}
	}
}

// Flush is the flusher loop: it applies a window whenever one is due
// (nextWindow) until ctx ends, and returns the applier's error if any.
func (p *Pump) Flush(ctx context.Context) error {
	start := time.Now()
	for {
		if err := p.nextWindow(ctx, start); err != nil {
			return nil
		}
		start = time.Now()
		received := p.ap.Stats().Changes // all in this window or earlier ones
		if err := p.ap.Flush(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p.applied.Store(received)
	}
}

// WindowTime is how often the applier applies a window while nothing waits
// for it: changes arriving meanwhile are gathered, coalesced, and written in
// a few statements. At a light load, windows 5 ms apart held about one
// application transaction each and wrote it as that many transactions again
// (and more: one per worker), which every replica replays after the
// application's own; the serial replica of the bench could not keep up with
// them (docs/applier.md, *Windows*). A caller of WaitApplied (the cut-over,
// the checksum, the catch-up) or a full window does not wait: the flusher
// goes back to minWindowGap.
const WindowTime = 50 * time.Millisecond

// minWindowGap is the least time between two windows.
const minWindowGap = 5 * time.Millisecond

// nextWindow waits until the next window is due: WindowTime after the last
// one started, or minWindowGap after it ended when the applier is urgent.
// While the throttle delays the applier (currentDelay: the replicas lag), a
// window is due minWindowGap + the delay after the last one ended, as it was
// before windows had a time of their own: the throttle's feedback (the delay
// doubles while the lag grows, halves once it is below the limit) was tuned
// on that, and windows are capped at slowPending changes meanwhile. A nil
// error means it is due; an error, that ctx ended.
func (p *Pump) nextWindow(ctx context.Context, start time.Time) error {
	ended := time.Now()
	delay := p.currentDelay()
	gap := minWindowGap + delay
	wait := gap
	if delay == 0 && !p.ap.Urgent() {
		wait = max(gap, p.windowTime-ended.Sub(start))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case <-p.ap.Hurry():
			if !p.ap.Urgent() { // a wake-up the last window already answered
				continue
			}
			// Urgent now: due gap after the last window ended (the
			// delay asked again: Align's freeze and the cut-over's full
			// speed take it away).
			gap = minWindowGap + p.currentDelay()
			rest := gap - time.Since(ended)
			if rest <= 0 || !t.Stop() {
				return nil
			}
			t.Reset(rest)
		}
	}
}

// currentDelay is the throttle's applier delay, except while Align holds the
// reader: then the applier must reach the snapshot's position within
// Align's limit, and what it has to apply is bounded by that position.
func (p *Pump) currentDelay() time.Duration {
	if p.delay == nil {
		return 0
	}
	p.mu.Lock()
	frozen := p.frozen
	p.mu.Unlock()
	if frozen {
		return 0
	}
	return p.delay()
}

func countRows(evs []binlog.Event) int {
	n := 0
	for _, e := range evs {
		n += len(e.Rows)
	}
	return n
}
