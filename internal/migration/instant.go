package migration

// The lightest method first, the metadata-lock policy, and the postponed
// cut-over.
//
// --method auto asks the server whether the ALTER can run without copying:
// it runs the ALTER with ALGORITHM=INSTANT (then NOCOPY) on an empty
// CREATE TABLE ... LIKE copy, _T_probe, dropped right after (not binlogged
// when the session may set sql_log_bin; a TEMPORARY copy cannot answer:
// MariaDB ignores ALGORITHM= for temporary tables). The server refuses an
// impossible algorithm at once (ERROR 1845/1846) without doing any work.
// If INSTANT works, the ALTER runs on the table itself with it; NOCOPY is
// used only when it builds no index (an in-place index build is serial on
// replicas and its final lock upgrade comes after the build: the copy is
// gentler). Either way the ALTER needs an exclusive metadata lock, so it runs
// under the same blocker policy and short lock waits as the cut-over.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/table"
)

// Methods a Plan can have.
const (
	MethodCopy    = "copy"    // ghost table, binlog-driven copy, cut-over
	MethodInstant = "instant" // ALTER ... ALGORITHM=INSTANT on the table
	MethodNoCopy  = "nocopy"  // ALTER ... ALGORITHM=NOCOPY: in place, no rebuild, no index build
)

// ProbeName is the empty table the method choice tries the ALTER on.
func ProbeName(t string) string { return "_" + t + "_probe" }

// methodChoice is the method and why.
type methodChoice struct {
	method, reason string
}

// MySQL errors of an ALGORITHM= the operation does not support.
const (
	erAlterNotSupported       = 1845
	erAlterNotSupportedReason = 1846
	erInnoDBMaxRowVersion     = 4092 // MySQL: the table's instant row versions are used up
	// MySQL: an INSTANT ADD COLUMN would pass the row size limit (4093;
	// 4157 counting the columns dropped instantly before) or the column
	// limit (4158): the probe, a fresh table, has no such history, the
	// table may.
	erInnoDBInstantAddTooBig = 4093
	erInnoDBInstantTooBig    = 4157
	erInnoDBInstantTooMany   = 4158
)

func notSupported(err error) bool {
	switch dbconn.Number(err) {
	case erAlterNotSupported, erAlterNotSupportedReason, erInnoDBMaxRowVersion, erInnoDBInstantAddTooBig, erInnoDBInstantTooBig, erInnoDBInstantTooMany:
		return true
	}
	return false
}

// chooseMethod decides between the copy and a native INSTANT/NOCOPY ALTER.
func (m *migrator) chooseMethod(ctx context.Context) (methodChoice, error) {
	o := m.opts
	switch {
	case o.Method == MethodCopy:
		return methodChoice{MethodCopy, "--method copy"}, nil
	case m.an.Algorithm == "COPY" && o.Method == MethodInstant:
		return methodChoice{}, errors.New("--method instant, but the ALTER asks for ALGORITHM=COPY")
	case m.an.Algorithm == "COPY":
		return methodChoice{MethodCopy, "the ALTER asks for ALGORITHM=COPY"}, nil
	}
	ch, err := m.probe(ctx)
	if err != nil {
		return methodChoice{}, err
	}
	if o.Method == MethodInstant && ch.method != MethodInstant {
		return methodChoice{}, fmt.Errorf("--method instant, but the server cannot run this ALTER with ALGORITHM=INSTANT: %s", ch.reason)
	}
	return ch, nil
}

