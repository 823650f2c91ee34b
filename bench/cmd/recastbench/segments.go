package main

import (
	"regexp"
	"strconv"
)

// Where the application's p99 went during a recast run under load. A
// lock-free copy leaves the changes to rows it has not copied yet to the
// copy (session 20), so its applier writes little at first and almost
// every change once the copy has passed the rows the application writes
// most (sysbench's hot rows are in the middle of the key range): the
// write load recast adds to the server changes halfway through the copy,
// and the pacer's budget with it. The report splits the run there.

// progPoint is one copy progress line: its elapsed second, the copy's
// rows/s, the table's changes the applier applied and left to the copy
// per second, and the pacer's duty (-1: the line shows none).
type progPoint struct {
	el, copyRate, applied, left, duty float64
}

var rcDutyRE = regexp.MustCompile(`\| paced: duty ([\d.]+)%`)

// parseDuty is the pacer's duty a progress line's tail shows, as a share
// (0.004 for "0.4%"); -1 when it shows none (not paced, or held).
func parseDuty(tail string) float64 {
	m := rcDutyRE.FindStringSubmatch(tail)
	if m == nil {
		return -1
	}
	d, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return d / 100
}

// applierSwitch is when the applier began to apply more of the table's
// changes than it left to the copy: the start of the interval the first
// such copy line reports on (elapsed seconds); -1 when no copy line did.
// A copy that leaves nothing to itself (the locking copy) switches at its
// first line with changes applied.
func (r *recastLog) applierSwitch() float64 {
	for _, p := range r.points {
		if p.applied > 0 && p.applied > p.left {
			return max(p.el-1, 0)
		}
	}
	return -1
}

// segment is one part of a recast run under load: its span in seconds
// since the tool started, the sysbench seconds whose middle falls in it
// (with a p99: sysbench answered), their p99's mean and median, and the
// means of the copy's progress lines in it (duty -1: none shown).
type segment struct {
	name              string
	from, to          float64
	secs              int
	p99Mean, p99Med   float64
	copyRate, applied float64
	left, duty        float64
	lines             int
}

// computeSegments splits a recast run under load into the copy while the
// applier left most changes to the copy, the copy once it applied most,
// and what followed the copy (checksum, cut-over); sbStart and a0 are the
// epoch ms of sysbench's start and the tool's.
func (r *runResult) computeSegments(sb *sysbenchLog, sbStart, a0 int64) {
	if r.rc == nil || len(r.rc.points) == 0 || a0 <= 0 || sbStart <= 0 {
		return
	}
	var copyFrom, copyTo float64 = -1, -1
	for _, s := range r.rc.phaseSeconds(r.wall) {
		if s.name == "copy" && copyFrom < 0 {
			copyFrom, copyTo = s.first, s.last
		}
	}
	if copyFrom < 0 {
		return
	}
	sw := r.rc.applierSwitch()
	if sw < 0 || sw > copyTo {
		sw = copyTo
	}
	sw = max(sw, copyFrom)
	r.segments = []segment{
		{name: "copy, changes mostly left to the copy", from: copyFrom, to: sw},
		{name: "copy, changes mostly applied", from: sw, to: copyTo},
		{name: "after the copy", from: copyTo, to: r.wall},
	}
	for i := range r.segments {
		s := &r.segments[i]
		var p99s []float64
		for _, x := range sb.seconds {
			mid := (float64(sbStart-a0) + (float64(x.sec)-0.5)*1000) / 1000
			if mid >= s.from && mid < s.to && x.tps > 0 {
				p99s = append(p99s, x.p99)
			}
		}
		s.secs = len(p99s)
		s.p99Mean, s.p99Med = mean(p99s), median(p99s)
		var cr, ap, lf, du []float64
		for _, p := range r.rc.points {
			if mid := p.el - 0.5; mid >= s.from && mid < s.to {
				cr, ap, lf = append(cr, p.copyRate), append(ap, p.applied), append(lf, p.left)
				if p.duty >= 0 {
					du = append(du, p.duty)
				}
			}
		}
		s.lines = len(cr)
		s.copyRate, s.applied, s.left = mean(cr), mean(ap), mean(lf)
		s.duty = -1
		if len(du) > 0 {
			s.duty = mean(du)
		}
	}
}

// renderSegments is the table of computeSegments' parts for every recast
// run under load that has them.
func renderSegments(p func(string, ...any), runs []*runResult) {
	var rs []*runResult
	for _, r := range runs {
		if isRecast(r.tool) && r.load != "idle" && len(r.segments) > 0 {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	p("\n### Where the p99 went: the copy before and after its applier took over\n\n")
	p("A lock-free copy leaves the changes to rows it has not copied yet to the copy, so its applier writes little until the copy has passed the rows the application writes most, and nearly every change after that. ")
	p("Each recast run under load is split where the applier first applied more changes than it left to the copy (its progress lines; ±1 s; the locking copy leaves none, so it switches at once). ")
	p("*p99*: sysbench's per-second p99 over the seconds whose middle falls in the part, against the same run's baseline (mean → mean, median → median). ")
	p("*copy rows/s*, *applied*, *left to the copy* (changes/s) and *duty* (the pacer's share of a copy thread's time): means over the part's progress lines.\n\n")
	p("| load | tool | part | s | copy rows/s | applied /s | left to the copy /s | duty | p99 mean ms (× before) | p99 median ms (× before) |\n")
	p("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		for _, s := range r.segments {
			if s.to-s.from < 0.5 && s.secs == 0 {
				continue
			}
			rows, ap, lf, du := "–", "–", "–", "–"
			if s.lines > 0 && s.name != "after the copy" {
				rows, ap, lf = f0(s.copyRate), f0(s.applied), f0(s.left)
				if s.duty >= 0 {
					du = f1(100*s.duty) + " %"
				}
			}
			pm, pd := "–", "–"
			if s.secs > 0 {
				pm, pd = f1(s.p99Mean)+" ("+timesOf(s.p99Mean, r.baseP99)+")", f1(s.p99Med)+" ("+timesOf(s.p99Med, r.baseP99Med)+")"
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.load, toolName(r.tool), s.name, f0(s.to-s.from),
				rows, ap, lf, du, pm, pd)
		}
	}
}

// timesOf is a ÷ b as "N.N×", or "–" without a b.
func timesOf(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return f1(a/b) + "×"
}
