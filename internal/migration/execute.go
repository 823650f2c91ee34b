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

	"github.com/recast-osc/recast/internal/apply"
	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/verify"
)

func sentryName(t string) string { return cutover.SentryName(t) }

// errSwapped ends the stream once the binlog shows the cut-over's RENAME.
var errSwapped = errors.New("table swapped")

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

// execute runs the copy method: ghost, stream, copy, catch up, checksum, cut over.
func (m *migrator) execute(ctx context.Context, res *Result) (err error) {
	o := m.opts
	ghostQ := table.QuoteIdent(o.Database) + "." + table.QuoteIdent(GhostName(o.Table))
	chkQ := table.QuoteIdent(o.Database) + "." + table.QuoteIdent(checkpoint.TableName(o.Table))
	swappedIn := false
	var save func(context.Context) error // writes a checkpoint, once the pipeline runs
	defer func() {
		if err == nil || swappedIn {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		switch {
		case save == nil && o.Resume:
			// The resumed run failed before its pipeline started: the
			// interrupted run's ghost and checkpoint are all there is.
			err = fmt.Errorf("%w; the helper tables (%s, %s) are kept for another --resume, or recast cleanup", err, ghostQ, chkQ)
			return
		case save == nil:
		case errors.Is(err, cutover.ErrOutcomeUnknown):
			// (Before the interrupted case: an interruption does not make
			// the outcome known.)
			// Whether the table was swapped is not certain: drop nothing,
			// keep the position for --resume.
			if serr := save(cctx); serr != nil {
				err = fmt.Errorf("%w (and saving the checkpoint failed: %w)", err, serr)
			}
			err = fmt.Errorf("%w; every helper table is kept (%s, %s)", err, ghostQ, chkQ)
			return
		case ctx.Err() != nil:
			// Interrupted: keep the ghost and the checkpoint for --resume.
			if serr := save(cctx); serr == nil {
				err = fmt.Errorf("%w: %w; the original table is untouched; continue with the same command plus --resume", ErrInterrupted, err)
				return
			}
		case errors.Is(err, mdl.ErrGaveUp):
			// The cut-over could not get its lock: the copy is complete and
			// verified, and hours of it may be at stake. Keep it.
			if serr := save(cctx); serr == nil {
				err = fmt.Errorf("%w; the copy is kept (%s, %s): once the blockers are gone, run the same command plus --resume (it catches up, verifies again and retries the cut-over), or recast cleanup to drop it", err, ghostQ, chkQ)
				return
			}
		}
		for _, t := range []string{ghostQ, chkQ} {
			if _, derr := m.db.ExecContext(cctx, dbconn.Tag+"DROP TABLE IF EXISTS "+t); derr != nil {
				err = fmt.Errorf("%w (and dropping %s failed: %w; run recast cleanup)", err, t, derr)
			}
		}
	}()

	// Phase: ghost table and the position to stream from (fresh, or resumed).
	plan, state, err := m.prepareGhost(ctx)
	if err != nil {
		return err
	}
	if err := m.checkNewAutoIncrement(ctx, plan); err != nil { // autoinc.go
		return err
	}
	res.Plan = plan
	o.Pause(ctx, "ghost-created")
	startPos := state.Pos()

	// Phase: stream from that position, before the copy starts.
	stream, err := binlog.Open(ctx, binlog.Config{
		Host: o.Conn.Host, Port: uint16(o.Conn.Port), User: o.Conn.User, Password: o.Conn.Password,
		ServerID: o.ServerID, Table: m.source, MySQL: o.Conn.Server.MySQL(), Logger: o.Logger,
	}, startPos)
	if err != nil {
		return fmt.Errorf("open the binlog stream: %w", err)
	}
	defer stream.Close()

	applyConn := o.Conn
	applyConn.MaxOpen = o.ApplyThreads + 2
	applyConn.SetVars = m.applierVars(ctx)
	// The applier writes binlog images: TIMESTAMPs rendered in UTC, so its
	// sessions run in UTC and the columns whose conversion depends on the
	// zone carry an expression (applyExprs); strict, so a value the copy
	// would refuse with a warning fails the applier too.
	applyConn.TimeZone = "+00:00"
	applyConn.SQLMode = dbconn.WithMode(m.sem.SQLMode, "STRICT_ALL_TABLES")
	applyDB, err := dbconn.Open(ctx, applyConn)
	if err != nil {
		return err
	}
	defer applyDB.Close()
	ver := m.newVerifier(plan)
	ap, err := m.newApplier(applyDB, plan, ver)
	if err != nil {
		return err
	}
	ap.SetApplied(startPos)

	ctl := m.control() // control.go: throttle, status, settings changed at run time
	cp, err := copier.New(m.db, copier.Config{
		Source: m.source, Ghost: ghostQ,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
		KeyColumns: plan.KeySource, KeyIndex: plan.KeyIndex,
		ChunkTime: o.ChunkTime, MaxChunk: o.MaxChunkRows, Threads: o.Threads, Logger: o.Logger, Throttle: ctl.throttleWait,
		AfterChunk: func(ctx context.Context, lo, hi []any) error { return ver.Missing(ctx, m.db, lo, hi) },
		Start:      checkpoint.DecodeKey(m.source, plan.KeySource, state.Watermark),
	})
	if err != nil {
		return err
	}
	save = func(ctx context.Context) error {
		st := state
		st.File, st.Offset = ap.Applied().File, ap.Applied().Offset // applied first, then the watermark
		wm, done := cp.Watermark()
		st.Watermark, st.CopyDone = checkpoint.EncodeKey(wm), state.CopyDone || done
		st.CopiedRows = state.CopiedRows + cp.Progress().Rows
		return checkpoint.Write(ctx, m.db, o.Database, o.Table, st)
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pump := &pump{stream: stream, ap: ap, swapped: make(chan struct{}), delay: ctl.applierDelay}
	m.postponed = func(ctx context.Context) error { return m.keepVerified(ctx, ver, 0) }
	defer func() { m.postponed = nil }()
	stopCtl, err := ctl.start(runCtx, m, cancel, cp, ap, pump, plan.RowEstimate, state.CopiedRows)
	if err != nil {
		return err
	}
	defer stopCtl()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return pump.read(gctx) })
	g.Go(func() error { return pump.flush(gctx) })
	prog := newProgress(o, ctl)
	g.Go(func() error { prog.run(gctx); return nil })
	g.Go(func() error { return checkpointLoop(gctx, o.CheckpointInterval, save, o) })
	// Any failure of the stream or the applier ends the migration.
	go func() {
		if err := g.Wait(); err != nil && !errors.Is(err, errSwapped) {
			cancel(err)
		}
	}()
	fail := func(err error) error {
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}

	// Phase: copy.
	ctl.setPhase(status.PhaseCopy)
	if !state.CopyDone {
		o.Logger.Info("copying", "table", m.source.QuotedName(), "ghost", ghostQ, "key", plan.KeySource, "from", startPos.String(), "after", state.Watermark)
		if err := cp.Run(runCtx); err != nil {
			return fail(err)
		}
	}
	res.CopiedRows = cp.Progress().Rows
	o.Pause(runCtx, "copy-done")

	// Phase: catch up, so the cut-over's drain under lock is short.
	ctl.setPhase(status.PhaseCatchUp)
	if err := m.catchUp(runCtx, ap); err != nil {
		return fail(err)
	}
	o.Pause(runCtx, "caught-up")

	// Rows the applier displaced or the copy skipped under a unique key are
	// restored now, or proven to be duplicates the source holds.
	if err := ver.Restore(runCtx, m.db); err != nil {
		return fail(err)
	}

	// Phase: checksum, the gate to the cut-over.
	if o.Checksum {
		ctl.setPhase(status.PhaseChecksum)
		cs, err := checksum.Run(runCtx, m.db, checksum.Config{
			Source: m.source, Ghost: plan.Ghost,
			SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
			KeySource: plan.KeySource, KeyGhost: plan.KeyGhost, KeyIndex: plan.KeyIndex,
			MaxChunkRows: o.MaxChunkRows, Align: pump.align, Pause: o.Pause, Logger: o.Logger,
		})
		res.Checksum = cs
		if err != nil {
			return fail(err)
		}
		if len(cs.Skipped) > 0 {
			o.Logger.Warn("checksum: columns whose type changed were not compared", "columns", cs.Skipped)
		}
		o.Logger.Info("checksum passed", "rows", cs.Rows, "chunks", cs.Chunks, "repaired", cs.Repaired,
			"took", cs.Took.Round(time.Millisecond), "aligning", cs.Aligning.Round(time.Millisecond))
		// Everything the applier wrote since the checksum's snapshot is
		// verified incrementally from here to the swap (package verify).
		if err := m.keepVerified(runCtx, ver, 5*time.Second); err != nil {
			return fail(err)
		}
	} else {
		o.Logger.Warn("checksum skipped (--checksum=false): the new table is swapped in unverified")
	}

	// Phase: cut-over.
	ctl.setPhase(status.PhaseCutOver)
	if err := m.carryAutoIncrement(runCtx, nil); err != nil { // autoinc.go; again under the lock
		return fail(err)
	}
	cres, err := m.cutOver(runCtx, cutover.Config{ // instant.go: postponement, blocker policy
		Schema: o.Database, Table: o.Table, Ghost: GhostName(o.Table), Old: OldName(o.Table),
		LockWaitTimeout: o.CutOverLockTimeout, Attempts: o.CutOverAttempts,
		WaitApplied: ap.WaitApplied, Armed: pump.arm, Disarmed: pump.disarm,
		BeforeLock: m.readyToLock(ap, ctl, func(ctx context.Context) error { return m.keepVerified(ctx, ver, 2*time.Second) }),
		UnderLock:  chainUnderLock(m.verifyUnderLock(ver), m.carryAutoIncrement), // autoinc.go
		DropOld:    o.DropOldTable, Logger: o.Logger,
		Pause: func(ctx context.Context, point string) { o.Pause(ctx, "cutover:"+point) },
	})
	res.CutOver = cutOverReport(cres)
	if cres.LockedFor > 0 {
		swappedIn = true
	}
	if err != nil && swappedIn {
		// The new table is in place (an abort or a failure after the swap
		// cannot undo it): say so, whatever ended the run.
		return fmt.Errorf("%w: the table WAS swapped (the new table is in place, the old one is %s): %w", errAfterSwap, orSentry(cres.OldTable, o.Table), err)
	}
	if errors.Is(err, cutover.ErrOutcomeUnknown) {
		return err // as is: whatever else ended the run, the helper tables must stay
	}
	if err != nil {
		return fail(err)
	}
	if cres.Recovered {
		o.Logger.Warn("the swap session lost its connection, but the server shows the tables swapped: the new table is in place")
	}
	// The stream shows the RENAME; anything of T's between the drain point and
	// it would be a write the swap lost. Wait for it, briefly.
	select {
	case <-pump.swapped:
	case <-runCtx.Done():
		o.Logger.Warn("the run was stopped after the swap: the binlog stream's check that no write reached the old table after the drain point was not done", "cause", context.Cause(runCtx))
	case <-time.After(10 * time.Second):
		o.Logger.Warn("the binlog stream did not show the cut-over RENAME within 10s")
	}
	cancel(nil)
	_ = g.Wait()
	st := ap.Stats()
	res.Applied, res.AppliedRows = st.Changes, st.Rows
	if n := pump.lost.Load(); n > 0 {
		return fmt.Errorf("cut-over: %d row change(s) reached the old table after the drain point: writes lost; the old table is %s", n, cres.OldTable)
	}
	if _, err := m.db.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TABLE IF EXISTS "+chkQ); err != nil {
		o.Logger.Warn("dropping the checkpoint table failed; recast cleanup removes it", "table", chkQ, "err", err)
	}
	o.Logger.Info("cut-over done", "attempts", cres.Attempts, "locked", cres.LockedFor.Round(time.Millisecond), "old", cres.OldTable)
	return nil
}

