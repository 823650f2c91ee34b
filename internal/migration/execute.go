package migration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/verify"
)

func sentryName(t string) string { return cutover.SentryName(t) }

// errAfterSwap marks an error that came after the swap: the migration is
// done as far as the table goes, so it is not reported as aborted.
var errAfterSwap = errors.New("after the swap")

func orSentry(old, t string) string {
	if old == "" {
		return "dropped"
	}
	return old
}

// ErrInterrupted wraps the error of a migration stopped by a signal or a
// cancelled context before the cut-over: its state was checkpointed and
// `--resume` continues it.
var ErrInterrupted = errors.New("interrupted")

// execute runs the copy method: the list of phases. Every phase is a
// method of copyRun (below), which holds what the phases share.
func (m *migrator) execute(ctx context.Context, res *Result) (err error) {
	r := &copyRun{m: m, o: m.opts, res: res}
	r.ghostQ = table.QuoteIdent(r.o.Database) + "." + table.QuoteIdent(GhostName(r.o.Table))
	r.chkQ = table.QuoteIdent(r.o.Database) + "." + table.QuoteIdent(checkpoint.TableName(r.o.Table))
	r.marksQ = table.QuoteIdent(r.o.Database) + "." + table.QuoteIdent(copier.MarksName(r.o.Table))
	defer func() { err = r.onFailure(ctx, err) }() // the one fatal path
	defer r.close()
	if err := r.m.dropLeftovers(ctx); err != nil { // leftovers.go: --initially-drop-*
		return err
	}
	if err := r.prepareGhost(ctx); err != nil { // ghost table, the position to stream from
		return err
	}
	if err := r.openPipeline(ctx); err != nil { // stream, applier, copier
		return err
	}
	if err := r.startPipeline(ctx); err != nil { // throttle, pump, progress, checkpoints
		return err
	}
	if err := r.copyRows(); err != nil {
		return r.fail(err)
	}
	if err := r.buildIndexes(); err != nil { // deferidx.go: --defer-indexes
		return r.fail(err)
	}
	if err := r.catchUp(); err != nil { // so the cut-over's drain is short
		return r.fail(err)
	}
	if err := r.checksum(); err != nil { // the gate to the cut-over
		return r.fail(err)
	}
	if err := r.cutOver(); err != nil {
		return err
	}
	return r.finish(ctx) // the stream's proof that no write was lost
}

// copyRun is one run of the copy method: what its phases share.
type copyRun struct {
	m            *migrator
	o            Options
	res          *Result
	ghostQ, chkQ string             // quoted ghost and checkpoint tables
	marksQ       string             // quoted watermark table of the lock-free copy (copy_lock.go)
	def          *pipeline.Deferrer // nil unless the copy is lock-free
	plan         *Plan
	state        checkpoint.State
	startPos     binlog.Position
	stream       *binlog.Stream
	ap           *pipeline.Applier
	ver          *verify.Verifier
	cp           *copier.Copier
	ctl          *Control
	pump         *pipeline.Pump
	runCtx       context.Context
	cancel       context.CancelCauseFunc
	group        *errgroup.Group
	cres         cutover.Result
	swappedIn    bool
	save         func(context.Context) error // writes a checkpoint, once the pipeline runs
	closers      []func()                    // run by close, last first
}

func (r *copyRun) onClose(f func()) { r.closers = append(r.closers, f) }

