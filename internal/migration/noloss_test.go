package migration

// No silent loss: a row that takes another row's value under a UNIQUE key the
// ALTER adds (which the original table does not enforce) must never make the
// applier delete the other row. Whenever the duplicate arrives (during the
// copy, between the checksum and the swap, while the cut-over is postponed),
// the migration stops naming the key and both rows, and the original table
// keeps both rows.

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/verify"
)

type uniqueCase struct {
	name string
	// when: the Options.Pause point at which dup runs ("" : while postponed).
	when string
	dup  string
	// rows: the ids of two rows that end up sharing the email; the error
	// names them unless anyPair (a bulk UPDATE makes many such pairs).
	rows    [2]string
	anyPair bool
}

func TestUniqueDuplicateNeverLost(t *testing.T) {
	t.Parallel()
	cases := []uniqueCase{
		// During the copy (the stream runs, the copy starts right after).
		{"during-copy", "ghost-created", "UPDATE t SET email = 'u10@example.com' WHERE id = 2900", [2]string{"10", "2900"}, false},
		// After the copy, before the checksum: a bulk UPDATE (many row events).
		{"bulk-update", "copy-done", "UPDATE t SET email = CONCAT('u', id - 1000, '@example.com') WHERE id BETWEEN 1500 AND 1999", [2]string{"500", "1500"}, true},
		// Between the checksum and the swap: an INSERT (gh-ost's
		// panic-on-warnings-batch-middle) ...
		{"insert-before-swap", "cutover:before-lock", "INSERT INTO t VALUES (4000, 'u1@example.com', 0)", [2]string{"1", "4000"}, false},
		// ... and an UPDATE that changes the primary key onto the new
		// unique value (update-pk-with-duplicate-on-new-unique-index).
		{"pk-update-before-swap", "cutover:before-lock", "UPDATE t SET id = 5000, email = 'u3@example.com' WHERE id = 7", [2]string{"3", "5000"}, false},
		// While the cut-over is postponed.
		{"postponed", "", "INSERT INTO t VALUES (4001, 'u2@example.com', 0)", [2]string{"2", "4001"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runUniqueDuplicate(t, c)
		})
	}
}

func runUniqueDuplicate(t *testing.T, c uniqueCase) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, email VARCHAR(64) NOT NULL, n INT NOT NULL)",
		"INSERT INTO t SELECT seq, CONCAT('u', seq, '@example.com'), seq % 7 FROM seq_1_to_3000")
	o := testOptions(t, schema, "t", "ADD UNIQUE KEY uk_email (email)")
	o.MaxChunkRows = 500
	lg := &mdlLog{t: t}
	o.Logger = slog.New(slog.NewTextHandler(lg, nil))
	var once sync.Once
	fire := func() { once.Do(func() { testutil.Exec(t, db, c.dup) }) }
	if c.when == "" {
		o.PostponeCutOverFlagFile = filepath.Join(t.TempDir(), "postpone")
	} else {
		o.Pause = func(ctx context.Context, point string) {
			if point == c.when {
				fire()
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := runT(ctxFor(t, 2*time.Minute), o)
		done <- err
	}()
	if c.when == "" {
		lg.waitLog(t, time.Minute, "cut-over postponed")
		fire()
		// The hold keeps verifying: the duplicate is found while postponed,
		// before anyone removes the flag file.
		select {
		case err := <-done:
			checkDuplicateErr(t, err, c)
		case <-time.After(30 * time.Second):
			t.Fatal("the duplicate was not found while the cut-over was postponed")
		}
	} else {
		checkDuplicateErr(t, <-done, c)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id IN (" + c.rows[0] + "," + c.rows[1] + ")").Scan(&n); err != nil || n != 2 {
		t.Errorf("the original table must keep both rows %v: %d, %v", c.rows, n, err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("left tables: %v", got)
	}
}

func checkDuplicateErr(t *testing.T, err error, c uniqueCase) {
	t.Helper()
	if !errors.Is(err, verify.ErrDuplicate) {
		t.Fatalf("want a duplicate under the new unique key, got %v", err)
	}
	msg := err.Error()
	want := []string{"uk_email", "id='" + c.rows[0] + "'", "id='" + c.rows[1] + "'"}
	if c.anyPair {
		want = want[:1]
		if strings.Count(msg, "(id='") != 2 {
			t.Errorf("the error does not name two rows: %s", msg)
		}
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error does not name %s: %s", w, msg)
		}
	}
}

// TestUniqueSwapsConverge: rows that trade unique values back and forth,
// distinct at every commit, make the applier meet rows in the way (ghost
// rows the copy wrote ahead of it, rows not caught up yet): under a key the
// source enforces (REPLACE) and under a key the ALTER adds (guarded writes:
// the rows are displaced and restored, never reported as duplicates). Both
// end equal to the native ALTER.
func TestUniqueSwapsConverge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, key, alter string }{
		{"enforced", ", UNIQUE KEY uk_email (email)", "ADD COLUMN note VARCHAR(10) NULL"},
		{"new-key", "", "ADD UNIQUE KEY uk_email (email)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runUniqueSwaps(t, c.key, c.alter)
		})
	}
}

func runUniqueSwaps(t *testing.T, key, alter string) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, email VARCHAR(64) NOT NULL, n INT NOT NULL"+key+")",
		"INSERT INTO t SELECT seq, CONCAT('u', seq, '@example.com'), seq % 7 FROM seq_1_to_2000")
	o := testOptions(t, schema, "t", alter)
	o.MaxChunkRows = 300
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := 1+(i*37)%2000, 1+(i*91+5)%2000
			if a == b {
				continue
			}
			// Swap the emails of a and b in one transaction, through a
			// free placeholder value (the source enforces the key).
			swapEmails(db, a, b)
			// Paced (≤ 500 swaps/s): the catch-up ends only once the
			// applier outruns the writer, and an unpaced writer on a
			// loaded 2-core CI machine under -race could outrun it for
			// minutes (a throughput question, which bench/ measures).
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var halted sync.Once
	halt := func() { halted.Do(func() { close(stop); wg.Wait() }) }
	defer halt()
	o.Pause = func(ctx context.Context, point string) {
		if point == "cutover:before-lock" {
			halt()
		}
	}
	if _, err := runT(ctxFor(t, 3*time.Minute), o); err != nil {
		t.Fatal(err)
	}
	var dup int
	if err := db.QueryRow("SELECT COUNT(*) - COUNT(DISTINCT email) FROM t").Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("duplicates: %d, %v", dup, err)
	}
	// The oracle: the old table with the ALTER applied natively.
	testutil.Exec(t, db, "ALTER TABLE _t_old "+alter)
	if a, b := testutil.TableChecksum(t, db, schema, "t", "id"), testutil.TableChecksum(t, db, schema, "_t_old", "id"); a != b {
		t.Errorf("the new table differs from the old one with the ALTER applied natively: %s vs %s", a, b)
	}
}

func swapEmails(db *sql.DB, a, b int) {
	tx, err := db.Begin()
	if err != nil {
		return
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: no-op
	var ea, eb string
	if tx.QueryRow("SELECT email FROM t WHERE id = ? FOR UPDATE", a).Scan(&ea) != nil ||
		tx.QueryRow("SELECT email FROM t WHERE id = ? FOR UPDATE", b).Scan(&eb) != nil {
		return
	}
	for _, st := range []struct {
		email string
		id    int
	}{{"tmp-swap", a}, {ea, b}, {eb, a}} {
		if _, err := tx.Exec("UPDATE t SET email = ? WHERE id = ?", st.email, st.id); err != nil {
			return
		}
	}
	_ = tx.Commit()
}
