package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
)

// Deferrer is the pipeline's side of the lock-free copy
// (pipeline.Deferrer): Open registers a chunk's key range and returns the
// mark to commit as its low watermark; Close says the chunk's statement is
// over, so the changes held for the range may be applied.
type Deferrer interface {
	Open(lo, hi []any) int64
	Close(id int64)
}

// MarksName is the name of the lock-free copy's watermark table for table t.
func MarksName(t string) string { return "_" + t + "_wm" }

// CreateMarks creates the watermark table (quoted name q) if it is missing.
func CreateMarks(ctx context.Context, db *sql.DB, q string) error {
	_, err := db.ExecContext(ctx, dbconn.Tag+"CREATE TABLE IF NOT EXISTS "+q+
		" (slot INT NOT NULL PRIMARY KEY, mark BIGINT NOT NULL) ENGINE=InnoDB")
	return err
}

// LockFreeSupport says whether the server makes commits visible in binlog
// order, which the lock-free copy's correctness rests on (docs/copy.md):
// MariaDB always does (commit_ordered runs in binlog order and makes a
// transaction visible); MySQL does when binlog_order_commits is ON. It also
// requires READ COMMITTED sessions (an INSERT ... SELECT then reads its
// source as a consistent read). ok false comes with the reason.
func LockFreeSupport(ctx context.Context, db *sql.DB) (ok bool, why string, err error) {
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return false, "", err
	}
	if srv.MySQL() {
		var on int
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.binlog_order_commits").Scan(&on); err != nil {
			return false, "", err
		}
		if on == 0 {
			return false, "binlog_order_commits=OFF: commits may become visible out of binlog order", nil
		}
	}
	var iso string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION."+srv.IsolationVar()).Scan(&iso); err != nil {
		return false, "", err
	}
	if !strings.EqualFold(iso, "READ-COMMITTED") {
		return false, "the copy's sessions run at " + iso + ", not READ-COMMITTED", nil
	}
	// Prepared XA transactions are visible at XA COMMIT, not where their
	// rows are in the binlog: chunks check for them (XA RECOVER).
	if err := xaRecoverAllowed(ctx, db); err != nil {
		if dbconn.Number(err) != 0 {
			return false, fmt.Sprintf("XA RECOVER is refused (%v): prepared XA transactions could not be seen", err), nil
		}
		return false, "", err
	}
	return true, "", nil
}

// xaRecoverAllowed runs XA RECOVER (its rows are not needed).
func xaRecoverAllowed(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

// lockFree is the state of a lock-free copy.
type lockFree struct {
	def   Deferrer
	marks string // quoted watermark table
	// unordered: a chunk found binlog_order_commits OFF (logged once).
	unordered atomic.Bool
}

// copyChunkLockFree copies (lo, hi] without locking the source rows: the
// range is registered with the pipeline, a low watermark committed, then the
// chunk's INSERT IGNORE ... SELECT runs as a consistent read (READ
// COMMITTED), and the range is closed once the statement is over.
func (c *Copier) copyChunkLockFree(ctx context.Context, slot int, lo, hi []any) (int64, error) {
	lf := c.lf
	id := lf.def.Open(lo, hi)
	closeRange := true
	defer func() {
		if closeRange {
			lf.def.Close(id)
		}
	}()
	k := c.cfg.KeyColumns
	where, args := table.RangeWhere(k, lo, hi)
	base := dbconn.Tag + "INSERT IGNORE INTO " + c.cfg.Ghost + " (" + table.QuoteIdents(c.cfg.GhostColumns) + ") SELECT " +
		c.selectList() + " FROM " + c.cfg.Source.QuotedName() +
		" FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where
	var rows int64
	marked := false
	attempt := func(ctx context.Context) error {
		conn, err := c.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if !marked {
			// The low watermark: its own committed transaction, before the
			// chunk's snapshot. Written once per chunk: a retry of the
			// chunk's read keeps it (changes after it are still held);
			// written again only when writing it failed, and then it may
			// have committed the first time: a second event with the same
			// mark is ignored.
			if _, err := conn.ExecContext(ctx, dbconn.Tag+"REPLACE INTO "+lf.marks+" (slot, mark) VALUES (?, ?)", slot, id); err != nil {
				return err
			}
			marked = true
		}
		q := base
		locked := false
		lock := func() {
			if !locked {
				q += " LOCK IN SHARE MODE"
				c.lockedChunks.Add(1)
				locked = true
			}
		}
		// A prepared XA transaction becomes visible at its XA COMMIT, not at
		// its place in the binlog: while one exists, this chunk locks.
		xa, err := preparedXA(ctx, conn)
		if err != nil {
			return err
		}
		if xa {
			lock()
		}
		var connID int64
		if !c.cfg.OrderedCommits {
			if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
				return err
			}
		} else {
			// MySQL: the lock-free read is correct while commits become
			// visible in binlog order. Read after the mark: a DBA who
			// turns binlog_order_commits off makes the chunks lock from
			// then on (one turning it off in the instant around a
			// chunk's mark is not seen by that chunk: docs/copy.md).
			var ordered int
			if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@GLOBAL.binlog_order_commits").Scan(&connID, &ordered); err != nil {
				return err
			}
			if ordered == 0 {
				lock()
				if !lf.unordered.Swap(true) {
					c.cfg.Logger.Warn("binlog_order_commits is OFF: commits may become visible out of binlog order, so copy chunks lock their rows (LOCK IN SHARE MODE) while it stays off")
				}
			}
		}
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			if dbconn.StatementFateUnknown(err) {
				// The statement's fate is unknown and it may still run on
				// the server: end it before anything held is applied or
				// the chunk is tried again.
				if kerr := dbconn.KillAndWait(context.WithoutCancel(ctx), c.db, connID); kerr != nil {
					closeRange = false // held changes stay held: the run fails
					return &dbconn.NotRetryable{Err: fmt.Errorf("%w (and ending the chunk's session %d failed: %w)", err, connID, kerr)}
				}
			}
			return err
		}
		rows, _ = res.RowsAffected()
		return c.checkWarnings(ctx, conn, lo, hi)
	}
	var err error
	for range 10 {
		err = dbconn.Retry(ctx, 30, attempt)
		// MariaDB 11.6+ (innodb_snapshot_isolation) refuses a write to a
		// ghost row changed since the statement's read view: try again.
		if dbconn.Number(err) != erCheckRead {
			break
		}
	}
	if errors.Is(err, ErrDataChange) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("copy chunk after %v: %w", lo, err)
	}
	lf.def.Close(id)
	closeRange = false
	if c.cfg.AfterChunk != nil {
		if err := c.cfg.AfterChunk(ctx, lo, hi); err != nil {
			return 0, fmt.Errorf("copy chunk after %v: %w", lo, err)
		}
	}
	return rows, nil
}

// erCheckRead: record changed since the read view (MariaDB snapshot isolation).
const erCheckRead = 1020

func preparedXA(ctx context.Context, conn interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (bool, error) {
	rs, err := conn.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return false, err
	}
	defer rs.Close()
	found := rs.Next()
	return found, rs.Err()
}
