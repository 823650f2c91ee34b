package main

import (
	"bufio"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kv is an ordered key=value file (later lines win).
type kv struct {
	keys []string
	m    map[string]string
}

func readKV(path string) (kv, error) {
	out := kv{m: map[string]string{}}
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if _, seen := out.m[k]; !seen {
			out.keys = append(out.keys, k)
		}
		out.m[k] = v
	}
	return out, sc.Err()
}

func (k kv) str(key string) string { return k.m[key] }

func (k kv) num(key string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(k.m[key]), 64)
	if err != nil {
		return 0
	}
	return v
}

func (k kv) has(key string) bool { _, ok := k.m[key]; return ok }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// --- sysbench -----------------------------------------------------------------

type sbSecond struct {
	sec  int // the line "[ Ns ]" covers (start+N-1 s, start+N s]
	tps  float64
	p99  float64
	errs float64
}

type sysbenchLog struct {
	seconds  []sbSecond
	queueMax int
	fatal    string // first FATAL line, if any
	fatals   int
}

var (
	sbLineRE  = regexp.MustCompile(`^\[ (\d+)s \] thds: \d+ tps: ([\d.]+) qps: .*lat \(ms,99%\): ([\d.]+) err/s: ([\d.]+)`)
	sbQueueRE = regexp.MustCompile(`^\[ (\d+)s \] queue length: (\d+), concurrency: (\d+)`)
)

func parseSysbench(path string) (*sysbenchLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &sysbenchLog{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := sbLineRE.FindStringSubmatch(line); m != nil {
			s := sbSecond{}
			s.sec, _ = strconv.Atoi(m[1])
			s.tps, _ = strconv.ParseFloat(m[2], 64)
			s.p99, _ = strconv.ParseFloat(m[3], 64)
			s.errs, _ = strconv.ParseFloat(m[4], 64)
			out.seconds = append(out.seconds, s)
			continue
		}
		if m := sbQueueRE.FindStringSubmatch(line); m != nil {
			q, _ := strconv.Atoi(m[2])
			out.queueMax = max(out.queueMax, q)
			continue
		}
		if strings.HasPrefix(line, "FATAL:") {
			out.fatals++
			if out.fatal == "" {
				out.fatal = strings.TrimSpace(line)
			}
		}
	}
	return out, sc.Err()
}

// --- heartbeat monitor ----------------------------------------------------------

type lagSample struct {
	ms  int64
	lag float64 // ms; for sbm: seconds, -1 for NULL
}

type lagLog struct {
	hb, sbm []lagSample
	errs    []string
}

func parseLag(path string) (*lagLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &lagLog{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		ms, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			continue
		}
		switch fs[0] {
		case "hb":
			v, err := strconv.ParseFloat(fs[2], 64)
			if err == nil {
				out.hb = append(out.hb, lagSample{ms, v})
			}
		case "sbm":
			v, err := strconv.ParseFloat(fs[2], 64)
			if err != nil {
				v = -1
			}
			out.sbm = append(out.sbm, lagSample{ms, v})
		case "err":
			out.errs = append(out.errs, strings.Join(fs[2:], " "))
		}
	}
	return out, sc.Err()
}

// maxIn returns the largest sample value in [from, to] and how many samples
// there were.
func maxIn(s []lagSample, from, to int64) (float64, int) {
	best, n := 0.0, 0
	for _, x := range s {
		if x.ms >= from && x.ms <= to {
			n++
			best = max(best, x.lag)
		}
	}
	return best, n
}

// --- recast progress --------------------------------------------------------------

// recastLog is what recast's progress lines and final line say. Two line
// formats are understood:
//
//	recast: 12s copy 48.3% (96600/~200000 rows, chunk 2400) | copy 8050 rows/s | binlog in 310 changes/s, written 290 rows/s, pending 12, behind 0 bytes | ETA 13s
//	recast: 2s [copy] copy 9.6% (94669/~986400 rows, chunk 5000), 47320 rows/s | apply 0 ev/s vs in 0 ev/s, backlog 0 ev (0 B, caught up) | lag 127.0.0.1:14307 0s | throttled: … | ETA …
type recastLog struct {
	lines             int
	copyRates         []float64 // rows/s while copying
	inRates, outRates []float64 // incoming and applied (or written) per second
	leftRates         []float64 // changes left to the copy per second (0 when the line names none)
	leftTotal         int64     // the "copy done" line's changes_left_to_the_copy; -1: not logged
	outIsRows         bool      // old format: "written rows/s" (after coalescing)
	backlogMax        int64     // events (old format: pending)
	backlogBytesMax   int64     // -1: a whole binlog file or more (old format)
	throttledLines    int
	throttledSeconds  float64 // sum of the intervals ending in a line that says "throttled"
	throttleReasons   map[string]int
	phases            []phaseSpan // in order of appearance
	summary           string
	copied, changes   int64
	wrote             int64
	attempts          int
	locked            string
	failure           string
	lastElapsed       float64
	copyLock          string      // "lock-free", "share (reason)", or "" (not logged: an older recast)
	etas              []etaPoint  // the copy's progress lines, for etaError
	points            []progPoint // the copy's progress lines (new format), for computeSegments
}

