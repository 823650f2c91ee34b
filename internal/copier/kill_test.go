package copier

import (
	"context"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestKillAndWaitFourByteStatement: a chunk whose statement's fate is
// unknown (its connection lost) has its session ended before anything held
// is applied; if that fails, the run fails. Waiting for the session to go
// must work while another session runs a statement with a 4-byte
// character: on MySQL, information_schema.PROCESSLIST then fails whole
// (3854), so the flavor's processlist is read.
func TestKillAndWaitFourByteStatement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	db := rcDB(t, schema)
	start := func(q string) (int64, <-chan error) {
		t.Helper()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := conn.ExecContext(ctx, q)
			conn.Close()
			done <- err
		}()
		return id, done
	}
	victim, victimDone := start("SELECT SLEEP(60)")
	other, otherDone := start("SELECT SLEEP(60), '\U0001F600 recast kill test'")
	processlist, err := flavor.ProcesslistOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2; {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+processlist+" WHERE ID IN (?, ?) AND INFO LIKE 'SELECT SLEEP%'",
			victim, other).Scan(&n); err != nil {
			t.Fatalf("reading %s: %v", processlist, err)
		}
		if ctx.Err() != nil {
			t.Fatal("the two sessions never showed as running")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := dbconn.KillAndWait(ctx, db, victim); err != nil {
		t.Fatalf("ending session %d while another runs a 4-byte statement: %v", victim, err)
	}
	select {
	case err := <-victimDone:
		if err == nil {
			t.Error("the ended session's statement returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the ended session's statement is still running")
	}
	select {
	case err := <-otherDone:
		t.Fatalf("the other session ended too: %v", err)
	default:
	}
	if err := dbconn.KillAndWait(ctx, db, other); err != nil {
		t.Fatal(err)
	}
	<-otherDone
}
