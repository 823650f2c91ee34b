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
	}
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
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "native") {
		t.Errorf("a tool without runs is listed:\n%s", out)
	}
}
