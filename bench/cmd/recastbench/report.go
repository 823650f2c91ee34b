package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Layout of a bench output directory (written by bench/run.sh):
//
//	OUT/machine.env            machine facts and versions (key=value, in order)
//	OUT/setup.env              rows, rates, durations (key=value)
//	OUT/commands.md            the exact commands, verbatim into the report
//	OUT/not-run.env            tool=reason: tools the harness left out on
//	                           purpose (pt-osc on MySQL), said so in the report
//	OUT/runs/<load>/<name>/    one run: run.env, exec.env, tool.log,
//	                           sysbench.log (under load), lag.tsv
//
// Loads: idle, light, heavy. Tools: native-inplace, native-copy, ptosc,
// ptosc-nops (pt-osc with sysbench --db-ps-mode=disable), recast (its
// default, lock-free copy), recast-share (--copy-lock=share, the locking copy).

var (
	loadOrder = []string{"idle", "light", "heavy"}
	toolOrder = []string{"native-inplace", "native-copy", "ptosc", "ptosc-nops", "recast", "recast-share"}
	toolNames = map[string]string{
		"native-inplace": "native `FORCE, ALGORITHM=INPLACE`",
		"native-copy":    "native `FORCE, ALGORITHM=COPY`",
		"ptosc":          "pt-online-schema-change (sysbench PS on)",
		"ptosc-nops":     "pt-online-schema-change (sysbench `--db-ps-mode=disable`)",
		"recast":         "recast",
		"recast-share":   "recast `--copy-lock=share`",
	}
)

const (
	warmupS  = 5 // sysbench seconds ignored at the start of a baseline window
	notesBeg = "<!-- notes:begin -->"
	notesEnd = "<!-- notes:end -->"
)

type runResult struct {
	dir, load, tool string
	rep             int
	env, ex         kv
	done            bool

	exit    int
	wall    float64
	ok      bool
	errLine string

	// under load
	rate                      float64
	psMode                    string
	baseTPS, baseP99          float64
	durTPS, durP99, durP99Max float64
	// medians of the per-second p99s: a write-back burst of the run
	// before (a 200 ms second in the baseline) moves the mean, not these
	baseP99Med, durP99Med float64
	durSecs, baseSecs     int
	durErrs               float64
	sbFatal               string
	sbQueueMax            int

	// replica
	lagMax, lagBase, sbmMax float64 // ms, ms, s
	lagOver1s               float64 // seconds with lag > 1 s (heartbeat samples × period)
	hbSamples               int
	consistent              string

	// recast
	rssMiB   float64
	cpuS     float64
	rc       *recastLog
	loadavg0 string
	loadavg1 string
	cpuOther string // % of the machine used by processes outside the bench during the run

	// lock conflicts while the tool ran: the server's counters (any session;
	// "n/a" where missing) and recast's copy lock mode from its log
	deadlocks, lockTimeouts, rowLockWaits string
	copyLock                              string

	// recast under load: the copy before and after its applier took
	// over, and what followed it (computeSegments)
	segments []segment
}

// reportEnv is what the report knows beyond the runs: whether the server
// was MySQL (machine.env's server line ends "(--flavor mysql-…)") and the
// tools the harness left out on purpose, with the reason (not-run.env).
type reportEnv struct {
	mysql  bool
	notRun kv
}

func loadReportEnv(dir string, machine kv) reportEnv {
	e := reportEnv{mysql: strings.Contains(machine.str("server"), "--flavor mysql-")}
	e.notRun, _ = readKV(filepath.Join(dir, "not-run.env"))
	return e
}

// notRunReason is why tool was not run ("" if it was not left out);
// ptosc-nops shares ptosc's reason.
func (e reportEnv) notRunReason(tool string) string {
	if r := e.notRun.str(tool); r != "" {
		return r
	}
	if tool == "ptosc-nops" {
		return e.notRun.str("ptosc")
	}
	return ""
}

// deadlockCounter names the server counter read as "deadlocks": MySQL has
// no Innodb_deadlocks status variable.
func (e reportEnv) deadlockCounter() string {
	if e.mysql {
		return "INNODB_METRICS `lock_deadlocks`"
	}
	return "`Innodb_deadlocks`"
}

