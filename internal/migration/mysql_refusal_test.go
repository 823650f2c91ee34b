package migration

import (
	"errors"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

// TestRefusesOnMySQL: on MySQL, where the migrated table can still differ
// from the server's own ALTER, recast refuses before touching anything,
// dry run or not; on MariaDB it does not.
func TestRefusesOnMySQL(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, j JSON)", "INSERT INTO t VALUES (1, '{\"a\": 1}')")
	mysql := testutil.Sandbox(t).MySQL()
	for _, execute := range []bool{false, true} {
		o := testOptions(t, schema, "t", "MODIFY j TEXT")
		o.Execute = execute
		_, err := Run(ctxFor(t, time.Minute), o)
		if mysql != errors.Is(err, ErrMySQLUnsupported) || (!mysql && err != nil) {
			t.Fatalf("execute=%v on %s: %v", execute, testutil.Sandbox(t).Flavor, err)
		}
		if got := tableNames(t, db, schema); mysql && (len(got) != 1 || got[0] != "t") {
			t.Errorf("recast touched the schema on MySQL: %v", got)
		}
	}
}
