package migration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/ddl"
	"github.com/recast-osc/recast/internal/hooks"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/table"
)

// Plan is what the migration will do; the dry run prints it.
type Plan struct {
	Method    string // "copy", "instant" or "nocopy" (instant.go)
	Source    *table.Table
	Ghost     *table.Table
	Analysis  *ddl.Analysis
	Pairs     []ddl.ColumnPair
	KeySource []string
	KeyGhost  []string
	// ApplyKeySource and ApplyKeyGhost identify rows for the applier: the
	// key above, or the new table's unique key that widens it (ddl.ApplyKey).
	ApplyKeySource, ApplyKeyGhost []string
	KeyIndex                      string
	Ordered                       bool // the key is collation-sensitive: one applier worker
	// Exprs and KeyExprs are the applier's write templates per pair and per
	// key column (convert.go); nil: plain values.
	Exprs, KeyExprs []string
	// CopyExprs are the copy's SELECT expressions per pair (convert.go).
	CopyExprs   []string
	GhostName   string
	OldName     string
	RowEstimate int64
	// DropFirst are the leftover helper tables the run drops before it
	// starts (--initially-drop-old-table, --initially-drop-ghost-table).
	DropFirst []string

	// MethodReason says why Method was chosen (instant.go).
	MethodReason string
	// Resume is the checkpoint a --resume continues from (nil otherwise).
	Resume *checkpoint.State
	// CopyLock is the copy's lock mode ("lock-free" or "share") and
	// CopyLockReason why (copy_lock.go; dry run).
	CopyLock, CopyLockReason string
}

// Result is what Run reports.
type Result struct {
	Plan        *Plan
	Executed    bool
	CopiedRows  int64
	Applied     int64 // row changes received from the binlog
	AppliedRows int64 // rows written by the applier after coalescing
	Skipped     int64 // row changes left to the copy: their rows were not copied yet (docs/copy.md)
	CutOver     CutOverReport
	Checksum    checksum.Result
	Duration    time.Duration
}

// CutOverReport is the cost of the swap.
type CutOverReport struct {
	Attempts  int
	LockedFor time.Duration // the table was locked this long (successful attempt)
	Drain     time.Duration // of which: waiting for the applier under lock
	Queue     time.Duration // of which: waiting for the RENAME to queue
	Rename    time.Duration // of which: renaming the ghost for the swap
	UnderLock time.Duration // of which: verifying under lock (UnderLock)
	LockWait  time.Duration // waiting for LOCK TABLES (before LockedFor)
	OldTable  string
	// Waited is the time spent waiting for metadata-lock blockers before
	// requesting the lock; Blockers and Kills are what was seen and done.
	Waited   time.Duration
	Blockers []mdl.Blocker
	Kills    []mdl.Kill
	// Blocked is how long application statements on the table could wait
	// behind recast's lock over all attempts (each LOCK TABLES request to
	// its UNLOCK); AttemptLocks is that per attempt.
	Blocked      time.Duration
	AttemptLocks []time.Duration
	// AttemptHolds: how long each attempt held LOCK TABLES (granted to UNLOCK).
	AttemptHolds []time.Duration
}

// Run runs the migration described by opts: a dry run (inspect and plan)
// unless opts.Execute.
func Run(ctx context.Context, opts Options, rt Runtime) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rt = rt.withDefaults()
	oldName := OldTableName(opts.Table, opts.TimestampOldTable, start)
	if opts.HooksPath != "" && rt.Control == nil {
		rt.Control = NewControl() // the hooks' progress figures
	}
	hk, err := newHookRunner(opts, rt, start, oldName) // hooks.go
	if err != nil {
		return nil, err
	}
	if err := hk.run(ctx, hooks.Startup); err != nil {
		return nil, err
	}
	defer hk.attach(rt.Control)()
	res, err := run(ctx, opts, rt, start, oldName, hk)
	if err != nil {
		_ = hk.run(context.WithoutCancel(ctx), hooks.Failure) // reported only
	} else {
		_ = hk.run(ctx, hooks.Success) // reported only
	}
	return res, err
}

