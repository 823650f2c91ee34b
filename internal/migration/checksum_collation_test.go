package migration

import (
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

// TestChecksumMixedCollations: columns of different charsets and collations
// in one table (utf8mb4_bin, utf8mb4_general_ci, latin1) go through the
// checksum together, with and without a change of charset.
func TestChecksumMixedCollations(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		`CREATE TABLE t (id INT NOT NULL PRIMARY KEY,
			a VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
			b VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL,
			c VARCHAR(20) CHARACTER SET latin1 NULL, d BLOB NULL)`,
		"INSERT INTO t SELECT seq, CONCAT('a', seq), IF(seq % 3 = 0, NULL, CONCAT('B', seq)), CONCAT('é', seq), UNHEX(HEX(seq)) FROM seq_1_to_2000")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	res, err := runT(ctxFor(t, time.Minute), testOptions(t, schema, "t", "MODIFY c VARCHAR(20) CHARACTER SET utf8mb4 NULL"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Checksum.Rows != 2000 || res.Checksum.Repaired != 0 || len(res.Checksum.Skipped) != 0 {
		t.Errorf("checksum: %+v", res.Checksum)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("content changed")
	}
	// Unchanged columns in two character sets (utf8mb4 and latin1): they
	// cannot all be relabelled to one binary collation, so they are cast.
	o := testOptions(t, schema, "t", "ADD COLUMN z INT NULL")
	o.DropOldTable = true
	res, err = runT(ctxFor(t, time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checksum.Rows != 2000 || res.Checksum.Repaired != 0 || len(res.Checksum.Skipped) != 0 {
		t.Errorf("checksum, two character sets: %+v", res.Checksum)
	}
}
