package checksum_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
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
// emoji is '?' too), a FLOAT made another FLOAT with the same 6
// significant digits, and (on MySQL, which stores it) a FLOAT or DOUBLE
// zero made -0, are differences. FLOATs were compared as col + 0e0, which
// is +0 for -0.
func TestTextAndFloatDetected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb3 NOT NULL, e VARCHAR(10) CHARACTER SET utf8mb4 NOT NULL, f FLOAT NOT NULL, d DOUBLE NOT NULL)",
		"INSERT INTO src VALUES (1, 'x', 'smile 😀', 1, 1), (2, 'y', 'plain', 1.2345678, 2), (3, 'z', 'more', 0, 0)")
	db := openPool(ctx, t, schema)
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, corrupt string
		mysqlOnly     bool // MariaDB stores every zero as +0
	}{
		{"emoji", "UPDATE %s SET e = 'smile ?' WHERE id = 1", false},
		{"float", "UPDATE %s SET f = 1.23457 WHERE id = 2", false},
		{"float_negative_zero", "UPDATE %s SET f = -0e0 WHERE id = 3", true},
		{"double_negative_zero", "UPDATE %s SET d = -0e0 WHERE id = 3", true},
	} {
		if c.mysqlOnly && !srv.MySQL() {
			continue
		}
		ghost := "ghost_" + c.name
		testutil.Exec(t, raw,
			"CREATE TABLE "+ghost+" (id INT NOT NULL PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb3 NOT NULL, e VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL, f FLOAT NOT NULL, d DOUBLE NOT NULL)",
			"INSERT INTO "+ghost+" SELECT * FROM src", fmt.Sprintf(c.corrupt, ghost))
		if c.mysqlOnly {
			var sign float64
			if err := raw.QueryRowContext(ctx, "SELECT LEAST(ATAN2(f, -1), ATAN2(d, -1)) FROM "+ghost+" WHERE id = 3").Scan(&sign); err != nil || sign > 0 {
				t.Fatalf("%s: the ghost does not hold -0 (ATAN2 %v, %v): the test's premise", c.name, sign, err)
			}
		}
		res, err := compareTables(ctx, t, db, schema, "src", ghost, []string{"id", "a", "e", "f", "d"})
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
// id, both snapshots opened one after the other, repairing up to 2 rounds;
// tweaks change the configuration first.
func compareTables(ctx context.Context, t *testing.T, db *sql.DB, schema, src, ghost string, cols []string, tweaks ...func(*checksum.Config)) (checksum.Result, error) {
	t.Helper()
	st, err := table.Load(ctx, db, schema, src)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := table.Load(ctx, db, schema, ghost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := checksum.Config{
		Source: st, Ghost: gt, SourceColumns: cols, GhostColumns: cols,
		KeySource: []string{"id"}, KeyGhost: []string{"id"}, KeyIndex: "PRIMARY",
		ChunkRows: 1000, Rounds: 2, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Align: func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
			if _, err := openSource(); err != nil {
				return err
			}
			return openGhost()
		},
	}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	return checksum.Run(ctx, db, cfg)
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

// TestGentleChecksum: while the application is to be spared (Gentle), the
// checksum's chunks shrink toward GentleChunkTime, the throttle is asked
// before each and the pacer after each with its rows, the progress counts
// every row once, the walk ends at the snapshot's last key while the
// application appends faster than the chunks go, and differences are still
// found and repaired; otherwise its chunks are ChunkRows rows. Unpaced, the checksum held both CPUs of the
// bench's VM for seconds (docs/benchmarks.md, session 30).
func TestGentleChecksum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	raw := testutil.DB(t, schema)
	const rows = 5000
	testutil.Exec(t, raw,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL)",
		"CREATE TABLE digits (d INT NOT NULL)",
		"INSERT INTO digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)",
		fmt.Sprintf("INSERT INTO src SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d, CONCAT('row', a.d, b.d, c.d, e.d) "+
			"FROM digits a, digits b, digits c, digits e WHERE a.d + 10 * b.d + 100 * c.d + 1000 * e.d < %d", rows),
		"CREATE TABLE ghost LIKE src",
		"INSERT INTO ghost SELECT * FROM src",
		"UPDATE ghost SET v = 'wrong' WHERE id IN (5, 2500, 4999)")
	db := openPool(ctx, t, schema)
	for _, gentle := range []bool{true, false} {
		t.Run(fmt.Sprintf("gentle=%v", gentle), func(t *testing.T) {
			if !gentle {
				testutil.Exec(t, raw, "UPDATE ghost SET v = 'wrong' WHERE id IN (5, 2500, 4999)")
			}
			var mu sync.Mutex
			var paced, throttled int
			appended := 100_000 // the first id the application appends
			defer testutil.Exec(t, raw, fmt.Sprintf("DELETE FROM src WHERE id > %d", rows))
			var pacedRows, lastProgress int64
			var progressDone, backwards bool
			res, err := compareTables(ctx, t, db, schema, "src", "ghost", []string{"id", "v"}, func(c *checksum.Config) {
				c.Gentle = func() bool { return gentle }
				c.GentleChunkTime = time.Nanosecond // as small as a chunk may be
				c.Throttle = func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					throttled++
					return nil
				}
				c.Pace = func(ctx context.Context, took time.Duration, n int64) error {
					mu.Lock()
					defer mu.Unlock()
					if took <= 0 || n < 0 {
						t.Errorf("Pace(%s, %d rows)", took, n)
					}
					paced++
					if !progressDone {
						pacedRows += n
						if gentle {
							// The application appends faster than 100-row
							// chunks go: the walk must end at the snapshot's
							// last key, not follow the inserts.
							_, err := raw.ExecContext(ctx, fmt.Sprintf("INSERT INTO src SELECT %d + a.d + 10 * b.d + 100 * c.d, 'appended' FROM digits a, digits b, digits c WHERE a.d + 10 * b.d + 100 * c.d < 150", appended))
							appended += 1000
							return err
						}
					}
					return nil
				}
				c.Progress = func(n int64, done bool) {
					mu.Lock()
					defer mu.Unlock()
					backwards = backwards || n < lastProgress || progressDone
					lastProgress, progressDone = n, done
				}
			})
			if err != nil {
				t.Fatalf("checksum: %v (%+v)", err, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Repaired == 0 || res.Rows != rows {
				t.Errorf("the checksum did not repair the 3 wrong rows, or compared %d of %d rows: %+v", res.Rows, rows, res)
			}
			var same int
			if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM src JOIN ghost USING (id) WHERE src.v = ghost.v").Scan(&same); err != nil {
				t.Fatal(err)
			}
			if same != rows {
				t.Errorf("after the repair %d of %d rows are equal", same, rows)
			}
			// Chunks: 1,000 rows ungentle (and the empty one after the last
			// key); gentle, the first few 1,000 (the walker reads ahead) and
			// the rest 100 (minGentleRows).
			if want := rows/1000 + 1; !gentle && res.Chunks != want {
				t.Errorf("ungentle: %d chunks, want %d of 1000 rows", res.Chunks, want)
			}
			if gentle && res.Chunks < 20 {
				t.Errorf("gentle: %d chunks of %d rows: they did not shrink", res.Chunks, rows)
			}
			// Every chunk of every round is throttled and paced: the first
			// round's, and the differing ones compared again.
			if throttled != paced || paced < res.Chunks+res.Repaired {
				t.Errorf("throttled %d times, paced %d, for %d chunks and %d repaired", throttled, paced, res.Chunks, res.Repaired)
			}
			if pacedRows != rows || lastProgress != rows || !progressDone || backwards {
				t.Errorf("first round: paced %d rows, progress ended at %d (done %v, went backwards %v), want %d",
					pacedRows, lastProgress, progressDone, backwards, rows)
			}
		})
	}
}
