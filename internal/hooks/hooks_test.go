package hooks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuf is a log sink safe for concurrent writes.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func script(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func newRunner(t *testing.T, dir string, timeout time.Duration) (*Runner, *lockedBuf) {
	t.Helper()
	log := &lockedBuf{}
	r, err := New(Config{Dir: dir, Timeout: timeout, Hint: "h1", HintOwner: "owner1", HintToken: "tok1",
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r, log
}

func readEnv(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestEnvironment(t *testing.T) {
	t.Setenv("RECAST_PASSWORD", "secret")
	dir, out := t.TempDir(), t.TempDir()
	script(t, dir, "gh-ost-on-success", "env > "+filepath.Join(out, "env"), 0o755)
	r, _ := newRunner(t, dir, 10*time.Second)
	v := Vars{Database: "db1", Table: "t1", Ghost: "_t1_new", Old: "_t1_old", DDL: "MODIFY c INT",
		Elapsed: 1500 * time.Millisecond, ElapsedCopy: time.Second, EstimatedRows: 1000, CopiedRows: 990,
		Progress: 99, ETA: -1, MigratedHost: "h:3306", InspectedHost: "h:3306", ExecutingHost: "runner", DryRun: false}
	if err := r.Run(context.Background(), Success, v); err != nil {
		t.Fatal(err)
	}
	env := readEnv(t, filepath.Join(out, "env"))
	want := map[string]string{
		"DATABASE_NAME": "db1", "TABLE_NAME": "t1", "GHOST_TABLE_NAME": "_t1_new", "OLD_TABLE_NAME": "_t1_old",
		"DDL": "MODIFY c INT", "ELAPSED_SECONDS": "1.500000", "ELAPSED_COPY_SECONDS": "1.000000",
		"ESTIMATED_ROWS": "1000", "COPIED_ROWS": "990", "PROGRESS": "99.00", "ETA_SECONDS": "",
		"MIGRATED_HOST": "h:3306", "INSPECTED_HOST": "h:3306", "EXECUTING_HOST": "runner",
		"HOOKS_HINT": "h1", "HOOKS_HINT_OWNER": "owner1", "HOOKS_HINT_TOKEN": "tok1", "DRY_RUN": "false", "REVERT": "false",
	}
	for k, w := range want {
		for _, prefix := range []string{"GH_OST_", "RECAST_"} {
			got, ok := env[prefix+k]
			if !ok || got != w {
				t.Errorf("%s%s = %q (set %v), want %q", prefix, k, got, ok, w)
			}
		}
	}
	if _, ok := env["GH_OST_STATUS"]; ok {
		t.Error("GH_OST_STATUS set outside on-status")
	}
	if env["PATH"] == "" {
		t.Error("the hook did not inherit the environment (PATH)")
	}
	if _, ok := env["RECAST_PASSWORD"]; ok {
		t.Error("RECAST_PASSWORD reached the hook")
	}

	// Event-specific variables.
	script(t, dir, "gh-ost-on-status", "env > "+filepath.Join(out, "status"), 0o755)
	script(t, dir, "recast-on-interactive-command", "env > "+filepath.Join(out, "cmd"), 0o755)
	v.Status, v.ETA = "Copy: 5/10 50.0%", 90*time.Second
	if err := r.Run(context.Background(), Status, v); err != nil {
		t.Fatal(err)
	}
	if env := readEnv(t, filepath.Join(out, "status")); env["GH_OST_STATUS"] != v.Status || env["RECAST_STATUS"] != v.Status || env["GH_OST_ETA_SECONDS"] != "90" {
		t.Errorf("on-status: STATUS %q / %q, ETA %q", env["GH_OST_STATUS"], env["RECAST_STATUS"], env["GH_OST_ETA_SECONDS"])
	}
	v.Status, v.Command = "", "throttle"
	if err := r.Run(context.Background(), InteractiveCommand, v); err != nil {
		t.Fatal(err)
	}
	if env := readEnv(t, filepath.Join(out, "cmd")); env["GH_OST_COMMAND"] != "throttle" {
		t.Errorf("GH_OST_COMMAND = %q", env["GH_OST_COMMAND"])
	}
}

// TestPrefixMatching: every file whose name starts with the event's name
// runs, in name order, under gh-ost's and recast's prefixes; others do not.
func TestPrefixMatching(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	log := filepath.Join(out, "ran")
	for _, n := range []string{"gh-ost-on-success", "gh-ost-on-success-slack", "gh-ost-on-success12", "recast-on-success",
		"gh-ost-on-startup", "recast-on-failure", "on-success", "x-gh-ost-on-success"} {
		script(t, dir, n, "echo "+n+" >> "+log, 0o755)
	}
	if err := os.Mkdir(filepath.Join(dir, "gh-ost-on-success.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, _ := newRunner(t, dir, 10*time.Second)
	if err := r.Run(context.Background(), Success, Vars{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(b))
	want := []string{"gh-ost-on-success", "gh-ost-on-success-slack", "gh-ost-on-success12", "recast-on-success"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ran %v, want %v", got, want)
	}
}

// TestFailure: a failing hook of a fatal event is returned, naming the hook
// and its last output, and the later hooks do not run; of a non-fatal event
// it is logged and the later hooks run.
func TestFailure(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	script(t, dir, "gh-ost-on-before-cut-over-1", "echo not approved >&2; exit 3", 0o755)
	script(t, dir, "gh-ost-on-before-cut-over-2", "touch "+filepath.Join(out, "second"), 0o755)
	script(t, dir, "gh-ost-on-failure-1", "echo boom; exit 1", 0o755)
	script(t, dir, "gh-ost-on-failure-2", "touch "+filepath.Join(out, "failure2"), 0o755)
	r, log := newRunner(t, dir, 10*time.Second)
	err := r.Run(context.Background(), BeforeCutOver, Vars{})
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("before-cut-over: got %v, want *Error", err)
	}
	if he.TimedOut || he.Output != "not approved" || !strings.Contains(err.Error(), "gh-ost-on-before-cut-over-1") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("error %q (output %q, timed out %v)", err, he.Output, he.TimedOut)
	}
	if _, err := os.Stat(filepath.Join(out, "second")); err == nil {
		t.Error("the hook after the failing one ran")
	}
	if err := r.Run(context.Background(), Failure, Vars{}); err != nil {
		t.Errorf("on-failure hook failure returned %v, want it only reported", err)
	}
	if _, err := os.Stat(filepath.Join(out, "failure2")); err != nil {
		t.Error("the on-failure hook after the failing one did not run")
	}
	if s := log.String(); !strings.Contains(s, "boom") || !strings.Contains(s, "reported only") {
		t.Errorf("log lacks the failing hook's output or report:\n%s", s)
	}
}

// TestNotExecutable: a matching file without the execute bit fails (a
// gating hook that silently did not run would let the migration through).
func TestNotExecutable(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "gh-ost-on-validated", "exit 0", 0o644)
	r, _ := newRunner(t, dir, 10*time.Second)
	var he *Error
	if err := r.Run(context.Background(), Validated, Vars{}); !errors.As(err, &he) || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("got %v, want a permission failure", err)
	}
}

// TestTimeoutKillsGroup: a hook over the timeout is killed with the
// processes it started.
func TestTimeoutKillsGroup(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(out, "child")
	script(t, dir, "gh-ost-on-startup", "sleep 60 & echo $! > "+pidFile+"; wait", 0o755)
	r, _ := newRunner(t, dir, 300*time.Millisecond)
	start := time.Now()
	err := r.Run(context.Background(), Startup, Vars{})
	var he *Error
	if !errors.As(err, &he) || !he.TimedOut {
		t.Fatalf("got %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	// Killed and reaped (by init): signal 0 fails. A zombie would still
	// answer; /proc shows its state.
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the hook's child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestCancel: a cancelled context stops a running hook.
func TestCancel(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "gh-ost-on-row-copy-complete", "sleep 60", 0o755)
	r, _ := newRunner(t, dir, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	var he *Error
	if err := r.Run(ctx, RowCopyComplete, Vars{}); !errors.As(err, &he) || he.TimedOut || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a cancelled hook", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("the cancelled hook was not stopped")
	}
}

func TestNilAndConfig(t *testing.T) {
	var r *Runner
	if err := r.Run(context.Background(), BeforeCutOver, Vars{}); err != nil {
		t.Fatal(err)
	}
	if r, err := New(Config{}); r != nil || err != nil {
		t.Fatalf("New without a directory: %v, %v", r, err)
	}
	if _, err := New(Config{Dir: filepath.Join(t.TempDir(), "nosuch")}); err == nil {
		t.Error("a missing directory was accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: f}); err == nil {
		t.Error("a file was accepted as the hooks directory")
	}
	for _, e := range Events {
		if e.Fatal() == (e == Success || e == Failure || e == Status) {
			t.Errorf("%s: Fatal() = %v", e, e.Fatal())
		}
	}
}

func TestStatusLoop(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	log := filepath.Join(out, "status")
	script(t, dir, "gh-ost-on-status", `echo "$GH_OST_STATUS" >> `+log, 0o755)
	r, _ := newRunner(t, dir, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var mu sync.Mutex
	n := 0
	go func() {
		r.StatusLoop(ctx, 50*time.Millisecond, func() Vars {
			mu.Lock()
			defer mu.Unlock()
			n++
			return Vars{Status: "line " + strconv.Itoa(n)}
		})
		close(done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Count(string(b), "\n") >= 2 {
			if !strings.HasPrefix(string(b), "line 1\nline 2\n") {
				t.Errorf("status lines %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("on-status did not run twice")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
