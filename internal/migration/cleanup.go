package migration

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/copier"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Cleanup removes what an interrupted run left behind for database.table:
// the ghost table and the cut-over sentry. It never drops the table itself,
// nor the kept old tables (_T_old, _T_<timestamp>_old). A table under the
// sentry's name that is not a sentry is an old table whose final rename was
// interrupted: it is renamed to the old table's name, or to a timestamped
// one if that is taken (as --timestamp-old-table names them). It returns one
// line per action taken.
func Cleanup(ctx context.Context, conn dbconn.Config, database, tbl string) ([]string, error) {
	done, _, err := cleanup(ctx, conn, database, tbl)
	return done, err
}

// cleanup is Cleanup; it also returns the name the interrupted swap's old
// table was given ("" when there was none under the sentry's name).
func cleanup(ctx context.Context, conn dbconn.Config, database, tbl string) (done []string, renamed string, _ error) {
	conn.Schema = database
	db, err := dbconn.Open(ctx, conn)
	if err != nil {
		return nil, "", err
	}
	defer db.Close()
	// Never clean up under a running migration of the same table.
	lock, err := check.AcquireLock(ctx, db, database, tbl)
	if err != nil {
		return nil, "", err
	}
	defer lock.Release()
	q := func(n string) string { return table.QuoteIdent(database) + "." + table.QuoteIdent(n) }

	exists := func(name string) (bool, string, error) { return table.Exists(ctx, db, database, name) }

	// The checkpoint first: one left without its ghost would read as a run
	// killed after its swap (killedAfterSwap).
	for _, h := range []struct{ name, what string }{
		{checkpoint.TableName(tbl), "checkpoint table"},
		{GhostName(tbl), "ghost table"},
		{cutover.SwapName(tbl), "ghost table (renamed for an interrupted swap)"},
		{HeartbeatName(tbl), "heartbeat table"},
		{copier.MarksName(tbl), "copy watermark table"},
	} {
		ok, _, err := exists(h.name)
		if err != nil {
			return done, "", err
		}
		if ok {
			if _, err := db.ExecContext(ctx, dbconn.Tag+"DROP TABLE "+q(h.name)); err != nil {
				return done, "", fmt.Errorf("drop %s: %w", q(h.name), err)
			}
			done = append(done, "dropped "+h.what+" "+q(h.name))
		}
	}

	sentry := sentryName(tbl)
	ok, comment, err := exists(sentry)
	if err != nil {
		return done, "", err
	}
	if ok {
		if comment == cutover.SentryComment {
			if _, err := db.ExecContext(ctx, dbconn.Tag+"DROP TABLE "+q(sentry)); err != nil {
				return done, "", fmt.Errorf("drop %s: %w", q(sentry), err)
			}
			done = append(done, "dropped cut-over sentry "+q(sentry))
		} else {
			line, name, err := keepOldTable(ctx, db, database, tbl)
			if err != nil {
				return done, "", err
			}
			done, renamed = append(done, line), name
		}
	}
	return done, renamed, nil
}

// keepOldTable renames the old table under the sentry's name to the old
// table's name, or to a timestamped one if that is taken (as
// --timestamp-old-table names them), and leaves it there when both are. It
// returns what it did and the name given ("" when left).
func keepOldTable(ctx context.Context, db *sql.DB, database, tbl string) (string, string, error) {
	q := func(n string) string { return table.QuoteIdent(database) + "." + table.QuoteIdent(n) }
	sentry := sentryName(tbl)
	old := OldName(tbl)
	taken, _, err := table.Exists(ctx, db, database, old)
	if ts := OldTableName(tbl, true, time.Now()); err == nil && taken && len(ts) <= 64 {
		old = ts
		taken, _, err = table.Exists(ctx, db, database, old)
	}
	if err != nil {
		return "", "", err
	}
	if taken {
		return fmt.Sprintf("left %s alone: it holds the previous original table, and %s exists; rename or drop one of them yourself", q(sentry), q(old)), "", nil
	}
	if _, err := db.ExecContext(ctx, dbconn.Tag+"RENAME TABLE "+q(sentry)+" TO "+q(old)); err != nil {
		return "", "", fmt.Errorf("rename %s to %s: %w", q(sentry), q(old), err)
	}
	return fmt.Sprintf("renamed the previous original table %s to %s", q(sentry), q(old)), old, nil
}
