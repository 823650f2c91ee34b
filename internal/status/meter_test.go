package status

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// series returns n one-second readings: rows copied and binlog end/applied
// offsets growing at the given rates per second from the given starts.
func series(n int, rowsPerSec, endStart, endPerSec, appliedStart, appliedPerSec int64) []Reading {
	t0 := time.Now().Add(-time.Duration(n) * time.Second)
	var out []Reading
	for i := int64(0); i < int64(n); i++ {
		out = append(out, Reading{At: t0.Add(time.Duration(i) * time.Second), Rows: i * rowsPerSec, Phase: PhaseCopy,
			EndBytes: endStart + i*endPerSec, AppliedBytes: appliedStart + i*appliedPerSec})
	}
	return out
}

// estimate builds what a running migration's snapshot holds from the
// readings (as package migration's Control does) and estimates.
func estimate(phase string, rows int64, readings []Reading, throttle Throttle) Snapshot {
	var m Meter
	for _, r := range readings {
		m.Add(r)
	}
	r := m.Rates()
	s := Snapshot{Phase: phase, Throttle: throttle}
	s.Copy.RowsEstimated = rows
	s.Apply.BacklogBytes = -1
	if last, ok := m.Last(); ok {
		s.Copy.RowsCopied = last.Rows
		s.Apply.BacklogEvents = max(last.Received-last.Applied, 0)
		if last.EndBytes >= 0 && last.AppliedBytes >= 0 {
			s.Apply.BacklogBytes = max(last.EndBytes-last.AppliedBytes, 0)
		}
	}
	backlog, drain := Backlog(&s, r, true)
	s.Apply.Backlog = backlog
	s.ETA = Estimate(&s, r, backlog, drain, "")
	return s
}

func TestETA(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name     string
		phase    string
		readings []Reading
		backlog  string
		seconds  float64 // -1: no number
		textHas  string
	}{
		{name: "copy, caught up", phase: PhaseCopy, readings: series(6, 1000, 0, 100<<10, 0, 100<<10),
			// 100 000 rows, 5 000 copied, 1 000/s
			backlog: "caught up", seconds: 95, textHas: "copy 1m35s, then checksum"},
		{name: "copy, draining backlog", phase: PhaseCopy, readings: series(6, 1000, 10*mib, 100<<10, 0, 100<<10+mib),
			// backlog 10 MiB + 5*100KiB - 5*(100KiB+1MiB) = 5 MiB, gaining 1 MiB/s
			backlog: "draining", seconds: 100, textHas: "copy 1m35s + backlog 5s"},
		{name: "backlog not draining", phase: PhaseCopy, readings: series(6, 1000, 10*mib, 300<<10, 0, 200<<10),
			backlog: "not draining", seconds: -1, textHas: "backlog not draining"},
		{name: "no progress yet", phase: PhaseCopy, readings: series(1, 0, 0, 0, 0, 0),
			backlog: "caught up", seconds: -1, textHas: "measuring"},
		{name: "catch-up draining", phase: PhaseCatchUp, readings: series(6, 0, 10*mib, 0, 0, mib),
			backlog: "draining", seconds: 5, textHas: "backlog 5s"},
		{name: "catch-up, stuck", phase: PhaseCatchUp, readings: series(6, 0, 10*mib, mib, 0, mib),
			backlog: "not draining", seconds: -1, textHas: "backlog not draining"},
		{name: "checksum", phase: PhaseChecksum, readings: series(3, 0, 0, 0, 0, 0),
			backlog: "caught up", seconds: -1, textHas: "checksum running"},
		{name: "inspect", phase: PhaseInspect, backlog: "caught up", seconds: -1, textHas: "inspecting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := estimate(c.phase, 100_000, c.readings, Throttle{})
			if s.Apply.Backlog != c.backlog {
				t.Errorf("backlog %q, want %q (%s of binlog)", s.Apply.Backlog, c.backlog, Bytes(s.Apply.BacklogBytes))
			}
			switch {
			case c.seconds < 0 && s.ETA.Seconds != nil:
				t.Errorf("ETA %.1fs, want none (%s)", *s.ETA.Seconds, s.ETA.Text)
			case c.seconds >= 0 && s.ETA.Seconds == nil:
				t.Errorf("no ETA (%s), want %.0fs", s.ETA.Text, c.seconds)
			case c.seconds >= 0 && (*s.ETA.Seconds < c.seconds-1 || *s.ETA.Seconds > c.seconds+1):
				t.Errorf("ETA %.1fs, want %.0fs", *s.ETA.Seconds, c.seconds)
			}
			if !strings.Contains(s.ETA.Text, c.textHas) {
				t.Errorf("ETA text %q lacks %q", s.ETA.Text, c.textHas)
			}
			// On a progress line: a number, or "unknown" with the reason.
			line := ETALine(s.ETA)
			if c.seconds < 0 && line != "ETA unknown: "+s.ETA.Text {
				t.Errorf("progress ETA %q", line)
			}
			if c.seconds >= 0 && !strings.HasPrefix(line, "ETA "+Seconds(*s.ETA.Seconds)) {
				t.Errorf("progress ETA %q", line)
			}
		})
	}
	// The copy throttled: no number, the reason instead.
	s := estimate(PhaseCopy, 100_000, series(6, 1000, 0, 0, 0, 0), Throttle{Throttled: true, Reason: "paused by operator"})
	if s.ETA.Seconds != nil || !strings.Contains(ETALine(s.ETA), "ETA unknown: the copy is paused (paused by operator)") {
		t.Errorf("throttled: %+v", s.ETA)
	}
	if got := ETALine(ETA{}); got != "ETA unknown: measuring" {
		t.Errorf("empty ETA: %q", got)
	}
}

