package migration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/check"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestNewDefinitionCheckedOnGhost: InnoDB has no temporary table with a
// FULLTEXT index or partitions, so the preflight cannot build the new
// definition on one; the checks that need it (key-type, not-null, ...) run
// on the ghost table once it is created, and a refusal leaves only the
// original table. Before, they were skipped: a key column made DATETIME
// from DATETIME(6) was accepted.
func TestNewDefinitionCheckedOnGhost(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	ctx := ctxFor(t, 3*time.Minute)
	for _, q := range []string{
		"CREATE TABLE ft (at DATETIME(6) NOT NULL PRIMARY KEY, body TEXT, FULLTEXT KEY (body))",
		"INSERT INTO ft VALUES ('2026-01-01 10:00:00.400000', 'a b'), ('2026-01-01 10:00:00.600000', 'c d')",
		"CREATE TABLE pt (id INT NOT NULL PRIMARY KEY, v INT NULL) PARTITION BY HASH (id) PARTITIONS 2",
		"INSERT INTO pt VALUES (1, 10), (2, NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		table, alter, check string
	}{
		{"ft", "MODIFY at DATETIME NOT NULL", "key-type"},
		{"ft", "ADD FULLTEXT KEY f2 (body), MODIFY at DATETIME NOT NULL", "key-type"},
		{"pt", "MODIFY v INT NOT NULL", "not-null"},
	} {
		before := testutil.TableChecksum(t, db, schema, c.table, "1")
		_, err := runT(ctx, testOptions(t, schema, c.table, c.alter))
		var ce *check.Error
		if !errors.As(err, &ce) || ce.Check != c.check {
			t.Errorf("%s %s: %v, want a refusal by %s", c.table, c.alter, err, c.check)
		}
		if got := strings.Join(tableNames(t, db, schema), ","); got != "ft,pt" {
			t.Errorf("%s %s: tables left: %s", c.table, c.alter, got)
		}
		if testutil.TableChecksum(t, db, schema, c.table, "1") != before {
			t.Errorf("%s %s: the table changed", c.table, c.alter)
		}
	}
	// What the checks accept still runs, on each kind.
	for _, c := range []struct{ table, alter string }{
		{"ft", "ADD COLUMN n INT NULL"},
		{"pt", "MODIFY v BIGINT NULL"},
	} {
		if _, err := runT(ctx, testOptions(t, schema, c.table, c.alter)); err != nil {
			t.Errorf("%s %s: %v", c.table, c.alter, err)
		}
	}
}