// run is Run between the hooks' startup and success/failure events.
func run(ctx context.Context, opts Options, rt Runtime, start time.Time, oldName string, hk *hookRunner) (*Result, error) {
	m, err := connect(ctx, opts, rt)
	if err != nil {
		return nil, err
	}
	if m.opts.Table != opts.Table { // lower_case_table_names=1 (serverNames)
		oldName = OldTableName(m.opts.Table, opts.TimestampOldTable, start)
	}
	m.oldName, m.hooks = oldName, hk
	defer m.db.Close()
	defer m.release()
	opts = m.opts
	if opts.Resume && opts.Execute {
		// A run killed after its swap: the table is already the new one, so
		// the ALTER cannot be checked against it again; finish the clean-up.
		if swapped, err := m.killedAfterSwap(ctx); err != nil || swapped {
			if err != nil {
				return nil, err
			}
			res := &Result{Executed: true}
			err := m.finishSwapped(ctx, res)
			res.Duration = time.Since(start)
			return res, err
		}
	}
	if err := m.inspect(ctx); err != nil {
		return nil, err
	}
	if opts.Resume {
		// Before anything is created, renamed or dropped: a refusal leaves
		// every helper table as the interrupted run left it.
		if err := m.checkResume(ctx); err != nil {
			return nil, err
		}
	}
	choice, err := m.chooseMethod(ctx)
	if err != nil {
		return nil, err
	}
	if opts.Resume && choice.method != MethodCopy {
		return nil, fmt.Errorf("--resume: a checkpoint of a copy exists (%s), but --method %s chose %s (%s): continue the copy with --method copy, or drop the helper tables with `recast cleanup --database %s --table %s` and run the ALTER natively",
			checkpoint.TableName(opts.Table), opts.Method, strings.ToUpper(choice.method), choice.reason, opts.Database, opts.Table)
	}
	if choice.method == MethodCopy {
		if err := m.copyChecks(ctx); err != nil {
			return nil, err
		}
	}
	if err := m.hooksValidated(ctx); err != nil { // hooks.go
		return nil, err
	}
	res := &Result{}
	if !opts.Execute {
		plan, err := m.planDryMethod(ctx, choice)
		if err != nil {
			return nil, err
		}
		if err := m.planCopyLock(ctx, plan); err != nil { // copy_lock.go
			return nil, err
		}
		res.Plan = plan
		res.Duration = time.Since(start)
		return res, nil
	}
	if err := m.executeMethod(ctx, res, choice); err != nil {
		return res, err
	}
	res.Executed = true
	res.Duration = time.Since(start)
	return res, nil
}

// connect probes the server (the flavor is known from here on for every
// connection derived from opts.Conn: applier, replicas, cut-over) and opens the migration's pool under the server's
// semantics, not recast's: the ghost's DDL, the checks and every
// conversion run under the server's global sql_mode and time_zone (or the
// user's --set-vars), as the server's own ALTER would.
func connect(ctx context.Context, opts Options, rt Runtime) (*migrator, error) {
	opts.Conn.Schema = opts.Database
	conn, err := dbconn.Probe(ctx, opts.Conn)
	if err != nil {
		return nil, err
	}
	opts.Conn = conn
	db, err := dbconn.Open(ctx, opts.Conn)
	if err != nil {
		return nil, err
	}
	sem, err := dbconn.ReadSemantics(ctx, db, opts.Conn)
	if err == nil {
		opts.Database, opts.Table, err = serverNames(ctx, db, opts.Database, opts.Table)
		opts.Conn.Schema = opts.Database
	}
	_ = db.Close()
	if err != nil {
		return nil, err
	}
	if err := literalModes(sem.SQLMode); err != nil {
		return nil, err
	}
	opts.Conn.SQLMode, opts.Conn.TimeZone = sem.SQLMode, sem.TimeZone
	if db, err = dbconn.Open(ctx, opts.Conn); err != nil {
		return nil, err
	}
	return &migrator{opts: opts, rt: rt, db: db, sem: sem}, nil
}