func loadRun(dir, load, name string) (*runResult, error) {
	r := &runResult{dir: dir, load: load}
	var err error
	if r.env, err = readKV(filepath.Join(dir, "run.env")); err != nil {
		return nil, err
	}
	r.tool = r.env.str("tool")
	if r.tool == "" {
		r.tool = name
	}
	r.rep = int(r.env.num("rep"))
	r.done = r.env.str("done") == "1"
	r.ex, _ = readKV(filepath.Join(dir, "exec.env"))
	r.exit = int(r.ex.num("exit_code"))
	if !r.ex.has("exit_code") {
		r.exit = -1
	}
	r.wall = r.ex.num("wall_s")
	r.ok = r.exit == 0
	r.rate = r.env.num("rate")
	r.psMode = r.env.str("ps_mode")
	r.consistent = r.env.str("replica_consistent")
	r.loadavg0, r.loadavg1 = r.env.str("loadavg_start"), r.env.str("loadavg_end")
	r.cpuS = r.ex.num("user_s") + r.ex.num("sys_s")
	if r.env.has("cpu_other_pct") {
		r.cpuOther = r.env.str("cpu_other_pct") + "%"
	}
	r.rssMiB = r.ex.num("maxrss_kb") / 1024
	r.deadlocks, r.lockTimeouts = r.env.str("deadlocks_during"), r.env.str("lock_timeouts_during")
	r.rowLockWaits = r.env.str("row_lock_waits_during")

	logPath := filepath.Join(dir, "tool.log")
	if isRecast(r.tool) {
		if rc, err := parseRecast(logPath); err == nil {
			r.rc = rc
			r.copyLock = rc.copyLock
		}
	}
	defer func() {
		if len(r.errLine) > 400 {
			r.errLine = r.errLine[:400] + "…"
		}
	}()
	if !r.ok {
		switch {
		case r.rc != nil && r.rc.failure != "":
			r.errLine = r.rc.failure
		case !r.ex.has("exit_code"):
			r.errLine = "no result (interrupted)"
		default:
			r.errLine = lastErrorLine(logPath)
		}
	}

	a0, a1 := int64(r.ex.num("start_ms")), int64(r.ex.num("end_ms"))
	monEnd := int64(r.env.num("mon_end_ms"))
	if monEnd == 0 {
		monEnd = math.MaxInt64
	}
	if lg, err := parseLag(filepath.Join(dir, "lag.tsv")); err == nil && a0 > 0 {
		r.lagMax, r.hbSamples = maxIn(lg.hb, a0, monEnd)
		// before: the last 10 s before the alter (the first samples of a
		// run can show the age of the previous run's last heartbeat)
		r.lagBase, _ = maxIn(lg.hb, a0-10000, a0)
		r.sbmMax, _ = maxIn(lg.sbm, a0, monEnd)
		period := 0.1
		for _, s := range lg.hb {
			if s.ms >= a0 && s.ms <= monEnd && s.lag > 1000 {
				r.lagOver1s += period
			}
		}
	}

	sbStart := int64(r.env.num("sb_start_ms"))
	if sbStart > 0 && a0 > 0 {
		sb, err := parseSysbench(filepath.Join(dir, "sysbench.log"))
		if err == nil {
			r.computeSysbench(sb, sbStart, a0, a1)
			r.computeSegments(sb, sbStart, a0)
		}
	}
	return r, nil
}

