// Package hooks runs the user's executables at points of a migration, the
// way gh-ost's --hooks-path does: every executable file in the hooks
// directory whose name starts with an event's name (gh-ost-on-startup,
// gh-ost-on-startup-mail, recast-on-startup…) runs, one after another in
// name order, with the migration's state in environment variables
// (GH_OST_DATABASE_NAME… and the same under RECAST_…).
//
// Each hook is time-limited: when it runs longer than the timeout, its whole
// process group is killed. Its output (stdout and stderr) goes to the log.
// A hook that fails (exit status other than 0, killed, not executable) of a
// Fatal event aborts the migration; of the other events (success, failure,
// status) it is only reported.
package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is a point of the migration at which hooks run; its value is the
// name after the "gh-ost-" or "recast-" prefix of the executables.
type Event string

// The events, in the order a migration reaches them. gh-ost's
// on-stop-replication and on-start-replication (--test-on-replica) have no
// counterpart: recast never stops replication.
const (
	Startup            Event = "on-startup"             // options parsed, before connecting
	Validated          Event = "on-validated"           // the preflight checks passed
	RowCountComplete   Event = "on-rowcount-complete"   // the row estimate is known
	BeforeRowCopy      Event = "on-before-row-copy"     // the ghost exists and the stream runs; the copy starts next
	RowCopyComplete    Event = "on-row-copy-complete"   // every row is copied
	BeginPostponed     Event = "on-begin-postponed"     // the cut-over is postponed (flag file), once
	BeforeCutOver      Event = "on-before-cut-over"     // verified; the swap starts next
	InteractiveCommand Event = "on-interactive-command" // a command arrived on the socket / HTTP endpoint
	Success            Event = "on-success"             // the migration finished
	Failure            Event = "on-failure"             // the migration failed or was aborted
	Status             Event = "on-status"              // every --hooks-status-interval
)

// Events lists every event, in the order a migration reaches them.
var Events = []Event{Startup, Validated, RowCountComplete, BeforeRowCopy, RowCopyComplete, BeginPostponed,
	BeforeCutOver, InteractiveCommand, Success, Failure, Status}

// Fatal reports whether a failing hook of the event stops what it precedes:
// the migration (every event before the swap), or the interactive command.
// Hooks of on-success, on-failure and on-status are only reported.
func (e Event) Fatal() bool {
	switch e {
	case Success, Failure, Status:
		return false
	case Startup, Validated, RowCountComplete, BeforeRowCopy, RowCopyComplete, BeginPostponed, BeforeCutOver, InteractiveCommand:
		return true
	default:
		return true
	}
}

// Prefixes are the name prefixes of an event's executables: gh-ost's, then
// recast's own.
func (e Event) Prefixes() []string { return []string{"gh-ost-" + string(e), "recast-" + string(e)} }

// DefaultTimeout bounds one hook unless Config.Timeout says otherwise.
const DefaultTimeout = time.Minute

// DefaultStatusInterval is how often on-status hooks run (gh-ost's
// --hooks-status-interval default).
const DefaultStatusInterval = time.Minute

// Config is a hooks directory and how its hooks run.
type Config struct {
	// Dir is the hooks directory; "" runs no hooks.
	Dir string
	// Timeout bounds each hook (DefaultTimeout when 0).
	Timeout time.Duration
	// Hint, HintOwner and HintToken are passed to every hook as
	// GH_OST_HOOKS_HINT, GH_OST_HOOKS_HINT_OWNER, GH_OST_HOOKS_HINT_TOKEN.
	Hint, HintOwner, HintToken string
	Logger                     *slog.Logger
}

// Vars is the migration's state passed to a hook.
type Vars struct {
	Database, Table string
	Ghost, Old      string // helper table names
	DDL             string // the ALTER as given
	Elapsed         time.Duration
	ElapsedCopy     time.Duration
	EstimatedRows   int64
	CopiedRows      int64
	// Progress is the copy's percentage (0..100); ETA the estimated time
	// left (negative: unknown).
	Progress float64
	ETA      time.Duration
	// MigratedHost is the server migrated (host:port); InspectedHost the one
	// read (the same for recast); ExecutingHost this machine's name (filled
	// by Run when empty).
	MigratedHost, InspectedHost, ExecutingHost string
	DryRun                                     bool
	// Status (on-status) and Command (on-interactive-command).
	Status, Command string
}

// Env renders v and the hints as NAME=value lines, under both prefixes.
func (v *Vars) Env(c *Config) []string {
	eta := ""
	if v.ETA >= 0 {
		eta = strconv.FormatInt(int64(v.ETA.Round(time.Second)/time.Second), 10)
	}
	pairs := [][2]string{
		{"DATABASE_NAME", v.Database},
		{"TABLE_NAME", v.Table},
		{"GHOST_TABLE_NAME", v.Ghost},
		{"OLD_TABLE_NAME", v.Old},
		{"DDL", v.DDL},
		{"ELAPSED_SECONDS", strconv.FormatFloat(v.Elapsed.Seconds(), 'f', 6, 64)},
		{"ELAPSED_COPY_SECONDS", strconv.FormatFloat(v.ElapsedCopy.Seconds(), 'f', 6, 64)},
		{"ESTIMATED_ROWS", strconv.FormatInt(v.EstimatedRows, 10)},
		{"COPIED_ROWS", strconv.FormatInt(v.CopiedRows, 10)},
		{"PROGRESS", strconv.FormatFloat(v.Progress, 'f', 2, 64)},
		{"ETA_SECONDS", eta},
		{"MIGRATED_HOST", v.MigratedHost},
		{"INSPECTED_HOST", v.InspectedHost},
		{"EXECUTING_HOST", v.ExecutingHost},
		{"HOOKS_HINT", c.Hint},
		{"HOOKS_HINT_OWNER", c.HintOwner},
		{"HOOKS_HINT_TOKEN", c.HintToken},
		{"DRY_RUN", strconv.FormatBool(v.DryRun)},
		{"REVERT", "false"},
	}
	if v.Status != "" {
		pairs = append(pairs, [2]string{"STATUS", v.Status})
	}
	if v.Command != "" {
		pairs = append(pairs, [2]string{"COMMAND", v.Command})
	}
	out := make([]string, 0, 2*len(pairs))
	for _, prefix := range []string{"GH_OST_", "RECAST_"} {
		for _, p := range pairs {
			out = append(out, prefix+p[0]+"="+p[1])
		}
	}
	return out
}