// TestETAThrottled: while the copy is throttled the applier is slowed on
// purpose, so a backlog that does not drain is not the reason given: the
// pause is (the throttled live-control test met it under load).
func TestETAThrottled(t *testing.T) {
	const mib = 1 << 20
	s := estimate(PhaseCopy, 100_000, series(6, 0, 10*mib, 300<<10, 0, 0), Throttle{Throttled: true, Reason: "paused by operator", Paused: true})
	if s.Apply.Backlog != "not draining" {
		t.Fatalf("backlog %q, want not draining", s.Apply.Backlog)
	}
	if s.ETA.Seconds != nil || !strings.Contains(s.ETA.Text, "paused by operator") {
		t.Errorf("ETA %q (seconds %v), want the pause as the reason", s.ETA.Text, s.ETA.Seconds)
	}
	s = estimate(PhaseCatchUp, 100_000, series(6, 0, 10*mib, mib, 0, mib), Throttle{Throttled: true, Reason: "replica lag"})
	if !strings.Contains(s.ETA.Text, "backlog not draining") {
		t.Errorf("catch-up ETA %q: the copy's pause must not hide a stuck catch-up", s.ETA.Text)
	}
}

func TestMeterRatesAndHistory(t *testing.T) {
	var m Meter
	if r := m.Rates(); r.Copy != 0 || r.BinlogIn != -1 {
		t.Errorf("rates of no readings: %+v", r)
	}
	for _, r := range series(10, 1000, 0, 2048, 0, 1024) {
		r.Received, r.Applied, r.Skipped = r.Rows*2, r.Rows, r.Rows*3
		m.Add(r)
	}
	r := m.Rates()
	if r.Copy < 999 || r.Copy > 1001 || r.Incoming < 1999 || r.Incoming > 2001 || r.Skipped < 2999 || r.Skipped > 3001 || r.BinlogIn < 2047 || r.BinlogIn > 2049 || r.BinlogApplied < 1023 || r.BinlogApplied > 1025 {
		t.Errorf("rates: %+v", r)
	}
	h := m.History(func(rows int64, _ string) float64 { return float64(rows) / 100 })
	if len(h) != 10 || h[9].CopyRate < 999 || h[9].CopyRate > 1001 || h[9].Percent != 90 || h[9].BacklogEvents != 9000 || h[0].CopyRate != 0 {
		t.Errorf("history: %+v", h[9])
	}
	// The history is bounded.
	t0 := time.Now()
	for i := range HistoryLen + 50 {
		m.Add(Reading{At: t0.Add(time.Duration(i) * time.Second)})
	}
	if n := len(m.History(func(int64, string) float64 { return 0 })); n != HistoryLen {
		t.Errorf("history of %d readings", n)
	}
}

// paced returns one-second copy readings of the given regime whose rows
// grow at rates[i] in second i, from rows0 at t0.
func paced(t0 time.Time, rows0 int64, regime string, rates []int64) []Reading {
	out := make([]Reading, 0, len(rates))
	rows := rows0
	for i, r := range rates {
		rows += r
		out = append(out, Reading{At: t0.Add(time.Duration(i+1) * time.Second), Rows: rows, Phase: PhaseCopy,
			EndBytes: -1, AppliedBytes: -1, Regime: regime})
	}
	return out
}

