package checksum_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, 0)) }

// TestSnapshotAfterRetry: the pipeline's Align opens the source snapshot
// again when the binlog reader was already past the first one. The second
// snapshot must be a REPEATABLE READ snapshot too (recast's pool sessions
// are READ COMMITTED, and SET TRANSACTION covers only the next
// transaction): a change committed after it must not be seen by the
// comparison, or the checksum reports (and "repairs") a difference that
// is only the time between the two snapshots — what made
// TestRandomizedCollationKey see 63–126 differing rows now and then.
func TestSnapshotAfterRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO src SELECT seq, seq FROM seq_1_to_500",
		"CREATE TABLE ghost LIKE src",
		"INSERT INTO ghost SELECT * FROM src")
	db := openPool(ctx, t, schema)
	src, err := table.Load(ctx, db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	gh, err := table.Load(ctx, db, schema, "ghost")
	if err != nil {
		t.Fatal(err)
	}
	bump := 0
	res, err := checksum.Run(ctx, db, checksum.Config{
		Source: src, Ghost: gh,
		SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
		KeySource: []string{"id"}, KeyGhost: []string{"id"}, KeyIndex: "PRIMARY",
		ChunkRows: 1000, Rounds: 1, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Align: func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
			for range 2 { // the reader was ahead: the snapshot is opened again
				if _, err := openSource(); err != nil {
					return err
				}
			}
			// Committed after the source snapshot, before the ghost's: the
			// applier would write it only after the ghost snapshot.
			bump++
			testutil.Exec(t, raw, "UPDATE src SET v = v + 1 WHERE id = 7")
			return openGhost()
		},
	})
	if err != nil {
		t.Fatalf("checksum: %v (%+v)", err, res)
	}
	if res.Repaired != 0 || res.Rounds != 1 || bump != 1 {
		t.Errorf("checksum saw a change committed after its source snapshot: %+v (%d aligns)", res, bump)
	}
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var iso string
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION."+srv.IsolationVar()).Scan(&iso); err != nil || iso != "READ-COMMITTED" {
		t.Errorf("the pool's sessions are %q (%v), want READ-COMMITTED (the test's premise)", iso, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestEvenChangesDetected: the same wrong byte at the same place in two rows
// of a chunk (a systematic conversion fault, a lost multi-row UPDATE) is a
// difference. With each row's CRC32 XORed into the chunk's sum, the two
// changes cancelled (CRC32 is linear over XOR) and the chunk passed.
func TestEvenChangesDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, status CHAR(1) NOT NULL, n INT NOT NULL)",
		"INSERT INTO src WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 40) SELECT i, 'a', i % 3 FROM s",
		"CREATE TABLE ghost LIKE src",
		"INSERT INTO ghost SELECT * FROM src",
		// Same bytes changed, same distance from the end of each row's text.
		"UPDATE ghost SET status = 'b' WHERE id IN (9, 10)",
		"UPDATE ghost SET n = 7 - n WHERE id IN (21, 24, 27, 30)")
	db := openPool(ctx, t, schema)
	res, err := compareTables(ctx, t, db, schema, "src", "ghost", []string{"id", "status", "n"})
	if err != nil {
		t.Fatalf("checksum: %v (%+v)", err, res)
	}
	if res.Repaired == 0 {
		t.Fatalf("the checksum passed a ghost with rows 9, 10, 21, 24, 27 and 30 changed: %+v", res)
	}
	var n int
	if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM src JOIN ghost USING (id) WHERE src.status = ghost.status AND src.n = ghost.n").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 40 {
		t.Errorf("after the repair %d of 40 rows are equal", n)
	}
}

