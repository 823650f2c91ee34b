package migration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestMethodAutoCopyOnlyChecks: what only the copy needs (no triggers, no
// foreign keys, a chunk key) does not stop --method auto from running an
// INSTANT ALTER on a table that has them, and still refuses the copy when
// the ALTER needs one, in the dry run and in the run.
func TestMethodAutoCopyOnlyChecks(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE parent (id INT NOT NULL PRIMARY KEY)", "INSERT INTO parent SELECT seq FROM seq_1_to_10",
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, p INT NOT NULL, v INT NOT NULL, FOREIGN KEY (p) REFERENCES parent (id))",
		"INSERT INTO t SELECT seq, seq % 10 + 1, seq FROM seq_1_to_500",
		"CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.v = NEW.v")

	// An instant change: done natively, foreign key and trigger kept.
	o := testOptions(t, schema, "t", "ADD COLUMN c INT NULL")
	o.Method = "auto"
	res, err := runT(ctxFor(t, time.Minute), o)
	if err != nil {
		t.Fatalf("--method auto, instant ALTER on a table with a foreign key and a trigger: %v", err)
	}
	if res.Plan == nil || res.Plan.Method != MethodInstant {
		t.Fatalf("method: %+v", res.Plan)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'c'", schema).Scan(&n); err != nil || n != 1 {
		t.Errorf("column c added: %d (%v)", n, err)
	}
	if got := tablesOf(t, db, schema); got != "parent,t" {
		t.Errorf("tables: %s", got)
	}

	// A change that needs the copy: refused by the copy's own check, with
	// nothing created, in the dry run and in the run.
	for _, execute := range []bool{false, true} {
		o := testOptions(t, schema, "t", "MODIFY v BIGINT NOT NULL")
		o.Method, o.Execute = "auto", execute
		_, err := runT(ctxFor(t, time.Minute), o)
		var ce *check.Error
		if !errors.As(err, &ce) || ce.Check != "triggers" {
			t.Fatalf("execute=%v: want the triggers check to refuse the copy, got %v", execute, err)
		}
		if !strings.Contains(err.Error(), "t_bi") {
			t.Errorf("the refusal does not name the trigger: %v", err)
		}
		if got := tablesOf(t, db, schema); got != "parent,t" {
			t.Errorf("execute=%v: tables: %s", execute, got)
		}
	}
}
