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

// The median columns are the medians of the same seconds as the means: one
// slow second in the baseline moves the mean, not the median.
func TestComputeSysbenchMedians(t *testing.T) {
	sb := &sysbenchLog{}
	// seconds 1-5 warm-up (left out), 6-15 baseline with one 200 ms
	// second, 16-20 during the alter
	for s := 1; s <= 20; s++ {
		p99 := 2.0
		switch {
		case s <= warmupS:
			p99 = 50
		case s == 10:
			p99 = 200
		case s > 15:
			p99 = float64(s - 11) // 5..9
		}
		sb.seconds = append(sb.seconds, sbSecond{sec: s, tps: 100, p99: p99})
	}
	var r runResult
	const start = int64(1_000_000)
	r.computeSysbench(sb, start, start+15_000, start+20_000)
	if r.baseSecs != 10 || r.durSecs != 5 {
		t.Fatalf("windows: %d baseline and %d alter seconds, want 10 and 5", r.baseSecs, r.durSecs)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"baseline mean", r.baseP99, (9*2.0 + 200) / 10},
		{"baseline median", r.baseP99Med, 2},
		{"alter mean", r.durP99, 7},
		{"alter median", r.durP99Med, 7},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	dir := t.TempDir()
	// a tool left out adds its own row to the light table
	if err := os.WriteFile(filepath.Join(dir, "not-run.env"), []byte("ptosc=not run here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := render(dir, []*runResult{{load: "light", tool: "recast", rep: 1, ok: true, done: true, wall: 5, rate: 100,
		baseP99: r.baseP99, durP99: r.durP99, baseP99Med: r.baseP99Med, durP99Med: r.durP99Med, durSecs: 5,
		deadlocks: "0", lockTimeouts: "0", rowLockWaits: "0"}}, "")
	if !strings.Contains(out, "| 2.0 → 7.0 (3.5×) |") {
		t.Errorf("the light table lacks the median cell:\n%s", out)
	}
	if !strings.Contains(out, "| not run here | – |") {
		t.Errorf("the light table lacks the left-out tool's row:\n%s", out)
	}
	// every row of the light table has as many cells as its header
	_, light, ok := strings.Cut(out, "### light load")
	if !ok {
		t.Fatalf("no light table:\n%s", out)
	}
	var header int
	for _, line := range strings.Split(light, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if header == 0 {
			header = strings.Count(line, "|")
		} else if n := strings.Count(line, "|"); n != header {
			t.Errorf("%d cells, the header %d: %s", n-1, header-1, line)
		}
	}
}
