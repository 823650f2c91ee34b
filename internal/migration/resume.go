package migration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/throttle"
)

// prepareGhost creates the ghost and the checkpoint table and records the
// stream's start position, or, with --resume, loads them as a killed run
// left them.
func (m *migrator) prepareGhost(ctx context.Context) (*Plan, checkpoint.State, error) {
	o := m.opts
	if o.Resume {
		return m.resumeGhost(ctx)
	}
	ghostQ := table.QuoteIdent(o.Database) + "." + table.QuoteIdent(GhostName(o.Table))
	for _, s := range []string{
		"CREATE TABLE " + ghostQ + " LIKE " + m.source.QuotedName(),
		"ALTER TABLE " + ghostQ + " " + m.an.GhostStatement,
	} {
		if _, err := m.db.ExecContext(ctx, dbconn.Tag+s); err != nil {
			return nil, checkpoint.State{}, fmt.Errorf("create the ghost table: %s: %w", s, err)
		}
	}
	// A new definition InnoDB could not build as a temporary table
	// (FULLTEXT, partitions) is checked here, on the ghost table while it
	// is still empty; a refusal drops it again (copyRun.onFailure).
	if err := check.CheckGhost(ctx, m.checks, GhostName(o.Table)); err != nil {
		return nil, checkpoint.State{}, err
	}
	gt, err := table.Load(ctx, m.db, o.Database, GhostName(o.Table))
	if err != nil {
		return nil, checkpoint.State{}, err
	}
	plan, err := m.plan(gt)
	if err != nil {
		return nil, checkpoint.State{}, err
	}
	var deferred []string
	var deferredFrom string
	if o.DeferIndexes {
		if deferred, deferredFrom, err = m.deferIndexes(ctx, ghostQ, plan.KeyIndex); err != nil {
			return nil, checkpoint.State{}, err
		}
		if len(deferred) > 0 { // the plan of the ghost as the copy fills it
			if gt, err = table.Load(ctx, m.db, o.Database, GhostName(o.Table)); err != nil {
				return nil, checkpoint.State{}, err
			}
			if plan, err = m.plan(gt); err != nil {
				return nil, checkpoint.State{}, err
			}
		}
	}
	pos, err := binlog.StartPosition(ctx, m.db) // with MariaDB's GTIDs at it
	if err != nil {
		return nil, checkpoint.State{}, err
	}
	id, err := flavor.Identity(ctx, m.db, o.Conn.Server)
	if err != nil {
		return nil, checkpoint.State{}, err
	}
	st := checkpoint.State{Alter: o.Alter, Key: plan.KeySource, Server: id, DeferredIndexes: deferred, DeferredFrom: deferredFrom,
		SQLMode: m.sem.SQLMode, TimeZone: m.sem.TimeZone}
	st.SetPos(pos)
	if err := checkpoint.Create(ctx, m.db, o.Database, o.Table); err != nil {
		return nil, st, err
	}
	return plan, st, checkpoint.Write(ctx, m.db, o.Database, o.Table, st)
}

// resumeGhost loads the checkpoint and the ghost of an interrupted run.
func (m *migrator) resumeGhost(ctx context.Context) (*Plan, checkpoint.State, error) {
	o := m.opts
	if err := m.endOrphans(ctx); err != nil {
		return nil, checkpoint.State{}, err
	}
	if err := m.restoreSwapName(ctx); err != nil {
		return nil, checkpoint.State{}, err
	}
	st, err := checkpoint.Read(ctx, m.db, o.Database, o.Table)
	if errors.Is(err, checkpoint.ErrNone) {
		return nil, st, fmt.Errorf("--resume: there is no checkpoint (%s) to resume from: run without --resume (after recast cleanup if helper tables remain)", checkpoint.TableName(o.Table))
	}
	if err != nil {
		return nil, st, err
	}
	if strings.TrimSpace(st.Alter) != strings.TrimSpace(o.Alter) {
		return nil, st, fmt.Errorf("--resume: the checkpoint is for --alter %q, not %q: pass the same ALTER, or run recast cleanup and start over", st.Alter, o.Alter)
	}
	gt, err := table.Load(ctx, m.db, o.Database, GhostName(o.Table))
	if errors.Is(err, table.ErrNotFound) {
		return nil, st, fmt.Errorf("--resume: the ghost table %s is gone: run recast cleanup and start over", GhostName(o.Table))
	}
	if err != nil {
		return nil, st, err
	}
	if err := check.CheckGhost(ctx, m.checks, GhostName(o.Table)); err != nil {
		return nil, st, err
	}
	plan, err := m.plan(gt)
	if err != nil {
		return nil, st, err
	}
	if !slices.EqualFunc(plan.KeySource, st.Key, strings.EqualFold) {
		return nil, st, fmt.Errorf("--resume: the checkpoint's key (%s) is not the key recast picks now (%s): run recast cleanup and start over",
			strings.Join(st.Key, ","), strings.Join(plan.KeySource, ","))
	}
	if st.Version < checkpoint.NumberedSince && st.Watermark != nil {
		for _, k := range plan.KeySource {
			if table.KeyNumbered(m.source.Columns[m.source.ColumnIndex(k)]) {
				return nil, st, fmt.Errorf("--resume: the checkpoint was written by an older recast, whose copy bounds for the key's %s column %s were not exact: run recast cleanup and start over",
					strings.ToUpper(m.source.Columns[m.source.ColumnIndex(k)].DataType), table.QuoteIdent(k))
			}
		}
	}
	if m.resume != nil { // where checkResume found the stream can start
		st.SetPos(m.resume.start)
		st.Server = m.resume.server
	}
	m.rt.Logger.Info("resuming", "from", st.Pos().String(), "copy_done", st.CopyDone, "rows_copied_before", st.CopiedRows)
	return plan, st, nil
}