// TestTextAndFloatDetected: an emoji made '?' in a utf8mb4 column whose type
// changed, next to unchanged utf8mb3 columns (relabelled COLLATE
// utf8mb3_bin, they converted the whole row text to utf8mb3, where the
// emoji is '?' too), and a FLOAT made another FLOAT with the same 6
// significant digits, are differences.
func TestTextAndFloatDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb3 NOT NULL, e VARCHAR(10) CHARACTER SET utf8mb4 NOT NULL, f FLOAT NOT NULL)",
		"INSERT INTO src VALUES (1, 'x', 'smile 😀', 1), (2, 'y', 'plain', 1.2345678), (3, 'z', 'more', 3)")
	db := openPool(ctx, t, schema)
	for _, c := range []struct{ name, corrupt string }{
		{"emoji", "UPDATE %s SET e = 'smile ?' WHERE id = 1"},
		{"float", "UPDATE %s SET f = 1.23457 WHERE id = 2"},
	} {
		ghost := "ghost_" + c.name
		testutil.Exec(t, raw,
			"CREATE TABLE "+ghost+" (id INT NOT NULL PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb3 NOT NULL, e VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL, f FLOAT NOT NULL)",
			"INSERT INTO "+ghost+" SELECT * FROM src", fmt.Sprintf(c.corrupt, ghost))
		res, err := compareTables(ctx, t, db, schema, "src", ghost, []string{"id", "a", "e", "f"})
		if err != nil {
			t.Fatalf("%s: checksum: %v (%+v)", c.name, err, res)
		}
		if len(res.Skipped) != 0 || res.Repaired == 0 {
			t.Errorf("%s: the checksum passed a differing row (columns left out: %v): %+v", c.name, res.Skipped, res)
		}
		var n int
		if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM src JOIN "+ghost+" g USING (id) WHERE BINARY src.e = BINARY g.e AND src.f = g.f").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("%s: after the repair %d of 3 rows are equal", c.name, n)
		}
	}
}

// openPool opens recast's pool (READ COMMITTED sessions) on the test server.
func openPool(ctx context.Context, t *testing.T, schema string) *sql.DB {
	t.Helper()
	sb := testutil.Sandbox(t)
	db, err := dbconn.Open(ctx, dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// compareTables runs the checksum of ghost against src over cols, keyed by
// id, both snapshots opened one after the other, repairing up to 2 rounds.
func compareTables(ctx context.Context, t *testing.T, db *sql.DB, schema, src, ghost string, cols []string) (checksum.Result, error) {
	t.Helper()
	st, err := table.Load(ctx, db, schema, src)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := table.Load(ctx, db, schema, ghost)
	if err != nil {
		t.Fatal(err)
	}
	return checksum.Run(ctx, db, checksum.Config{
		Source: st, Ghost: gt, SourceColumns: cols, GhostColumns: cols,
		KeySource: []string{"id"}, KeyGhost: []string{"id"}, KeyIndex: "PRIMARY",
		ChunkRows: 1000, Rounds: 2, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Align: func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
			if _, err := openSource(); err != nil {
				return err
			}
			return openGhost()
		},
	})
}

// TestRepairRefusesConversionChange: a repair's INSERT IGNORE that would
// truncate a value (the copy and the applier refuse it, strictly) fails the
// checksum with ErrRepairChanged and writes nothing; it used to store the
// truncated value.
func TestRepairRefusesConversionChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL)",
		"INSERT INTO src VALUES (1, 'abc'), (2, 'abcdefghij'), (3, 'xy')",
		"CREATE TABLE ghost (id INT NOT NULL PRIMARY KEY, v VARCHAR(5) NOT NULL)",
		"INSERT INTO ghost VALUES (1, 'abc'), (3, 'xy')") // row 2 missing: the chunk differs
	db := openPool(ctx, t, schema)
	res, err := compareTables(ctx, t, db, schema, "src", "ghost", []string{"id", "v"})
	if !errors.Is(err, checksum.ErrRepairChanged) {
		t.Fatalf("checksum: %v (%+v); want ErrRepairChanged", err, res)
	}
	var n int
	if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM ghost").Scan(&n); err != nil || n != 2 {
		t.Errorf("after the refused repair the ghost has %d rows (%v); want the 2 it had", n, err)
	}
}
