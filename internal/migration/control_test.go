package migration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/status"
)

// etaControl is a Control in the given phase with a copier and an applier
// that never touch a server, and the given readings (one a second).
func etaControl(t *testing.T, phase string, estimate int64, readings []status.Reading) *Control {
	t.Helper()
	cp, err := copier.New(nil, copier.Config{KeyColumns: []string{"id"}, SourceColumns: []string{"id"}, GhostColumns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := pipeline.New(nil, pipeline.Config{Ghost: "g", SourceColumns: []int{0}, GhostColumns: []string{"id"}, KeySource: []int{0}, KeyGhost: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewControl()
	c.init(Options{Database: "d", Table: "t", Alter: "FORCE", Threads: 2, ChunkTime: time.Second, MaxChunkRows: 10, MaxLag: time.Second})
	c.phase, c.cp, c.ap, c.pump, c.estimate = phase, cp, ap, pipeline.NewPump(nil, ap, nil), estimate
	for _, r := range readings {
		c.meter.Add(r)
	}
	return c
}

// series returns n one-second readings: rows copied and binlog end/applied
// offsets growing at the given rates per second from the given starts.
func series(n int, rowsPerSec, endStart, endPerSec, appliedStart, appliedPerSec int64) []status.Reading {
	t0 := time.Now().Add(-time.Duration(n) * time.Second)
	var out []status.Reading
	for i := int64(0); i < int64(n); i++ {
		out = append(out, status.Reading{At: t0.Add(time.Duration(i) * time.Second), Rows: i * rowsPerSec, Phase: status.PhaseCopy,
			EndBytes: endStart + i*endPerSec, AppliedBytes: appliedStart + i*appliedPerSec})
	}
	return out
}

// TestControlStatusETA: the Control's snapshot carries the meter's rates
// and estimate (status/meter_test.go tests the estimate itself), and every
// progress line shows the ETA: a number, or "unknown" with the reason.
func TestControlStatusETA(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		phase    string
		readings []status.Reading
		backlog  string
		lineHas  string
	}{
		{status.PhaseCopy, series(6, 1000, 0, 100<<10, 0, 100<<10), "caught up", "ETA 1m40s (copy 1m40s, then checksum"},
		{status.PhaseCopy, series(6, 1000, 10*mib, 300<<10, 0, 200<<10), "not draining", "ETA unknown: backlog not draining"},
		{status.PhaseCopy, series(1, 0, 0, 0, 0, 0), "caught up", "ETA unknown: measuring"},
		{status.PhaseCatchUp, series(6, 0, 10*mib, 0, 0, mib), "draining", "ETA 5s (backlog 5s"},
		{status.PhaseChecksum, nil, "caught up", "ETA unknown: checksum running"},
	} {
		s := etaControl(t, c.phase, 100_000, c.readings).Status()
		line := Line(s)
		if s.Apply.Backlog != c.backlog || !strings.Contains(line, "["+c.phase+"]") || !strings.Contains(line, c.lineHas) {
			t.Errorf("backlog %q, want %q; progress line %q lacks %q", s.Apply.Backlog, c.backlog, line, c.lineHas)
		}
	}
	// Changes left to the copy (pipeline.Deferrer.SkipUncopied) are not in
	// the incoming rate: the line and the status give their own rate.
	left := series(6, 1000, 0, 0, 0, 0)
	for i := range left {
		left[i].Received, left[i].Skipped = int64(i)*40, int64(i)*300
	}
	if s := etaControl(t, status.PhaseCopy, 100_000, left).Status(); s.Apply.SkippedPerSecond < 299 || s.Apply.SkippedPerSecond > 301 ||
		s.Apply.IncomingPerSecond < 39 || s.Apply.IncomingPerSecond > 41 || !strings.Contains(Line(s), "), 300 ev/s left to the copy |") ||
		!strings.Contains(s.Text(), "; 300 events/s left to the copy") {
		t.Errorf("changes left to the copy: %+v\n%s\n%s", s.Apply, Line(s), s.Text())
	}
	if s := etaControl(t, status.PhaseCopy, 100_000, series(6, 1000, 0, 0, 0, 0)).Status(); strings.Contains(Line(s), "left to the copy") || strings.Contains(s.Text(), "left to the copy") {
		t.Errorf("nothing left to the copy, yet a rate: %s\n%s", Line(s), s.Text())
	}
	// The copy paused: no number, the reason instead.
	ctl := etaControl(t, status.PhaseCopy, 100_000, series(6, 1000, 0, 0, 0, 0))
	ctl.paused = true
	if s := ctl.Status(); s.ETA.Seconds != nil || !strings.Contains(Line(s), "ETA unknown: the copy is paused (paused by operator)") || !s.Throttle.Throttled {
		t.Errorf("paused: %+v %+v", s.ETA, s.Throttle)
	}
	// The checksum: its rows compared and rate on the line, and an ETA from them.
	sum := series(12, 0, 0, 0, 0, 0)
	for i := range sum {
		sum[i].Rows, sum[i].Phase, sum[i].Checked = 100_000, status.PhaseChecksum, int64(i)*2000
	}
	ctl = etaControl(t, status.PhaseChecksum, 100_000, sum)
	ctl.checksumProgress(22_000, false)
	ctl.copiedBefore = 100_000 // the copier here copied nothing
	if s := ctl.Status(); s.Checksum == nil || !strings.Contains(Line(s), "| checksum 22.0% (22000/~100000 rows), 2000 rows/s |") ||
		!strings.Contains(Line(s), "ETA 39s (checksum 39s, then cut-over)") || !strings.Contains(s.Text(), "checksum:  22000/~100000 rows, 2000 rows/s\n") {
		t.Errorf("checksum: %+v\n%s\n%s", s.Checksum, Line(s), s.Text())
	}
	ctl.checksumProgress(100_000, true)
	if s := ctl.Status(); s.ETA.Seconds != nil || strings.Contains(Line(s), "| checksum ") {
		t.Errorf("checksum's first round over: %+v\n%s", s.ETA, Line(s))
	}
	// History: one point per reading, rates between them.
	h := etaControl(t, status.PhaseCopy, 100_000, series(4, 1000, 0, 0, 0, 0)).History()
	if len(h) != 4 || h[3].CopyRate < 999 || h[3].CopyRate > 1001 || h[3].Percent != 3 {
		t.Errorf("history: %+v", h)
	}
}

// TestControlRegime: a setting changed live that changes the copy's pace
// changes the regime its readings carry, so that the ETA's mean copy rate
// (status.Rates.CopyAvg) starts again.
func TestControlRegime(t *testing.T) {
	ctl := etaControl(t, status.PhaseCopy, 1000, nil)
	regime := func() string {
		ctl.mu.Lock()
		defer ctl.mu.Unlock()
		return ctl.regime()
	}
	seen := map[string]string{"start": regime()}
	for _, kv := range [][2]string{{"threads", "3"}, {"nice-ratio", "1.5"}, {"max-copy-rate", "500"}} {
		if err := ctl.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("%s=%s: %v", kv[0], kv[1], err)
		}
		r := regime()
		for k, v := range seen {
			if v == r {
				t.Errorf("after %s=%s the regime %q is the same as after %s", kv[0], kv[1], r, k)
			}
		}
		seen[kv[0]] = r
	}
	if r := regime(); r != seen["max-copy-rate"] {
		t.Errorf("regime %q changed with nothing set (was %q)", r, seen["max-copy-rate"])
	}
}

func TestControlSettings(t *testing.T) {
	ctl := etaControl(t, status.PhaseCopy, 1000, nil)
	for _, kv := range [][2]string{{"threads", "3"}, {"chunk-time", "50ms"}, {"max-chunk-rows", "700"}, {"max-lag", "2s"},
		{"max-load", "Threads_running=30"}, {"critical-load", "Threads_running=90"}, {"nice-ratio", "1.5"}} {
		if err := ctl.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
	st := ctl.Status().Settings
	if st.Threads != 3 || st.ChunkTime != "50ms" || st.MaxChunkRows != 700 || st.MaxLag != "2s" ||
		st.MaxLoad != "Threads_running=30" || st.CriticalLoad != "Threads_running=90" || st.NiceRatio != 1.5 {
		t.Fatalf("settings: %+v", st)
	}
	threads, chunkTime, minRows, maxRows := ctl.cp.Settings()
	if threads != 3 || chunkTime != 50*time.Millisecond || minRows != 100 || maxRows != 700 {
		t.Fatalf("copier settings: %d %s %d %d", threads, chunkTime, minRows, maxRows)
	}
	for _, bad := range [][2]string{{"threads", "0"}, {"threads", "65"}, {"chunk-time", "fast"}, {"chunk-time", "0s"},
		{"max-chunk-rows", "-1"}, {"max-lag", "-1s"}, {"max-load", "Threads_running"}, {"nosuch", "1"},
		{"nice-ratio", "-1"}, {"nice-ratio", "101"}, {"nice-ratio", "slow"}} {
		if err := ctl.Set(bad[0], bad[1]); err == nil {
			t.Errorf("%s=%s accepted", bad[0], bad[1])
		}
	}
	if err := ctl.Unpostpone(); err == nil || !strings.Contains(err.Error(), "not postponed") {
		t.Errorf("unpostpone without a flag file: %v", err)
	}
	ctl.phase = status.PhaseDone
	if err := ctl.Pause(); err == nil {
		t.Error("pause after the end accepted")
	}
}

// TestNiceRatio (--nice-ratio): after a chunk that took d the copy thread
// sleeps ratio × d (never less: timers do not fire early), nothing at 0,
// and an abort ends the sleep.
func TestNiceRatio(t *testing.T) {
	ctl := etaControl(t, status.PhaseCopy, 1000, nil)
	ctx := context.Background()
	if err := ctl.Set("nice-ratio", "2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ctl.pace(ctx, 40*time.Millisecond, 100); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Errorf("slept %s after a 40ms chunk at nice-ratio 2", d)
	}
	if got := niceSleep(40*time.Millisecond, 0); got != 0 {
		t.Errorf("nice-ratio 0 sleeps %s", got)
	}
	if got := niceSleep(40*time.Millisecond, 0.5); got != 20*time.Millisecond {
		t.Errorf("nice-ratio 0.5 sleeps %s after 40ms", got)
	}
	if err := ctl.Set("nice-ratio", "100"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := ctl.pace(cctx, time.Second, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled sleep returned %v", err)
	}
}

// TestMaxCopyRateSetting (--max-copy-rate, live): out-of-range values are refused;
// with a cap (and no pacer: always applied) a chunk of n rows is followed by
// a sleep until n/rate has passed since it started, the copy runs short
// chunks, and the status shows the cap; 0 lifts it.
func TestMaxCopyRateSetting(t *testing.T) {
	ctl := etaControl(t, status.PhaseCopy, 1000, nil)
	ctx := context.Background()
	for _, bad := range []string{"5", "-1", "x", "2e9"} {
		if err := ctl.Set("max-copy-rate", bad); err == nil {
			t.Errorf("max-copy-rate=%s accepted", bad)
		}
	}
	if ctl.rateCapped() {
		t.Fatal("capped before any max-copy-rate was set")
	}
	if err := ctl.Set("max-copy-rate", "1000"); err != nil {
		t.Fatal(err)
	}
	if !ctl.rateCapped() {
		t.Fatal("max-copy-rate=1000 without a pacer does not cap the copy")
	}
	if got := ctl.copyChunkTime; got != PacedChunkTime {
		t.Errorf("capped copy's chunk time %s, want %s", got, PacedChunkTime)
	}
	if got := ctl.Status().Settings.MaxCopyRate; got != 1000 {
		t.Errorf("status max_copy_rate %g, want 1000", got)
	}
	start := time.Now()
	if err := ctl.pace(ctx, 10*time.Millisecond, 300); err != nil {
		t.Fatal(err)
	}
	// 300 rows at 1,000/s: 300 ms from the chunk's start, 10 ms before the
	// call (timers do not fire early).
	if d := time.Since(start); d < 290*time.Millisecond {
		t.Errorf("slept %s after a 10ms chunk of 300 rows at 1000 rows/s, want at least 290ms", d)
	}
	if err := ctl.Set("max-copy-rate", "0"); err != nil {
		t.Fatal(err)
	}
	if ctl.rateCapped() {
		t.Error("max-copy-rate=0 still caps the copy")
	}
	if got := ctl.copyChunkTime; got != time.Second {
		t.Errorf("uncapped copy's chunk time %s, want --chunk-time's 1s", got)
	}
}

func TestTerminalBar(t *testing.T) {
	var b bytes.Buffer
	term := NewTerminal(&b)
	term.SetBar("[##..] 50%")
	term.Write([]byte("log line\n"))
	term.SetBar("")
	want := "\r\x1b[K[##..] 50%" + "\r\x1b[Klog line\n[##..] 50%" + "\r\x1b[K"
	if got := b.String(); got != want {
		t.Errorf("terminal output %q, want %q", got, want)
	}
	s := etaControl(t, status.PhaseCopy, 1000, nil).Status()
	s.Copy.Percent = 50
	if bar := Bar(s, 10); !strings.HasPrefix(bar, "[#####.....]  50.0% copy") {
		t.Errorf("bar %q", bar)
	}
}

// TestDutyText: the progress line's duty keeps a decimal below 10 %, where
// the pacer's floor (0.4 %) would otherwise read 0 %.
func TestDutyText(t *testing.T) {
	for d, want := range map[float64]string{0.004: "0.4%", 0.02: "2.0%", 0.0999: "10%", 0.35: "35%", 1: "100%"} {
		if got := dutyText(d); got != want {
			t.Errorf("dutyText(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestFloorPause: --min-copy-rate's longest pause keeps threads × rows a
// chunk per period at the floor.
func TestFloorPause(t *testing.T) {
	for _, c := range []struct {
		rows    int64
		took    time.Duration
		threads int
		floor   float64
		want    time.Duration
	}{
		{100, 10 * time.Millisecond, 2, 1000, 190 * time.Millisecond}, // 2 × 100 rows per 200 ms
		{100, 10 * time.Millisecond, 1, 1000, 90 * time.Millisecond},
		{5000, 10 * time.Millisecond, 4, 1000, 20*time.Second - 10*time.Millisecond},
		{100, 300 * time.Millisecond, 2, 1000, 0}, // the chunk alone took longer
		{0, 10 * time.Millisecond, 2, 1000, 0},    // a chunk of no rows counts as one
	} {
		if got := floorPause(c.rows, c.took, c.threads, c.floor); got < c.want-time.Millisecond || got > c.want+time.Millisecond {
			t.Errorf("floorPause(%d rows, %s, %d threads, %g/s) = %s, want %s", c.rows, c.took, c.threads, c.floor, got, c.want)
		}
	}
}

// TestMinCopyRateSetting: min-copy-rate is set live, checked, and shown.
func TestMinCopyRateSetting(t *testing.T) {
	ctl := etaControl(t, status.PhaseCopy, 1000, nil)
	for _, bad := range []string{"-1", "x", "2e9"} {
		if err := ctl.Set("min-copy-rate", bad); err == nil {
			t.Errorf("min-copy-rate=%s accepted", bad)
		}
	}
	if err := ctl.Set("min-copy-rate", "250"); err != nil {
		t.Fatal(err)
	}
	if got := ctl.Status().Settings.MinCopyRate; got != 250 {
		t.Errorf("status min_copy_rate %g, want 250", got)
	}
	if err := ctl.Set("min-copy-rate", "0"); err != nil {
		t.Fatal(err)
	}
}