// probe tries the ALTER with ALGORITHM=INSTANT, then NOCOPY, on an empty
// copy of the table's definition.
func (m *migrator) probe(ctx context.Context) (methodChoice, error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return methodChoice{}, err
	}
	// The session may have sql_log_bin off: never hand it back to the pool.
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
		m.rt.Logger.Debug("method probe: cannot turn sql_log_bin off (the probe table's CREATE and DROP are binlogged)", "err", err)
	}
	name := ProbeName(m.opts.Table)
	q := table.QuoteIdent(m.opts.Database) + "." + table.QuoteIdent(name)
	create := func() error {
		_, err := conn.ExecContext(ctx, dbconn.Tag+"CREATE TABLE "+q+" LIKE "+m.source.QuotedName())
		if dbconn.Number(err) == dbconn.ErTableExists {
			return fmt.Errorf("helper table %s exists (left by an interrupted run?): recast's method probe is an empty table with %s's definition; if it is that, drop it (recast cleanup), else rename it", q, m.source.QuotedName())
		}
		if err != nil {
			return fmt.Errorf("method probe: %w", err)
		}
		return nil
	}
	drop := func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TABLE IF EXISTS "+q)
	}
	try := func(algorithm string) error {
		if err := create(); err != nil {
			return err
		}
		defer drop()
		_, err := conn.ExecContext(ctx, dbconn.Tag+"ALTER TABLE "+q+" "+m.an.GhostStatement+", ALGORITHM="+algorithm)
		if err != nil {
			return err
		}
		if algorithm == "NOCOPY" {
			after, err := table.LoadTemporary(ctx, conn, m.opts.Database, name)
			if err != nil {
				return err
			}
			if built := newIndexes(m.source, after); len(built) > 0 {
				return &indexBuild{names: built}
			}
		}
		return nil
	}
	err = try("INSTANT")
	if err == nil {
		if why := m.rowVersionsFull(ctx); why != "" {
			return methodChoice{MethodCopy, why}, nil
		}
		return methodChoice{MethodInstant, "the server can apply it with ALGORITHM=INSTANT (a metadata change: no copy, no rebuild)"}, nil
	}
	if !notSupported(err) {
		if dbconn.Number(err) == 0 {
			return methodChoice{}, err // ours (helper table exists, probe failed)
		}
		// The copy's own checks will name what is wrong with the ALTER.
		return methodChoice{MethodCopy, "ALGORITHM=INSTANT probe failed: " + oneLine(err)}, nil
	}
	instantNo := oneLine(err)
	if !m.opts.Conn.Server.HasNoCopy() {
		// MySQL's INPLACE may rebuild the table: the copy is gentler.
		return methodChoice{MethodCopy, instantNo + "; MySQL has no ALGORITHM=NOCOPY (its INPLACE may rebuild the table, unthrottled): copying instead"}, nil
	}
	err = try("NOCOPY")
	var ib *indexBuild
	switch {
	case err == nil:
		return methodChoice{MethodNoCopy, "the server can apply it in place without rebuilding the table and without building an index (ALGORITHM=NOCOPY); INSTANT: " + instantNo}, nil
	case errors.As(err, &ib):
		return methodChoice{MethodCopy, fmt.Sprintf("%s; ALGORITHM=NOCOPY would build index %s in place, serially on every replica (lag) and with its final exclusive lock after the build: copying instead",
			instantNo, strings.Join(ib.names, ", "))}, nil
	case notSupported(err):
		return methodChoice{MethodCopy, instantNo}, nil
	case dbconn.Number(err) == 0:
		return methodChoice{}, err
	default:
		return methodChoice{MethodCopy, instantNo + "; ALGORITHM=NOCOPY probe failed: " + oneLine(err)}, nil
	}
}

// rowVersionsFull returns why an INSTANT ALTER must not run on the table
// itself ("" when it may): on MySQL, a table whose instant ADD/DROP COLUMNs
// reached the row-version limit refuses another (error 4092), which the
// probe, on a fresh copy of the definition, cannot see.
func (m *migrator) rowVersionsFull(ctx context.Context) string {
	limit := m.opts.Conn.Server.MaxRowVersions()
	if limit == 0 {
		return ""
	}
	var n int64
	err := m.db.QueryRowContext(ctx, "SELECT TOTAL_ROW_VERSIONS FROM information_schema.INNODB_TABLES WHERE NAME = ?",
		m.opts.Database+"/"+m.opts.Table).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		// Not under its plain name: a name InnoDB stores encoded
		// (my@002dtable) or a partitioned table (t#p#p0). The ALTER
		// itself says when the versions are used up (4092), and the
		// method falls back to the copy then (executeMethod).
		m.rt.Logger.Debug("the table's row versions are not under its plain name in information_schema.INNODB_TABLES; the ALTER will say if they are used up", "name", m.opts.Database+"/"+m.opts.Table)
		return ""
	}
	if err != nil {
		m.rt.Logger.Warn("cannot read the table's row versions (information_schema.INNODB_TABLES); copying rather than risking an INSTANT ALTER the server refuses", "err", err)
		return "the table's row versions (TOTAL_ROW_VERSIONS) could not be read: " + oneLine(err)
	}
	if n+1 > int64(limit) {
		return fmt.Sprintf("the table has %d row versions from earlier INSTANT ALTERs, the server's limit is %d: another INSTANT ADD/DROP COLUMN would be refused; copying instead (which resets them)", n, limit)
	}
	return ""
}