// serverNames returns the schema's and the table's names as the server
// keeps them: lower case under lower_case_table_names=1, where the server
// folds the names it is given, and the binary log carries the folded ones
// (the stream matches its events by name, byte for byte: given Orders for
// orders, it saw none of the table's changes).
func serverNames(ctx context.Context, db *sql.DB, schema, tbl string) (string, string, error) {
	var lctn int
	if err := db.QueryRowContext(ctx, dbconn.Tag+"SELECT @@lower_case_table_names").Scan(&lctn); err != nil {
		return "", "", fmt.Errorf("read lower_case_table_names: %w", err)
	}
	if lctn == 1 {
		return strings.ToLower(schema), strings.ToLower(tbl), nil
	}
	return schema, tbl, nil
}

type migrator struct {
	opts   Options
	rt     Runtime          // logger, progress, pause hook, control
	sem    dbconn.Semantics // the server's sql_mode and time_zone (or --set-vars')
	db     *sql.DB
	source *table.Table
	an     *ddl.Analysis
	checks *check.Input // preflight: holds the per-table lock until release
	resume *resumeState // --resume: the validated checkpoint (checkResume)
	// postponed, if set, runs about once a second while the cut-over is
	// postponed (keeps the rows written meanwhile verified).
	postponed func(ctx context.Context) error
	// oldName is where the original table is kept after the swap
	// (OldTableName: timestamped with --timestamp-old-table).
	oldName string
	hooks   *hookRunner // --hooks-path (hooks.go); nil: none
	// appRows counts the binlog's rows events of the application's tables
	// (all but ownTables): the pacer's sign that the application writes.
	appRows atomic.Uint64
	// appAtStart: the binlog reader has reached its start position, and
	// appRows counts the application now (not history before it).
	appAtStart atomic.Bool
}

// ownTables are the tables recast writes in the source table's schema.
func ownTables(t string) []string {
	return []string{GhostName(t), HeartbeatName(t), copier.MarksName(t), checkpoint.TableName(t), ProbeName(t),
		cutover.SentryName(t), cutover.SwapName(t)}
}

// inspect runs the preflight checks (package check) in their fixed order:
// the server, the user's privileges, the table, the ALTER, what a copy
// cannot carry over, other runs (the per-table lock, taken here and held
// until release), the new definition and the data it would reject. Nothing
// persistent is created.
func (m *migrator) inspect(ctx context.Context) error {
	in := &check.Input{
		DB: m.db, Conn: m.opts.Conn, Database: m.opts.Database, Table: m.opts.Table, Alter: m.opts.Alter,
		GhostName: GhostName(m.opts.Table), OldName: m.oldName, SentryName: sentryName(m.opts.Table), SwapName: cutover.SwapName(m.opts.Table),
		CheckpointName: checkpoint.TableName(m.opts.Table), Resume: m.opts.Resume, DST: m.sem.DST,
		DropOld: m.opts.DropOldTable, Logger: m.rt.Logger,
		DropOldFirst: m.opts.InitiallyDropOldTable, DropGhostFirst: m.opts.InitiallyDropGhostTable,
	}
	if m.opts.Method != MethodCopy {
		// What only the copy needs (a chunk key, no triggers or foreign
		// keys, data the new definition accepts) does not matter to a
		// native INSTANT/NOCOPY ALTER: copyChecks runs it once the copy is
		// chosen. A column added INSTANT to a table with foreign keys or
		// triggers is not refused.
		in.Scope = check.Common
	}
	m.checks = in
	if err := check.Run(ctx, in); err != nil {
		return err
	}
	m.source, m.an = in.Source, in.Analysis
	return nil
}

// copyChecks runs the copy-only preflight checks that inspect left out
// (--method auto chose, or fell back to, the copy).
func (m *migrator) copyChecks(ctx context.Context) error {
	if m.checks == nil || m.checks.Scope != check.Common {
		return nil
	}
	m.checks.Scope = check.CopyOnly
	defer func() { m.checks.Scope = check.All }()
	return check.Run(ctx, m.checks)
}

// release releases what inspect holds: the per-table lock.
func (m *migrator) release() {
	if m.checks != nil {
		m.checks.Release()
	}
}