// computeSysbench derives the baseline window (after the warm-up, ending at
// the alter's start) and the alter window (per-second lines whose midpoint
// lies in [a0, a1]; seconds missing because sysbench died count as 0 tps).
func (r *runResult) computeSysbench(sb *sysbenchLog, start, a0, a1 int64) {
	r.sbFatal = sb.fatal
	r.sbQueueMax = sb.queueMax
	bySec := map[int]sbSecond{}
	for _, s := range sb.seconds {
		bySec[s.sec] = s
	}
	var bt, bp []float64
	for _, s := range sb.seconds {
		end := start + int64(s.sec)*1000
		if s.sec-1 >= warmupS && end <= a0 {
			bt = append(bt, s.tps)
			bp = append(bp, s.p99)
		}
	}
	r.baseSecs = len(bt)
	r.baseTPS, r.baseP99, r.baseP99Med = mean(bt), mean(bp), median(bp)

	first := int(math.Ceil(float64(a0-start)/1000 + 0.5))
	last := int(math.Floor(float64(a1-start)/1000 + 0.5))
	if last < first {
		first = int((a0-start)/1000) + 1
		last = first
	}
	var dt, dp []float64
	for n := first; n <= last; n++ {
		s, ok := bySec[n]
		if !ok {
			dt = append(dt, 0)
			continue
		}
		dt = append(dt, s.tps)
		r.durErrs += s.errs
		if s.tps > 0 {
			dp = append(dp, s.p99)
			r.durP99Max = max(r.durP99Max, s.p99)
		}
	}
	r.durSecs = len(dt)
	r.durTPS, r.durP99, r.durP99Med = mean(dt), mean(dp), median(dp)
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	dir := fs.String("dir", "", "bench output directory")
	out := fs.String("out", "", "markdown output (default stdout)")
	keep := fs.String("keep-notes", "", "copy the hand-written notes block from this file (if it has one)")
	tsv := fs.String("tsv", "", "also write one line per run here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	runs, err := loadRuns(*dir)
	if err != nil {
		return err
	}
	notes := ""
	if *keep != "" {
		if b, err := os.ReadFile(*keep); err == nil {
			if _, rest, ok := strings.Cut(string(b), notesBeg); ok {
				if body, _, ok := strings.Cut(rest, notesEnd); ok {
					notes = strings.Trim(body, "\n")
				}
			}
		}
	}
	md := render(*dir, runs, notes)
	if *tsv != "" {
		if err := os.WriteFile(*tsv, []byte(renderTSV(runs)), 0o644); err != nil {
			return err
		}
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(md)
		return err
	}
	return os.WriteFile(*out, []byte(md), 0o644)
}

func loadRuns(dir string) ([]*runResult, error) {
	var runs []*runResult
	for _, load := range loadOrder {
		entries, err := os.ReadDir(filepath.Join(dir, "runs", load))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			r, err := loadRun(filepath.Join(dir, "runs", load, e.Name()), load, e.Name())
			if err != nil {
				continue
			}
			runs = append(runs, r)
		}
	}
	slices.SortStableFunc(runs, func(a, b *runResult) int {
		if c := slices.Index(loadOrder, a.load) - slices.Index(loadOrder, b.load); c != 0 {
			return c
		}
		if c := toolIndex(a.tool) - toolIndex(b.tool); c != 0 {
			return c
		}
		return a.rep - b.rep
	})
	return runs, nil
}

// isRecast: recast itself or a variant run with extra flags ("recast-NAME").
func isRecast(t string) bool { return t == "recast" || strings.HasPrefix(t, "recast-") }

// variantTools lists the recast variants present, in name order.
func variantTools(runs []*runResult) []string {
	var out []string
	for _, r := range runs {
		if strings.HasPrefix(r.tool, "recast-") && !slices.Contains(toolOrder, r.tool) && !slices.Contains(out, r.tool) {
			out = append(out, r.tool)
		}
	}
	slices.Sort(out)
	return out
}

func toolIndex(t string) int {
	if i := slices.Index(toolOrder, t); i >= 0 {
		return i
	}
	return len(toolOrder)
}

func toolName(t string) string {
	if n, ok := toolNames[t]; ok {
		return n
	}
	return t
}

// --- rendering -------------------------------------------------------------------

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func secs(ms float64) string { return f2(ms / 1000) }

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

func result(r *runResult) string {
	switch {
	case !r.done && !r.ex.has("exit_code"):
		return "incomplete"
	case !r.ok && r.env.str("note") != "":
		return fmt.Sprintf("**did not finish** (exit %d, see below)", r.exit)
	case r.ok && r.sbFatal != "":
		return "done; **sysbench aborted**"
	case r.ok:
		return "done"
	default:
		return fmt.Sprintf("**FAILED** (exit %d)", r.exit)
	}
}