// etaPoint is what a copy progress line says about the time the copy has
// left: the ETA's copy part (-1: no number), and the rows, the estimate and
// the line's rows/s (the last 5 s) that the same line shows.
type etaPoint struct {
	el, eta, rate float64
	rows, est     int64
}

// copyETAError is etaError against the copy's end as the progress lines
// time it (phaseSeconds, for a run of wall seconds); nothing (n 0) when the
// copy did not end (no later phase began: the run stopped during it).
func (r *recastLog) copyETAError(wall float64) (printed, lastRate float64, n int) {
	spans := r.phaseSeconds(wall)
	for i, s := range spans {
		if s.name == "copy" && i+1 < len(spans) {
			return r.etaError(s.last)
		}
	}
	return 0, 0, 0
}

// etaError measures the copy ETAs of the progress lines against the time
// the copy then took (copyEnd: elapsed seconds at its end), as the
// exponential of the mean |ln(estimate ÷ actual)| over the lines from 30 s
// on that had 20 s or more left (1: exact; 2: off by a factor of 2 on
// average): printed is recast's own ETA, lastRate the one the line's
// last-5-s rows/s gives. n: the lines measured (0: none, both 0).
func (r *recastLog) etaError(copyEnd float64) (printed, lastRate float64, n int) {
	var sp, sr float64
	var np, nr int
	for _, e := range r.etas {
		left := copyEnd - e.el
		if e.el < 30 || left < 20 {
			continue
		}
		if e.eta > 0 {
			sp += math.Abs(math.Log(e.eta / left))
			np++
		}
		if e.rate > 0 && e.est > e.rows {
			sr += math.Abs(math.Log(float64(e.est-e.rows) / e.rate / left))
			nr++
		}
	}
	if np > 0 {
		printed = math.Exp(sp / float64(np))
	}
	if nr > 0 {
		lastRate = math.Exp(sr / float64(nr))
	}
	return printed, lastRate, max(np, nr)
}

type phaseSpan struct {
	name        string
	first, last float64 // elapsed seconds of the first and last line in the phase
}

var (
	rcOldRE  = regexp.MustCompile(`^recast: (\S+) (copy done|copy [\d.]+%).* \| copy (\d+) rows/s \| binlog in (\d+) changes/s, written (\d+) rows/s, pending (\d+), behind (.*?) \|`)
	rcNewRE  = regexp.MustCompile(`^recast: (\S+) \[([^\]]+)\] (copy done \(\d+ rows\)|copy [\d.]+% \(\d+/~\d+ rows, chunk \d+\), (\d+) rows/s) \| apply (\d+) ev/s vs in (\d+) ev/s, backlog (\d+) ev \(([^,]*), ([^)]*)\)(.*)$`)
	rcThrRE  = regexp.MustCompile(`\| throttled: (.*?)(?: \| ETA|$)`)
	rcLeftRE = regexp.MustCompile(`^, (\d+) ev/s left to the copy`)
	rcLeftN  = regexp.MustCompile(`\bchanges_left_to_the_copy=(\d+)`)
	rcDoneRE = regexp.MustCompile(`^migrated .* in (\S+): (\d+) rows copied, (\d+) binlog row changes applied \((\d+) rows written\), cut-over took (\d+) attempt\(s\), table locked (\S+);`)
	numRE    = regexp.MustCompile(`^[\d.]+`)
	rcRowsRE = regexp.MustCompile(`^copy [\d.]+% \((\d+)/~(\d+) rows`)
	rcETARE  = regexp.MustCompile(`\| ETA \S+ \(copy ([0-9.hmsµ]+)`)

	rcLockWhyRE = regexp.MustCompile(`reason=("(?:[^"\\]|\\.)*"|\S+)`)
)