// planDry builds the plan on a temporary copy of the table: the ALTER is
// checked by the server itself, and nothing persistent is created.
func (m *migrator) planDry(ctx context.Context) (*Plan, error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ghost := GhostName(m.opts.Table)
	q := table.QuoteIdent(m.opts.Database) + "." + table.QuoteIdent(ghost)
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"CREATE TEMPORARY TABLE "+q+" LIKE "+m.source.QuotedName()); err != nil {
		return nil, fmt.Errorf("dry run: copy the table definition: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DROP TEMPORARY TABLE IF EXISTS "+q)
	}()
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"ALTER TABLE "+q+" "+m.an.GhostStatement); err != nil {
		return nil, fmt.Errorf("the server rejects the ALTER: %w", err)
	}
	gt, err := table.LoadTemporary(ctx, conn, m.opts.Database, ghost)
	if err != nil {
		return nil, err
	}
	p, err := m.plan(gt)
	if err != nil {
		return nil, err
	}
	if p.DropFirst, err = m.leftovers(ctx); err != nil {
		return nil, err
	}
	if err := m.checkServerComputed(ctx, conn, p); err != nil { // computed.go
		return nil, err
	}
	return p, m.checkNewAutoIncrement(ctx, p)
}

// plan maps the columns and picks the key, given the ghost's definition.
func (m *migrator) plan(ghost *table.Table) (*Plan, error) {
	pairs, err := ddl.Map(m.source, ghost, m.an)
	if err != nil {
		return nil, err
	}
	ks, kg, err := ddl.SharedKey(m.source, ghost, pairs)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Method: "copy", Source: m.source, Ghost: ghost, Analysis: m.an, Pairs: pairs,
		KeySource: ks, KeyGhost: kg, GhostName: GhostName(m.opts.Table), OldName: m.oldName,
		RowEstimate: m.source.RowEstimate,
	}
	for _, ix := range m.source.IdentifyingKeys() {
		if sameColumns(ix.Columns, ks) {
			p.KeyIndex = ix.Name
			break
		}
	}
	if p.KeyIndex == "" {
		return nil, fmt.Errorf("internal: no index holds the key (%s)", strings.Join(ks, ", "))
	}
	if m.sem.DST {
		// Key values travel as text in the server's zone: a TIMESTAMP of the
		// hour repeated when clocks go back reads the same as another, and a
		// chunk boundary could skip rows.
		for _, k := range ks {
			if m.source.Columns[m.source.ColumnIndex(k)].DataType == "timestamp" {
				return nil, fmt.Errorf("refused: the copy key includes TIMESTAMP column %s and the time zone %s has daylight-saving changes, so key values are ambiguous in it; fix: run with --set-vars time_zone='+00:00' (changes no stored TIMESTAMP; only conversions between TIMESTAMP and other types would then use UTC)",
					table.QuoteIdent(k), m.sem.TimeZone)
			}
		}
	}
	p.ApplyKeySource, p.ApplyKeyGhost = ddl.ApplyKey(m.source, ghost, pairs, ks, kg)
	if p.ApplyKeySource == nil {
		return nil, fmt.Errorf("internal: no key identifies rows in the new table (%s)", strings.Join(kg, ", "))
	}
	for _, k := range append(slices.Clone(ks), p.ApplyKeySource...) {
		if m.source.Columns[m.source.ColumnIndex(k)].CollationSensitive() {
			p.Ordered = true
		}
	}
	if p.Exprs, p.KeyExprs, err = m.convExprs(p); err != nil {
		return nil, err
	}
	p.CopyExprs = m.copyExprs(p)
	if err := m.zonedKeyUniques(p); err != nil {
		return nil, err
	}
	return p, nil
}

// zonedKeyUniques refuses a TIMESTAMP column in the applier's key under a
// zone other than UTC when the new table has a unique key the old one does
// not enforce. The rows the applier removes from the new table under such
// a key are restored by their key, which the applier reads in UTC (its
// sessions' zone) and the restore looks up in the migration's: it found
// no row, took the row for gone from the source, and the row was lost.
func (m *migrator) zonedKeyUniques(p *Plan) error {
	if m.sem.UTC {
		return nil
	}
	for _, k := range p.ApplyKeySource {
		if m.source.Columns[m.source.ColumnIndex(k)].DataType != "timestamp" {
			continue
		}
		for _, u := range ghostUniques(p) {
			if !u.Enforced {
				return fmt.Errorf("refused: the key that identifies rows includes TIMESTAMP column %s, the time zone is %s, and the new table's unique key %s is not one the table enforces: rows set aside under it could not be found again by that key; fix: run with --set-vars time_zone='+00:00' if no column converts between TIMESTAMP and another type, or make the key unique in the table first",
					table.QuoteIdent(k), m.sem.TimeZone, table.QuoteIdent(u.Name))
			}
		}
	}
	return nil
}

