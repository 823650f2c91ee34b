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
		case save == nil:
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
				err = fmt.Errorf("%w (and dropping %s failed: %v; run recast cleanup)", err, t, derr)
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
	stopCtl, err := ctl.start(runCtx, m, cancel, cp, ap, pump, plan.RowEstimate)
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
			Align: pump.align, Pause: o.Pause, Logger: o.Logger,
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
		BeforeAttempt: func(ctx context.Context) error { return m.keepVerified(ctx, ver, 2*time.Second) },
		UnderLock:     chainUnderLock(m.verifyUnderLock(ver), m.carryAutoIncrement), // autoinc.go
		DropOld:       o.DropOldTable, Logger: o.Logger,
		Pause: func(ctx context.Context, point string) { o.Pause(ctx, "cutover:"+point) },
	})
	res.CutOver = cutOverReport(cres)
	if cres.LockedFor > 0 {
		swappedIn = true
	}
	if err != nil {
		return fail(err)
	}
	// The stream shows the RENAME; anything of T's between the drain point and
	// it would be a write the swap lost. Wait for it, briefly.
	select {
	case <-pump.swapped:
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
	if _, err := m.db.ExecContext(ctx, dbconn.Tag+"DROP TABLE IF EXISTS "+chkQ); err != nil {
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
