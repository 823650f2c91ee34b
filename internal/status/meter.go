package status

import (
	"fmt"
	"sync"
	"time"
)

// Reading is one reading of a running migration's counters (package
// migration takes one a second).
type Reading struct {
	At                time.Time
	Rows              int64 // rows copied (a resumed run's predecessors included)
	Received, Applied int64 // binlog row changes received and applied
	Skipped           int64 // binlog row changes left to the copy (never received)
	Written           int64 // rows the applier wrote
	EndBytes          int64 // absolute binlog offset of the end (-1 unknown)
	AppliedBytes      int64 // absolute binlog offset applied (-1 unknown)
	Throttled         bool
	Lags              map[string]float64 // replica lag, seconds
	Phase             string
	Checked           int64 // rows the checksum has compared (its first round)
	// Regime: what sets the copy's pace now (pacing with the application
	// active and its ratio, a rate cap, or full speed; package migration
	// names it). The ETA's copy rate is taken over the last ETAWindow of
	// the readings since it last changed (Rates.CopyAvg).
	Regime string
}

// HistoryLen is how many one-second readings a Meter keeps (the status
// page's charts).
const HistoryLen = 900

// RateWindow is the span rates are measured over.
const RateWindow = 5 * time.Second

// ETAWindow is the span the ETA's copy rate is measured over (Rates.CopyAvg).
// A paced copy's rate swings with its duty: on session 22's bench (MariaDB
// 11.8, 1M rows, three paced copies of 366-1,334 s) it ranged from 110 to
// 8,400 rows a second over a half-minute or a minute, and an ETA from the
// last 5 s jumped by up to a factor of 2.7 from one second to the next
// (the 99th percentile), from 3 minutes to 25 within one. Over the last
// minute the jumps were 5-7 times smaller and the estimates no further off
// (the mean |ln(estimate ÷ the time the copy then took)| 0.77, 0.92, 0.77
// against 0.84, 1.07, 0.79). The mean since the copy's start was closer in
// the light run (0.49) and far off in the heavy one (1.58: its second half
// ran at a tenth of the first's rate). docs/control.md, docs/benchmarks.md
// (Session 22), bench/eta-windows.py.
const ETAWindow = time.Minute

// Meter keeps the recent readings and derives rates, the history and the
// ETA from them. The zero value is ready; it is safe for concurrent use.
type Meter struct {
	mu       sync.Mutex
	readings []Reading // oldest first
}

// Add records a reading.
func (m *Meter) Add(r Reading) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readings = append(m.readings, r)
	if len(m.readings) > HistoryLen {
		m.readings = append(m.readings[:0], m.readings[len(m.readings)-HistoryLen:]...)
	}
}

// Last is the latest reading (ok false: none yet).
func (m *Meter) Last() (r Reading, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.readings) == 0 {
		return Reading{}, false
	}
	return m.readings[len(m.readings)-1], true
}

// Rates are per-second rates over the last RateWindow of readings.
type Rates struct {
	Copy, Incoming, Applied float64 // rows, row changes
	Skipped                 float64 // row changes left to the copy
	BinlogIn, BinlogApplied float64 // bytes (-1 unknown)
	// CopyAvg: the copy's rate over the last ETAWindow of the readings of
	// its current regime (the copy phase, the same Reading.Regime; 0 while
	// they span less than RateWindow): the ETA's.
	CopyAvg float64
	// Checked: the checksum's rate over the last ETAWindow of the
	// checksum phase's readings (0 while they span less than RateWindow).
	Checked float64
}

// Rates measures the rates over the last RateWindow.
func (m *Meter) Rates() Rates {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Rates{BinlogIn: -1, BinlogApplied: -1}
	n := len(m.readings)
	if n < 2 {
		return r
	}
	last := m.readings[n-1]
	first := m.readings[0]
	for i := n - 2; i >= 0; i-- {
		first = m.readings[i]
		if last.At.Sub(first.At) >= RateWindow {
			break
		}
	}
	dt := last.At.Sub(first.At).Seconds()
	if dt <= 0 {
		return r
	}
	r.Copy = float64(last.Rows-first.Rows) / dt
	r.Incoming = float64(last.Received-first.Received) / dt
	r.Applied = float64(last.Applied-first.Applied) / dt
	r.Skipped = float64(last.Skipped-first.Skipped) / dt
	r.CopyAvg = copyAvg(m.readings)
	r.Checked = checkedAvg(m.readings)
	if first.EndBytes >= 0 && last.EndBytes >= 0 && first.AppliedBytes >= 0 && last.AppliedBytes >= 0 {
		r.BinlogIn = float64(last.EndBytes-first.EndBytes) / dt
		r.BinlogApplied = float64(last.AppliedBytes-first.AppliedBytes) / dt
	}
	return r
}

// copyAvg is Rates.CopyAvg over readings (oldest first).
func copyAvg(readings []Reading) float64 {
	last := readings[len(readings)-1]
	return phaseAvg(readings, PhaseCopy, func(r Reading) bool { return r.Regime == last.Regime }, func(r Reading) int64 { return r.Rows })
}

// checkedAvg is Rates.Checked over readings (oldest first).
func checkedAvg(readings []Reading) float64 {
	return phaseAvg(readings, PhaseChecksum, func(Reading) bool { return true }, func(r Reading) int64 { return r.Checked })
}

