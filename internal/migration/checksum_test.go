package migration

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/verify"
)

// TestChecksumRepairsCorruption: a ghost row corrupted before the checksum
// is found, re-copied, and the migration completes with the right content.
func TestChecksumRepairsCorruption(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "FORCE")
	o.Pause = func(ctx context.Context, point string) {
		if point == "checksum:round1" {
			testutil.Exec(t, db, "UPDATE _t_new SET a = 'corrupted' WHERE id = 1234", "DELETE FROM _t_new WHERE id = 2345")
		}
	}
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := runT(ctxFor(t, time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checksum.Repaired == 0 || res.Checksum.Rounds != 2 {
		t.Errorf("checksum: %+v, want a repair and a second round", res.Checksum)
	}
	// The differing rows are logged from the snapshots before the repair
	// (keys in hex: 1234 = 0x4D2, 2345 = 0x929).
	for _, want := range []string{"key 0x4D2: source '1234', 'v1234'", "new table '1234', 'corrupted'", "key 0x929: only in the source: '2345', 'v2345'"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the checksum's log lacks %q:\n%s", want, logs.String())
		}
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("the migrated table differs from the original")
	}
}

// TestChecksumStopsOnPersistentDifference: a difference that repairs cannot
// remove stops the migration before the cut-over, naming the key; the
// original table is untouched and the ghost removed.
func TestChecksumStopsOnPersistentDifference(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "FORCE")
	o.Pause = func(ctx context.Context, point string) {
		if strings.HasPrefix(point, "checksum:round") {
			testutil.Exec(t, db, "UPDATE _t_new SET a = CONCAT(a, 'x') WHERE id = 777")
		}
	}
	_, err := runT(ctxFor(t, time.Minute), o)
	if !errors.Is(err, checksum.ErrDifferent) || !strings.Contains(err.Error(), "(id) = (777)") {
		t.Fatalf("want a persistent difference naming id 777, got %v", err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("left tables: %v", got)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("the original table changed")
	}
}

// TestChecksumCatchesUniqueLoss: an ALTER adding a UNIQUE key while the
// application writes a duplicate value during the migration would lose a row
// (REPLACE and INSERT IGNORE both drop one of the two): the migration stops
// before the cut-over, naming the key and both rows (the displaced row's
// restore finds the duplicate before the checksum; noloss_test.go has the
// other moments).
func TestChecksumCatchesUniqueLoss(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	o := testOptions(t, schema, "t", "ADD UNIQUE KEY uk_a (a)")
	o.Pause = func(ctx context.Context, point string) {
		if point == "copy-done" {
			testutil.Exec(t, db, "UPDATE t SET a = 'v10' WHERE id = 20")
		}
	}
	_, err := runT(ctxFor(t, time.Minute), o)
	if !errors.Is(err, verify.ErrDuplicate) || !strings.Contains(err.Error(), "uk_a") ||
		!strings.Contains(err.Error(), "id='10'") || !strings.Contains(err.Error(), "id='20'") {
		t.Fatalf("want the migration stopped naming uk_a and rows 10 and 20, got %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE a = 'v10'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the original table must keep both rows: %d, %v", n, err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("left tables: %v", got)
	}
}