// TestETACopyAverage: a paced copy's ETA comes from its rate over the last
// minute of its current regime, not from the last 5 s, which swing with
// the duty.
func TestETACopyAverage(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	eta := func(readings []Reading) (float64, string) {
		t.Helper()
		s := estimate(PhaseCopy, 1_000_000, readings, Throttle{})
		if s.ETA.Seconds == nil {
			t.Fatalf("no ETA: %s", s.ETA.Text)
		}
		return *s.ETA.Seconds, s.ETA.Text
	}
	// start: a copy's first reading, at t0, in a new slice.
	start := func(regime string) []Reading {
		return []Reading{{At: t0, Rows: 0, Phase: PhaseCopy, EndBytes: -1, AppliedBytes: -1, Regime: regime}}
	}

	// 60 s at 500 rows/s, then a burst of 10 s at 5,500: over the last
	// minute (ETAWindow) 80,000 rows, 1,333/s. From the last 5 s
	// (5,500/s) it would read 166 s, from the whole copy 753 s.
	rs := start("paced")
	rs = append(rs, paced(t0, 0, "paced", append(slices.Repeat([]int64{500}, 60), slices.Repeat([]int64{5500}, 10)...))...)
	want := float64(1_000_000-85_000) / (80_000.0 / 60)
	if got, text := eta(rs); got < want-2 || got > want+2 {
		t.Errorf("swinging paced copy: ETA %.0fs (%s), want %.0fs (the last minute's rate)", got, text, want)
	}

	// The same with the copy held for the last 5 s (the pacer measuring
	// its baseline again): a number from the last minute (55 s at 500
	// rows/s), not "measuring".
	rs = start("paced")
	rs = append(rs, paced(t0, 0, "paced", append(slices.Repeat([]int64{500}, 60), slices.Repeat([]int64{0}, 5)...))...)
	want = float64(1_000_000-30_000) / (27_500.0 / 60)
	if got, text := eta(rs); got < want-2 || got > want+2 {
		t.Errorf("held for 5 s: ETA %.0fs (%s), want %.0fs", got, text, want)
	}

	// A regime change (the application showed up: the copy went from full
	// speed to paced) restarts the average: 60 s at 50,000 rows/s, then
	// 20 s paced at 1,000.
	rs = start("full")
	rs = append(rs, paced(t0, 0, "full", slices.Repeat([]int64{50_000}, 60))...)
	rs = append(rs, paced(t0.Add(60*time.Second), 3_000_000, "paced", slices.Repeat([]int64{1000}, 20))...)
	s := estimate(PhaseCopy, 5_000_000, rs, Throttle{})
	want = float64(5_000_000-3_020_000) / 1000
	if s.ETA.Seconds == nil || *s.ETA.Seconds < want-2 || *s.ETA.Seconds > want+2 {
		t.Errorf("after a regime change: ETA %v (%s), want %.0fs (the new regime's rate)", s.ETA.Seconds, s.ETA.Text, want)
	}

	// Less than RateWindow into a new regime: the last 5 s's rate (2 s at
	// 50,000 rows/s and 3 at 1,000: 20,600).
	rs = start("full")
	rs = append(rs, paced(t0, 0, "full", slices.Repeat([]int64{50_000}, 60))...)
	rs = append(rs, paced(t0.Add(60*time.Second), 3_000_000, "paced", slices.Repeat([]int64{1000}, 3))...)
	var m Meter
	for _, r := range rs {
		m.Add(r)
	}
	if r := m.Rates(); r.CopyAvg != 0 || r.Copy < 20_599 || r.Copy > 20_601 {
		t.Errorf("3 s into a regime: %+v, want no average and the 5 s rate", r)
	}
}

// TestChecksumETA: in the checksum phase the estimate is the rows left to
// compare at the rate of the checksum's readings (not the copy's); none
// while that rate is not measured yet, nor once the first round is over.
func TestChecksumETA(t *testing.T) {
	t0 := time.Now().Add(-30 * time.Second)
	var readings []Reading
	for i := range 30 {
		r := Reading{At: t0.Add(time.Duration(i) * time.Second), Rows: 1_000_000, Phase: PhaseCopy, EndBytes: -1, AppliedBytes: -1}
		if i >= 10 {
			r.Phase, r.Checked = PhaseChecksum, int64(i-10)*5000
		}
		readings = append(readings, r)
	}
	check := func(name string, readings []Reading, sum *Checksum, want float64, textHas string) {
		t.Helper()
		var m Meter
		for _, r := range readings {
			m.Add(r)
		}
		r := m.Rates()
		s := Snapshot{Phase: PhaseChecksum, Copy: Copy{RowsCopied: 1_000_000, Done: true}, Checksum: sum}
		s.Apply.BacklogBytes = -1
		if sum != nil {
			s.Checksum.RowsPerSecond = r.Checked
		}
		e := Estimate(&s, r, "caught up", 0, "")
		switch {
		case want < 0 && e.Seconds != nil:
			t.Errorf("%s: ETA %.1f s (%q), want none", name, *e.Seconds, e.Text)
		case want >= 0 && (e.Seconds == nil || *e.Seconds < want-1 || *e.Seconds > want+1):
			t.Errorf("%s: ETA %v (%q), want %.0f s", name, e.Seconds, e.Text, want)
		}
		if !strings.Contains(e.Text, textHas) {
			t.Errorf("%s: ETA text %q lacks %q", name, e.Text, textHas)
		}
	}
	last := readings[len(readings)-1].Checked // 95,000 rows at 5,000 a second
	check("measured", readings, &Checksum{RowsCompared: last, RowsTotal: 1_000_000}, float64(1_000_000-last)/5000, "checksum 3m")
	check("too few checksum readings", readings[:13], &Checksum{RowsCompared: readings[12].Checked, RowsTotal: 1_000_000}, -1, "measuring")
	check("not started", readings[:10], nil, -1, "measuring")
	check("first round over", readings, &Checksum{RowsCompared: 1_000_000, RowsTotal: 1_000_000, Done: true}, -1, "repairing or verifying")
}
