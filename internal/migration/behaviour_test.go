package migration

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestTimestampOldTable: with --timestamp-old-table a second migration is
// not refused by the first one's _t_old; its old table gets a timestamped
// name holding the original rows.
func TestTimestampOldTable(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := runT(ctx, testOptions(t, schema, "t", "ADD COLUMN c INT NOT NULL DEFAULT 7")); err != nil {
		t.Fatal(err)
	}
	before := testutil.TableChecksum(t, db, schema, "t", "id")

	// Without an option, the kept _t_old refuses the second run.
	o := testOptions(t, schema, "t", "ADD COLUMN d INT")
	_, err := runT(ctx, o)
	var ce *check.Error
	if !errors.As(err, &ce) || ce.Check != "helper-tables" || !strings.Contains(err.Error(), "--timestamp-old-table") {
		t.Fatalf("second run without an option: %v", err)
	}

	o.TimestampOldTable = true
	o.Execute = false
	res, err := runT(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^_t_20\d{12}_old$`)
	if !re.MatchString(res.Plan.OldName) || !strings.Contains(res.Plan.Describe(), "old table kept as "+res.Plan.OldName) {
		t.Errorf("dry run: old table %q\n%s", res.Plan.OldName, res.Plan.Describe())
	}
	o.Execute = true
	res, err = runT(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !re.MatchString(res.CutOver.OldTable) {
		t.Fatalf("old table %q", res.CutOver.OldTable)
	}
	if got := testutil.TableChecksum(t, db, schema, res.CutOver.OldTable, "id"); got != before {
		t.Error("the timestamped old table differs from the original")
	}
	names := strings.Join(tableNames(t, db, schema), ",")
	if names != res.CutOver.OldTable+",_t_old,t" {
		t.Errorf("tables: %s", names)
	}

	// Options that cannot hold: a table name too long for the timestamp.
	long := testOptions(t, schema, strings.Repeat("x", 45), "FORCE")
	long.TimestampOldTable = true
	if _, err := runT(ctx, long); err == nil || !strings.Contains(err.Error(), "longer than 44") {
		t.Errorf("45-character table with --timestamp-old-table: %v", err)
	}
}

// TestInitiallyDrop: --initially-drop-old-table and
// --initially-drop-ghost-table drop the leftovers (the dry run names them
// and drops nothing); the migration then succeeds.
func TestInitiallyDrop(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	ctx := ctxFor(t, 2*time.Minute)
	testutil.Exec(t, db, "CREATE TABLE _t_old (x INT)", "INSERT INTO _t_old VALUES (42)",
		"CREATE TABLE _t_new LIKE t", "CREATE TABLE _t_chk (id INT)")
	before := testutil.TableChecksum(t, db, schema, "t", "id")

	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	if _, err := runT(ctx, o); err == nil {
		t.Fatal("leftovers did not refuse the run")
	}
	o.InitiallyDropOldTable, o.InitiallyDropGhostTable = true, true
	if _, err := Run(ctx, Options{InitiallyDropGhostTable: true, Resume: true, Database: "d", Table: "t", Alter: "FORCE", Threads: 1, ApplyThreads: 1}, Runtime{}); err == nil ||
		!strings.Contains(err.Error(), "--initially-drop-ghost-table drops what --resume continues from") {
		t.Errorf("--initially-drop-ghost-table with --resume: %v", err)
	}
	o.Execute = false
	res, err := runT(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Plan.Describe(); strings.Count(d, "drops the leftover table") != 3 {
		t.Errorf("dry run does not list the 3 leftovers:\n%s", d)
	}
	if got := strings.Join(tableNames(t, db, schema), ","); got != "_t_chk,_t_new,_t_old,t" {
		t.Fatalf("the dry run changed tables: %s", got)
	}
	o.Execute = true
	res, err = runT(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tableNames(t, db, schema), ","); got != "_t_old,t" {
		t.Errorf("tables after: %s", got)
	}
	if got := testutil.TableChecksum(t, db, schema, "_t_old", "id"); got != before {
		t.Error("_t_old is not this run's original")
	}
	if res.CutOver.OldTable != "_t_old" {
		t.Errorf("old table %q", res.CutOver.OldTable)
	}
}

// TestInitiallyDropWaitsForBlocker: the initial DROP of _t_old does not
// queue behind a session holding a metadata lock on it: it gives up under
// the lock policy, and the table is untouched.
func TestInitiallyDropWaitsForBlocker(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	testutil.Exec(t, db, "CREATE TABLE _t_old (x INT)", "INSERT INTO _t_old VALUES (1)")
	ctx := ctxFor(t, 2*time.Minute)
	blocker, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	// An open transaction that read _t_old holds its metadata lock.
	if _, err := blocker.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := blocker.QueryRowContext(ctx, "SELECT x FROM _t_old").Scan(&x); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.InitiallyDropOldTable = true
	o.CutOverLockTimeout, o.CutOverAttempts, o.CutOverBudget = time.Second, 2, 6*time.Second
	start := time.Now()
	_, err = runT(ctx, o)
	if err == nil || !strings.Contains(err.Error(), "drop the leftover table") {
		t.Fatalf("got %v, want the DROP given up", err)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("gave up after %s", took)
	}
	// The application's table was never locked: a write goes through at once.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := db.ExecContext(wctx, "UPDATE t SET b = b WHERE id = 1"); err != nil {
		t.Errorf("write to t: %v", err)
	}
	if _, err := blocker.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tableNames(t, db, schema), ","); got != "_t_old,t" {
		t.Errorf("tables after the refusal: %s", got)
	}
}

// TestCleanupTimestampsStrandedOld: an old table stranded under the
// sentry's name while _t_old is taken gets a timestamped old name.
func TestCleanupTimestampsStrandedOld(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	seedTable(t, db)
	o := testOptions(t, schema, "t", "FORCE")
	testutil.Exec(t, db, "CREATE TABLE _t_old (x INT)", "CREATE TABLE t_rcsentry LIKE t", "INSERT INTO t_rcsentry SELECT * FROM t")
	want := testutil.TableChecksum(t, db, schema, "t_rcsentry", "id")
	done, err := Cleanup(ctxFor(t, time.Minute), o.Conn, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	names := tableNames(t, db, schema)
	if len(names) != 3 || !strings.HasPrefix(names[0], "_t_20") || names[1] != "_t_old" || names[2] != "t" {
		t.Fatalf("tables after cleanup: %v (%q)", names, done)
	}
	if got := testutil.TableChecksum(t, db, schema, names[0], "id"); got != want {
		t.Error("the renamed old table lost rows")
	}
	if len(done) != 1 || !strings.Contains(done[0], "renamed the previous original table") {
		t.Errorf("done: %q", done)
	}
}