type indexBuild struct{ names []string }

func (e *indexBuild) Error() string { return "builds index " + strings.Join(e.names, ", ") }

// newIndexes names the indexes of after that before does not have with the
// same columns, uniqueness, shape (prefix lengths, order, index type,
// functional parts) and column types and collations: a new index, one
// dropped and added again differently under its name, or one rebuilt
// because a column of it changed (a collation change of an indexed column
// is NOCOPY on MariaDB 10.11, but rebuilds the index).
func newIndexes(before, after *table.Table) []string {
	have := map[string]bool{}
	sig := func(t *table.Table, ix table.Index) string {
		cols := make([]string, len(ix.Columns))
		for i, name := range ix.Columns {
			cols[i] = strings.ToLower(name)
			if ci := t.ColumnIndex(name); ci >= 0 {
				c := t.Columns[ci]
				cols[i] += " " + c.ColumnType + " " + c.Collation
			}
		}
		return fmt.Sprintf("%s|%v|%s|%s", strings.ToLower(ix.Name), ix.Unique, strings.Join(cols, ","), ix.Shape)
	}
	for _, ix := range before.Indexes {
		have[sig(before, ix)] = true
	}
	var out []string
	for _, ix := range after.Indexes {
		if !have[sig(after, ix)] {
			out = append(out, table.QuoteIdent(ix.Name))
		}
	}
	return out
}

// oneLine renders err on one line; a server error by its message alone.
func oneLine(err error) string {
	msg := err.Error()
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		msg = me.Message
	}
	return strings.Join(strings.Fields(msg), " ")
}

// planDryMethod is the dry run's plan for the chosen method.
func (m *migrator) planDryMethod(ctx context.Context, ch methodChoice) (*Plan, error) {
	if ch.method == MethodCopy {
		p, err := m.planDry(ctx)
		if err != nil {
			return nil, err
		}
		p.MethodReason = ch.reason
		if m.resume != nil {
			st := m.resume.state
			p.Resume = &st
		}
		return p, nil
	}
	return m.nativePlan(ch), nil
}

func (m *migrator) nativePlan(ch methodChoice) *Plan {
	return &Plan{Method: ch.method, MethodReason: ch.reason, Source: m.source, Analysis: m.an, RowEstimate: m.source.RowEstimate}
}

// describeMethod renders the plan's method lines.
func (p *Plan) describeMethod() string {
	var b strings.Builder
	switch p.Method {
	case MethodInstant, MethodNoCopy:
		algo := strings.ToUpper(p.Method)
		fmt.Fprintf(&b, "method:       %s (ALTER TABLE ... ALGORITHM=%s on the table itself: no ghost table, no copy)\n", p.Method, algo)
	default:
		fmt.Fprintf(&b, "method:       copy (ghost table %s, binlog-driven, triggerless)\n", p.GhostName)
	}
	if p.MethodReason != "" {
		fmt.Fprintf(&b, "why:          %s\n", p.MethodReason)
	}
	if p.Method == MethodInstant || p.Method == MethodNoCopy {
		b.WriteString("locking:      the ALTER needs an exclusive metadata lock for a moment: it waits for blockers first, then asks with the cut-over lock timeout\n")
	}
	return b.String()
}

// executeMethod runs the migration with the chosen method.
func (m *migrator) executeMethod(ctx context.Context, res *Result, ch methodChoice) error {
	if err := m.preparePostpone(); err != nil {
		return err
	}
	if ch.method == MethodCopy {
		err := m.execute(ctx, res)
		if res.Plan != nil {
			res.Plan.MethodReason = ch.reason
		}
		return err
	}
	err := m.executeNative(ctx, res, ch)
	if err != nil && m.opts.Method == "auto" && notSupported(err) && !errors.Is(err, mdl.ErrGaveUp) {
		m.rt.Logger.Warn("the server refused the ALTER's algorithm on the table itself, though the probe accepted it; copying instead", "algorithm", strings.ToUpper(ch.method), "err", err)
		why := "ALGORITHM=" + strings.ToUpper(ch.method) + " refused on the table: " + oneLine(err)
		*res = Result{}
		if err := m.copyChecks(ctx); err != nil {
			return err
		}
		err = m.execute(ctx, res)
		if res.Plan != nil {
			res.Plan.MethodReason = why
		}
	}
	return err
}

