package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// carryAutoIncrement raises the ghost's AUTO_INCREMENT counter to at least
// the old table's, as the server's own ALTER keeps it: otherwise, after
// rows with the highest ids were deleted, the new table would hand out ids
// that existed before (gh-ost's autoinc-copy-deletes). locked is the
// cut-over's locking session (the only one that may read the table while it
// is locked); nil: read through the pool (the step before the lock, which
// makes the step under the lock a no-op unless rows arrived meanwhile).
// The ghost is altered through the pool, never through locked.
func (m *migrator) carryAutoIncrement(ctx context.Context, locked *sql.Conn) error {
	ghostName := GhostName(m.opts.Table)
	ghostQ := table.QuoteIdent(m.opts.Database) + "." + table.QuoteIdent(ghostName)
	var q interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	} = m.db
	if locked != nil {
		q = locked
	}
	// The ghost's auto-increment column, if it has one (an ALTER may drop it).
	var col sql.NullString
	err := m.db.QueryRowContext(ctx, dbconn.Tag+`SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND EXTRA LIKE '%auto_increment%'`, m.opts.Database, ghostName).Scan(&col)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auto-increment: read the new table's column: %w", err)
	}
	if m.an != nil && m.an.AutoIncrement {
		// AUTO_INCREMENT=N in the ALTER: the server's ALTER ends with the
		// counter at N, or past the highest value when that is higher
		// (the old counter does not count). The ghost's may be higher
		// (rows inserted, then deleted during the migration): set it
		// again, which InnoDB raises to the highest value + 1 itself.
		return m.setGhostCounter(ctx, locked, ghostQ, m.an.AutoIncrementValue, 0)
	}
	// The old table's counter: information_schema reads InnoDB's in-memory
	// counter on MariaDB; MAX(id)+1 of the old table's own column bounds it
	// from below in case the server reports a cached value.
	old, err := counter(ctx, q, m.opts.Database, m.opts.Table)
	if err != nil {
		return err
	}
	var srcCol string
	if i := m.source.ColumnIndex(col.String); i >= 0 {
		srcCol = m.source.Columns[i].Name
	}
	if srcCol != "" {
		var mx sql.NullString
		if err := q.QueryRowContext(ctx, dbconn.Tag+"SELECT MAX("+table.QuoteIdent(srcCol)+") + 1 FROM "+m.source.QuotedName()).Scan(&mx); err == nil && mx.Valid {
			var v uint64
			if _, serr := fmt.Sscan(mx.String, &v); serr == nil && v > old {
				old = v
			}
		}
	}
	cur, err := counter(ctx, m.db, m.opts.Database, ghostName)
	if err != nil {
		return err
	}
	if old <= cur {
		return nil
	}
	return m.setGhostCounter(ctx, locked, ghostQ, old, cur)
}

// setGhostCounter runs ALTER TABLE ghost AUTO_INCREMENT = n (cur: the
// counter before, for the log).
func (m *migrator) setGhostCounter(ctx context.Context, locked *sql.Conn, ghostQ string, old, cur uint64) error {
	stmt := fmt.Sprintf("ALTER TABLE %s AUTO_INCREMENT = %d", ghostQ, old)
	if locked != nil && (m.checks == nil || m.checks.Flavor != "mysql") {
		// Under the cut-over lock: never wait long for the ghost's metadata
		// lock (a session reading the ghost); the attempt is retried.
		stmt = "SET STATEMENT lock_wait_timeout = 2 FOR " + stmt
	}
	if _, err := m.db.ExecContext(ctx, dbconn.Tag+stmt); err != nil {
		err = fmt.Errorf("auto-increment: set the new table's counter to %d: %w", old, err)
		if locked != nil && dbconn.Retryable(err) {
			return fmt.Errorf("%w: %w", cutover.ErrRetry, err)
		}
		return err
	}
	m.rt.Logger.Info("auto-increment carried over", "from", cur, "to", old, "under_lock", locked != nil)
	return nil
}

// counter reads a table's AUTO_INCREMENT counter (0: none).
func counter(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, schema, name string) (uint64, error) {
	var v sql.NullInt64
	err := q.QueryRowContext(ctx, dbconn.Tag+"SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("auto-increment: read the counter of %s: %w", name, err)
	}
	if !v.Valid || v.Int64 < 0 {
		return 0, nil
	}
	return uint64(v.Int64), nil
}

// checkNewAutoIncrement refuses an ALTER that makes an existing column
// AUTO_INCREMENT while rows hold 0 in it, unless the sql_mode has
// NO_AUTO_VALUE_ON_ZERO: the server's ALTER gives those rows new numbers (in
// the order it copies them), which the copy cannot reproduce.
func (m *migrator) checkNewAutoIncrement(ctx context.Context, p *Plan) error {
	if dbconn.HasMode(m.sem.SQLMode, "NO_AUTO_VALUE_ON_ZERO") {
		return nil
	}
	for _, pr := range p.Pairs {
		si, gi := m.source.ColumnIndex(pr.Source), p.Ghost.ColumnIndex(pr.Ghost)
		if si < 0 || gi < 0 || m.source.Columns[si].AutoIncrement || !p.Ghost.Columns[gi].AutoIncrement {
			continue
		}
		var one int
		err := m.db.QueryRowContext(ctx, dbconn.Tag+"SELECT 1 FROM "+m.source.QuotedName()+" WHERE "+table.QuoteIdent(pr.Source)+" = 0 LIMIT 1").Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", m.source.QuotedName(), err)
		}
		return fmt.Errorf("refused: the ALTER makes %s AUTO_INCREMENT and rows hold 0 in it, which the server's ALTER would renumber in its copy order; fix: give those rows their numbers first, or keep the 0s with --set-vars sql_mode='<the server's mode>,NO_AUTO_VALUE_ON_ZERO'",
			table.QuoteIdent(pr.Source))
	}
	return nil
}