func (r *copyRun) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// onFailure is the fatal path: a run that failed before the swap keeps its
// helper tables when --resume can continue it, and drops them otherwise.
func (r *copyRun) onFailure(ctx context.Context, err error) error {
	if err == nil || r.swappedIn {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch {
	case r.save == nil && r.o.Resume:
		// The resumed run failed before its pipeline started: the
		// interrupted run's ghost and checkpoint are all there is.
		return fmt.Errorf("%w; the helper tables (%s, %s) are kept for another --resume, or recast cleanup", err, r.ghostQ, r.chkQ)
	case r.save == nil:
	case errors.Is(err, cutover.ErrOutcomeUnknown):
		// (Before the interrupted case: an interruption does not make
		// the outcome known.)
		// Whether the table was swapped is not certain: drop nothing,
		// keep the position for --resume.
		if serr := r.save(cctx); serr != nil {
			err = fmt.Errorf("%w (and saving the checkpoint failed: %w)", err, serr)
		}
		return fmt.Errorf("%w; every helper table is kept (%s, %s)", err, r.ghostQ, r.chkQ)
	case ctx.Err() != nil:
		// Interrupted: keep the ghost and the checkpoint for --resume.
		if serr := r.save(cctx); serr == nil {
			return fmt.Errorf("%w: %w; the original table is untouched; continue with the same command plus --resume", ErrInterrupted, err)
		}
	case errors.Is(err, mdl.ErrGaveUp):
		// The cut-over could not get its lock: the copy is complete and
		// verified, and hours of it may be at stake. Keep it.
		if serr := r.save(cctx); serr == nil {
			return fmt.Errorf("%w; the copy is kept (%s, %s): once the blockers are gone, run the same command plus --resume (it catches up, verifies again and retries the cut-over), or recast cleanup to drop it", err, r.ghostQ, r.chkQ)
		}
	}
	// The checkpoint first: a checkpoint left without its ghost would
	// read as a run killed after its swap (killedAfterSwap).
	for _, t := range []string{r.chkQ, r.ghostQ, r.marksQ} {
		if _, derr := r.m.db.ExecContext(cctx, dbconn.Tag+"DROP TABLE IF EXISTS "+t); derr != nil {
			err = fmt.Errorf("%w (and dropping %s failed: %w; run recast cleanup)", err, t, derr)
		}
	}
	return err
}

// fail prefers the cause that ended the pipeline (a stream or applier
// failure, an abort) over the error it caused.
func (r *copyRun) fail(err error) error {
	if cause := context.Cause(r.runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// prepareGhost creates the ghost (or finds the interrupted run's) and the
// position to stream from.
func (r *copyRun) prepareGhost(ctx context.Context) error {
	m := r.m
	plan, state, err := m.prepareGhost(ctx)
	if err != nil {
		return err
	}
	if err := m.checkNewAutoIncrement(ctx, plan); err != nil { // autoinc.go
		return err
	}
	if err := m.checkServerComputed(ctx, m.db, plan); err != nil { // computed.go
		return err
	}
	r.res.Plan, r.plan, r.state = plan, plan, state
	m.rt.Pause(ctx, "ghost-created")
	r.startPos = state.Pos()
	return nil
}

// openPipeline opens the stream at the start position (before the copy
// starts), the applier's connections and the copier.
func (r *copyRun) openPipeline(ctx context.Context) error {
	m, o := r.m, r.o
	lockFree, lockWhy, err := m.lockFreeCopy(ctx, r.marksQ, r.plan.KeySource) // copy_lock.go
	if err != nil {
		return err
	}
	marks := ""
	if lockFree {
		marks = copier.MarksName(o.Table)
	}
	binlogTLS, err := o.Conn.BinlogTLS()
	if err != nil {
		return err
	}
	stream, err := binlog.Open(ctx, binlog.Config{
		Host: o.Conn.Host, Port: uint16(o.Conn.Port), User: o.Conn.User, Password: o.Conn.Password,
		Socket: o.Conn.Socket, TLSConfig: binlogTLS,
		ServerID: o.ServerID, Table: m.source, MySQL: o.Conn.Server.MySQL(), Marks: marks, Logger: m.rt.Logger,
		AppRows: &m.appRows, AtStart: &m.appAtStart, Own: ownTables(o.Table), Resumed: o.Resume,
	}, r.startPos)
	if err != nil {
		return fmt.Errorf("open the binlog stream: %w", err)
	}
	r.stream = stream
	r.onClose(func() { stream.Close() })
	applyDB, err := m.openApplyDB(ctx)
	if err != nil {
		return err
	}
	r.onClose(func() { applyDB.Close() })
	r.ver = m.newVerifier(r.plan)
	if r.ap, err = m.newApplier(applyDB, r.plan, r.ver); err != nil {
		return err
	}
	r.ap.SetApplied(r.startPos)
	r.ctl = m.control() // control.go: throttle, status, settings changed at run time
	plan := r.plan
	var cpDefer copier.Deferrer
	if lockFree {
		if r.def, err = pipeline.NewDeferrer(m.source, plan.KeySource); err != nil {
			return err
		}
		cpDefer = r.def
	}
	r.ctl.setCopyLock(lockFree, lockWhy, r.def) // copy_lock.go
	start, err := checkpoint.DecodeKey(m.source, plan.KeySource, r.state.Watermark)
	if err != nil {
		return fmt.Errorf("--resume: %w: run recast cleanup and start over", err)
	}
	r.cp, err = copier.New(m.db, copier.Config{
		Source: m.source, Ghost: r.ghostQ,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
		KeyColumns: plan.KeySource, KeyIndex: plan.KeyIndex,
		ChunkTime: o.ChunkTime, MaxChunk: o.MaxChunkRows, Threads: o.Threads, Logger: m.rt.Logger, Throttle: r.ctl.throttleWait, Pace: r.ctl.pace,
		AfterChunk: func(ctx context.Context, lo, hi []any) error { return r.ver.Missing(ctx, m.db, lo, hi) },
		Start:      start,
		Defer:      cpDefer, Marks: r.marksQ, OrderedCommits: o.Conn.Server.MySQL(),
	})
	if err != nil || r.def == nil || o.Resume || len(ghostUniques(plan)) > 0 {
		return err
	}
	// A fresh lock-free copy into a table whose only unique key is the
	// identifying one: the stream is at its start position and the pump has
	// not read anything, so the copy's upper bound is fixed now and the
	// changes to rows no chunk has read yet are left to the copy
	// (pipeline.Deferrer.SkipUncopied). Not on a resumed run, and not with
	// other unique keys: there a write may remove a row the copy wrote
	// under its unique value, and the applier relies on that row's own later
	// change to put it back (docs/applier.md), which could be one left to
	// the copy.
	end, err := r.cp.FixEnd(ctx)
	if err != nil {
		return err
	}
	r.def.SkipUncopied(end)
	return nil
}

// openApplyDB opens the applier's connections. The applier writes binlog
// images: TIMESTAMPs rendered in UTC, so its sessions run in UTC and the
// columns whose conversion depends on the zone carry an expression
// (applyExprs); strict, so a value the copy would refuse with a warning
// fails the applier too.
func (m *migrator) openApplyDB(ctx context.Context) (*sql.DB, error) {
	applyConn := m.opts.Conn
	applyConn.MaxOpen = m.opts.ApplyThreads + 2
	applyConn.SetVars = m.applierVars(ctx)
	applyConn.TimeZone = "+00:00"
	applyConn.SQLMode = dbconn.WithMode(m.sem.SQLMode, "STRICT_ALL_TABLES")
	return dbconn.Open(ctx, applyConn)
}

// checkpointSave writes the checkpoint: the applied position first, then
// the copy's watermark.
func (r *copyRun) checkpointSave(ctx context.Context) error {
	st := r.state
	st.SetPos(r.ap.Applied()) // applied first, then the watermark
	wm, done := r.cp.Watermark()
	st.Watermark, st.CopyDone = checkpoint.EncodeKey(wm), r.state.CopyDone || done
	st.CopiedRows = r.state.CopiedRows + r.cp.Progress().Rows
	return checkpoint.Write(ctx, r.m.db, r.o.Database, r.o.Table, st)
}

// startPipeline starts the throttle runtime and the meter (Control), the
// pump's reader and flusher, the progress lines and the checkpoints. Any
// failure of the stream or the applier ends the migration.
func (r *copyRun) startPipeline(ctx context.Context) error {
	m, o := r.m, r.o
	r.save = r.checkpointSave
	r.runCtx, r.cancel = context.WithCancelCause(ctx)
	r.onClose(func() { r.cancel(nil) })
	r.pump = pipeline.NewPump(r.stream, r.ap, r.ctl.applierDelay)
	if r.def != nil {
		r.pump.Defer(r.def)
	}
	m.postponed = func(ctx context.Context) error { return m.keepVerified(ctx, r.ver, 0) }
	r.onClose(func() { m.postponed = nil })
	stopCtl, err := r.ctl.start(r.runCtx, m, r.cancel, pipelineParts{cp: r.cp, ap: r.ap, pump: r.pump,
		estimate: r.plan.RowEstimate, copiedBefore: r.state.CopiedRows})
	if err != nil {
		return err
	}
	r.onClose(stopCtl)
	g, gctx := errgroup.WithContext(r.runCtx)
	r.group = g
	g.Go(func() error { return r.pump.Read(gctx) })
	g.Go(func() error { return r.pump.Flush(gctx) })
	prog := newProgress(o.ProgressInterval, m.rt.Progress, r.ctl)
	g.Go(func() error { prog.run(gctx); return nil })
	g.Go(func() error { return checkpointLoop(gctx, o.CheckpointInterval, r.save, m.rt.Logger) })
	g.Go(func() error { m.hooks.statusLoop(gctx, r.ctl); return nil }) // hooks.go: on-status
	if o.ExactRowcount && !r.state.CopyDone {
		g.Go(func() error { m.exactRowcount(gctx, r.ctl); return nil })
	}
	go func() {
		if err := g.Wait(); err != nil && !errors.Is(err, pipeline.ErrSwapped) {
			r.cancel(err)
		}
	}()
	return nil
}

// exactRowcount is --exact-rowcount: the rows counted (in the background;
// the copy does not wait) replace the statistics' estimate for the
// progress and the ETA.
func (m *migrator) exactRowcount(ctx context.Context, ctl *Control) {
	start := time.Now()
	var n int64
	if err := m.db.QueryRowContext(ctx, dbconn.Tag+"SELECT COUNT(*) FROM "+m.source.QuotedName()).Scan(&n); err != nil {
		if ctx.Err() == nil {
			m.rt.Logger.Warn("--exact-rowcount: counting the rows failed; the progress uses the table statistics' estimate", "err", err)
		}
		return
	}
	ctl.setEstimate(n)
	m.rt.Logger.Info("exact row count", "rows", n, "took", time.Since(start).Round(time.Millisecond))
}

// copyRows is the copy phase (skipped when the interrupted run finished it).
func (r *copyRun) copyRows() error {
	m := r.m
	if err := m.hooks.run(r.runCtx, hooks.BeforeRowCopy); err != nil {
		return err
	}
	r.ctl.setPhase(status.PhaseCopy)
	if !r.state.CopyDone {
		m.rt.Logger.Info("copying", "table", m.source.QuotedName(), "ghost", r.ghostQ, "key", r.plan.KeySource, "from", r.startPos.String(), "after", r.state.Watermark)
		if p := r.ctl.pacer(); p != nil {
			p.Begin(r.runCtx) // the probe's latency so far is the baseline
		}
		r.ctl.syncChunkTime() // a paced or capped copy's first chunks are short ones too
		if err := r.cp.Run(r.runCtx); err != nil {
			return err
		}
		// The copy's end checkpointed at once, not up to an interval later:
		// a run that stops now resumes with the copy done (a copy of a small
		// table can end between two of the loop's checkpoints, and the
		// resume tests kill the run at the pause right after it).
		if err := r.save(r.runCtx); err != nil && r.runCtx.Err() == nil {
			m.rt.Logger.Warn("checkpoint failed; will retry", "err", err)
		}
		args := []any{"rows", r.cp.Progress().Rows}
		if r.def != nil {
			args = append(args, "changes_left_to_the_copy", r.def.Stats().Skipped)
		}
		m.rt.Logger.Info("copy done", args...)
	}
	r.res.CopiedRows = r.cp.Progress().Rows
	if err := m.hooks.run(r.runCtx, hooks.RowCopyComplete); err != nil {
		return err
	}
	m.rt.Pause(r.runCtx, "copy-done")
	return nil
}

// catchUp brings the applier close behind the binlog's end; then the rows
// the applier displaced or the copy skipped under a unique key are
// restored, or proven to be duplicates the source holds.
func (r *copyRun) catchUp() error {
	r.ctl.setPhase(status.PhaseCatchUp)
	if err := r.m.catchUp(r.runCtx, r.ap); err != nil {
		return err
	}
	r.m.rt.Pause(r.runCtx, "caught-up")
	return r.ver.Restore(r.runCtx, r.m.db)
}

// checksum compares source and ghost from one point (package checksum);
// everything the applier writes from its snapshot on is verified
// incrementally up to the swap (package verify).
func (r *copyRun) checksum() error {
	m, o, plan := r.m, r.o, r.plan
	if !o.Checksum {
		m.rt.Logger.Warn("checksum skipped (--checksum=false): the new table is swapped in unverified")
		return nil
	}
	r.ctl.setPhase(status.PhaseChecksum)
	if p := r.ctl.pacer(); p != nil {
		// A run resumed after its copy has not begun pacing: the
		// checksum is paced too (once begun, Begin returns at once).
		p.Begin(r.runCtx)
	}
	cs, err := checksum.Run(r.runCtx, m.db, checksum.Config{
		Source: m.source, Ghost: plan.Ghost,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
		KeySource: plan.KeySource, KeyGhost: plan.KeyGhost, KeyIndex: plan.KeyIndex,
		MaxChunkRows: o.MaxChunkRows, Align: r.pump.Align, Pause: m.rt.Pause, Logger: m.rt.Logger,
		Throttle: r.ctl.checksumThrottleWait, Gentle: r.ctl.checksumGentle, GentleChunkTime: PacedChunkTime,
		Pace: r.ctl.checksumPace, Progress: r.ctl.checksumProgress,
	})
	r.res.Checksum = cs
	if err != nil {
		return err
	}
	if len(cs.Skipped) > 0 {
		m.rt.Logger.Warn("checksum: columns whose type changed were not compared", "columns", cs.Skipped)
	}
	m.rt.Logger.Info("checksum passed", "rows", cs.Rows, "chunks", cs.Chunks, "repaired", cs.Repaired,
		"took", cs.Took.Round(time.Millisecond), "aligning", cs.Aligning.Round(time.Millisecond))
	return m.keepVerified(r.runCtx, r.ver, 5*time.Second)
}

// cutOver swaps the ghost in (package cutover; instant.go adds the
// postponement and the blocker policy).
func (r *copyRun) cutOver() error {
	m, o := r.m, r.o
	r.ctl.setPhase(status.PhaseCutOver)
	if err := m.carryAutoIncrement(r.runCtx, nil); err != nil { // autoinc.go; again under the lock
		return r.fail(err)
	}
	cres, err := m.cutOver(r.runCtx, cutover.Config{
		Schema: o.Database, Table: o.Table, Ghost: GhostName(o.Table), Old: m.oldName,
		LockWaitTimeout: o.CutOverLockTimeout, Attempts: o.CutOverAttempts,
		WaitApplied: r.ap.WaitApplied, Armed: r.pump.Arm, Disarmed: r.pump.Disarm,
		BeforeLock: m.readyToLock(r.ap, r.ctl, func(ctx context.Context) error { return m.keepVerified(ctx, r.ver, 2*time.Second) }),
		UnderLock:  chainUnderLock(m.verifyUnderLock(r.ver), m.carryAutoIncrement), // autoinc.go
		DropOld:    o.DropOldTable, Logger: m.rt.Logger,
		Pause: func(ctx context.Context, point string) { m.rt.Pause(ctx, "cutover:"+point) },
	})
	r.cres = cres
	r.res.CutOver = cutOverReport(cres)
	if cres.LockedFor > 0 {
		r.swappedIn = true
	}
	switch {
	case err != nil && r.swappedIn:
		// The new table is in place (an abort or a failure after the swap
		// cannot undo it): say so, whatever ended the run.
		return fmt.Errorf("%w: the table WAS swapped (the new table is in place, the old one is %s): %w", errAfterSwap, orSentry(cres.OldTable, o.Table), err)
	case errors.Is(err, cutover.ErrOutcomeUnknown):
		return err // as is: whatever else ended the run, the helper tables must stay
	case err != nil:
		return r.fail(err)
	}
	if cres.Recovered {
		m.rt.Logger.Warn("the swap session lost its connection, but the server shows the tables swapped: the new table is in place")
	}
	return nil
}

// finish waits for the stream to show the RENAME: anything of T's between
// the drain point and it would be a write the swap lost. Then it stops the
// pipeline and drops the checkpoint.
func (r *copyRun) finish(ctx context.Context) error {
	m := r.m
	seen := false
	select {
	case <-r.pump.Swapped():
		seen = true
	case <-r.runCtx.Done():
		m.rt.Logger.Warn("the run was stopped after the swap: the binlog stream's check that no write reached the old table after the drain point was not done", "cause", context.Cause(r.runCtx))
	case <-time.After(time.Minute):
		m.rt.Logger.Warn("the binlog stream did not show the cut-over RENAME within a minute: the check that no write reached the old table after the drain point stops at what it read")
	}
	r.cancel(nil)
	_ = r.group.Wait()
	st := r.ap.Stats()
	r.res.Applied, r.res.AppliedRows = st.Changes, st.Rows
	if r.def != nil {
		r.res.Skipped = r.def.Stats().Skipped
	}
	if n := r.pump.Lost(); n > 0 {
		return fmt.Errorf("cut-over: %d row change(s) reached the old table after the drain point: writes lost; the old table %s is kept (also with --drop-old-table): recover them from it before running recast again", n, r.cres.OldTable)
	}
	// Not seen: the rows read after the drain point are all the check
	// has, and any is a write the swap may have lost.
	if n := r.pump.HeldRows(); !seen && n > 0 {
		return fmt.Errorf("%w: cut-over: %d row change(s) of the table were read after the drain point and the binlog stream stopped before the RENAME: writes the swap may have lost; the old table is %s", errAfterSwap, n, orSentry(r.cres.OldTable, r.o.Table))
	}
	// --drop-old-table: the cut-over left the old table under the
	// sentry's name, and it goes only once the stream has proven that no
	// write reached it after the drain point. Without that proof (the
	// stream stopped before the RENAME) it is kept under the old table's
	// name. (Killed after the drop, before the checkpoint's: the resume
	// finds a checkpoint without ghost or old table and refuses, pointing
	// to recast cleanup.)
	m.rt.Pause(ctx, "cutover:checked")
	held := r.o.DropOldTable && r.cres.OldTable == sentryName(r.o.Table)
	if held && seen {
		if err := r.dropOld(ctx); err != nil {
			return err
		}
	}
	for _, t := range []string{r.chkQ, r.marksQ} {
		if _, err := m.db.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TABLE IF EXISTS "+t); err != nil {
			m.rt.Logger.Warn("dropping a helper table failed; recast cleanup removes it", "table", t, "err", err)
		}
	}
	if held && !seen {
		line, name, err := keepOldTable(context.WithoutCancel(ctx), m.db, r.o.Database, r.o.Table)
		if err != nil {
			return fmt.Errorf("%w: the new table is in place; the old table is kept under %s (nothing proves that no write reached it after the drain point), and renaming it failed: %w; recast cleanup renames it", errAfterSwap, sentryName(r.o.Table), err)
		}
		if name != "" {
			r.cres.OldTable, r.res.CutOver.OldTable = name, name
		}
		m.rt.Logger.Warn("--drop-old-table: the old table is kept, since nothing proves that no write reached it after the drain point; drop it once you are satisfied", "done", line)
	}
	m.rt.Logger.Info("cut-over done", "attempts", r.cres.Attempts, "locked", r.cres.LockedFor.Round(time.Millisecond), "old", orSentry(r.cres.OldTable, r.o.Table))
	return nil
}

// dropOld drops the old table the cut-over left under the sentry's name
// (--drop-old-table).
func (r *copyRun) dropOld(ctx context.Context) error {
	sentry := table.QuoteIdent(r.o.Database) + "." + table.QuoteIdent(sentryName(r.o.Table))
	if _, err := r.m.db.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TABLE "+sentry); err != nil {
		return fmt.Errorf("%w: the new table is in place; dropping the old table %s failed: %w", errAfterSwap, sentry, err)
	}
	r.cres.OldTable, r.res.CutOver.OldTable = "", ""
	return nil
}

func (m *migrator) newApplier(db *sql.DB, plan *Plan, ver *verify.Verifier) (*pipeline.Applier, error) {
	var srcIdx []int
	var ghostCols, charsets []string
	for _, p := range plan.Pairs {
		srcIdx = append(srcIdx, m.source.ColumnIndex(p.Source))
		ghostCols = append(ghostCols, p.Ghost)
		charsets = append(charsets, convertFrom(m.source, plan.Ghost, p.Source, p.Ghost))
	}
	var keyIdx []int
	var keyCharsets []string
	for i, k := range plan.ApplyKeySource {
		keyIdx = append(keyIdx, m.source.ColumnIndex(k))
		keyCharsets = append(keyCharsets, convertFrom(m.source, plan.Ghost, k, plan.ApplyKeyGhost[i]))
	}
	return pipeline.New(db, pipeline.Config{
		Ghost:         table.QuoteIdent(m.opts.Database) + "." + table.QuoteIdent(GhostName(m.opts.Table)),
		SourceColumns: srcIdx, GhostColumns: ghostCols,
		KeySource: keyIdx, KeyGhost: plan.ApplyKeyGhost,
		Charsets: charsets, KeyCharsets: keyCharsets,
		Exprs: plan.Exprs, KeyExprs: plan.KeyExprs,
		Ordered: plan.Ordered, Workers: m.opts.ApplyThreads, Logger: m.rt.Logger,
		Uniques: ghostUniques(plan), Displaced: ver.Displaced, Written: ver.Written,
	})
}

// applierVars are the session variables of the applier's connections: the
// user's --set-vars, plus binlog_annotate_row_events=OFF (MariaDB) or
// binlog_rows_query_log_events=OFF (MySQL) when recast may set it (SUPER or
// BINLOG ADMIN; SYSTEM_VARIABLES_ADMIN on MySQL). MariaDB logs each
// row-based statement's text beside its rows by default (MySQL when that
// variable is ON), and the applier's statements are multi-row
// REPLACEs whose text is as long as their rows: the annotation would double
// the binlog the applier writes and every replica relays (measured with
// bench/cmd/copyform: 386 MiB instead of 182 MiB for a 1M-row table written
// by multi-row INSERTs).
func (m *migrator) applierVars(ctx context.Context) map[string]string {
	annotate := "binlog_annotate_row_events"
	if m.opts.Conn.Server.MySQL() {
		annotate = "binlog_rows_query_log_events"
	}
	vars := maps.Clone(m.opts.Conn.SetVars)
	if _, set := vars[annotate]; set {
		return vars
	}
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return vars
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"SET SESSION "+annotate+" = OFF"); err != nil {
		m.rt.Logger.Debug("the applier's statements are annotated in the binlog (setting "+annotate+" needs SUPER or BINLOG ADMIN)", "err", err)
		return vars
	}
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"SET SESSION "+annotate+" = DEFAULT"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // do not return a changed session to the pool
	}
	if vars == nil {
		vars = map[string]string{}
	}
	vars[annotate] = "OFF"
	return vars
}