// idleWall is the median wall time of the successful idle runs of tool.
func idleWall(runs []*runResult, tool string) (float64, []float64) {
	var ws []float64
	for _, r := range runs {
		if r.load == "idle" && r.tool == tool && r.ok {
			ws = append(ws, r.wall)
		}
	}
	return median(ws), ws
}

func pick(runs []*runResult, load, tool string) *runResult {
	var best *runResult
	for _, r := range runs {
		if r.load == load && r.tool == tool {
			best = r // last rep wins
		}
	}
	return best
}

func render(dir string, runs []*runResult, notes string) string {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	machine, _ := readKV(filepath.Join(dir, "machine.env"))
	setup, _ := readKV(filepath.Join(dir, "setup.env"))
	env := loadReportEnv(dir, machine)

	p("# recast benchmark results\n\n")
	p("Generated by `bench/run.sh` (`recastbench report`) from `%s` on %s. ",
		relOut(dir), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if setup.has("resumed") {
		p("Every figure below comes from that one run: same machine, same recast binary, same rates, the tools one after another; ")
		p("the run was resumed once, on a fresh sandbox and table (see *resumed* under Set-up).\n\n")
	} else {
		p("Every figure below comes from that one run: same machine, same sandbox, same table, the tools one after another.\n\n")
	}

	p("## Machine and versions\n\n")
	for _, k := range machine.keys {
		p("- %s: %s\n", k, machine.m[k])
	}
	p("\n## Set-up\n\n")
	for _, k := range setup.keys {
		p("- %s: %s\n", k, setup.m[k])
	}

	p("\n## Results\n\n")
	p("Wall time: start to exit of the tool's process (native: the `mariadb -e \"ALTER ...\"` client). ")
	p("tps and p99 come from sysbench's per-second lines (`--report-interval=1 --percentile=99`): *before* is the mean over the baseline ")
	p("window (after a %d s warm-up, up to the alter's start), *during* the mean over the seconds inside the alter's wall time ", warmupS)
	p("(a second with no line because sysbench had died counts as 0 tps). p99 *during* is the mean of the per-second p99s (the targets' measure); ")
	p("the *median* column gives the medians of the same seconds, which one write-back burst (a 50–200 ms second every ~31 s on this VM, the run before's included) does not move; ")
	p("*worst s* is the worst one-second p99. Replica lag: heartbeat row written on the primary every 100 ms with `NOW(6)`, ")
	p("read on the replica every 100 ms (lag = replica `NOW(6)` − replicated timestamp, so ~0.1 s is the floor), ")
	p("max from the alter's start until the replica has applied everything (it includes the replica re-running a native ALTER); *before*: max over the 10 s before the alter. ")
	p("RSS: peak resident set of the tool's process (getrusage `ru_maxrss`, = VmHWM at exit). ")
	p("*others' CPU*: share of the whole machine used during the run by processes outside the bench (the machine is shared; ")
	p("before each run the bench waits, up to a limit, until it is quiet).\n\n")
	if len(env.notRun.keys) > 0 {
		p("Not run:\n\n")
		for _, t := range env.notRun.keys {
			p("- %s: %s\n", idleName(t), cell(env.notRun.str(t)))
		}
		p("\n")
	}

	for _, load := range loadOrder {
		var lr []*runResult
		for _, r := range runs {
			if r.load == load {
				lr = append(lr, r)
			}
		}
		if len(lr) == 0 {
			continue
		}
		if load == "idle" {
			p("### idle (no foreground load)\n\n")
			p("| tool | run | result | wall s | replica lag max s | peak RSS MiB | CPU s (user+sys) | replica = primary | others' CPU |\n|---|---|---|---:|---:|---:|---:|---|---:|\n")
			for _, r := range lr {
				rss, cpu := "–", "–"
				if isRecast(r.tool) || strings.HasPrefix(r.tool, "ptosc") {
					rss, cpu = f0(r.rssMiB), f1(r.cpuS)
				}
				p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", idleName(r.tool), r.rep, result(r), f1(r.wall),
					secs(r.lagMax), rss, cpu, orDash(r.consistent), orDash(r.cpuOther))
			}
			for _, t := range env.notRun.keys {
				if !hasTool(lr, t) {
					p("| %s | – | %s | – | – | – | – | – | – |\n", idleName(t), cell(env.notRun.str(t)))
				}
			}
			p("\nMedian idle wall time per tool:")
			for _, t := range append(slices.Clone(toolOrder), variantTools(runs)...) {
				if m, ws := idleWall(runs, t); len(ws) > 0 {
					p(" %s **%s s** (%s);", idleName(t), f1(m), joinF(ws))
				}
			}
			p("\n\n")
			continue
		}
		rate := lr[0].rate
		p("### %s load: sysbench `oltp_write_only --threads=8 --rate=%s`\n\n", load, f0(rate))
		p("| tool | result | wall s | tps before | tps during (%% of rate) | p99 before ms | p99 during ms (× before) | p99 median before → during ms (×) | worst s p99 ms | app errors during | server deadlocks / lock-wait timeouts / row-lock waits | replica lag before s | replica lag max s | lag > 1 s (s) | peak RSS MiB | replica = primary | others' CPU |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
		for _, r := range lr {
			rss := "–"
			if isRecast(r.tool) || strings.HasPrefix(r.tool, "ptosc") {
				rss = f0(r.rssMiB)
			}
			pct := "–"
			if r.rate > 0 {
				pct = f0(100*r.durTPS/r.rate) + "%"
			}
			ratio := "–"
			if r.baseP99 > 0 && r.durP99 > 0 {
				ratio = f1(r.durP99/r.baseP99) + "×"
			}
			med := "–"
			if r.baseP99Med > 0 && r.durP99Med > 0 {
				med = fmt.Sprintf("%s → %s (%s×)", f1(r.baseP99Med), f1(r.durP99Med), f1(r.durP99Med/r.baseP99Med))
			}
			p("| %s | %s | %s | %s | %s (%s) | %s | %s (%s) | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s |\n",
				toolName(r.tool), result(r), f1(r.wall), f0(r.baseTPS), f0(r.durTPS), pct, f1(r.baseP99),
				f1(r.durP99), ratio, med, f1(r.durP99Max), f0(r.durErrs), orDash(r.deadlocks), orDash(r.lockTimeouts), orDash(r.rowLockWaits), secs(r.lagBase), secs(r.lagMax), f1(r.lagOver1s), rss, orDash(r.consistent), orDash(r.cpuOther))
		}
		for _, t := range toolOrder {
			if why := env.notRunReason(t); why != "" && !hasTool(lr, t) {
				p("| %s | %s | – | – | – | – | – | – | – | – | – | – | – | – | – | – | – |\n", toolName(t), cell(why))
			}
		}
		p("\n")
	}

	// failures and aborted sysbench runs
	var fails []string
	for _, r := range runs {
		if r.errLine != "" {
			fails = append(fails, fmt.Sprintf("- %s, %s (run %d): exit %d: `%s`", r.load, toolName(r.tool), r.rep, r.exit, cell(r.errLine)))
		}
		if n := r.env.str("note"); n != "" {
			fails = append(fails, fmt.Sprintf("- %s, %s: %s", r.load, toolName(r.tool), cell(n)))
		}
		if r.sbFatal != "" {
			fails = append(fails, fmt.Sprintf("- %s, %s: sysbench aborted (%d FATAL lines), first: `%s`", r.load, toolName(r.tool), r.sbFatal2(), cell(r.sbFatal)))
		}
	}
	if len(fails) > 0 {
		p("### Failures and aborted foreground load\n\n%s\n\n", strings.Join(fails, "\n"))
	}

	// recast details
	p("### recast: phases, apply rate vs incoming change rate, throttling, memory\n\n")
	p("From recast's own progress lines (`--progress-interval 1s`): *in* is the rate of the table's row changes read from the binlog ")
	p("and handed to the applier, *left to the copy* the rate of those dropped instead because no chunk had read their row yet ")
	p("(a lock-free copy into a table with no other unique key, docs/copy.md; *in* + *left* is all the table's changes; ")
	p("the total from recast's `copy done` line), ")
	p("*applied* the rate the applier applied them to the new table (means over the run's progress lines); *backlog* the changes ")
	p("read but not applied yet. For comparison, sysbench `oltp_write_only` makes 4 row changes per transaction (2 UPDATEs, ")
	p("a DELETE and an INSERT), so it sends about 4 × its tps. Phases are timed from the progress lines (±1 s); ")
	p("*throttled*: seconds covered by progress lines that reported the copy paused, and how many such lines per reason. ")
	p("*copy ETA off by*: how far the progress lines' copy ETA was from the time the copy then took, as a factor ")
	p("(the exponential of the mean |ln(ETA ÷ actual)| over the lines from 30 s on with 20 s or more left; 1 is exact), ")
	p("and in brackets the same for an ETA from the line's rows/s (the last 5 s).\n\n")
	p("| load | tool | run | wall s | phases s | copy rows/s (mean while copying) | in changes/s | left to the copy changes/s | applied changes/s | applied ÷ in | 4 × sysbench tps | backlog max (changes, bytes) | throttled s | changes applied, rows written | cut-over attempts, lock | peak RSS MiB | CPU s | copy ETA off by (5 s rate's) |\n")
	p("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|---|\n")
	for _, r := range runs {
		if !isRecast(r.tool) || r.rc == nil {
			continue
		}
		rc := r.rc
		in, ap := mean(rc.inRates), mean(rc.outRates)
		ratio := "–"
		if in > 0 {
			ratio = f2(ap / in)
		}
		backlogBytes := strconv.FormatInt(rc.backlogBytesMax, 10)
		if rc.backlogBytesMax < 0 {
			backlogBytes = "≥ 1 binlog file"
		} else if rc.backlogBytesMax >= 1<<20 {
			backlogBytes = f1(float64(rc.backlogBytesMax)/(1<<20)) + " MiB"
		} else if rc.backlogBytesMax >= 1<<10 {
			backlogBytes = f0(float64(rc.backlogBytesMax)/(1<<10)) + " KiB"
		}
		co := "–"
		if rc.summary != "" {
			co = fmt.Sprintf("%d, %s", rc.attempts, rc.locked)
		}
		var ph []string
		for _, s := range rc.phaseSeconds(r.wall) {
			ph = append(ph, fmt.Sprintf("%s %s", s.name, f0(s.last-s.first)))
		}
		etaOff := "–" // a copy too short to measure, or one that did not end
		if printed, last, n := rc.copyETAError(r.wall); n > 0 {
			etaOff = fmt.Sprintf("×%s (×%s)", orDashF1(printed), orDashF1(last))
		}
		thr := "0"
		if rc.throttledLines > 0 {
			var rs []string
			for _, k := range sortedKeysInt(rc.throttleReasons) {
				rs = append(rs, fmt.Sprintf("%s %d", k, rc.throttleReasons[k]))
			}
			thr = fmt.Sprintf("%s (%s)", f0(rc.throttledSeconds), strings.Join(rs, ", "))
		}
		sb := "–"
		if r.rate > 0 {
			sb = f0(4 * r.durTPS)
		}
		left := "–" // an older recast, or a copy that ended before its "copy done" line
		if rc.leftTotal >= 0 {
			left = fmt.Sprintf("%s (%d in all)", f0(mean(rc.leftRates)), rc.leftTotal)
		}
		p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d, %s | %s | %d, %d | %s | %s | %s | %s |\n", r.load, r.tool, r.rep, f1(r.wall),
			orDash(strings.Join(ph, ", ")), f0(mean(rc.copyRates)), f0(in), left, f0(ap), ratio, sb, rc.backlogMax, backlogBytes, thr,
			rc.changes, rc.wrote, co, f0(r.rssMiB), f1(r.cpuS), etaOff)
	}
	renderSegments(p, runs)
	p("\n")

	// ratios and targets
	p("## Ratios (same run)\n\n")
	rIdle, _ := idleWall(runs, "recast")
	copyIdle, _ := idleWall(runs, "native-copy")
	inplIdle, _ := idleWall(runs, "native-inplace")
	ptIdle, _ := idleWall(runs, "ptosc")
	ratio := func(a, b float64) string {
		if a <= 0 || b <= 0 {
			return "n/a"
		}
		return f2(a / b)
	}
	p("| ratio | value |\n|---|---:|\n")
	p("| idle: recast ÷ native COPY (median wall) | %s (%s s / %s s) |\n", ratio(rIdle, copyIdle), f1(rIdle), f1(copyIdle))
	p("| idle: recast ÷ native INPLACE | %s (%s s / %s s) |\n", ratio(rIdle, inplIdle), f1(rIdle), f1(inplIdle))
	if why := env.notRunReason("ptosc"); why != "" && ptIdle == 0 {
		p("| idle: recast ÷ pt-osc | %s |\n", cell(why))
	} else {
		p("| idle: recast ÷ pt-osc | %s (%s s / %s s) |\n", ratio(rIdle, ptIdle), f1(rIdle), f1(ptIdle))
	}
	for _, t := range variantTools(runs) {
		if v, _ := idleWall(runs, t); v > 0 {
			p("| idle: %s ÷ native COPY | %s (%s s / %s s) |\n", t, ratio(v, copyIdle), f1(v), f1(copyIdle))
			p("| idle: %s ÷ recast | %s (%s s / %s s) |\n", t, ratio(v, rIdle), f1(v), f1(rIdle))
		}
	}
	for _, load := range []string{"light", "heavy"} {
		if r := pick(runs, load, "recast"); r != nil && r.ok {
			p("| %s: recast ÷ recast idle | %s (%s s / %s s) |\n", load, ratio(r.wall, rIdle), f1(r.wall), f1(rIdle))
		}
		for _, pt := range []string{"ptosc-nops", "ptosc"} {
			r, q := pick(runs, load, "recast"), pick(runs, load, pt)
			if r != nil && q != nil && r.ok && q.ok {
				p("| %s: recast ÷ %s | %s (%s s / %s s) |\n", load, toolName(pt), ratio(r.wall, q.wall), f1(r.wall), f1(q.wall))
			}
		}
	}
	renderLockModes(p, runs, env)
	p("\n## Targets (issue 4; 1M rows)\n\n")
	p("| target | measured | holds |\n|---|---|---|\n")
	yes := func(ok bool) string {
		if ok {
			return "**yes**"
		}
		return "**no**"
	}
	if rIdle > 0 && copyIdle > 0 {
		p("| idle: recast wall ≤ native COPY | %s s vs %s s (%s×) | %s |\n", f1(rIdle), f1(copyIdle), ratio(rIdle, copyIdle), yes(rIdle <= copyIdle))
	}
	if rIdle > 0 && ptIdle > 0 {
		p("| idle: recast wall ≤ 0.5 × pt-osc | %s s vs 0.5 × %s s = %s s (%s×) | %s |\n", f1(rIdle), f1(ptIdle), f1(ptIdle/2), ratio(rIdle, ptIdle), yes(rIdle <= ptIdle/2))
	} else if why := env.notRunReason("ptosc"); why != "" && ptIdle == 0 {
		p("| idle: recast wall ≤ 0.5 × pt-osc | %s | n/a |\n", cell(why))
	}
	if h := pick(runs, "heavy", "recast"); h != nil {
		if !h.ok {
			p("| heavy: recast finishes | did not finish (exit %d after %s s; see *Failures* above) | **no** |\n", h.exit, f0(h.wall))
		} else {
			p("| heavy: recast finishes, in ≤ 2× its idle time | %s s vs 2 × %s s = %s s (%s×) | %s |\n", f1(h.wall), f1(rIdle), f1(2*rIdle), ratio(h.wall, rIdle), yes(rIdle > 0 && h.wall <= 2*rIdle))
		}
	}
	for _, load := range []string{"heavy", "light"} {
		h := pick(runs, load, "recast")
		if h == nil || h.rate == 0 {
			continue
		}
		if !h.ok {
			p("| %s: recast's p99 and tps targets | did not finish (exit %d after %s s; see *Failures* above) | n/a |\n", load, h.exit, f0(h.wall))
			continue
		}
		p("| %s: foreground tps during recast ≥ 95%% of rate | %s of %s tps (%s%%) | %s |\n", load, f0(h.durTPS), f0(h.rate), f0(100*h.durTPS/h.rate), yes(h.durTPS >= 0.95*h.rate))
		if h.baseP99 > 0 {
			p("| %s: p99 during ≤ 2× baseline | %s ms vs %s ms (%s×; worst second %s ms) | %s |\n", load, f1(h.durP99), f1(h.baseP99), ratio(h.durP99, h.baseP99), f1(h.durP99Max), yes(h.durP99 <= 2*h.baseP99))
		}
	}
	for _, load := range loadOrder {
		var worst *runResult
		for _, r := range runs {
			if r.load == load && r.tool == "recast" && (worst == nil || r.lagMax > worst.lagMax) {
				worst = r
			}
		}
		if worst != nil {
			p("| %s: replica lag ≤ 1 s throughout (recast) | max %s s (SBM max %s s) | %s |\n", load, secs(worst.lagMax), f0(worst.sbmMax), yes(worst.lagMax <= 1000))
		}
	}
	var rssMax float64
	n := 0
	for _, r := range runs {
		if r.tool == "recast" {
			rssMax = max(rssMax, r.rssMiB)
			n++
		}
	}
	if n > 0 {
		p("| recast RSS ≤ 256 MiB (all %d recast runs) | max %s MiB | %s |\n", n, f0(rssMax), yes(rssMax <= 256))
	}

	if cmds, err := os.ReadFile(filepath.Join(dir, "commands.md")); err == nil {
		p("\n## Commands\n\n%s\n", strings.TrimSpace(string(cmds)))
	}

	p("\n## Observations\n\n")
	p("%s\n", notesBeg)
	if notes != "" {
		p("%s\n", notes)
	} else {
		p("(none yet: write observations between these markers; `recastbench report --keep-notes` carries them over)\n")
	}
	p("%s\n", notesEnd)
	return b.String()
}

