package migration

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/recast-osc/recast/internal/status"
)

// progress writes a status line every interval: copy %, copy rate, apply
// rate vs incoming rate, backlog, replica lag, throttle reason, and an ETA
// that says so when the backlog is not draining instead of inventing a
// time. When Runtime.Progress is a Terminal it also keeps a progress bar on
// the terminal's last line, redrawn every second.
type progress struct {
	every time.Duration
	w     io.Writer
	ctl   *Control
}

func newProgress(every time.Duration, w io.Writer, ctl *Control) *progress {
	return &progress{every: every, w: w, ctl: ctl}
}

func (p *progress) run(ctx context.Context) {
	term, _ := p.w.(*Terminal)
	if p.every <= 0 && term == nil {
		return
	}
	var lines, bars <-chan time.Time
	if p.every > 0 {
		t := time.NewTicker(p.every)
		defer t.Stop()
		lines = t.C
	}
	if term != nil {
		defer term.SetBar("")
		t := time.NewTicker(time.Second)
		defer t.Stop()
		bars = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-lines:
			fmt.Fprintln(p.w, Line(p.ctl.Status()))
		case <-bars:
			term.SetBar(Bar(p.ctl.Status(), 28))
		}
	}
}

// Line renders the progress line.
func Line(s status.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "recast: %s [%s]", status.Seconds(float64(int64(s.ElapsedSeconds))), s.Phase)
	c, a := s.Copy, s.Apply
	if c.Done {
		fmt.Fprintf(&b, " copy done (%d rows)", c.RowsCopied)
	} else {
		fmt.Fprintf(&b, " copy %.1f%% (%d/~%d rows, chunk %d), %.0f rows/s", c.Percent, c.RowsCopied, c.RowsEstimated, c.ChunkSize, c.RowsPerSecond)
	}
	fmt.Fprintf(&b, " | apply %.0f ev/s vs in %.0f ev/s, backlog %d ev (%s, %s)",
		a.AppliedPerSecond, a.IncomingPerSecond, a.BacklogEvents, status.Bytes(a.BacklogBytes), a.Backlog)
	if a.SkippedPerSecond >= 0.5 {
		// Not in the incoming rate: changes to rows no chunk has read yet.
		fmt.Fprintf(&b, ", %.0f ev/s left to the copy", a.SkippedPerSecond)
	}
	if len(s.Replicas) > 0 {
		var lags []string
		for _, r := range s.Replicas {
			if r.LagSeconds == nil {
				lags = append(lags, r.Name+" ?")
			} else {
				lags = append(lags, r.Name+" "+status.Seconds(*r.LagSeconds))
			}
		}
		fmt.Fprintf(&b, " | lag %s", strings.Join(lags, ", "))
	}
	if s.Throttle.Throttled {
		fmt.Fprintf(&b, " | throttled: %s", s.Throttle.Reason)
	}
	if k := s.Checksum; k != nil && s.Phase == status.PhaseChecksum && !k.Done {
		pct := 0.0
		if k.RowsTotal > 0 {
			pct = min(100*float64(k.RowsCompared)/float64(k.RowsTotal), 99.9)
		}
		fmt.Fprintf(&b, " | checksum %.1f%% (%d/~%d rows), %.0f rows/s", pct, k.RowsCompared, k.RowsTotal, k.RowsPerSecond)
	}
	// The pacer paces the copy, and the checksum's first round.
	paced := s.Pace != nil && ((s.Phase == status.PhaseCopy && !s.Copy.Done) ||
		(s.Phase == status.PhaseChecksum && s.Checksum != nil && !s.Checksum.Done))
	if paced && s.Pace.AppIdle {
		b.WriteString(" | paced: application idle, full speed")
	} else if paced && s.Pace.Measuring {
		what := "copy"
		if s.Phase == status.PhaseChecksum {
			what = "checksum"
		}
		b.WriteString(" | paced: " + what + " held ~1s to measure the probe's baseline")
	} else if paced {
		fmt.Fprintf(&b, " | paced: duty %s (probe %s, %s before; chunks %s)", dutyText(s.Pace.Duty),
			time.Duration(s.Pace.CurrentSeconds*float64(time.Second)).Round(10*time.Microsecond),
			time.Duration(s.Pace.BaselineSeconds*float64(time.Second)).Round(10*time.Microsecond), s.Pace.ChunkTime)
	}
	if s.Phase == status.PhaseCopy && s.Copy.CappedAt > 0 {
		fmt.Fprintf(&b, " | capped: %.0f rows/s", s.Copy.CappedAt)
	}
	// Always the ETA: a number, or why there is none.
	b.WriteString(" | " + status.ETALine(s.ETA))
	return b.String()
}

// Bar renders a one-line progress bar of the given width.
func Bar(s status.Snapshot, width int) string {
	filled := int(s.Copy.Percent / 100 * float64(width))
	filled = min(max(filled, 0), width)
	eta := s.ETA.Text
	if s.ETA.Seconds != nil {
		eta = status.Seconds(*s.ETA.Seconds)
	}
	state := fmt.Sprintf("%.0f rows/s", s.Copy.RowsPerSecond)
	if s.Throttle.Throttled {
		state = "throttled: " + s.Throttle.Reason
	}
	line := fmt.Sprintf("[%s%s] %5.1f%% %s | backlog %d | %s | ETA %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), s.Copy.Percent, s.Phase, s.Apply.BacklogEvents, state, eta)
	if len(line) > 160 {
		line = line[:157] + "..."
	}
	return line
}

// Terminal writes to a terminal: what is written (log and progress lines)
// goes above a progress bar kept on the last line.
type Terminal struct {
	mu  sync.Mutex
	w   io.Writer
	bar string
}

// NewTerminal returns a Terminal writing to w.
func NewTerminal(w io.Writer) *Terminal { return &Terminal{w: w} }

// IsTerminal reports whether f is a terminal (a character device).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Write writes p above the bar.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bar != "" {
		if _, err := io.WriteString(t.w, "\r\x1b[K"); err != nil {
			return 0, err
		}
	}
	n, err := t.w.Write(p)
	if err == nil && t.bar != "" {
		_, err = io.WriteString(t.w, t.bar)
	}
	return n, err
}

// SetBar replaces the bar ("" removes it).
func (t *Terminal) SetBar(bar string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bar == t.bar {
		return
	}
	_, _ = io.WriteString(t.w, "\r\x1b[K"+bar) // cosmetic: Write reports a broken terminal
	t.bar = bar
}

// dutyText is a duty as the progress line shows it: a whole percentage,
// with one decimal below 10 % (the pacer's floor is 0.4 %).
func dutyText(d float64) string {
	if p := 100 * d; p < 9.95 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", 100*d)
}
