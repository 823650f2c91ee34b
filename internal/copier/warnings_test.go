package copier

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// TestWarningOverflow: a chunk meets 60 rows the applier already wrote (a
// hot key range: 60 duplicate-key warnings) while its session keeps 10
// warnings. The chunk's rows are converted again apart: with only
// duplicates the copy goes on; with a truncation hidden behind them (row
// 100, past the 10 kept) it stops naming that row, where it used to give
// up with "lower --max-chunk-rows" either way.
func TestWarningOverflow(t *testing.T) {
	for _, c := range []struct {
		name     string
		long     bool // row 100 does not fit the ghost's column
		wantErr  string
		rechecks int64
	}{
		{name: "duplicates only", rechecks: 1},
		{name: "a truncation behind them", long: true, wantErr: "the row with key (id) = '100' raised Warning 1265", rechecks: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			schema := testutil.NewSchema(t)
			raw := testutil.DB(t, schema)
			testutil.Exec(t, raw,
				"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL)",
				"INSERT INTO src SELECT seq, CONCAT('v', seq) FROM seq_1_to_100",
				"CREATE TABLE g (id INT NOT NULL PRIMARY KEY, v VARCHAR(8) NOT NULL)",
				"INSERT INTO g SELECT id, v FROM src WHERE id BETWEEN 21 AND 80")
			if c.long {
				testutil.Exec(t, raw, "UPDATE src SET v = 'much too long for g' WHERE id = 100")
			}
			db := rcDB(t, schema, "max_error_count", "10") // as MySQL keeps 1024 without SESSION_VARIABLES_ADMIN
			src, err := table.Load(ctx, db, schema, "src")
			if err != nil {
				t.Fatal(err)
			}
			q := table.QuoteIdent(schema) + "." + table.QuoteIdent("g")
			cp, err := New(db, Config{Source: src, Ghost: q, SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
				KeyColumns: []string{"id"}, KeyIndex: "PRIMARY", MinChunk: 1000, MaxChunk: 1000})
			if err != nil {
				t.Fatal(err)
			}
			err = cp.Run(ctx)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("copy: %v", err)
			case c.wantErr != "" && (!errors.Is(err, ErrDataChange) || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("copy: %v, want ErrDataChange naming %q", err, c.wantErr)
			}
			if got := cp.Rechecked(); got != c.rechecks {
				t.Errorf("%d chunk(s) examined again, want %d", got, c.rechecks)
			}
			var n int
			if err := raw.QueryRow("SELECT COUNT(*) FROM g").Scan(&n); err != nil || n != 100 {
				t.Errorf("ghost rows: %d, %v (want 100)", n, err)
			}
			var tmp int
			if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME = ?", recheckTable).Scan(&tmp); err != nil || tmp != 0 {
				t.Errorf("temporary table visible: %d, %v", tmp, err)
			}
		})
	}
}