func (r *runResult) sbFatal2() int {
	sb, err := parseSysbench(filepath.Join(r.dir, "sysbench.log"))
	if err != nil {
		return 0
	}
	return sb.fatals
}

func sortedKeysInt(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// hasTool reports whether runs hold a run of tool.
func hasTool(runs []*runResult, tool string) bool {
	return slices.ContainsFunc(runs, func(r *runResult) bool { return r.tool == tool })
}

// idleName is the tool's name without the foreground-load qualifier.
func idleName(t string) string {
	if t == "ptosc" {
		return "pt-online-schema-change"
	}
	return toolName(t)
}

// orDashF1 is f1(v), or "–" for 0 (not measured).
func orDashF1(v float64) string {
	if v == 0 {
		return "–"
	}
	return f1(v)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func joinF(ws []float64) string {
	var s []string
	for _, w := range ws {
		s = append(s, f1(w))
	}
	return strings.Join(s, ", ")
}

func relOut(dir string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return dir
}

func renderTSV(runs []*runResult) string {
	var b strings.Builder
	b.WriteString("load\ttool\trep\texit\twall_s\trate\ttps_before\ttps_during\tp99_before\tp99_during\tp99_worst\tlag_max_s\tsbm_max\trss_mib\tcpu_s\tsb_fatal\terror\tothers_cpu\tdeadlocks\tlock_timeouts\tapp_errors\tcopy_lock\trow_lock_waits\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "%s\t%s\t%d\t%d\t%.3f\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.3f\t%.0f\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\n",
			r.load, r.tool, r.rep, r.exit, r.wall, r.rate, r.baseTPS, r.durTPS, r.baseP99, r.durP99, r.durP99Max,
			r.lagMax/1000, r.sbmMax, r.rssMiB, r.cpuS, r.sbFatal, r.errLine, r.cpuOther, orDash(r.deadlocks), orDash(r.lockTimeouts), r.durErrs, r.copyLock, orDash(r.rowLockWaits))
	}
	return b.String()
}