// checkpointLoop writes a checkpoint every interval until ctx ends.
func checkpointLoop(ctx context.Context, every time.Duration, save func(context.Context) error, log *slog.Logger) error {
	if every <= 0 {
		return nil
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := save(ctx); err != nil && ctx.Err() == nil {
				log.Warn("checkpoint failed; will retry", "err", err)
			}
		}
	}
}

// killedAfterSwap reports whether a killed run completed the swap: its
// checkpoint is there, the ghost is gone (under its own name and under the
// name it takes for the swap) and the old table sits under the sentry's
// name (killed before renaming it) or under the old table's name.
//
// A table under the old table's name is this run's only when the run would
// have refused to start with one there: with --drop-old-table or
// --timestamp-old-table it can be an earlier migration's. Read as this
// run's, a run killed while it dropped its helper tables (the ghost gone,
// the checkpoint not yet) was reported done with the table untouched, and
// the earlier table was dropped. Under those flags, with no sentry, the
// swap cannot be told from that, and the resume refuses.
//
// The swap name counts: on MySQL a run killed between the ghost's rename
// for the swap and the swap itself left the ghost there and T untouched,
// with no sentry; an old table of an earlier migration under the old
// table's name then read as this run's, and the resume dropped the ghost
// and reported the ALTER done.
func (m *migrator) killedAfterSwap(ctx context.Context) (bool, error) {
	o := m.opts
	exists := func(name string) (bool, string, error) { return table.Exists(ctx, m.db, o.Database, name) }
	chk, _, err := exists(checkpoint.TableName(o.Table))
	if err != nil || !chk {
		return false, err
	}
	for _, g := range []string{GhostName(o.Table), cutover.SwapName(o.Table)} {
		ghost, _, err := exists(g)
		if err != nil || ghost {
			return false, err
		}
	}
	sentry, comment, err := exists(sentryName(o.Table))
	if err != nil || sentry {
		return sentry && comment != cutover.SentryComment, err
	}
	if o.DropOldTable || o.TimestampOldTable {
		return false, fmt.Errorf("--resume: the checkpoint %s is there but the new table is gone, and no old table is under %s: the interrupted run either swapped the tables and had dropped or renamed its old table (--drop-old-table, --timestamp-old-table), or was dropping its helper tables; check %s with SHOW CREATE TABLE, then run `recast cleanup --database %s --table %s`",
			checkpoint.TableName(o.Table), sentryName(o.Table), table.QuoteIdent(o.Database)+"."+table.QuoteIdent(o.Table), o.Database, o.Table)
	}
	old, _, err := exists(OldName(o.Table))
	return old, err
}

