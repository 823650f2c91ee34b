package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is a snapshot of /proc/stat's aggregate cpu line (clock ticks).
type cpuTimes struct{ total, idle, steal int64 }

func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, errors.New("unexpected /proc/stat")
	}
	var v [8]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	var t cpuTimes
	for _, x := range v {
		t.total += x
	}
	t.idle = v[3] + v[4] // idle + iowait
	t.steal = v[7]
	return t, nil
}

// procTicks is utime+stime+cutime+cstime of pid: its own CPU and that of the
// children it has reaped.
func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0
	}
	var sum int64
	for _, k := range []int{11, 12, 13, 14} { // fields 14-17
		v, _ := strconv.ParseInt(f[k], 10, 64)
		sum += v
	}
	return sum
}

func parsePids(s string) []int {
	var pids []int
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if v, err := strconv.Atoi(p); err == nil && v > 0 {
			pids = append(pids, v)
		}
	}
	return pids
}

// cpuCmd measures how busy the machine is, and how much of that is the
// bench's own processes.
//
//	cpu busy --window 3s            print the machine's busy % over the window
//	cpu mark --pids P,... --out F   snapshot the machine and the pids
//	cpu since --pids P,... --in F   print key=value: the busy share of the
//	                                machine since the mark, split into the
//	                                pids' share and everything else
//
// Percentages are of the whole machine (all CPUs = 100 %).
func cpuCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("want busy, mark or since")
	}
	fs := flag.NewFlagSet("cpu "+args[0], flag.ContinueOnError)
	window := fs.Duration("window", 3*time.Second, "busy: sampling window")
	pids := fs.String("pids", "", "mark/since: comma-separated pids (their own and reaped children's CPU)")
	out := fs.String("out", "", "mark: snapshot file")
	in := fs.String("in", "", "since: snapshot file from mark")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "busy":
		a, err := readCPU()
		if err != nil {
			return err
		}
		time.Sleep(*window)
		b, err := readCPU()
		if err != nil {
			return err
		}
		dt := b.total - a.total
		if dt <= 0 {
			return errors.New("no CPU ticks elapsed")
		}
		fmt.Printf("%.0f\n", 100*float64(dt-(b.idle-a.idle))/float64(dt))
		return nil
	case "mark":
		c, err := readCPU()
		if err != nil {
			return err
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "total=%d\nidle=%d\nsteal=%d\n", c.total, c.idle, c.steal)
		for _, p := range parsePids(*pids) {
			fmt.Fprintf(&sb, "pid%d=%d\n", p, procTicks(p))
		}
		return os.WriteFile(*out, []byte(sb.String()), 0o644)
	case "since":
		m, err := readKV(*in)
		if err != nil {
			return err
		}
		c, err := readCPU()
		if err != nil {
			return err
		}
		dt := float64(c.total) - m.num("total")
		if dt <= 0 {
			return errors.New("no CPU ticks elapsed")
		}
		busy := dt - (float64(c.idle) - m.num("idle"))
		var mine float64
		for _, p := range parsePids(*pids) {
			mine += float64(procTicks(p)) - m.num(fmt.Sprintf("pid%d", p))
		}
		// /proc/stat counts in USER_HZ per CPU, /proc/pid/stat in USER_HZ too;
		// dt is the sum over all CPUs, so shares are of the whole machine.
		fmt.Printf("cpu_busy_pct=%.0f\ncpu_bench_pct=%.0f\ncpu_other_pct=%.0f\ncpu_steal_pct=%.0f\n",
			100*busy/dt, 100*mine/dt, max(0, 100*(busy-mine)/dt), 100*(float64(c.steal)-m.num("steal"))/dt)
		return nil
	}
	return fmt.Errorf("cpu: unknown %q", args[0])
}
