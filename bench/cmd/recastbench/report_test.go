package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tool the harness left out (pt-osc on MySQL) is named with its reason,
// not shown as a failed or empty run.
func TestRenderNotRun(t *testing.T) {
	dir := t.TempDir()
	const why = "not run on mysql-9.7: pt-online-schema-change 3.2.1 uses statements MySQL 8.4 removed"
	for name, body := range map[string]string{
		"machine.env": "server=9.7.4-2 (--flavor mysql-9.7)\n",
		"not-run.env": "ptosc=" + why + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok := func(load, tool string, wall, rate float64) *runResult {
		return &runResult{load: load, tool: tool, rep: 1, ok: true, done: true, wall: wall, rate: rate,
			baseP99: 2, durP99: 3, durSecs: 5, deadlocks: "0", lockTimeouts: "0", rowLockWaits: "0"}
	}
	runs := []*runResult{
		ok("idle", "native-copy", 8, 0),
		ok("idle", "recast", 10, 0),
		ok("light", "recast", 11, 100),
	}
	out := render(dir, runs, "")
	for _, want := range []string{
		"- pt-online-schema-change: " + why + "\n",
		"| pt-online-schema-change | – | " + why + " | – |",
		"| pt-online-schema-change (sysbench PS on) | " + why + " | – |",
		"| pt-online-schema-change (sysbench `--db-ps-mode=disable`) | " + why + " | – |",
		"| idle: recast ÷ pt-osc | " + why + " |",
		"| idle: recast wall ≤ 0.5 × pt-osc | " + why + " | n/a |",
		"INNODB_METRICS `lock_deadlocks`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"FAILED", "incomplete", "`Innodb_deadlocks`"} {
		if strings.Contains(out, bad) {
			t.Errorf("has %q:\n%s", bad, out)
		}
	}
}