// executeNative runs the ALTER on the table with ALGORITHM=INSTANT or NOCOPY,
// under the metadata-lock policy.
func (m *migrator) executeNative(ctx context.Context, res *Result, ch methodChoice) error {
	o := m.opts
	res.Plan = m.nativePlan(ch)
	algo := strings.ToUpper(ch.method)
	waitSecs := max(1, int(o.CutOverLockTimeout/time.Second))
	// The lock wait is the session's lock_wait_timeout on a connection of
	// its own, on MariaDB too: a WAIT n clause would be logged with the
	// ALTER and bound the replicas' metadata-lock wait as well, where a
	// long query on a replica would then stop its replication (1205).
	stmt := fmt.Sprintf("%sALTER TABLE %s %s, ALGORITHM=%s", dbconn.Tag, m.source.QuotedName(), m.an.GhostStatement, algo)
	what := strings.ToLower(algo) + " ALTER"
	var took time.Duration
	return m.postponable(ctx, func() error {
		pol := m.blockerPolicy(ctx)
		pol.LockWaitTimeout, pol.Attempts, pol.Budget, pol.Logger = o.CutOverLockTimeout, o.CutOverAttempts, o.CutOverBudget, m.rt.Logger
		m.rt.Logger.Info("running the ALTER natively", "algorithm", algo, "table", m.source.QuotedName(), "why", ch.reason)
		rep, err := mdl.Run(ctx, *pol, what, func(ctx context.Context) error {
			start := time.Now()
			err := execWithLockWait(ctx, m.db, waitSecs, stmt)
			took = time.Since(start)
			return err
		}, dbconn.IsLockTimeout)
		res.CutOver = CutOverReport{Attempts: rep.Attempts, LockedFor: took, Waited: rep.Waited, Blockers: rep.Blockers, Kills: rep.Kills}
		if err != nil {
			res.CutOver.LockedFor = 0
			return err
		}
		m.rt.Logger.Info(what+" done", "lock_and_alter", took.Round(time.Millisecond), "attempts", rep.Attempts,
			"waited_for_blockers", rep.Waited.Round(time.Millisecond), "blockers_seen", len(rep.Blockers), "kills", len(rep.Kills))
		return nil
	})
}

// blockerPolicy is the metadata-lock policy of the options; its lock
// timeout, attempts and budget are filled in by the caller.
func (m *migrator) blockerPolicy(ctx context.Context) *mdl.Policy {
	o := m.opts
	f, err := mdl.NewFinder(ctx, m.db, mdl.Config{
		Schema: o.Database, Table: o.Table, LoadPlugin: o.LoadMDLPlugin, Logger: m.rt.Logger,
	})
	if err != nil {
		m.rt.Logger.Warn("cannot look for metadata-lock blockers; lock attempts stay bounded by --cut-over-lock-timeout", "err", err)
		f = nil
	} else {
		m.rt.Logger.Info("metadata-lock blockers are looked up in "+f.Source(), "kill_after", o.KillBlockersAfter, "kill_max_rows", o.KillMaxRows)
		if !f.Plugin() {
			const why = "the metadata_lock_info plugin is not loaded: an idle transaction that read the table can only be a possible blocker (recast treats it as one once it outlives a failed lock attempt)"
			if can, err := mdl.CanLoadPlugin(ctx, m.db); err == nil && can {
				m.rt.Logger.Warn(why + "; recommended: your user may load it, pass --load-mdl-plugin (INSTALL SONAME 'metadata_lock_info')")
			} else {
				m.rt.Logger.Warn(why + "; recommended: ask an administrator to run INSTALL SONAME 'metadata_lock_info' (it needs INSERT on mysql.plugin)")
			}
		}
	}
	return &mdl.Policy{Finder: f, KillAfter: o.KillBlockersAfter, KillMaxRows: o.KillMaxRows,
		Observe: m.rt.Control.ObserveBlockers} // nil-safe: the status page's blockers
}

