package migration

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/testutil"
)

func tableNames(t *testing.T, db *sql.DB, schema string) []string {
	t.Helper()
	rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE <> 'VIEW' ORDER BY TABLE_NAME", schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func seedTable(t *testing.T, db *sql.DB) {
	t.Helper()
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(20) NOT NULL, b INT NULL, KEY (b))",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), seq % 7 FROM seq_1_to_3000",
	)
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	binlogBefore := masterStatus(t, db)

	o := testOptions(t, schema, "t", "ADD COLUMN c INT, CHANGE a a2 VARCHAR(20) NOT NULL, DROP COLUMN b, ADD INDEX (c)")
	o.Execute = false
	res, err := runT(ctxFor(t, time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Executed {
		t.Fatal("dry run reports executed")
	}
	desc := res.Plan.Describe()
	for _, want := range []string{"method:       copy", "chunk key:    id (index PRIMARY)", "copy lock:    lock-free (", "a                        -> a2 (renamed)", "b                        dropped", "c                        new"} {
		if !strings.Contains(desc, want) {
			t.Errorf("plan lacks %q:\n%s", want, desc)
		}
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("dry run left tables: %v", got)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("dry run changed the table")
	}
	// Other tests write to the binlog too: look for events of this schema.
	rows, err := db.Query(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d", binlogBefore.File, binlogBefore.Offset))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var file, typ, info string
		var pos, serverID, end int64
		if err := rows.Scan(&file, &pos, &typ, &serverID, &end, &info); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, schema) {
			t.Errorf("dry run wrote to the binlog: %s %s", typ, info)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func masterStatus(t *testing.T, db *sql.DB) binlog.Position {
	t.Helper()
	p, err := binlog.CurrentPosition(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDryRunRejectsWhatTheServerRejects(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	o := testOptions(t, schema, "t", "DROP COLUMN nosuchcolumn")
	o.Execute = false
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "the server rejects the ALTER") {
		t.Fatalf("want the server's rejection, got %v", err)
	}
}

// TestFailureLeavesOriginal: a migration that fails mid-copy (here: a value
// the new column cannot hold) exits with an error, leaves the original table
// as it was and removes the ghost.
func TestFailureLeavesOriginal(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	testutil.Exec(t, db, "UPDATE t SET a = 'much-too-long-value' WHERE id = 2500")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "MODIFY a VARCHAR(5) NOT NULL")
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "would change or lose data") {
		t.Fatalf("want a data-change error, got %v", err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("failure left tables: %v", got)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("the original table changed")
	}
}

// TestCleanup removes a ghost and a sentry left by a killed run, renames an
// old table stranded under the sentry's name, and never touches the table.
func TestCleanup(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "FORCE")
	ctx := ctxFor(t, time.Minute)

	testutil.Exec(t, db, "CREATE TABLE _t_new LIKE t", "CREATE TABLE t_rcsentry (id INT) ENGINE=MEMORY COMMENT='recast cut-over sentry'")
	done, err := Cleanup(ctx, o.Conn, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 {
		t.Errorf("want 2 actions, got %q", done)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("after cleanup: %v", got)
	}
	// An old table stranded under the sentry's name (crash after the swap).
	testutil.Exec(t, db, "CREATE TABLE t_rcsentry LIKE t")
	if _, err := Cleanup(ctx, o.Conn, schema, "t"); err != nil {
		t.Fatal(err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "_t_old,t" {
		t.Errorf("after cleanup: %v", got)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("cleanup changed the table")
	}
	done, err = Cleanup(ctx, o.Conn, schema, "t")
	if err != nil || len(done) != 0 {
		t.Errorf("second cleanup: %q, %v", done, err)
	}
}

// TestKeepsOldTable: without --drop-old-table the original stays as _t_old
// with its content, and the new table has the change.
func TestKeepsOldTable(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	res, err := runT(ctxFor(t, time.Minute), testOptions(t, schema, "t", "ADD COLUMN c INT NOT NULL DEFAULT 7"))
	if err != nil {
		t.Fatal(err)
	}
	if res.CutOver.OldTable != "_t_old" || res.CopiedRows != 3000 {
		t.Errorf("old table %q, copied %d", res.CutOver.OldTable, res.CopiedRows)
	}
	if got := testutil.TableChecksum(t, db, schema, "_t_old", "id"); got != before {
		t.Error("_t_old differs from the original")
	}
	var n, sum int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*), SUM(c) FROM t").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 3000 || sum != 7*3000 {
		t.Errorf("new table: %d rows, sum(c) %d", n, sum)
	}
}
