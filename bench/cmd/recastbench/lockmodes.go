package main

import (
	"slices"
	"strconv"
)

// renderLockModes is the side-by-side of issue 14: recast's lock-free copy
// and its locking copy (--copy-lock=share) next to pt-osc and the native
// ALTER: idle wall time, the application's p99 during the migration as a
// multiple of its baseline at light (≈ 10 %) and heavy (≈ 40 %) load, and
// the deadlocks and lock-wait timeouts seen meanwhile.
func renderLockModes(p func(string, ...any), runs []*runResult, env reportEnv) {
	tools := append(slices.Clone(toolOrder), variantTools(runs)...)
	present := false
	for _, r := range runs {
		if r.tool == "recast" || r.tool == "recast-share" {
			present = true
		}
	}
	if !present {
		return
	}
	p("\n## Lock-free vs locking copy (issue 14)\n\n")
	p("p99: sysbench's per-second p99, mean over the baseline → mean over the tool's wall time (× baseline). ")
	p("*app errors*: errors sysbench saw and retried while the tool ran (1213 deadlock, 1205 lock-wait timeout, 1020; its default `--mysql-ignore-errors`). ")
	p("*server*: the server's counters over the tool's run: deadlocks / lock-wait timeouts / row-lock waits (%s, INNODB_METRICS `lock_timeouts`, `Innodb_row_lock_waits`; any session, the tool's own included). ", env.deadlockCounter())
	p("*copy lock*: the mode recast logged (a fallback names its reason).\n\n")
	p("| tool | copy lock | idle wall s (median) | light p99 ms | light app errors | light server deadlocks / timeouts / row-lock waits | heavy p99 ms | heavy app errors | heavy server deadlocks / timeouts / row-lock waits |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range tools {
		idle, ws := idleWall(runs, t)
		cells := []string{"–", "–", "–", "–", "–", "–"}
		lock := ""
		seen := len(ws) > 0
		for i, load := range []string{"light", "heavy"} {
			r := pick(runs, load, t)
			if r == nil {
				continue
			}
			seen = true
			if r.copyLock != "" {
				lock = r.copyLock
			}
			if r.baseP99 > 0 && r.durP99 > 0 {
				cells[3*i] = f1(r.baseP99) + " → " + f1(r.durP99) + " (**" + f1(r.durP99/r.baseP99) + "×**)"
			}
			if r.durSecs > 0 {
				cells[3*i+1] = f0(r.durErrs)
			}
			cells[3*i+2] = orDash(r.deadlocks) + " / " + orDash(r.lockTimeouts) + " / " + orDash(r.rowLockWaits)
			if !r.ok {
				cells[3*i] += " (exit " + strconv.Itoa(r.exit) + ")"
			}
		}
		if !seen {
			if why := env.notRun.str(t); why != "" {
				p("| %s | %s | – | – | – | – | – | – | – |\n", idleName(t), cell(why))
			}
			continue
		}
		for _, r := range runs {
			if r.tool == t && r.copyLock != "" && lock == "" {
				lock = r.copyLock
			}
		}
		if !isRecast(t) {
			lock = "n/a"
		}
		w := "–"
		if len(ws) > 0 {
			w = f1(idle)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", toolName(t), orDash(lock), w,
			cells[0], cells[1], cells[2], cells[3], cells[4], cells[5])
	}
	p("\nTargets (issue 14): with the lock-free copy, p99 during ≤ 2× baseline at light load and ≤ 3× at heavy load, ")
	p("no application deadlocks or lock-wait timeouts, idle wall time not worse than the locking copy's.\n\n")
	p("| target | measured | holds |\n|---|---|---|\n")
	yes := func(ok bool) string {
		if ok {
			return "**yes**"
		}
		return "**no**"
	}
	// The default, then each variant of it (--recast-variant: the same
	// lock-free copy with other flags, named by them), but the locking copy.
	targets := []string{"recast"}
	for _, t := range variantTools(runs) {
		if t != "recast-share" {
			targets = append(targets, t)
		}
	}
	for _, t := range targets {
		who := "lock-free"
		if t != "recast" {
			who = toolName(t)
		}
		for _, c := range []struct {
			load  string
			limit float64
		}{{"light", 2}, {"heavy", 3}} {
			r := pick(runs, c.load, t)
			if r == nil || r.baseP99 <= 0 || r.durP99 <= 0 {
				continue
			}
			if !r.ok {
				// A run stopped before its end (the harness's time limit,
				// a failure) measured only part of the migration: it
				// decides no target.
				p("| %s: %s p99 during ≤ %s× baseline | %s ms vs %s ms (%s×) over the %s s it ran; **it did not finish** (exit %d) | n/a |\n", c.load, who, f0(c.limit),
					f1(r.durP99), f1(r.baseP99), f1(r.durP99/r.baseP99), f0(r.wall), r.exit)
				continue
			}
			p("| %s: %s p99 during ≤ %s× baseline | %s ms vs %s ms (%s×) | %s |\n", c.load, who, f0(c.limit), f1(r.durP99), f1(r.baseP99),
				f1(r.durP99/r.baseP99), yes(r.durP99 <= c.limit*r.baseP99))
			// The application's own errors decide; the server's counters include
			// recast's sessions (the copy and the applier both write the ghost).
			p("| %s: %s, no application deadlocks / lock-wait timeouts | %s app errors (server, any session: %s deadlocks / %s timeouts) | %s |\n", c.load, who, f0(r.durErrs),
				orDash(r.deadlocks), orDash(r.lockTimeouts), yes(r.durSecs > 0 && r.durErrs == 0))
		}
	}
	lf, _ := idleWall(runs, "recast")
	sh, _ := idleWall(runs, "recast-share")
	if lf > 0 && sh > 0 {
		p("| idle: lock-free wall ≤ locking copy's | %s s vs %s s (%s×) | %s |\n", f1(lf), f1(sh), f2(lf/sh), yes(lf <= sh))
	}
}