// phaseAvg is count's rate over the last ETAWindow of the readings (oldest
// first) that are in phase and alike (same), up to the last one; 0 when
// the last is not in phase, they span less than RateWindow, or count did
// not grow.
func phaseAvg(readings []Reading, phase string, same func(Reading) bool, count func(Reading) int64) float64 {
	n := len(readings)
	last := readings[n-1]
	if last.Phase != phase {
		return 0
	}
	i := n - 1
	for i > 0 && readings[i-1].Phase == phase && same(readings[i-1]) && last.At.Sub(readings[i-1].At) <= ETAWindow {
		i--
	}
	first := readings[i]
	dt := last.At.Sub(first.At)
	if dt < RateWindow || count(last) <= count(first) {
		return 0
	}
	return float64(count(last)-count(first)) / dt.Seconds()
}

// History is the readings as GET /history's samples; percent gives the
// copy's percentage for a reading's rows and phase.
func (m *Meter) History(percent func(rows int64, phase string) float64) []Sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Sample, 0, len(m.readings))
	for i, s := range m.readings {
		h := Sample{Time: float64(s.At.UnixMilli()) / 1000, Phase: s.Phase, Percent: percent(s.Rows, s.Phase),
			BacklogEvents: max(s.Received-s.Applied, 0), Lags: s.Lags, Throttled: s.Throttled}
		if i > 0 {
			p := m.readings[i-1]
			if dt := s.At.Sub(p.At).Seconds(); dt > 0 {
				h.CopyRate = float64(s.Rows-p.Rows) / dt
				h.IncomingRate = float64(s.Received-p.Received) / dt
				h.AppliedRate = float64(s.Applied-p.Applied) / dt
			}
		}
		out = append(out, h)
	}
	return out
}

// Backlog says whether the applier's backlog drains: "caught up",
// "draining" (with the seconds to drain it) or "not draining". applying
// is false before the applier exists.
func Backlog(s *Snapshot, r Rates, applying bool) (backlog string, drain float64) {
	// The backlog, in binlog bytes (what is unread counts too): caught up
	// when what is left takes the binlog about a second to produce.
	bb := s.Apply.BacklogBytes
	switch {
	case !applying:
	case bb < 0 || r.BinlogIn < 0:
		if s.Apply.BacklogEvents > 0 && r.Applied <= r.Incoming && s.Apply.BacklogEvents > int64(r.Incoming) {
			return "not draining", 0
		}
	case float64(bb) <= max(256<<10, r.BinlogIn):
	case r.BinlogApplied > r.BinlogIn:
		return "draining", float64(bb) / (r.BinlogApplied - r.BinlogIn)
	default:
		return "not draining", 0
	}
	return "caught up", 0
}

// Estimate is the time left, from the snapshot (phase, copy, throttle,
// postponement) and the rates. It is honest: it gives no number when there
// is no progress to extrapolate from, and when the applier does not gain on
// the binlog (the backlog would never drain) it says so. cutNote is what
// the cut-over waits for ("" when it does not wait). Without a number, the
// text is the reason.
func Estimate(s *Snapshot, r Rates, backlog string, drain float64, cutNote string) ETA {
	num := func(secs float64, text string) ETA { return ETA{Seconds: &secs, Text: text} }
	none := func(text string) ETA { return ETA{Text: text} }
	switch s.Phase {
	case PhaseDone:
		return num(0, "done")
	case PhaseFailed:
		return none("failed")
	case PhaseInspect:
		return none("measuring (inspecting)")
	}
	if s.Phase == PhaseCopy && !s.Copy.Done && s.Throttle.Throttled {
		// Throttled, the applier is slowed on purpose (the replicas get
		// the chance to catch up): a backlog that does not drain then is
		// the throttle's doing, and the pause is the reason to give.
		return none("the copy is paused (" + s.Throttle.Reason + ")")
	}
	if backlog == "not draining" {
		return none(fmt.Sprintf("backlog not draining (applied %s/s ≤ incoming %s/s of binlog)",
			Bytes(int64(max(r.BinlogApplied, 0))), Bytes(int64(max(r.BinlogIn, 0)))))
	}
	switch s.Phase {
	case PhaseCopy:
		if s.Copy.Done {
			break
		}
		rate := r.CopyAvg
		if rate <= 0 {
			rate = r.Copy
		}
		if rate <= 0 {
			return none("measuring (no copy progress measured yet)")
		}
		left := float64(max(s.Copy.RowsEstimated-s.Copy.RowsCopied, 0)) / rate
		text := "copy " + Seconds(left)
		if drain > 0 {
			text += " + backlog " + Seconds(drain)
		}
		return num(left+drain, text+", then checksum and cut-over")
	case PhaseChecksum:
		c := s.Checksum
		switch {
		case c != nil && c.Done:
			return none("checksum compared every row; repairing or verifying (no estimate), then cut-over")
		case c == nil || c.RowsPerSecond <= 0:
			return none("checksum running (measuring), then cut-over")
		}
		left := float64(max(c.RowsTotal-c.RowsCompared, 0)) / c.RowsPerSecond
		return num(left, "checksum "+Seconds(left)+", then cut-over")
	case PhaseCutOver:
		if s.Postponed {
			return none("cut-over postponed until " + s.Settings.PostponeFlagFile + " is removed (recast ctl cutover)")
		}
		if cutNote != "" {
			return none(cutNote)
		}
		return none("cutting over")
	}
	// Copy done, catching up.
	if drain > 0 {
		return num(drain, "backlog "+Seconds(drain)+", then checksum and cut-over")
	}
	return num(0, "caught up: checksum and cut-over next")
}

// ETALine renders the ETA for a progress line: "ETA 1m40s (copy …)", or
// "ETA unknown: <reason>" when there is no number.
func ETALine(e ETA) string {
	switch {
	case e.Seconds != nil && e.Text == "done":
		return "ETA: done"
	case e.Seconds != nil:
		return fmt.Sprintf("ETA %s (%s)", Seconds(*e.Seconds), e.Text)
	case e.Text == "":
		return "ETA unknown: measuring"
	}
	return "ETA unknown: " + e.Text
}
