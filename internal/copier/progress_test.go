package copier

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestProgressCountsCoveredRows: the applier has already written some of
// the table's rows to the ghost (in a middle chunk and in the last one),
// so the chunks' INSERT IGNORE skip them as duplicates. Progress counts the
// rows the chunks covered, not only those they inserted: it used to end at
// the inserted rows (a heavy-load bench run ended its copy at 77.5 %, and
// its ETA with it). Both the lock-free and the locking copy.
func TestProgressCountsCoveredRows(t *testing.T) {
	for _, lockFree := range []bool{true, false} {
		t.Run(fmt.Sprintf("lockfree=%v", lockFree), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			schema := testutil.NewSchema(t)
			db := rcDB(t, schema)
			const total = 2500
			var vals []string
			for i := 1; i <= total; i++ {
				vals = append(vals, fmt.Sprintf("(%d, 'v%d')", i, i))
			}
			testutil.Exec(t, db,
				"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL)",
				"INSERT INTO src VALUES "+strings.Join(vals, ","),
				"CREATE TABLE g LIKE src",
				// 201 rows of the second chunk (1001-2000), 51 of the last (2001-2500).
				"INSERT INTO g SELECT * FROM src WHERE id BETWEEN 1100 AND 1300 OR id BETWEEN 2400 AND 2450")
			q := func(n string) string { return table.QuoteIdent(schema) + "." + table.QuoteIdent(n) }
			src, err := table.Load(ctx, db, schema, "src")
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Source: src, Ghost: q("g"), SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
				KeyColumns: []string{"id"}, KeyIndex: "PRIMARY", MinChunk: 1000, MaxChunk: 1000}
			if lockFree {
				if err := CreateMarks(ctx, db, q(MarksName("src"))); err != nil {
					t.Fatal(err)
				}
				cfg.Defer, cfg.Marks = &noDefer{}, q(MarksName("src"))
			}
			cp, err := New(db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if on, _ := cp.LockFree(); on != lockFree {
				t.Fatalf("lock-free copy %v, want %v", on, lockFree)
			}
			pr := cp.Progress()
			if pr.Rows != total || pr.Chunks != 3 || !pr.Done {
				t.Errorf("progress %+v: want %d rows covered in 3 chunks, done", pr, total)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM g").Scan(&n); err != nil || n != total {
				t.Errorf("ghost rows: %d, %v (want %d)", n, err, total)
			}
		})
	}
}