func parseRecast(path string) (*recastLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &recastLog{throttleReasons: map[string]int{}, leftTotal: -1}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "lock-free copy: chunks read without row locks"):
			out.copyLock = "lock-free"
		case strings.Contains(line, "the copy locks the rows it reads"):
			out.copyLock = "share"
			if m := rcLockWhyRE.FindStringSubmatch(line); m != nil {
				out.copyLock += " (" + strings.Trim(m[1], `"`) + ")"
			}
		}
		if m := rcLeftN.FindStringSubmatch(line); m != nil {
			out.leftTotal, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := rcNewRE.FindStringSubmatch(line); m != nil {
			out.lines++
			el := parseElapsed(m[1])
			prev := out.lastElapsed
			out.lastElapsed = el
			phase := m[2]
			if n := len(out.phases); n == 0 || out.phases[n-1].name != phase {
				out.phases = append(out.phases, phaseSpan{phase, el, el})
			} else {
				out.phases[n-1].last = el
			}
			cr := -1.0 // the line's copy rows/s; -1: it shows none (copy done)
			if m[4] != "" {
				cr, _ = strconv.ParseFloat(m[4], 64)
				if phase == "copy" {
					out.copyRates = append(out.copyRates, cr)
					if rm := rcRowsRE.FindStringSubmatch(m[3]); rm != nil {
						e := etaPoint{el: el, eta: -1, rate: cr}
						e.rows, _ = strconv.ParseInt(rm[1], 10, 64)
						e.est, _ = strconv.ParseInt(rm[2], 10, 64)
						if em := rcETARE.FindStringSubmatch(m[10]); em != nil {
							e.eta = parseElapsed(em[1])
						}
						out.etas = append(out.etas, e)
					}
				}
			}
			ap, _ := strconv.ParseFloat(m[5], 64)
			in, _ := strconv.ParseFloat(m[6], 64)
			bl, _ := strconv.ParseInt(m[7], 10, 64)
			out.inRates = append(out.inRates, in)
			out.outRates = append(out.outRates, ap)
			left := 0.0
			if l := rcLeftRE.FindStringSubmatch(m[10]); l != nil {
				left, _ = strconv.ParseFloat(l[1], 64)
			}
			out.leftRates = append(out.leftRates, left)
			if phase == "copy" && cr >= 0 {
				out.points = append(out.points, progPoint{el: el, copyRate: cr, applied: ap, left: left, duty: parseDuty(m[10])})
			}
			out.backlogMax = max(out.backlogMax, bl)
			if b := parseBytes(m[8]); b > out.backlogBytesMax {
				out.backlogBytesMax = b
			}
			if t := rcThrRE.FindStringSubmatch(m[10]); t != nil {
				out.throttledLines++
				out.throttledSeconds += max(el-prev, 0)
				reason := t[1]
				if i := strings.IndexAny(reason, ":0123456789"); i > 0 {
					reason = strings.TrimSpace(reason[:i])
				}
				out.throttleReasons[reason]++
			}
			continue
		}
		if m := rcOldRE.FindStringSubmatch(line); m != nil {
			out.lines++
			out.outIsRows = true
			out.lastElapsed = parseElapsed(m[1])
			cr, _ := strconv.ParseFloat(m[3], 64)
			in, _ := strconv.ParseFloat(m[4], 64)
			wr, _ := strconv.ParseFloat(m[5], 64)
			pend, _ := strconv.ParseInt(m[6], 10, 64)
			if m[2] != "copy done" {
				out.copyRates = append(out.copyRates, cr)
			}
			out.inRates = append(out.inRates, in)
			out.outRates = append(out.outRates, wr)
			out.backlogMax = max(out.backlogMax, pend)
			behind := m[7]
			if b, ok := strings.CutSuffix(behind, " bytes"); ok {
				if v, err := strconv.ParseInt(b, 10, 64); err == nil && out.backlogBytesMax >= 0 {
					out.backlogBytesMax = max(out.backlogBytesMax, v)
				}
			} else if strings.Contains(behind, "binlog file") {
				out.backlogBytesMax = -1
			}
			continue
		}
		if m := rcDoneRE.FindStringSubmatch(line); m != nil {
			out.summary = line
			out.copied, _ = strconv.ParseInt(m[2], 10, 64)
			out.changes, _ = strconv.ParseInt(m[3], 10, 64)
			out.wrote, _ = strconv.ParseInt(m[4], 10, 64)
			out.attempts, _ = strconv.Atoi(m[5])
			out.locked = m[6]
			continue
		}
		if strings.HasPrefix(line, "recast: ") {
			out.failure = line
		}
	}
	return out, sc.Err()
}

// phaseSeconds is how long each phase lasted, from the elapsed times of the
// progress lines (a phase ends when the next one's first line appears; the
// last one ends at wall).
func (r *recastLog) phaseSeconds(wall float64) []phaseSpan {
	out := make([]phaseSpan, len(r.phases))
	for i, p := range r.phases {
		start := p.first - 1 // the line at N s reports on (N-1, N]
		if i == 0 {
			start = 0
		}
		end := wall
		if i+1 < len(r.phases) {
			end = r.phases[i+1].first - 1
		}
		out[i] = phaseSpan{p.name, start, max(end, start)}
	}
	return out
}

func parseElapsed(s string) float64 {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d.Seconds()
}

// parseBytes reads "931.9 KiB", "0 B", "1.2 MiB".
func parseBytes(s string) int64 {
	s = strings.TrimSpace(s)
	n := numRE.FindString(s)
	v, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return 0
	}
	switch {
	case strings.HasSuffix(s, "GiB"):
		v *= 1 << 30
	case strings.HasSuffix(s, "MiB"):
		v *= 1 << 20
	case strings.HasSuffix(s, "KiB"):
		v *= 1 << 10
	}
	return int64(v)
}

// lastErrorLine finds the line that names a failure in a tool's log: the last
// line mentioning an error, else the last non-empty line.
func lastErrorLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.ToLower(lines[i])
		if strings.Contains(l, "error") || strings.Contains(l, "fail") || strings.Contains(l, "not altered") ||
			strings.Contains(l, "died") || strings.Contains(l, "killed") {
			return strings.TrimSpace(lines[i])
		}
	}
	if len(lines) > 0 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return ""
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