func sameColumns(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Describe renders the plan for the dry run.
func (p *Plan) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table:        %s (~%d rows, engine %s)\n", p.Source.QuotedName(), p.RowEstimate, p.Source.Engine)
	fmt.Fprintf(&b, "alter:        %s\n", p.Analysis.GhostStatement)
	b.WriteString(p.describeMethod())
	if p.Method != "copy" {
		return b.String()
	}
	fmt.Fprintf(&b, "chunk key:    %s (index %s)\n", strings.Join(p.KeySource, ", "), p.KeyIndex)
	b.WriteString(p.describeCopyLock())
	if p.Ordered {
		b.WriteString("apply:        one worker, coalescing (the key has collation-sensitive text columns)\n")
	} else {
		b.WriteString("apply:        parallel by key, coalescing repeated changes\n")
	}
	b.WriteString("columns:\n")
	mapped := map[string]bool{}
	for _, pr := range p.Pairs {
		mapped[strings.ToLower(pr.Source)] = true
		if strings.EqualFold(pr.Source, pr.Ghost) {
			fmt.Fprintf(&b, "  %-24s copied\n", pr.Source)
		} else {
			fmt.Fprintf(&b, "  %-24s -> %s (renamed)\n", pr.Source, pr.Ghost)
		}
	}
	for _, c := range p.Source.Columns {
		if !mapped[strings.ToLower(c.Name)] {
			reason := "dropped"
			if c.Generated {
				reason = "generated, recomputed"
			}
			fmt.Fprintf(&b, "  %-24s %s\n", c.Name, reason)
		}
	}
	for _, c := range p.Ghost.Columns {
		found := false
		for _, pr := range p.Pairs {
			if strings.EqualFold(pr.Ghost, c.Name) {
				found = true
			}
		}
		if !found {
			fmt.Fprintf(&b, "  %-24s new (default value)\n", c.Name)
		}
	}
	if r := p.Resume; r != nil {
		wm := "none (the copy starts at the first row)"
		if r.CopyDone {
			wm = "copy done"
		} else if r.Watermark != nil {
			parts := make([]string, len(r.Watermark))
			for i, v := range r.Watermark {
				parts[i] = string(v)
			}
			wm = "(" + strings.Join(parts, ", ") + ")"
		}
		fmt.Fprintf(&b, "resume:       from binlog %s, %d rows copied before, watermark %s\n", r.Pos(), r.CopiedRows, wm)
	}
	for _, n := range p.DropFirst {
		fmt.Fprintf(&b, "first:        drops the leftover table %s\n", table.QuoteIdent(n))
	}
	fmt.Fprintf(&b, "afterwards:   old table kept as %s\n", p.OldName)
	return b.String()
}

// literalModes refuses the sql_mode flags under which the values recast
// writes as literals or reads back would not be the row's: the applier
// writes each binlog image's values as literals, and under MariaDB's
// EMPTY_STRING_IS_NULL an empty string, SET or ENUM value is NULL;
// under PAD_CHAR_TO_FULL_LENGTH a CHAR reads padded to its length where its
// binlog image is not (a CHAR made VARCHAR would differ by who wrote it).
// The server's ALTER copies values field to field and is affected by
// neither.
func literalModes(mode string) error {
	for _, f := range []string{"EMPTY_STRING_IS_NULL", "PAD_CHAR_TO_FULL_LENGTH"} {
		if dbconn.HasMode(mode, f) {
			return &check.Error{Cause: fmt.Sprintf("sql_mode %s is on: the rows the applier writes would not be the server's", f),
				Fix: fmt.Sprintf("run with --set-vars \"sql_mode='%s'\" (the mode without it)", dbconn.WithoutMode(mode, f))}
		}
	}
	return nil
}
