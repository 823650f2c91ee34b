package check

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "lock", Order: 80, Run: checkLock})
}

// checkLock takes the per-table lock: a named lock (GET_LOCK) held on a
// connection of its own for the whole migration, so that a second recast on
// the same table stops here instead of breaking the first one.
func checkLock(ctx context.Context, in *Input) error {
	l, err := AcquireLock(ctx, in.DB, in.Database, in.Table)
	if err != nil {
		return err
	}
	in.lock = l
	return nil
}

// LockName is the name of the per-table lock: "recast:<db>.<table>", or
// "recast:" and a hash of it when that is longer than 64 characters (MySQL's
// limit).
func LockName(database, tbl string) string {
	n := "recast:" + database + "." + tbl
	if len(n) <= 64 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return "recast:" + hex.EncodeToString(sum[:])[:57]
}

// Lock is a held per-table lock.
type Lock struct {
	Name string
	conn *sql.Conn
}

// AcquireLock takes the per-table lock of database.tbl without waiting. If
// another session holds it, the *Error names that session.
func AcquireLock(ctx context.Context, db *sql.DB, database, tbl string) (*Lock, error) {
	name := LockName(database, tbl)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// An idle session would be closed after wait_timeout (8 h by default),
	// releasing the lock in the middle of a long migration.
	if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = 31536000"); err != nil {
		discard(conn)
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, dbconn.Tag+"SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil {
		discard(conn)
		return nil, fmt.Errorf("GET_LOCK(%q): %w", name, err)
	}
	if got.Valid && got.Int64 == 1 {
		return &Lock{Name: name, conn: conn}, nil
	}
	discard(conn)
	holder := "another session"
	var id sql.NullInt64
	if db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id) == nil && id.Valid {
		holder = fmt.Sprintf("connection %d", id.Int64)
		var user, host string
		if pl, err := flavor.ProcesslistOf(ctx, db); err == nil && db.QueryRowContext(ctx, "SELECT USER, HOST FROM "+pl+" WHERE ID = ?", id.Int64).Scan(&user, &host) == nil {
			holder += fmt.Sprintf(" (user %s from %s)", user, host)
		}
	}
	return nil, refusef("wait for that run to finish (or stop it), then rerun: one recast per table at a time",
		"another recast is already migrating %s.%s: %s holds the lock %q", table.QuoteIdent(database), table.QuoteIdent(tbl), holder, name)
}

// Release releases the lock and closes its connection.
func (l *Lock) Release() {
	if l == nil || l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.Name)
	discard(l.conn) // never back to the pool: the session might still hold it
	l.conn = nil
}
