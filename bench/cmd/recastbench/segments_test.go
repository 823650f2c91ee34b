package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseRecastText is parseRecast on a tool.log holding text.
func parseRecastText(t *testing.T, text string) *recastLog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool.log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := parseRecast(path)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestComputeSegments: a lock-free copy whose applier left everything to
// the copy for 10 s and then applied nearly everything for 10 s, then a
// checksum; sysbench's p99 differs in each part, and the table shows each
// part's own figures against the run's baseline.
func TestComputeSegments(t *testing.T) {
	var b strings.Builder
	b.WriteString("time=2026-11-27T22:23:00.555Z level=INFO msg=\"lock-free copy: chunks read without row locks; changes to a chunk's range wait for it\"\n")
	for i := 1; i <= 20; i++ {
		rate, applied, left, duty := 2000, 0, 1000, "1.0"
		if i > 10 {
			rate, applied, left, duty = 500, 1100, 50, "0.4"
		}
		fmt.Fprintf(&b, "recast: %ds [copy] copy %.1f%% (%d/~100000 rows, chunk 10), %d rows/s | apply %d ev/s vs in %d ev/s, backlog 0 ev (0 B, caught up), %d ev/s left to the copy | lag 127.0.0.1:14307 0s | paced: duty %s%% (probe 1ms, 1ms before; chunks 10ms) | ETA 1m (copy 1m, then checksum and cut-over)\n",
			i, float64(i), i*1000, rate, applied, applied, left, duty)
	}
	b.WriteString("recast: 21s [checksum] copy done (100000 rows) | apply 1100 ev/s vs in 1100 ev/s, backlog 0 ev (0 B, caught up) | lag 127.0.0.1:14307 0s | ETA unknown: checksum running (no estimate), then cut-over\n")
	rc := parseRecastText(t, b.String())
	if len(rc.points) != 20 || rc.points[0].duty != 0.01 || rc.points[19].duty != 0.004 {
		t.Fatalf("points: %+v", rc.points)
	}
	if sw := rc.applierSwitch(); sw != 10 {
		t.Errorf("switch at %v s, want 10 (the line at 11 s reports on (10, 11])", sw)
	}

	// sysbench starts 65 s before the tool: its second n covers the tool's
	// (n-66, n-65]. p99 2 ms before, 3 while the copy had the changes, 8
	// once the applier applied them, 5 after the copy.
	const a0 = int64(1_000_000_000)
	sb := &sysbenchLog{}
	for n := 1; n <= 90; n++ {
		p99 := 2.0
		switch rel := n - 65; {
		case rel > 20:
			p99 = 5
		case rel > 10:
			p99 = 8
		case rel > 0:
			p99 = 3
		}
		sb.seconds = append(sb.seconds, sbSecond{sec: n, tps: 300, p99: p99})
	}
	r := &runResult{load: "light", tool: "recast", ok: true, wall: 22, rc: rc}
	r.computeSysbench(sb, a0-65_000, a0, a0+22_000)
	r.computeSegments(sb, a0-65_000, a0)
	if len(r.segments) != 3 {
		t.Fatalf("segments: %+v", r.segments)
	}
	for i, want := range []struct {
		from, to  float64
		secs      int
		p99, rate float64
	}{{0, 10, 10, 3, 2000}, {10, 20, 10, 8, 500}, {20, 22, 2, 5, 0}} {
		s := r.segments[i]
		if s.from != want.from || s.to != want.to || s.secs != want.secs || s.p99Mean != want.p99 || s.p99Med != want.p99 || s.copyRate != want.rate {
			t.Errorf("segment %d (%s): %+v, want %+v", i, s.name, s, want)
		}
	}

	var out strings.Builder
	renderSegments(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, []*runResult{r})
	for _, want := range []string{
		"| light | recast | copy, changes mostly left to the copy | 10 | 2000 | 0 | 1000 | 1.0 % | 3.0 (1.5×) | 3.0 (1.5×) |",
		"| light | recast | copy, changes mostly applied | 10 | 500 | 1100 | 50 | 0.4 % | 8.0 (4.0×) | 8.0 (4.0×) |",
		"| light | recast | after the copy | 2 | – | – | – | – | 5.0 (2.5×) | 5.0 (2.5×) |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}

	// A run without progress lines (an older recast, a native ALTER) has
	// no parts, and the table is left out.
	r2 := &runResult{load: "light", tool: "recast-share", ok: true, wall: 22, rc: &recastLog{}}
	r2.computeSegments(sb, a0-65_000, a0)
	out.Reset()
	renderSegments(func(f string, a ...any) { fmt.Fprintf(&out, f, a...) }, []*runResult{r2})
	if len(r2.segments) != 0 || out.Len() != 0 {
		t.Errorf("no progress lines: %+v, %q", r2.segments, out.String())
	}
}