// cutOver runs the copy method's cut-over under the metadata-lock policy,
// after the postponement.
func (m *migrator) cutOver(ctx context.Context, cfg cutover.Config) (cutover.Result, error) {
	var res cutover.Result
	err := m.postponable(ctx, func() error {
		cfg.Budget, cfg.Blockers = m.opts.CutOverBudget, m.blockerPolicy(ctx)
		var err error
		res, err = cutover.Run(ctx, m.db, cfg)
		return err
	})
	return res, err
}

// cutOverReport is the cut-over's part of the Result.
func cutOverReport(c cutover.Result) CutOverReport {
	return CutOverReport{Attempts: c.Attempts, LockedFor: c.LockedFor, Drain: c.Drain, Queue: c.Queue, OldTable: c.OldTable,
		Waited: c.Waited, Blockers: c.Blockers, Kills: c.Kills, Blocked: c.Blocked, AttemptLocks: c.AttemptLocks, AttemptHolds: c.AttemptHolds,
		Rename: c.Rename, LockWait: c.LockWait, UnderLock: c.UnderLock}
}

// preparePostpone creates the postpone flag file if it does not exist, so
// that the cut-over waits for the operator (as gh-ost does).
func (m *migrator) preparePostpone() error {
	f := m.opts.PostponeCutOverFlagFile
	if f == "" {
		return nil
	}
	if _, err := os.Stat(f); err == nil {
		return nil
	}
	h, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create the postpone flag file: %w", err)
	}
	m.rt.Logger.Info("created the postpone flag file: the cut-over waits until it is removed", "file", f)
	return h.Close()
}

// postponable runs step (a cut-over) once the postpone flag file is gone.
// When the step gives up (blockers outlasted the budget) and a flag file is
// configured, the file is recreated and the migration waits again instead of
// failing: the ghost stays in sync, and removing the file retries.
func (m *migrator) postponable(ctx context.Context, step func() error) error {
	f := m.opts.PostponeCutOverFlagFile
	for {
		if err := m.waitPostponed(ctx); err != nil {
			return err
		}
		if err := m.hooks.run(ctx, hooks.BeforeCutOver); err != nil { // hooks.go
			return err
		}
		err := step()
		if err == nil || f == "" || ctx.Err() != nil || !errors.Is(err, mdl.ErrGaveUp) {
			return err
		}
		if perr := m.preparePostpone(); perr != nil {
			return errors.Join(err, perr)
		}
		m.rt.Logger.Warn("the cut-over gave up and is postponed again: remove the flag file to retry", "file", f, "err", err)
	}
}

// waitPostponed blocks while the postpone flag file exists.
func (m *migrator) waitPostponed(ctx context.Context) error {
	f := m.opts.PostponeCutOverFlagFile
	if f == "" {
		return nil
	}
	exists := func() bool {
		_, err := os.Stat(f)
		return !errors.Is(err, fs.ErrNotExist)
	}
	if !exists() {
		return nil
	}
	start := time.Now()
	m.rt.Logger.Info("cut-over postponed while the flag file exists; the new table is kept in sync meanwhile", "file", f)
	if err := m.hooks.run(ctx, hooks.BeginPostponed); err != nil { // hooks.go
		return err
	}
	lastLog, lastVerified := start, start
	for exists() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if m.postponed != nil && time.Since(lastVerified) >= time.Second {
			if err := m.postponed(ctx); err != nil {
				return err
			}
			lastVerified = time.Now()
		}
		if time.Since(lastLog) >= time.Minute {
			m.rt.Logger.Info("cut-over still postponed", "file", f, "for", time.Since(start).Round(time.Second))
			lastLog = time.Now()
		}
	}
	m.rt.Logger.Info("postpone flag file removed: cutting over", "file", f, "postponed", time.Since(start).Round(time.Millisecond))
	return nil
}

// execWithLockWait runs stmt with lock_wait_timeout = secs on a session of
// its own that is closed afterwards (MySQL has no ALTER TABLE ... WAIT n;
// MariaDB would log the WAIT with the ALTER for its replicas to obey).
func execWithLockWait(ctx context.Context, db *sql.DB, secs int, stmt string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, stmt)
	return err
}