// convertFrom returns the source column's charset when the ghost column
// holds characters in another charset (the applier must convert), else "".
// MySQL's JSON column (no charset) parses text: the image's bytes, bound as
// _binary, are refused (3144), so text into JSON is given its charset too.
func convertFrom(source, ghost *table.Table, src, gh string) string {
	sc := source.Columns[source.ColumnIndex(src)]
	gi := ghost.ColumnIndex(gh)
	if sc.Charset == "" || gi < 0 {
		return ""
	}
	if gc := ghost.Columns[gi]; (gc.Charset != "" && gc.Charset != sc.Charset) || (gc.DataType == "json" && sc.DataType != "json") {
		return sc.Charset
	}
	return ""
}

// catchUp waits until the applier is close behind the binlog's end.
func (m *migrator) catchUp(ctx context.Context, ap *pipeline.Applier) error {
	for {
		pos, err := binlog.CurrentPosition(ctx, m.db)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := ap.WaitApplied(ctx, pos); err != nil {
			return err
		}
		if time.Since(start) < time.Second {
			return nil
		}
	}
}

// lockBacklog bounds the apply work left for the drain under lock: no lock
// is requested until a catch-up round (applying everything the binlog held
// when the round began) took at most this long.
const lockBacklog = 50 * time.Millisecond

