package copier

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestHighestKeyWaitsForLastRow: a locking copy reads its upper bound with
// LOCK IN SHARE MODE, so a transaction that inserted a key above the last
// row and has not committed (in the binlog before the stream's start where
// commits may become visible out of binlog order) holds the read until it
// commits, and the bound includes its key. The lock-free copy (commits
// visible in binlog order, the run's checkpoint a barrier) reads plainly:
// its bound does not wait, and, as the control, does not see the key;
// while a prepared XA transaction exists it waits too.
func TestHighestKeyWaitsForLastRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	q := func(n string) string { return table.QuoteIdent(schema) + "." + table.QuoteIdent(n) }
	testutil.Exec(t, db, "CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v INT)", "INSERT INTO src VALUES (1, 1), (2, 2), (3, 3)",
		"CREATE TABLE g LIKE src")
	if err := CreateMarks(ctx, db, q(MarksName("src"))); err != nil {
		t.Fatal(err)
	}
	src, err := table.Load(ctx, db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	newCopier := func(lockFree bool) *Copier {
		cfg := Config{Source: src, Ghost: q("g"), SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
			KeyColumns: []string{"id"}, KeyIndex: "PRIMARY", Threads: 1}
		if lockFree {
			cfg.Defer, cfg.Marks = &noDefer{}, q(MarksName("src"))
		}
		c, err := New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	for _, st := range []string{"BEGIN", "INSERT INTO src VALUES (4, 4)"} {
		if _, err := app.ExecContext(ctx, st); err != nil {
			t.Fatal(err)
		}
	}

	end, err := newCopier(true).FixEnd(ctx)
	if err != nil || fmt.Sprint(end) != "[3]" {
		t.Fatalf("lock-free bound: %v (%v), want [3]: the uncommitted key is not visible to a plain read", end, err)
	}

	waitsFor := func(c *Copier, release string, want string) {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			end, err := c.FixEnd(ctx)
			got <- fmt.Sprint(end, err)
		}()
		// The read waits for the insert's lock (a transaction in LOCK WAIT),
		// and returns nothing meanwhile.
		for waiting := 0; waiting == 0; {
			select {
			case g := <-got:
				t.Fatalf("the bound was read (%s) while the insert above the last row was not committed", g)
			case <-ctx.Done():
				t.Fatal("the bound never waited for the insert's lock")
			case <-time.After(20 * time.Millisecond):
			}
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
				"%"+q("src")+"%").Scan(&waiting); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := app.ExecContext(ctx, release); err != nil {
			t.Fatal(err)
		}
		if g := <-got; g != want {
			t.Fatalf("the bound after %s: %s, want %s", release, g, want)
		}
	}
	waitsFor(newCopier(false), "COMMIT", "[4] <nil>")

	// A prepared XA transaction is in the binlog at XA PREPARE and visible
	// at XA COMMIT: the lock-free copy reads its bound locked too meanwhile.
	// (Ended if the test stops before its XA COMMIT: a prepared XA
	// transaction outlives its connection, holding its locks.)
	xid := fmt.Sprintf("'hk%d'", time.Now().UnixNano()) // XA ids: 64 bytes at most
	t.Cleanup(func() { _, _ = db.Exec("XA ROLLBACK " + xid) })
	for _, st := range []string{"XA START " + xid, "INSERT INTO src VALUES (5, 5)", "XA END " + xid, "XA PREPARE " + xid} {
		if _, err := app.ExecContext(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	waitsFor(newCopier(true), "XA COMMIT "+xid, "[5] <nil>")
}