func (m *migrator) newApplier(db *sql.DB, plan *Plan, ver *verify.Verifier) (*apply.Applier, error) {
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
	return apply.New(db, apply.Config{
		Ghost:         table.QuoteIdent(m.opts.Database) + "." + table.QuoteIdent(GhostName(m.opts.Table)),
		SourceColumns: srcIdx, GhostColumns: ghostCols,
		KeySource: keyIdx, KeyGhost: plan.ApplyKeyGhost,
		Charsets: charsets, KeyCharsets: keyCharsets,
		Exprs: plan.Exprs, KeyExprs: plan.KeyExprs,
		Ordered: plan.Ordered, Workers: m.opts.ApplyThreads, Logger: m.opts.Logger,
		Uniques: ghostUniques(plan), Displaced: ver.Displaced, Written: ver.Written,
	})
}

// applierVars are the session variables of the applier's connections: the
// user's --set-vars, plus binlog_annotate_row_events=OFF when recast may set
// it (SUPER or BINLOG ADMIN). MariaDB logs each row-based statement's text
// beside its rows by default, and the applier's statements are multi-row
// REPLACEs whose text is as long as their rows: the annotation would double
// the binlog the applier writes and every replica relays (measured with
// bench/cmd/copyform: 386 MiB instead of 182 MiB for a 1M-row table written
// by multi-row INSERTs).
func (m *migrator) applierVars(ctx context.Context) map[string]string {
	const annotate = "binlog_annotate_row_events"
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
		m.opts.Logger.Debug("the applier's statements are annotated in the binlog (setting "+annotate+" needs SUPER or BINLOG ADMIN)", "err", err)
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
func convertFrom(source, ghost *table.Table, src, gh string) string {
	sc := source.Columns[source.ColumnIndex(src)]
	gi := ghost.ColumnIndex(gh)
	if sc.Charset == "" || gi < 0 {
		return ""
	}
	if gc := ghost.Columns[gi]; gc.Charset != "" && gc.Charset != sc.Charset {
		return sc.Charset
	}
	return ""
}

// catchUp waits until the applier is close behind the binlog's end.
func (m *migrator) catchUp(ctx context.Context, ap *apply.Applier) error {
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
func (m *migrator) readyToLock(ap *apply.Applier, ctl *Control, settle func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		ctl.setFullSpeed(true)
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
					o.Logger.Debug("cut-over: caught up before requesting the lock", "round", took.Round(time.Millisecond), "rounds", rounds)
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
					o.Logger.Warn("cut-over: " + note)
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