// Error is a hook that failed.
type Error struct {
	Event    Event
	Path     string
	TimedOut bool
	Err      error  // the exit status, or why it could not run
	Output   string // the last line the hook wrote, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hook %s (%s) ", e.Path, e.Event)
	if e.TimedOut {
		b.WriteString("ran longer than --hooks-timeout and was killed")
	} else {
		fmt.Fprintf(&b, "failed: %v", e.Err)
	}
	if e.Output != "" {
		fmt.Fprintf(&b, " (last output: %q)", e.Output)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Runner runs the hooks of one directory. A nil *Runner runs none.
type Runner struct {
	cfg  Config
	host string
	mu   sync.Mutex // one hook at a time: their output stays readable
}

// New checks the directory and returns its runner, or nil when cfg.Dir is "".
func New(cfg Config) (*Runner, error) {
	if cfg.Dir == "" {
		return nil, nil
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("--hooks-path: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("--hooks-path %s is not a directory", cfg.Dir)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	return &Runner{cfg: cfg, host: host}, nil
}

// Find returns the paths of the event's hooks, in name order. A file whose
// name matches is a hook whether or not it is executable (one that is not
// fails when run, as in gh-ost: a gating hook that silently did not run
// would be worse); directories are skipped.
func (r *Runner) Find(e Event) ([]string, error) {
	if r == nil {
		return nil, nil
	}
	entries, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("read --hooks-path: %w", err)
	}
	var out []string
	for _, ent := range entries {
		name := ent.Name()
		if !slices.ContainsFunc(e.Prefixes(), func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		p := filepath.Join(r.cfg.Dir, name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// Run runs the event's hooks one after another with v in their environment.
// For a Fatal event it returns the first failure (*Error) and runs no
// further hook; for the others it logs failures and returns nil. ctx bounds
// every hook besides the timeout (callers running on-failure pass a context
// that the failure has not cancelled).
func (r *Runner) Run(ctx context.Context, e Event, v Vars) error {
	if r == nil {
		return nil
	}
	paths, err := r.Find(e)
	if err != nil {
		if e.Fatal() {
			return err
		}
		r.cfg.Logger.Warn("hooks", "event", string(e), "err", err)
		return nil
	}
	if len(paths) == 0 {
		return nil
	}
	if v.ExecutingHost == "" {
		v.ExecutingHost = r.host
	}
	env := append(inherited(), v.Env(&r.cfg)...)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range paths {
		start := time.Now()
		r.cfg.Logger.Info("running hook", "event", string(e), "hook", p)
		herr := r.runOne(ctx, e, p, env)
		if herr == nil {
			r.cfg.Logger.Info("hook done", "event", string(e), "hook", p, "took", time.Since(start).Round(time.Millisecond))
			continue
		}
		if e.Fatal() {
			return herr
		}
		r.cfg.Logger.Warn("hook failed (reported only)", "event", string(e), "err", herr)
	}
	return nil
}

// secretVars are not passed on to hooks: the password recast may have read
// from its environment is not the hooks' business.
var secretVars = []string{"RECAST_PASSWORD", "MYSQL_PWD"}

// inherited is recast's environment without secretVars.
func inherited() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(secretVars, k) {
			out = append(out, kv)
		}
	}
	return out
}

// maxOutput bounds the output kept of one hook.
const maxOutput = 64 << 10

func (r *Runner) runOne(ctx context.Context, e Event, path string, env []string) error {
	tctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, path)
	cmd.Env = env
	cmd.Stdin = nil
	out := &tailBuffer{max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	setGroup(cmd)
	// On timeout or cancellation the whole group goes (a shell script's
	// children too); WaitDelay stops waiting for pipes a straggler holds.
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	lines := out.lines()
	for _, l := range lines {
		r.cfg.Logger.Info("hook output", "hook", filepath.Base(path), "line", l)
	}
	if err == nil {
		return nil
	}
	he := &Error{Event: e, Path: path, Err: err}
	if len(lines) > 0 {
		he.Output = lines[len(lines)-1]
	}
	if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		he.TimedOut = true
	} else if ctx.Err() != nil {
		he.Err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	return he
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped bool
}

var _ io.Writer = (*tailBuffer)(nil)

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
		t.dropped = true
	}
	return len(p), nil
}

func (t *tailBuffer) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(t.buf.String(), "\n")
	if s == "" {
		return nil
	}
	ls := strings.Split(s, "\n")
	if t.dropped {
		ls = append([]string{"[earlier output dropped]"}, ls...)
	}
	return ls
}

// StatusLoop runs the on-status hooks every interval until ctx ends, with
// the state vars returns at that moment (Status holds the progress line).
// Their failures are only reported. interval <= 0 runs none.
func (r *Runner) StatusLoop(ctx context.Context, interval time.Duration, vars func() Vars) {
	if r == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.Run(ctx, Status, vars())
		}
	}
}
