package migration

// --defer-indexes: the new table's plain secondary indexes are left out of
// the ghost while the copy fills it, and built after the copy, in one
// in-place ALTER of the ghost (ALGORITHM=INPLACE, LOCK=NONE: the applier
// keeps writing meanwhile), before the catch-up and the checksum.
//
// Measured on the server alone (bench/lateindex.sh, docs/benchmarks.md,
// Session 13): a copy into a sysbench table without its index k_1 took
// 4.8-5.4 s against 8.2-8.9 s with it (1M rows), the build 0.8-0.9 s. The
// price is the replicas': they replay the ALTER as one statement, and a
// serial replica lags by the build's duration, which no throttle can
// split. So it is not the default.
//
// Only plain non-unique keys are left out: unique keys decide what the
// copy's INSERT IGNORE keeps (and the copy and the checksum walk one), and
// FULLTEXT, SPATIAL and VECTOR keys and MySQL's functional key parts are
// kept as they are. A table with a FOREIGN KEY keeps all of its indexes
// (one may back it). The indexes are added back in their order in the
// server's own definition. The server orders keys by kind (primary and
// unique first; FULLTEXT and MariaDB's VECTOR keys last; MySQL puts keys
// on virtual columns, functional ones included, after the other plain
// ones), then in the order they were added: keys added back land after
// the kept keys of their kind. So a key is left out only if no kept key
// of its kind follows it in the definition (a SPATIAL key, or on MySQL a
// functional key after a key on a virtual column); otherwise the built
// table would list its keys in another order than the server's ALTER
// gives (measured on 10.11, 11.8 and 9.7: KEY a, SPATIAL KEY s, KEY b
// rebuilt as s, a, b; on 9.7 KEY gk (virtual g), KEY fx ((x + 1)) rebuilt
// as fx, gk).
// The ghost's whole definition is kept in the checkpoint and compared
// after the build: a difference fails the run before the cut-over. The
// checkpoint lists the keys left out: a resumed run builds what the ghost
// still lacks, with or without the flag.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/throttle"
)