// readyToLock is the cut-over's BeforeLock: with the applier at full speed
// (no throttle delay from now to the end of the cut-over), it catches up in
// rounds until one takes at most lockBacklog, measured. Rounds that do not
// shrink mean the backlog is not draining: the status says so and no lock is
// requested; after the attempt's share of the budget the attempt fails
// (retryable) without having locked anything. settle, if set, runs once
// caught up (it verifies the rows written meanwhile, so that what is left
// to verify under lock is small), followed by another round that must pass.
func (m *migrator) readyToLock(ap *pipeline.Applier, ctl *Control, settle func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		ctl.setFullSpeed(true)
		ap.SetEager() // windows back to back: little left for the drain under the lock
		defer ctl.setCutOverNote("")
		o := m.opts
		limit := max(o.CutOverBudget/time.Duration(max(o.CutOverAttempts, 1)), 10*time.Second)
		rctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		var prev, took time.Duration
		notDraining := 0
		settled := false // the last step was settle
		for rounds := 1; ; rounds++ {
			pos, err := binlog.CurrentPosition(rctx, m.db)
			if err == nil {
				t0 := time.Now()
				err = ap.WaitApplied(rctx, pos)
				took = time.Since(t0)
			}
			if err != nil {
				if ctx.Err() == nil && rctx.Err() != nil {
					return fmt.Errorf("%w: no lock requested: the applier's backlog did not get below %s of apply work within %s (last catch-up round %s)",
						cutover.ErrRetry, lockBacklog, limit, took.Round(time.Millisecond))
				}
				return err
			}
			if took <= lockBacklog {
				if settle == nil || settled {
					m.rt.Logger.Debug("cut-over: caught up before requesting the lock", "round", took.Round(time.Millisecond), "rounds", rounds)
					return nil
				}
				if err := settle(rctx); err != nil {
					if ctx.Err() == nil && rctx.Err() != nil {
						return fmt.Errorf("%w: no lock requested: verifying the rows written since the checksum did not end within %s: %w", cutover.ErrRetry, limit, err)
					}
					return err
				}
				settled = true
				continue
			}
			settled = false
			if prev > 0 && took >= prev {
				notDraining++
			} else {
				notDraining = 0
			}
			prev = took
			note := fmt.Sprintf("catching up before requesting the lock: the last round took %s (the lock is requested once one takes at most %s)", took.Round(time.Millisecond), lockBacklog)
			if notDraining >= 3 {
				note = fmt.Sprintf("the applier's backlog is not draining (catch-up rounds of %s and not shrinking): no lock is requested until it does", took.Round(time.Millisecond))
				if notDraining == 3 {
					m.rt.Logger.Warn("cut-over: " + note)
				}
			}
			ctl.setCutOverNote(note)
		}
	}
}

func pairSources(p *Plan) []string {
	out := make([]string, len(p.Pairs))
	for i, pr := range p.Pairs {
		out[i] = pr.Source
	}
	return out
}

func pairGhosts(p *Plan) []string {
	out := make([]string, len(p.Pairs))
	for i, pr := range p.Pairs {
		out[i] = pr.Ghost
	}
	return out
}
