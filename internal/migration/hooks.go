package migration

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/table"
)

// hookRunner runs the user's hooks (--hooks-path, package hooks) with the
// migration's state. A nil *hookRunner runs none.
type hookRunner struct {
	r       *hooks.Runner
	o       Options
	ctl     *Control // the progress figures (Runtime.Control)
	start   time.Time
	oldName string

	mu                  sync.Mutex
	source              *table.Table // once inspected: the row estimate
	copyStart, copyDone time.Time
}

func newHookRunner(o Options, rt Runtime, start time.Time, oldName string) (*hookRunner, error) {
	r, err := hooks.New(hooks.Config{Dir: o.HooksPath, Timeout: o.HooksTimeout, Hint: o.HooksHint, HintOwner: o.HooksHintOwner,
		HintToken: o.HooksHintToken, Logger: rt.Logger})
	if err != nil || r == nil {
		return nil, err
	}
	return &hookRunner{r: r, o: o, ctl: rt.Control, start: start, oldName: oldName}, nil
}

// run runs the event's hooks. A failing hook of a fatal event (every event
// before the swap) is returned: the migration stops there, before the swap,
// leaving the table untouched.
func (h *hookRunner) run(ctx context.Context, e hooks.Event) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	switch e { //nolint:exhaustive // only the copy's bounds are recorded
	case hooks.BeforeRowCopy:
		h.copyStart = time.Now()
	case hooks.RowCopyComplete:
		h.copyDone = time.Now()
	}
	h.mu.Unlock()
	if err := h.r.Run(ctx, e, h.vars("")); err != nil {
		return fmt.Errorf("%w: the migration stops before the swap (the table is untouched)", err)
	}
	return nil
}

// hooksValidated runs the validated and rowcount-complete hooks once the
// preflight checks passed (the row estimate is InnoDB's statistics).
func (m *migrator) hooksValidated(ctx context.Context) error {
	m.hooks.inspected(m.source)
	if err := m.hooks.run(ctx, hooks.Validated); err != nil {
		return err
	}
	return m.hooks.run(ctx, hooks.RowCountComplete)
}

// inspected records the table read by the preflight checks.
func (h *hookRunner) inspected(t *table.Table) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.source = t
}

// vars is the migration's state for a hook; statusLine for on-status.
func (h *hookRunner) vars(statusLine string) hooks.Vars {
	o := h.o
	host := fmt.Sprintf("%s:%d", o.Conn.Host, o.Conn.Port)
	v := hooks.Vars{
		Database: o.Database, Table: o.Table, Ghost: GhostName(o.Table), Old: h.oldName, DDL: o.Alter,
		Elapsed: time.Since(h.start), ETA: -1, MigratedHost: host, InspectedHost: host, DryRun: !o.Execute, Status: statusLine,
	}
	h.mu.Lock()
	if h.source != nil {
		v.EstimatedRows = h.source.RowEstimate
	}
	switch {
	case h.copyStart.IsZero():
	case h.copyDone.IsZero():
		v.ElapsedCopy = time.Since(h.copyStart)
	default:
		v.ElapsedCopy = h.copyDone.Sub(h.copyStart)
	}
	h.mu.Unlock()
	if c := h.ctl; c != nil {
		s := c.Status()
		v.CopiedRows, v.Progress = s.Copy.RowsCopied, s.Copy.Percent
		if s.Copy.RowsEstimated > 0 {
			v.EstimatedRows = s.Copy.RowsEstimated
		}
		if s.ETA.Seconds != nil {
			v.ETA = time.Duration(*s.ETA.Seconds * float64(time.Second))
		}
	}
	return v
}

// statusLoop runs the on-status hooks every --hooks-status-interval with the
// progress line, until ctx ends.
func (h *hookRunner) statusLoop(ctx context.Context, ctl *Control) {
	if h == nil {
		return
	}
	h.r.StatusLoop(ctx, h.o.HooksStatusInterval, func() hooks.Vars { return h.vars(Line(ctl.Status())) })
}

// InteractiveCommand runs the on-interactive-command hooks of the running
// migration with the command's text in GH_OST_COMMAND. A failing hook
// refuses the command (as in gh-ost): the endpoints call it before acting
// on a command and report its error instead. Without hooks it returns nil.
func (c *Control) InteractiveCommand(ctx context.Context, command string) error {
	c.mu.Lock()
	h := c.hooks
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	v := h.vars("")
	v.Command = command
	return h.r.Run(ctx, hooks.InteractiveCommand, v)
}

// attach makes the migration's hooks reachable from its Control until
// detach.
func (h *hookRunner) attach(c *Control) (detach func()) {
	if h == nil || c == nil {
		return func() {}
	}
	c.mu.Lock()
	c.hooks = h
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.hooks = nil
		c.mu.Unlock()
	}
}
