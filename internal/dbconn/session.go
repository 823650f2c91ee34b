package dbconn

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/recast-osc/recast/internal/flavor"
)

// SessionID returns the server's id of conn's session (CONNECTION_ID()). On a
// pool Open made it is asked once per connection and kept with it; on any
// other pool it is asked every time.
func SessionID(ctx context.Context, conn *sql.Conn) (int64, error) {
	var id int64
	if err := conn.Raw(func(dc any) error {
		if t, ok := dc.(*tagConn); ok {
			id = t.session
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if id != 0 {
		return id, nil
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return 0, err
	}
	// The connection is conn's alone until it is returned to the pool.
	_ = conn.Raw(func(dc any) error {
		if t, ok := dc.(*tagConn); ok {
			t.session = id
		}
		return nil
	})
	return id, nil
}

// killWait bounds KillAndWait.
const killWait = time.Minute

// KillAndWait ends session id (KILL) and waits until the server has let it
// go: a statement whose fate the client lost with its connection
// (StatementFateUnknown) may still be running, and must not commit after
// whatever recast writes next.
func KillAndWait(ctx context.Context, db *sql.DB, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil && Number(err) != ErNoSuchThread {
		return err
	}
	// The flavor's processlist: MySQL's information_schema.PROCESSLIST fails
	// whole (3854) while any session runs a statement with 4-byte or binary
	// text, such as the applier writing binary values.
	processlist, err := flavor.ProcesslistOf(ctx, db)
	if err != nil {
		return err
	}
	for {
		var n int
		if err := db.QueryRowContext(ctx, Tag+"SELECT COUNT(*) FROM "+processlist+" WHERE ID = ?", id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
