package migration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

// TestInstantRowVersionLimit: on MySQL, a table whose earlier INSTANT
// ADD/DROP COLUMNs used up its row versions is migrated by the copy under
// --method auto (the probe, on a fresh copy of the definition, would accept
// INSTANT; the table itself would refuse it with error 4092), and the copy
// resets the count; with versions to spare, INSTANT is used.
func TestInstantRowVersionLimit(t *testing.T) {
	t.Parallel()
	srv := testutil.Server(t)
	limit := srv.MaxRowVersions()
	if limit == 0 {
		t.Skipf("%s keeps no row-version count for INSTANT ALTERs", srv)
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t SELECT seq, seq FROM seq_1_to_500 WHERE seq <= 300")
	versions := func() int {
		var n int
		if err := db.QueryRow("SELECT TOTAL_ROW_VERSIONS FROM information_schema.INNODB_TABLES WHERE NAME = ?", schema+"/t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	run := func(alter string) *Result {
		t.Helper()
		o := testOptions(t, schema, "t", alter)
		o.Method = "auto"
		res, err := runT(ctxFor(t, time.Minute), o)
		if err != nil {
			t.Fatalf("%s: %v", alter, err)
		}
		return res
	}
	if res := run("ADD COLUMN a INT NULL"); res.Plan.Method != MethodInstant || versions() != 1 {
		t.Fatalf("with versions to spare: method %s, %d row versions", res.Plan.Method, versions())
	}
	for i := 0; versions() < limit; i++ {
		c := fmt.Sprintf("x%d", i)
		testutil.Exec(t, db, "ALTER TABLE t ADD COLUMN "+c+" INT, ALGORITHM=INSTANT")
		if versions() < limit {
			testutil.Exec(t, db, "ALTER TABLE t DROP COLUMN "+c+", ALGORITHM=INSTANT")
		}
	}
	res := run("ADD COLUMN b INT NULL")
	if res.Plan.Method != MethodCopy || !strings.Contains(res.Plan.MethodReason, "row versions") {
		t.Fatalf("at the limit (%d): method %s (%s), want the copy", limit, res.Plan.Method, res.Plan.MethodReason)
	}
	if n := versions(); n != 0 {
		t.Errorf("after the copy: %d row versions, want 0", n)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE b IS NULL AND a IS NULL").Scan(&n); err != nil || n != 300 {
		t.Errorf("rows after the copy: %d (%v)", n, err)
	}
}