// deferrableIndexes returns the definitions (as SHOW CREATE TABLE prints
// them, "KEY `name` (...) ...") of the indexes of create, a SHOW CREATE
// TABLE statement, that a copy can leave out: see above. keep names
// indexes that stay whatever they are (the copy's key).
func deferrableIndexes(create string, keep ...string) []string {
	lines := strings.Split(create, "\n")
	// Virtual columns: MySQL sorts the keys that use one (and functional
	// ones, on hidden virtual columns) after the other plain keys.
	var virtual []string
	for _, line := range lines {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "`") && strings.Contains(l, " GENERATED ALWAYS AS ") && strings.Contains(l, " VIRTUAL") {
			if n, ok := quotedPrefix(l); ok {
				virtual = append(virtual, n)
			}
		}
	}
	usesVirtual := func(rest string) bool {
		return slices.ContainsFunc(virtual, func(v string) bool { return strings.Contains(rest, table.QuoteIdent(v)) })
	}
	var out []string
	for _, line := range lines {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "CONSTRAINT ") && strings.Contains(l, " FOREIGN KEY ") || strings.HasPrefix(l, "FOREIGN KEY ") {
			return nil
		}
		if strings.HasPrefix(l, "SPATIAL KEY ") {
			out = out[:0] // kept, sorted with the plain keys: those before it stay too
			continue
		}
		if !strings.HasPrefix(l, "KEY ") {
			continue // primary, unique, FULLTEXT, VECTOR: kept, sorted apart
		}
		l = strings.TrimSuffix(l, ",")
		name, rest, ok := indexName(l)
		switch {
		case ok && strings.Contains(rest, "(("):
			// A functional key part (MySQL): kept, sorted with the keys on
			// virtual columns; those before it stay too.
			out = slices.DeleteFunc(out, func(d string) bool { _, r, _ := indexName(d); return usesVirtual(r) })
		case !ok || slices.ContainsFunc(keep, func(k string) bool { return strings.EqualFold(k, name) }):
			out = out[:0] // kept (the copy's key, a name not read): the keys before it stay too
		default:
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// quotedPrefix reads the backquoted identifier s starts with.
func quotedPrefix(s string) (string, bool) {
	n, _, ok := indexName("KEY " + s)
	return n, ok
}

// indexName reads the name of a "KEY `name` ..." definition and what
// follows it.
func indexName(def string) (name, rest string, ok bool) {
	s, found := strings.CutPrefix(def, "KEY `")
	if !found {
		return "", "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '`' { // a doubled backquote inside the name
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}

// deferIndexes drops the ghost's deferrable indexes (not keep) and returns
// their definitions and the ghost's definition before, for the checkpoint.
func (m *migrator) deferIndexes(ctx context.Context, ghostQ string, keep ...string) (defs []string, create string, err error) {
	if create, err = showCreate(ctx, m.db, ghostQ); err != nil {
		return nil, "", fmt.Errorf("--defer-indexes: read the new table's definition: %w", err)
	}
	defs = deferrableIndexes(create, keep...)
	if len(defs) == 0 {
		m.rt.Logger.Info("--defer-indexes: the new table has no index the copy can leave out (only plain non-unique keys, none followed by a kept key of their kind, and none on a table with foreign keys)")
		return nil, "", nil
	}
	drops := make([]string, len(defs))
	names := make([]string, len(defs))
	for i, d := range defs {
		n, _, _ := indexName(d)
		names[i], drops[i] = n, "DROP INDEX "+table.QuoteIdent(n)
	}
	if _, err := m.db.ExecContext(ctx, dbconn.Tag+"ALTER TABLE "+ghostQ+" "+strings.Join(drops, ", ")); err != nil {
		return nil, "", fmt.Errorf("--defer-indexes: leave the indexes out of the new table: %w", err)
	}
	m.rt.Logger.Info("--defer-indexes: the copy leaves out secondary indexes, built after it", "indexes", strings.Join(names, ","))
	return defs, create, nil
}

// showCreate returns SHOW CREATE TABLE's statement for the quoted name q.
func showCreate(ctx context.Context, db *sql.DB, q string) (string, error) {
	var name, create string
	err := db.QueryRowContext(ctx, dbconn.Tag+"SHOW CREATE TABLE "+q).Scan(&name, &create)
	return create, err
}

// autoIncrementOption is the table option a copy changes.
var autoIncrementOption = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// sameDefinition tells whether two SHOW CREATE TABLE statements of one
// table are equal but for the AUTO_INCREMENT counter.
func sameDefinition(a, b string) bool {
	return autoIncrementOption.ReplaceAllString(a, "") == autoIncrementOption.ReplaceAllString(b, "")
}

// checkBuilt compares the ghost's definition after the build with the one
// the ALTER gave it (the checkpoint's; a checkpoint of an older recast has
// none): keys built in another order than the server's would be a silent
// difference of the migrated table.
func (r *copyRun) checkBuilt() error {
	want := r.state.DeferredFrom
	if want == "" {
		return nil
	}
	got, err := showCreate(r.runCtx, r.m.db, r.ghostQ)
	if err != nil {
		return fmt.Errorf("--defer-indexes: read the new table's definition after the build: %w", err)
	}
	if !sameDefinition(want, got) {
		return fmt.Errorf("--defer-indexes: after the build the new table's definition is not the one the ALTER gave it (nothing was swapped; run without --defer-indexes): got\n%s\nwant\n%s", got, want)
	}
	return nil
}

// buildIndexes adds the indexes the checkpoint says were left out of the
// copy and the ghost does not have yet (a resumed run may have built some).
func (r *copyRun) buildIndexes() error {
	defs := r.state.DeferredIndexes
	if len(defs) == 0 {
		return nil
	}
	m, ctx := r.m, r.runCtx
	gt, err := table.Load(ctx, m.db, r.o.Database, GhostName(r.o.Table))
	if err != nil {
		return fmt.Errorf("build the deferred indexes: read the new table: %w", err)
	}
	var adds, names []string
	for _, d := range notBuilt(defs, gt) {
		n, _, ok := indexName(d)
		if !ok {
			return fmt.Errorf("build the deferred indexes: the checkpoint's definition %q is not an index's", d)
		}
		adds, names = append(adds, "ADD "+d), append(names, n)
	}
	if len(adds) == 0 {
		return r.checkBuilt()
	}
	start := time.Now()
	m.rt.Logger.Info("building the indexes left out of the copy (replicas replay this ALTER as one statement)", "indexes", strings.Join(names, ","))
	err = withLockWait(ctx, m.db, indexLockWait, func(conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, dbconn.Tag+"ALTER TABLE "+r.ghostQ+" "+strings.Join(adds, ", ")+", ALGORITHM=INPLACE, LOCK=NONE")
		return err
	})
	if err != nil {
		return fmt.Errorf("build the deferred indexes (%s): %w", strings.Join(names, ","), err)
	}
	built := time.Now()
	m.rt.Logger.Info("built the indexes left out of the copy", "indexes", strings.Join(names, ","), "took", built.Sub(start).Round(time.Millisecond))
	if err := r.checkBuilt(); err != nil {
		return err
	}
	return r.ctl.waitReplicasPast(ctx, built, m.rt.Logger)
}

// waitReplicasPast waits, when replica lag is watched (--max-lag), until
// every replica's lag, read more than --max-lag after t, is below it: the
// replica has applied a heartbeat written after t (the index build, which
// a serial replica replays as one statement, and the lag only shows once
// it has run for --max-lag). The cut-over itself does not wait for the
// replicas (docs/cutover.md); a build is the one step that can put them
// this far behind at once.
func (c *Control) waitReplicasPast(ctx context.Context, t time.Time, log *slog.Logger) error {
	th := c.th.Load()
	if th == nil {
		return nil
	}
	logged := false
	for {
		st := th.State()
		if replicasPast(st, t) {
			if logged {
				log.Info("the replicas have replayed the index build", "waited", time.Since(t).Round(time.Millisecond))
			}
			return nil
		}
		if !logged && time.Since(t) > st.MaxLag {
			log.Info("waiting for the replicas to replay the index build before going on", "max_lag", st.MaxLag)
			logged = true
		}
		if err := throttle.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// replicasPast tells whether st shows every watched replica past t: its
// lag read more than MaxLag after t, and below MaxLag. No lag watched
// (MaxLag 0, no replicas): true.
func replicasPast(st throttle.State, t time.Time) bool {
	if st.MaxLag <= 0 {
		return true
	}
	for _, r := range st.Replicas {
		if r.Err != "" || !r.At.After(t.Add(st.MaxLag)) || r.Lag >= st.MaxLag {
			return false
		}
	}
	return true
}

// indexLockWait: the index build's ALTER waits this long for the ghost's
// metadata lock, at its start and at its end (only the applier's short
// transactions hold it: recast's pool waits a few seconds at most, and a
// build that cannot take the lock at its end is lost whole).
const indexLockWait = 60 * time.Second

// withLockWait runs f on a connection of db whose lock_wait_timeout is d;
// the connection is closed after, not put back in the pool with it.
func withLockWait(ctx context.Context, db *sql.DB, d time.Duration, f func(*sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer func() { _ = conn.Raw(func(any) error { return driver.ErrBadConn }) }() // discarded, not pooled
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", int64(d/time.Second))); err != nil {
		return err
	}
	return f(conn)
}

// notBuilt returns the definitions of defs (deferrableIndexes') whose
// index t does not have; one whose name cannot be read counts as not built.
func notBuilt(defs []string, t *table.Table) []string {
	return slices.DeleteFunc(slices.Clone(defs), func(d string) bool {
		n, _, ok := indexName(d)
		return ok && slices.ContainsFunc(t.Indexes, func(ix table.Index) bool { return strings.EqualFold(ix.Name, n) })
	})
}

// withoutIndexes returns t, or a copy of it without the indexes defs define.
func withoutIndexes(t *table.Table, defs []string) *table.Table {
	if len(defs) == 0 {
		return t
	}
	c := *t
	c.Indexes = slices.DeleteFunc(slices.Clone(t.Indexes), func(ix table.Index) bool {
		return slices.ContainsFunc(defs, func(d string) bool { n, _, ok := indexName(d); return ok && strings.EqualFold(n, ix.Name) })
	})
	return &c
}
