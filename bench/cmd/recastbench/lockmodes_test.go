package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCopyLock(t *testing.T) {
	for _, c := range []struct{ log, want string }{
		{`time=2026-11-24T00:00:00Z level=INFO msg="lock-free copy: chunks read without row locks; changes to a chunk's range wait for it"`, "lock-free"},
		{`time=2026-11-24T00:00:00Z level=WARN msg="the copy locks the rows it reads (LOCK IN SHARE MODE)" reason=--copy-lock=share`, "share (--copy-lock=share)"},
		{`time=2026-11-24T00:00:00Z level=WARN msg="the copy locks the rows it reads (LOCK IN SHARE MODE)" reason="fallback: binlog_order_commits=OFF: commits may become visible out of binlog order"`,
			"share (fallback: binlog_order_commits=OFF: commits may become visible out of binlog order)"},
		{"recast: 1s [copy] copy 1.0% (10/~1000 rows, chunk 10), 10 rows/s | apply 0 ev/s vs in 0 ev/s, backlog 0 ev (0 B, caught up)", ""},
	} {
		path := filepath.Join(t.TempDir(), "tool.log")
		if err := os.WriteFile(path, []byte(c.log+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, err := parseRecast(path)
		if err != nil {
			t.Fatal(err)
		}
		if rc.copyLock != c.want {
			t.Errorf("%s: copy lock %q, want %q", c.log, rc.copyLock, c.want)
		}
	}
}

// TestParseLeftToCopy: the rate of changes left to the copy on each
// progress line (0 when a line names none) and the total of the "copy
// done" line; a log without that line has no total (-1).
func TestParseLeftToCopy(t *testing.T) {
	logs := []string{
		"recast: 1s [copy] copy 1.0% (10/~1000 rows, chunk 10), 10 rows/s | apply 5 ev/s vs in 5 ev/s, backlog 0 ev (0 B, caught up), 1200 ev/s left to the copy | paced: duty 1.0% | ETA 1m",
		"recast: 2s [copy] copy 2.0% (20/~1000 rows, chunk 10), 10 rows/s | apply 0 ev/s vs in 0 ev/s, backlog 0 ev (0 B, caught up), 600 ev/s left to the copy | throttled: replica lag 2s | ETA unknown",
		`time=2026-11-27T00:00:00Z level=INFO msg="copy done" rows=1000 changes_left_to_the_copy=1800`,
		"recast: 3s [catch-up] copy done (1000 rows) | apply 900 ev/s vs in 900 ev/s, backlog 0 ev (0 B, caught up) | ETA 1s",
	}
	path := filepath.Join(t.TempDir(), "tool.log")
	if err := os.WriteFile(path, []byte(strings.Join(logs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := parseRecast(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rc.leftRates); got != "[1200 600 0]" || rc.leftTotal != 1800 || fmt.Sprint(rc.inRates) != "[5 0 900]" || rc.throttledLines != 1 {
		t.Errorf("left rates %s, total %d, in %v, throttled lines %d", got, rc.leftTotal, rc.inRates, rc.throttledLines)
	}
	if err := os.WriteFile(path, []byte(logs[3]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rc, err = parseRecast(path); err != nil || rc.leftTotal != -1 {
		t.Errorf("no copy done line: total %d (%v), want -1", rc.leftTotal, err)
	}
}

func TestRenderLockModes(t *testing.T) {
	run := func(load, tool string, wall, base, dur, errs float64, dl, lt, lock string) *runResult {
		return &runResult{load: load, tool: tool, ok: true, wall: wall, baseP99: base, durP99: dur, durErrs: errs, durSecs: 10,
			deadlocks: dl, lockTimeouts: lt, rowLockWaits: "7", copyLock: lock}
	}
	runs := []*runResult{
		run("idle", "recast", 10, 0, 0, 0, "", "", "lock-free"),
		run("idle", "recast-share", 12, 0, 0, 0, "", "", "share (--copy-lock=share)"),
		run("idle", "ptosc", 30, 0, 0, 0, "", "", ""),
		run("light", "recast", 11, 2, 3, 0, "0", "0", "lock-free"),
		run("light", "recast-share", 13, 2, 40, 1, "1", "0", "share (--copy-lock=share)"),
		run("heavy", "recast", 15, 5, 20, 0, "0", "0", "lock-free"),
		run("light", "recast-capped", 60, 2.5, 4.5, 0, "0", "0", "lock-free"),
		run("heavy", "recast-capped", 1320, 5, 6, 0, "0", "0", "lock-free"),
	}
	runs[len(runs)-1].ok, runs[len(runs)-1].exit = false, 1 // stopped by the harness's time limit
	var b strings.Builder
	renderLockModes(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, runs, reportEnv{})
	out := b.String()
	for _, want := range []string{
		"| recast | lock-free | 10.0 | 2.0 → 3.0 (**1.5×**) | 0 | 0 / 0 / 7 | 5.0 → 20.0 (**4.0×**) | 0 | 0 / 0 / 7 |",
		"| recast `--copy-lock=share` | share (--copy-lock=share) | 12.0 | 2.0 → 40.0 (**20.0×**) | 1 | 1 / 0 / 7 | – | – | – |",
		"| pt-online-schema-change (sysbench PS on) | n/a | 30.0 |",
		"| light: lock-free p99 during ≤ 2× baseline | 3.0 ms vs 2.0 ms (1.5×) | **yes** |",
		"| heavy: lock-free p99 during ≤ 3× baseline | 20.0 ms vs 5.0 ms (4.0×) | **no** |",
		"| idle: lock-free wall ≤ locking copy's | 10.0 s vs 12.0 s (0.83×) | **yes** |",
		"| light: recast-capped p99 during ≤ 2× baseline | 4.5 ms vs 2.5 ms (1.8×) | **yes** |",
		"| light: recast-capped, no application deadlocks / lock-wait timeouts | 0 app errors (server, any session: 0 deadlocks / 0 timeouts) | **yes** |",
		"| light: lock-free, no application deadlocks / lock-wait timeouts | 0 app errors (server, any session: 0 deadlocks / 0 timeouts) | **yes** |",
		"| heavy: recast-capped p99 during ≤ 3× baseline | 6.0 ms vs 5.0 ms (1.2×) over the 1320 s it ran; **it did not finish** (exit 1) | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "heavy: recast-capped, no application") || strings.Contains(out, "(1.2×) | **yes** |") {
		t.Errorf("a run that did not finish decides a target:\n%s", out)
	}
	if strings.Contains(out, "native") {
		t.Errorf("a tool without runs is listed:\n%s", out)
	}
}

// TestParseETAError: the copy ETA's error against the time the copy then
// took, for recast's printed ETA and for one from the line's rows/s.
func TestParseETAError(t *testing.T) {
	var b strings.Builder
	// 100 s of copy at 1,000 rows/s of 100,000; the printed ETA is exact,
	// the line's rows/s twice the true rate (an ETA from it half as long).
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "recast: %ds [copy] copy %.1f%% (%d/~100000 rows, chunk 10), 2000 rows/s | apply 0 ev/s vs in 0 ev/s, backlog 0 ev (0 B, caught up) | paced: duty 1.0%% | ETA %ds (copy %ds, then checksum and cut-over)\n",
			i, float64(i), i*1000, 100-i, 100-i)
	}
	b.WriteString("recast: 101s [checksum] copy done (100000 rows) | apply 0 ev/s vs in 0 ev/s, backlog 0 ev (0 B, caught up) | ETA unknown: checksum running (no estimate), then cut-over\n")
	rc := parseRecastText(t, b.String())
	printed, last, n := rc.copyETAError(102)
	// The copy ends at 100 s (the checksum's first line, at 101 s, reports
	// on (100, 101]); lines from 30 s to 80 s (20 s or more left): 51.
	if n != 51 || printed < 0.999 || printed > 1.001 || last < 1.999 || last > 2.001 {
		t.Errorf("%d lines: printed ×%.3f (want 1), last 5 s ×%.3f (want 2)", n, printed, last)
	}
	// A run stopped during its copy (the harness's time limit) has no end
	// to measure against: nothing.
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	rc = parseRecastText(t, strings.Join(lines[:len(lines)-1], "\n")+"\n")
	if p, l, n := rc.copyETAError(102); p != 0 || l != 0 || n != 0 {
		t.Errorf("a copy that did not end: ×%v (×%v) over %d lines, want nothing", p, l, n)
	}
	if p, l, n := (&recastLog{}).etaError(100); p != 0 || l != 0 || n != 0 {
		t.Errorf("no lines: %v %v %d", p, l, n)
	}
}