// finishSwapped completes the clean-up of a run killed after its swap.
func (m *migrator) finishSwapped(ctx context.Context, res *Result) error {
	o := m.opts
	// This run's old table is the sentry's when it is still there
	// (killedAfterSwap); else the swap's finish had dropped it
	// (--drop-old-table) or renamed it: a table under the old table's
	// name is this run's only without either flag. Under --drop-old-table
	// a sentry-held old table is kept all the same (cleanup renames it):
	// the killed run may not have finished its check that no write
	// reached it after the drain point, and this run cannot make it.
	held := false // an old table under the sentry's name
	{
		sentry, comment, err := table.Exists(ctx, m.db, o.Database, sentryName(o.Table))
		if err != nil {
			return err
		}
		held = sentry && comment != cutover.SentryComment
		if held && o.DropOldTable {
			m.rt.Logger.Warn("resume: the killed run had swapped the tables; its old table is kept despite --drop-old-table (nothing proves that no write reached it after the drain point): drop it once you are satisfied", "table", sentryName(o.Table))
		}
	}
	done, renamed, err := cleanup(ctx, o.Conn, o.Database, o.Table)
	for _, d := range done {
		m.rt.Logger.Info("resume: the killed run had swapped the tables; finishing its clean-up", "done", d)
	}
	if err != nil {
		return err
	}
	switch {
	case renamed != "":
		res.CutOver.OldTable = renamed
	case held:
		res.CutOver.OldTable = sentryName(o.Table) // both old names taken: left there
	case !o.DropOldTable && !o.TimestampOldTable:
		res.CutOver.OldTable = OldName(o.Table)
	}
	return nil
}

// restoreSwapName gives the ghost its name back when a run was killed in the
// middle of a cut-over attempt, after renaming it for the swap.
func (m *migrator) restoreSwapName(ctx context.Context) error {
	o := m.opts
	q := func(n string) string { return table.QuoteIdent(o.Database) + "." + table.QuoteIdent(n) }
	if ok, _, err := table.Exists(ctx, m.db, o.Database, cutover.SwapName(o.Table)); err != nil || !ok {
		return err
	}
	if _, err := m.db.ExecContext(ctx, dbconn.Tag+"RENAME TABLE "+q(cutover.SwapName(o.Table))+" TO "+q(GhostName(o.Table))); err != nil {
		return fmt.Errorf("--resume: give the ghost its name back (%s to %s): %w", cutover.SwapName(o.Table), GhostName(o.Table), err)
	}
	m.rt.Logger.Info("resume: the ghost was renamed for an interrupted swap; renamed it back", "table", GhostName(o.Table))
	return nil
}

// resumeState is a checkpoint checkResume found resumable.
type resumeState struct {
	state checkpoint.State
	ghost string // the ghost's current name (GhostName, or SwapName mid-attempt)
	// start is where the stream starts: the checkpoint's GTIDs when the
	// server has them, with its file+offset when they are this server's;
	// server is this server's identity.
	start  binlog.Position
	server string
}

// checkResume validates the checkpoint of an interrupted run against this
// command, reading only: the ALTER, the ghost's definition (what the ALTER
// makes of the table now), the key, and the position (still in the
// binlog). It runs before anything is created, renamed or dropped, so a
// refusal leaves every helper table in place.
func (m *migrator) checkResume(ctx context.Context) error {
	o := m.opts
	keep := fmt.Sprintf("the helper tables are kept; pass the matching options, or abandon the run with `recast cleanup --database %s --table %s`", o.Database, o.Table)
	st, err := checkpoint.Read(ctx, m.db, o.Database, o.Table)
	if errors.Is(err, checkpoint.ErrNone) {
		return fmt.Errorf("--resume: there is no checkpoint (%s) to resume from: run without --resume (after recast cleanup if helper tables remain)", checkpoint.TableName(o.Table))
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(st.Alter) != strings.TrimSpace(o.Alter) {
		return fmt.Errorf("--resume: the checkpoint is for --alter %q, not %q: pass the same ALTER (%s)", st.Alter, o.Alter, keep)
	}
	if st.SQLMode != "" && (st.SQLMode != m.sem.SQLMode || st.TimeZone != m.sem.TimeZone) {
		return fmt.Errorf("--resume: the interrupted run converted values under sql_mode=%q and time_zone=%q, this one would under sql_mode=%q and time_zone=%q: set them back (the server's globals, or --set-vars) (%s)",
			st.SQLMode, st.TimeZone, m.sem.SQLMode, m.sem.TimeZone, keep)
	}
	rs := &resumeState{state: st, ghost: GhostName(o.Table)}
	gt, err := table.Load(ctx, m.db, o.Database, rs.ghost)
	if errors.Is(err, table.ErrNotFound) {
		rs.ghost = cutover.SwapName(o.Table) // killed in a cut-over attempt
		gt, err = table.Load(ctx, m.db, o.Database, rs.ghost)
	}
	if errors.Is(err, table.ErrNotFound) {
		return fmt.Errorf("--resume: the ghost table %s is gone: run recast cleanup and start over", GhostName(o.Table))
	}
	if err != nil {
		return err
	}
	want, err := m.planDry(ctx)
	if err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	// Indexes a --defer-indexes run left out of the copy and has not built
	// yet are not expected (the resumed run builds them: deferidx.go).
	if d := definitionDiff(withoutIndexes(want.Ghost, notBuilt(st.DeferredIndexes, gt)), gt); d != "" {
		return fmt.Errorf("--resume: the ghost %s is not what the ALTER makes of %s now (%s): the table or the ghost changed since the checkpoint; %s",
			rs.ghost, m.source.QuotedName(), d, keep)
	}
	plan, err := m.plan(gt)
	if err != nil {
		return err
	}
	if !slices.EqualFunc(plan.KeySource, st.Key, strings.EqualFold) {
		return fmt.Errorf("--resume: the checkpoint's key (%s) is not the key recast picks now (%s); %s",
			strings.Join(st.Key, ","), strings.Join(plan.KeySource, ","), keep)
	}
	// Rows the interrupted run removed from the ghost under a unique key
	// the source does not enforce (a written row took their value), or its
	// copy skipped under one, were known to that run only, in memory: its
	// checkpoint is past them, so the resumed run neither copies nor
	// applies them again, and only the checksum finds them missing.
	if !o.Checksum {
		for _, u := range ghostUniques(plan) {
			if !u.Enforced {
				return fmt.Errorf("--resume with --checksum=false: the new table's unique key %s is not one the table enforces, and the rows the interrupted run set aside under it are found again only by the checksum: resume without --checksum=false (%s)",
					table.QuoteIdent(u.Name), keep)
			}
		}
	}
	if rs.start, rs.server, err = m.resumePosition(ctx, st); err != nil {
		return err
	}
	m.resume = rs
	m.rt.Logger.Info("--resume: the checkpoint matches", "position", st.Pos().String(), "start", rs.start.String(), "copy_done", st.CopyDone, "rows_copied_before", st.CopiedRows)
	return nil
}

// resumePosition decides where the resumed stream starts. By GTID when the
// checkpoint has GTIDs and the server still has every transaction after
// them: that survives the purge of the checkpoint's binlog file and a
// failover to a server with the same GTIDs; the file+offset is kept
// beside them only when it is this server's (same identity, file still
// there), so that comparisons stay exact. Otherwise by file+offset, which
// must be this server's and still in the binlog (a format-1 checkpoint has
// no identity: it is taken as this server's, as before).
func (m *migrator) resumePosition(ctx context.Context, st checkpoint.State) (binlog.Position, string, error) {
	srv := m.opts.Conn.Server
	id, err := flavor.Identity(ctx, m.db, srv)
	if err != nil {
		return binlog.Position{}, "", fmt.Errorf("--resume: %w", err)
	}
	logs, err := binaryLogs(ctx, m.db)
	if err != nil {
		return binlog.Position{}, "", fmt.Errorf("--resume: list the binary logs: %w", err)
	}
	fileHere := false
	if st.File != "" && (st.Server == "" || st.Server == id) {
		for _, f := range logs {
			if f.name == st.File {
				fileHere = f.size >= int64(st.Offset)
			}
		}
	}
	whyNot := "the checkpoint has no GTIDs"
	if st.GTID != "" {
		on, err := flavor.GTIDEnabled(ctx, m.db, srv)
		if err != nil {
			return binlog.Position{}, "", fmt.Errorf("--resume: %w", err)
		}
		whyNot = "the server does not run with gtid_mode=ON"
		if on {
			ok, why, err := flavor.GTIDAvailable(ctx, m.db, srv, st.GTID)
			if err != nil {
				return binlog.Position{}, "", fmt.Errorf("--resume: check the checkpoint's GTIDs: %w", err)
			}
			if ok {
				p := binlog.Position{GTID: st.GTID}
				if fileHere {
					p.File, p.Offset = st.File, st.Offset
				}
				return p, id, nil
			}
			whyNot = "its GTIDs cannot be streamed from: " + why
		}
	}
	if fileHere {
		return binlog.Position{File: st.File, Offset: st.Offset}, id, nil
	}
	where := "is no longer on the server (purged)"
	if st.Server != "" && st.Server != id {
		where = fmt.Sprintf("belongs to another server (%s; this is %s)", st.Server, id)
	}
	return binlog.Position{}, "", fmt.Errorf("--resume: the checkpoint's binlog position %s %s, and %s: the changes since it cannot be replayed; run recast cleanup and start over", st.Pos(), where, whyNot)
}

// definitionDiff describes how got differs from want in what the copy and
// the applier rely on (columns, their types, indexes), or "" when it does not.
func definitionDiff(want, got *table.Table) string {
	col := func(c table.Column) string {
		return fmt.Sprintf("%s %s null=%v collation=%s generated=%v", strings.ToLower(c.Name), c.ColumnType, c.Nullable, c.Collation, c.Generated)
	}
	var diffs []string
	if len(want.Columns) != len(got.Columns) {
		diffs = append(diffs, fmt.Sprintf("%d columns, expected %d", len(got.Columns), len(want.Columns)))
	} else {
		for i := range want.Columns {
			if w, g := col(want.Columns[i]), col(got.Columns[i]); w != g {
				diffs = append(diffs, fmt.Sprintf("column %q, expected %q", g, w))
			}
		}
	}
	ix := func(t *table.Table) string {
		var out []string
		for _, i := range t.Indexes {
			out = append(out, fmt.Sprintf("%s unique=%v (%s)", strings.ToLower(i.Name), i.Unique, strings.ToLower(strings.Join(i.Columns, ","))))
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	if w, g := ix(want), ix(got); w != g {
		diffs = append(diffs, fmt.Sprintf("indexes %s, expected %s", g, w))
	}
	return strings.Join(diffs, "; ")
}

// orphanWait bounds the wait for a killed run's statements to end.
const orphanWait = 2 * time.Minute

// endOrphans ends the statements a killed run left running on the ghost
// and waits until they are gone. The server notices a client gone only
// when its statement ends: a lock-free copy chunk's INSERT ... SELECT
// (reading a snapshot older than the changes the resumed run replays), an
// applier's or a repair's write could otherwise commit a stale row after
// the resumed run had applied a newer change to it. Its statements are
// recognised by recast's tag and the ghost's name (under its own name or
// the swap's), in this schema; the per-table lock, held now, keeps any
// live run of this table away.
func (m *migrator) endOrphans(ctx context.Context) error {
	o := m.opts
	names := []string{table.QuoteIdent(GhostName(o.Table)), table.QuoteIdent(cutover.SwapName(o.Table))}
	find := func() ([]int64, error) {
		// The flavor's processlist: MySQL's information_schema.PROCESSLIST
		// fails whole (3854) while a statement holds 4-byte or binary text.
		rows, err := m.db.QueryContext(ctx, dbconn.Tag+`SELECT ID, IFNULL(DB, ''), INFO FROM `+o.Conn.Server.Processlist()+`
			WHERE ID <> CONNECTION_ID() AND INFO LIKE '/* recast */%'`)
		if err != nil {
			return nil, fmt.Errorf("--resume: look for the killed run's statements: %w", err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			var db, info string
			if err := rows.Scan(&id, &db, &info); err != nil {
				return nil, err
			}
			if orphanOf(info, db, o.Database, names) {
				ids = append(ids, id)
			}
		}
		return ids, rows.Err()
	}
	ids, err := find()
	if err != nil || len(ids) == 0 {
		return err
	}
	m.rt.Logger.Info("resume: ending statements the killed run left running on the new table", "sessions", ids)
	for _, id := range ids {
		if _, err := m.db.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil && dbconn.Number(err) != dbconn.ErNoSuchThread {
			return fmt.Errorf("--resume: end session %d, which the killed run left writing to the new table (it could write a stale row): %w", id, err)
		}
	}
	deadline := time.Now().Add(orphanWait)
	for {
		left, err := find()
		if err != nil || len(left) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("--resume: sessions %v, which the killed run left writing to the new table, did not end within %s (killed; still rolling back?): resume again once they are gone", left, orphanWait)
		}
		if err := throttle.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// orphanOf tells whether a tagged statement (its text info, run in
// database db) writes to one of the ghost's names in schema.
func orphanOf(info, db, schema string, names []string) bool {
	qs := table.QuoteIdent(schema) + "."
	for _, n := range names {
		for rest, at := info, 0; ; {
			i := strings.Index(rest, n)
			if i < 0 {
				break
			}
			before := info[:at+i]
			if strings.HasSuffix(before, ".") {
				if strings.HasSuffix(before, qs) {
					return true // schema.name
				}
			} else if db == schema {
				return true // name, in the session's schema
			}
			rest, at = rest[i+len(n):], at+i+len(n)
		}
	}
	return false
}
