package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// The differential fidelity suite: the server is the oracle. For each ALTER
// class, a table of varied, randomized data is migrated by recast while
// writers change it (single-row and multi-row statements touching the
// converted columns), during the copy and, for some classes, a postponed
// cut-over. The writers stop just before the cut-over lock; the old table's
// content is then final. The server's own ALTER TABLE, run on a copy of that
// content under the same sql_mode and time_zone, must give the same table:
// every column byte-exact (NULL-safe), SHOW CREATE TABLE equal apart from
// the name and counter, the AUTO_INCREMENT counter at least the old one's.
// Or recast refuses and the native ALTER fails too.
//
// It runs under a server time_zone other than UTC and a non-default,
// stricter sql_mode (set GLOBAL for the test, restored after; the test is
// not parallel with the package's other tests).

// fidelityMode is the server's sql_mode during the suite: MariaDB's default
// plus the zero-date rules (so that the 1067 case of issue 11 applies).
const fidelityMode = "STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

const fidelityZone = "+05:00"

// fidelityRows is the table size of the suite (the stress variant's is larger).
const fidelityRows = 1500

type fidelityCase struct {
	name  string
	alter string
	// recastRefuses: recast refuses by design (documented) although the
	// server's ALTER may succeed.
	recastRefuses bool
	postpone      bool
	// deferred: run with --defer-indexes; these indexes must be missing
	// from the new table when the copy is done, and there at the end.
	deferred []string
	// flavor: run only on flavors whose name starts with it ("mariadb",
	// "mysql"); "" on all.
	flavor string
}

var fidelityCases = []fidelityCase{
	{name: "add-column", alter: "ADD COLUMN note VARCHAR(20) NOT NULL DEFAULT 'x'"},
	{name: "add-column-zero-date-default", alter: "ADD COLUMN z DATETIME NOT NULL DEFAULT '1970-00-00 00:00:00'"},
	{name: "add-column-timestamp-default", alter: "ADD COLUMN tsd TIMESTAMP NOT NULL DEFAULT '2001-02-03 04:05:06'"},
	{name: "drop-column", alter: "DROP COLUMN txt", postpone: true},
	{name: "rename-column", alter: "CHANGE i i2 INT NULL"},
	{name: "int-to-bigint", alter: "MODIFY i BIGINT NULL"},
	{name: "bigint-to-int", alter: "MODIFY bi INT NULL"},
	{name: "smallint-to-tinyint-overflow", alter: "MODIFY si TINYINT NULL"},
	{name: "unsigned-widen", alter: "MODIFY u BIGINT UNSIGNED NULL"},
	{name: "int-to-varchar", alter: "MODIFY i VARCHAR(20) NULL"},
	{name: "float-to-double", alter: "MODIFY f DOUBLE NULL", postpone: true},
	{name: "double-to-float", alter: "MODIFY d FLOAT NULL"},
	{name: "float-to-varchar", alter: "MODIFY f VARCHAR(40) NULL"},
	{name: "float-to-bigint", alter: "MODIFY f BIGINT NULL"},
	{name: "float-to-decimal", alter: "MODIFY f DECIMAL(20,6) NULL"},
	{name: "double-to-bigint", alter: "MODIFY d BIGINT NULL"},
	{name: "double-to-varchar", alter: "MODIFY d VARCHAR(40) NULL"},
	{name: "decimal-to-int", alter: "MODIFY dc INT NULL"},
	{name: "decimal-to-double", alter: "MODIFY dc DOUBLE NULL"},
	{name: "bit-to-int", alter: "MODIFY b INT NULL"},
	{name: "bit-to-varbinary", alter: "MODIFY b VARBINARY(8) NULL"},
	{name: "datetime-to-bigint", alter: "MODIFY dt BIGINT NULL"},
	{name: "time-to-int", alter: "MODIFY tm INT NULL"},
	{name: "timestamp-to-bigint", alter: "MODIFY ts BIGINT NULL"},
	{name: "enum-to-int", alter: "MODIFY e INT NULL"},
	{name: "set-to-int", alter: "MODIFY st INT NULL"},
	{name: "varchar-to-timestamp", alter: "MODIFY vc TIMESTAMP NULL", recastRefuses: true},
	{name: "string-to-json", alter: "MODIFY j TEXT NULL, MODIFY txt JSON NULL"},
	{name: "decimal-scale-down", alter: "MODIFY dc DECIMAL(10,2) NULL"},
	{name: "decimal-scale-up", alter: "MODIFY dc DECIMAL(14,6) NULL"},
	{name: "bit-widen", alter: "MODIFY b BIT(16) NULL"},
	{name: "year-to-int", alter: "MODIFY y INT NULL"},
	{name: "time-precision-down", alter: "MODIFY tm TIME NULL"},
	{name: "datetime-precision-up", alter: "MODIFY dt DATETIME(6) NULL"},
	{name: "datetime-to-date", alter: "MODIFY dt DATE NULL"},
	{name: "date-to-datetime", alter: "MODIFY dte DATETIME NULL"},
	{name: "datetime-to-timestamp", alter: "MODIFY dt TIMESTAMP(3) NULL", postpone: true},
	{name: "timestamp-to-datetime", alter: "MODIFY ts DATETIME(3) NULL", postpone: true},
	{name: "timestamp-to-varchar", alter: "MODIFY ts VARCHAR(40) NULL"},
	{name: "enum-to-varchar", alter: "MODIFY e VARCHAR(10) NULL"},
	{name: "enum-add-member", alter: "MODIFY e ENUM('a','b','c','d') NULL"},
	{name: "set-to-varchar", alter: "MODIFY st VARCHAR(20) NULL"},
	{name: "latin1-to-utf8mb4", alter: "MODIFY lat VARCHAR(64) CHARACTER SET utf8mb4 NULL"},
	{name: "convert-to-utf8mb4", alter: "CONVERT TO CHARACTER SET utf8mb4"},
	{name: "collation-bin", alter: "MODIFY vc VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL"},
	{name: "json-to-text", alter: "MODIFY j LONGTEXT NULL"},
	{name: "modify-virtual-generated", alter: "MODIFY g BIGINT AS (i + 2) VIRTUAL"},
	{name: "virtual-to-stored", alter: "MODIFY g INT AS (i + 1) STORED"},
	{name: "json-to-varchar", alter: "MODIFY j VARCHAR(200) NULL"},
	{name: "utf8mb4-to-latin1", alter: "MODIFY vc VARCHAR(64) CHARACTER SET latin1 NULL"},
	{name: "varchar-shorten", alter: "MODIFY vc VARCHAR(5) NULL"},
	{name: "int-to-decimal", alter: "MODIFY i DECIMAL(12,2) NULL"},
	{name: "year-to-varchar", alter: "MODIFY y VARCHAR(4) NULL"},
	{name: "time-to-datetime", alter: "MODIFY tm DATETIME(3) NULL"},
	{name: "datetime-to-time", alter: "MODIFY dt TIME(3) NULL"},
	{name: "date-to-timestamp", alter: "MODIFY dte TIMESTAMP NULL"},
	{name: "add-stored-generated", alter: "ADD COLUMN g2 BIGINT AS (i * 2) STORED"},
	{name: "add-index", alter: "ADD INDEX idx_dt (dt), ADD INDEX idx_vc (vc(10))"},
	// --defer-indexes: plain keys built after the copy, in their order
	// after the unique key (the server sorts keys by kind); a descending,
	// a prefix and a commented key keep their definitions.
	{name: "defer-indexes", alter: "ADD INDEX idx_k (k, dt DESC), ADD UNIQUE KEY uk (k, id), ADD INDEX idx_vc (vc(10)) COMMENT 'late, built', MODIFY i BIGINT NULL",
		deferred: []string{"idx_k", "idx_vc"}, postpone: true},
	{name: "defer-indexes-drop-column", alter: "ADD INDEX idx_dte (dte), ADD INDEX idx_e (e, st), DROP COLUMN txt", deferred: []string{"idx_dte", "idx_e"}},
	{name: "defer-indexes-virtual", alter: "ADD INDEX idx_g (g, k), MODIFY si INT NULL", deferred: []string{"idx_g"}},
	// A SPATIAL key is kept and sorted with the plain keys: idx_a, before
	// it, stays (built after the copy it would be listed after sp); idx_b
	// is built after. (MySQL cannot add a NOT NULL POINT to rows.)
	{name: "defer-indexes-spatial-between", alter: "ADD COLUMN pt POINT NOT NULL DEFAULT (POINT(1,2)), ADD INDEX idx_a (k), ADD SPATIAL INDEX sp (pt), ADD INDEX idx_b (i)",
		deferred: []string{"idx_b"}, flavor: "mariadb"},
	// MySQL sorts a functional key with the keys on virtual columns (after
	// the other plain keys): idx_g, before fx, stays; idx_dt is built after.
	{name: "defer-indexes-functional", alter: "ADD INDEX idx_dt (dt), ADD INDEX idx_g (g), ADD INDEX fx ((k + 1))",
		deferred: []string{"idx_dt"}, flavor: "mysql"},
	{name: "pk-widen", alter: "DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)"},
	{name: "force", alter: "FORCE"},
}

const fidelityTable = `CREATE TABLE t (
	id INT NOT NULL AUTO_INCREMENT,
	k INT NOT NULL,
	i INT NULL, bi BIGINT NULL, si SMALLINT NULL, u INT UNSIGNED NULL,
	f FLOAT NULL, d DOUBLE NULL, dc DECIMAL(10,4) NULL,
	b BIT(8) NULL, y YEAR NULL,
	tm TIME(3) NULL, dt DATETIME(3) NULL, ts TIMESTAMP(3) NULL, dte DATE NULL,
	e ENUM('a','b','c') NULL, st SET('x','y','z') NULL,
	vc VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL,
	lat VARCHAR(64) CHARACTER SET latin1 NULL,
	txt TEXT CHARACTER SET latin1 NULL, bin VARBINARY(32) NULL, j JSON NULL,
	g INT AS (i + 1) VIRTUAL,
	PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=latin1`

// fidelityCols are the written columns (g is generated).
var fidelityCols = []string{"k", "i", "bi", "si", "u", "f", "d", "dc", "b", "y", "tm", "dt", "ts", "dte", "e", "st", "vc", "lat", "txt", "bin", "j"}

// randValue returns a SQL literal for column c (NULL sometimes).
func randValue(r *rand.Rand, c string) string {
	if c != "k" && r.IntN(12) == 0 {
		return "NULL"
	}
	day := func() string {
		return fmt.Sprintf("%04d-%02d-%02d", 1990+r.IntN(45), 1+r.IntN(12), 1+r.IntN(28))
	}
	clock := func() string { return fmt.Sprintf("%02d:%02d:%02d", r.IntN(24), r.IntN(60), r.IntN(60)) }
	words := []string{"alpha", "Beta", "gamma ", "déjà", "ÆØÅ", "naïve", "x", "", "zeta'q", "a\\\\b"}
	switch c {
	case "k":
		return fmt.Sprint(r.IntN(1000))
	case "i":
		return fmt.Sprint(r.Int32() - 1<<30)
	case "bi":
		if r.IntN(50) == 0 {
			return fmt.Sprint(r.Int64()) // beyond INT: narrowing refuses
		}
		return fmt.Sprint(int64(r.Int32()) - 1<<30)
	case "si":
		if r.IntN(3) == 0 {
			return fmt.Sprint(r.IntN(60000) - 30000)
		}
		return fmt.Sprint(r.IntN(256) - 128)
	case "u":
		return fmt.Sprint(r.Uint32())
	case "f", "d":
		return fmt.Sprintf("%g", (r.Float64()-0.5)*float64(r.IntN(1000000)+1))
	case "dc":
		return fmt.Sprintf("%d.%04d", r.IntN(2000000)-1000000, r.IntN(10000))
	case "b":
		return fmt.Sprintf("b'%b'", r.IntN(256))
	case "y":
		return fmt.Sprint(1901 + r.IntN(254))
	case "tm":
		return fmt.Sprintf("'%s.%03d'", clock(), r.IntN(1000))
	case "dt":
		return fmt.Sprintf("'%s %s.%03d'", day(), clock(), r.IntN(1000))
	case "ts":
		return fmt.Sprintf("'%04d-%02d-%02d %s.%03d'", 1975+r.IntN(60), 1+r.IntN(12), 1+r.IntN(28), clock(), r.IntN(1000))
	case "dte":
		return "'" + day() + "'"
	case "e":
		return "'" + []string{"a", "b", "c"}[r.IntN(3)] + "'"
	case "st":
		return "'" + []string{"", "x", "y,z", "x,y,z"}[r.IntN(4)] + "'"
	case "vc":
		return "'" + strings.ReplaceAll(words[r.IntN(len(words))], "'", "''") + fmt.Sprint(r.IntN(100)) + "'"
	case "lat":
		return "'" + strings.ReplaceAll(words[r.IntN(len(words))], "'", "''") + "'"
	case "txt":
		return "'" + strings.Repeat(words[r.IntN(3)], r.IntN(20)) + "'"
	case "bin":
		return fmt.Sprintf("x'%08X00FF'", r.Uint32())
	case "j":
		return fmt.Sprintf(`'{"a": %d, "b": "%s"}'`, r.IntN(100), []string{"x", "y"}[r.IntN(2)])
	}
	panic("randValue: unknown column " + c)
}

func randRow(r *rand.Rand) string {
	vals := make([]string, len(fidelityCols))
	for i, c := range fidelityCols {
		vals[i] = randValue(r, c)
	}
	return "(" + strings.Join(vals, ",") + ")"
}

// TestFidelity runs every ALTER class of fidelityCases (not in parallel with
// the package's other tests: it sets the server's globals).
func TestFidelity(t *testing.T) {
	fidelityGlobals(t)
	only := os.Getenv("RECAST_FIDELITY")
	for i, c := range fidelityCases {
		if only != "" && !strings.Contains(","+only+",", ","+c.name+",") || !strings.HasPrefix(testutil.Flavor(), c.flavor) {
			continue
		}
		t.Run(c.name, func(t *testing.T) { runFidelity(t, int64(i), c, fidelityRows) })
	}
	if only == "" || strings.Contains(only, "checksum") {
		t.Run("checksum-changed-types", testChecksumChangedTypes)
	}
	if only == "" || strings.Contains(only, "key-types") {
		t.Run("key-types", testKeyTypes) // keytypes_test.go
	}
}

// fidelityGlobals sets the server's sql_mode and time_zone for the test and
// restores them after.
func fidelityGlobals(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	admin := testutil.DB(t, "")
	var oldMode, oldZone string
	if err := admin.QueryRowContext(ctx, "SELECT @@GLOBAL.sql_mode, @@GLOBAL.time_zone").Scan(&oldMode, &oldZone); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, admin, "SET GLOBAL sql_mode = '"+fidelityMode+"'", "SET GLOBAL time_zone = '"+fidelityZone+"'")
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "SET GLOBAL sql_mode = '"+oldMode+"'")
		_, _ = admin.ExecContext(context.Background(), "SET GLOBAL time_zone = '"+oldZone+"'")
	})
}

// testChecksumChangedTypes: the checksum compares a column whose type
// changed (the new value against the server's conversion of the old one):
// a corrupted value of it is found and repaired, no column is skipped.
func testChecksumChangedTypes(t *testing.T) {
	for _, tc := range []struct{ alter, col, corrupt string }{
		{"MODIFY f DOUBLE NULL", "f", "f + 1"},
		{"MODIFY d FLOAT NULL", "d", "d + 1"},
		{"MODIFY dc DECIMAL(10,2) NULL", "dc", "dc + 1"},
		{"MODIFY f VARCHAR(40) NULL", "f", "CONCAT(f, '1')"},
		{"MODIFY i VARCHAR(20) NULL", "i", "i - 1"},
		{"MODIFY dt TIMESTAMP(3) NULL", "dt", "dt + INTERVAL 1 SECOND"},
		{"MODIFY ts DATETIME(3) NULL", "ts", "ts + INTERVAL 1 SECOND"},
		{"MODIFY ts VARCHAR(40) NULL", "ts", "CONCAT(ts, '1')"},
		{"MODIFY dt DATETIME(6) NULL", "dt", "dt + INTERVAL 1 SECOND"},
		{"MODIFY dt BIGINT NULL", "dt", "dt + 1"},
		{"MODIFY e INT NULL", "e", "e + 1"},
		{"MODIFY e VARCHAR(10) NULL", "e", "CONCAT(e, 'x')"},
		{"MODIFY b INT NULL", "b", "b + 1"},
		{"MODIFY y INT NULL", "y", "y + 1"},
		{"MODIFY tm TIME NULL", "tm", "tm + INTERVAL 1 SECOND"},
	} {
		t.Run(tc.col+"-"+strings.Fields(tc.alter)[2], func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			schema := testutil.NewSchema(t)
			db := serverDB(t, schema)
			testutil.Exec(t, db, fidelityTable)
			r := rand.New(rand.NewPCG(7, 7))
			var vals []string
			for range 300 {
				vals = append(vals, randRow(r))
			}
			testutil.Exec(t, db, "INSERT INTO t ("+strings.Join(fidelityCols, ",")+") VALUES "+strings.Join(vals, ","))
			o := testOptions(t, schema, "t", tc.alter)
			o.Pause = func(ctx context.Context, point string) {
				if point == "checksum:round1" {
					testutil.Exec(t, db, "UPDATE _t_new SET "+tc.col+" = "+tc.corrupt+" WHERE "+tc.col+" IS NOT NULL ORDER BY id LIMIT 1")
				}
			}
			res, err := runT(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Checksum.Skipped) > 0 || res.Checksum.Repaired == 0 {
				t.Errorf("checksum: %+v; want the corrupted %s found and repaired, nothing skipped", res.Checksum, tc.col)
			}
		})
	}
}

// serverDB opens a pool whose sessions take the server's global settings
// (testutil.DB pins time_zone to UTC).
func serverDB(t *testing.T, schema string) *sql.DB {
	t.Helper()
	sb := testutil.Sandbox(t)
	db, err := sql.Open("mysql", sb.DSN(sb.Primary, schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func runFidelity(t *testing.T, seed int64, c fidelityCase, rows int) {
	ctx := ctxFor(t, 15*time.Minute)
	schema := testutil.NewSchema(t)
	cmp := testutil.DB(t, schema) // UTC: TIMESTAMPs compare exactly
	db := serverDB(t, schema)     // the server's sql_mode and time_zone
	r := rand.New(rand.NewPCG(uint64(seed), 11))
	testutil.Exec(t, db, fidelityTable)
	cols := strings.Join(fidelityCols, ",")
	for n := 0; n < rows; {
		var vals []string
		for ; n < rows && len(vals) < 200; n++ {
			vals = append(vals, randRow(r))
		}
		testutil.Exec(t, db, "INSERT INTO t ("+cols+") VALUES "+strings.Join(vals, ","))
	}
	// The highest ids deleted: the counter must survive (autoinc-copy-deletes).
	testutil.Exec(t, db, fmt.Sprintf("DELETE FROM t WHERE id > %d", rows-20))

	// Writers: until the cut-over's lock is about to be requested.
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var wmu sync.Mutex
	var writes, werrs int
	var firstErr error
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(uint64(seed), uint64(100+w)))
			for wctx.Err() == nil {
				var q string
				id := 1 + wr.IntN(rows+200)
				col := fidelityCols[wr.IntN(len(fidelityCols))]
				switch op := wr.IntN(10); {
				case op < 3:
					q = "INSERT INTO t (" + cols + ") VALUES " + randRow(wr) + "," + randRow(wr)
				case op < 6:
					q = fmt.Sprintf("UPDATE t SET %s = %s, %s = %s WHERE id = %d", col, randValue(wr, col), "dt", randValue(wr, "dt"), id)
				case op < 8: // multi-row
					q = fmt.Sprintf("UPDATE t SET %s = %s, ts = %s, f = f + 1 WHERE id BETWEEN %d AND %d", col, randValue(wr, col), randValue(wr, "ts"), id, id+30)
				default:
					q = fmt.Sprintf("DELETE FROM t WHERE id = %d", id)
				}
				// ctx, not wctx: a statement cancelled in flight could still
				// commit after the writers are stopped, past the swap.
				_, err := db.ExecContext(ctx, q)
				wmu.Lock()
				if err != nil && wctx.Err() == nil {
					werrs++
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", q, err)
					}
				} else if err == nil {
					writes++
				}
				wmu.Unlock()
				time.Sleep(time.Duration(wr.IntN(3)) * time.Millisecond)
			}
		}()
	}
	var once sync.Once
	stop := func() { once.Do(func() { stopWriters(); wg.Wait() }) }
	defer stop()

	o := testOptions(t, schema, "t", c.alter)
	o.MaxChunkRows = 100
	o.DropOldTable = false
	o.DeferIndexes = len(c.deferred) > 0
	ghostIndexes := func() []string {
		names, err := queryStrings(ctx, cmp, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, GhostName("t"))
		if err != nil {
			t.Errorf("the new table's indexes: %v", err)
		}
		return names
	}
	flag := ""
	if c.postpone {
		flag = filepath.Join(t.TempDir(), "postpone")
		o.PostponeCutOverFlagFile = flag
	}
	o.Pause = func(ctx context.Context, point string) {
		switch point {
		case "copy-done":
			if have := ghostIndexes(); slices.ContainsFunc(c.deferred, func(n string) bool { return slices.Contains(have, n) }) {
				t.Errorf("--defer-indexes: the copy is done and the new table has %v already (deferred: %v)", have, c.deferred)
			}
		case "caught-up":
			if have := ghostIndexes(); slices.ContainsFunc(c.deferred, func(n string) bool { return !slices.Contains(have, n) }) {
				t.Errorf("--defer-indexes: caught up and the new table has only %v (deferred: %v)", have, c.deferred)
			}
			if flag != "" {
				time.AfterFunc(1500*time.Millisecond, func() { os.Remove(flag) })
			}
		case "cutover:before-lock":
			stop()
			// Ids the old table handed out that the new one never saw (a
			// rolled-back insert, like deleted rows the copy never read:
			// autoinc-copy-deletes): the old counter is above MAX(id)+1.
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				_, err = tx.ExecContext(ctx, "INSERT INTO t ("+cols+") VALUES "+randRow(r)+","+randRow(r)+","+randRow(r))
				_ = tx.Rollback()
			}
			if err != nil {
				t.Errorf("rolled-back insert: %v", err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	_, rerr := runT(ctx, o)
	stop()
	wmu.Lock()
	t.Logf("%q: %d concurrent writes (%d failed, first: %v); recast: %v", c.alter, writes, werrs, firstErr, rerr)
	wmu.Unlock()

	old := "t"
	if rerr == nil {
		old = OldName("t")
	}
	// The oracle: the server's own ALTER on a copy of the old table's final
	// content, under the server's settings, counter included.
	var oldAI sql.NullInt64
	if err := cmp.QueryRowContext(ctx, "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, old).Scan(&oldAI); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, db, "CREATE TABLE oracle LIKE "+testutil.QuoteIdent(old),
		"INSERT INTO oracle (id,"+cols+") SELECT id,"+cols+" FROM "+testutil.QuoteIdent(old),
		fmt.Sprintf("ALTER TABLE oracle AUTO_INCREMENT = %d", oldAI.Int64))
	_, nerr := db.ExecContext(ctx, "ALTER TABLE oracle "+c.alter)
	switch {
	case rerr != nil && nerr != nil:
		if strings.Contains(rerr.Error(), "\n") {
			t.Errorf("recast's refusal is not one line: %v", rerr)
		}
		t.Logf("both refuse: recast %v; server %v", rerr, nerr)
		return
	case rerr != nil && c.recastRefuses:
		t.Logf("recast refuses by design: %v", rerr)
		return
	case rerr != nil:
		t.Fatalf("recast failed but the server's ALTER succeeds: %v", rerr)
	case nerr != nil:
		t.Fatalf("recast migrated but the server's ALTER fails: %v", nerr)
	}
	if c.recastRefuses {
		t.Errorf("recast was expected to refuse")
	}
	if werrs > writes/2 {
		t.Errorf("most concurrent writes failed: %v", firstErr)
	}

	// Same definition, apart from the name and the counter.
	norm := regexp.MustCompile(` AUTO_INCREMENT=\d+`)
	showCreate := func(name string) string {
		var n, s string
		if err := cmp.QueryRowContext(ctx, "SHOW CREATE TABLE "+testutil.QuoteIdent(name)).Scan(&n, &s); err != nil {
			t.Fatal(err)
		}
		s = norm.ReplaceAllString(s, "")
		return strings.Replace(s, "CREATE TABLE `"+name+"`", "CREATE TABLE `X`", 1)
	}
	if got, want := showCreate("t"), showCreate("oracle"); got != want {
		t.Errorf("definition differs from the server's ALTER:\nrecast: %s\nserver: %s", got, want)
	}
	var newAI sql.NullInt64
	if err := cmp.QueryRowContext(ctx, "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", schema).Scan(&newAI); err != nil {
		t.Fatal(err)
	}
	if newAI.Valid && newAI.Int64 < oldAI.Int64 {
		t.Errorf("AUTO_INCREMENT %d < the old table's %d", newAI.Int64, oldAI.Int64)
	}
	// Same rows, byte for byte.
	got, err := tableRows(ctx, cmp, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tableRows(ctx, cmp, schema, "oracle")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d rows, the server's ALTER gives %d", len(got), len(want))
	}
	// Rows start with their id: compare by it.
	byID := func(rows []string) map[string]string {
		m := make(map[string]string, len(rows))
		for _, r := range rows {
			id, _, _ := strings.Cut(r, " k=")
			m[id] = r
		}
		return m
	}
	g, w := byID(got), byID(want)
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 4 {
			t.Errorf(format, args...)
		}
	}
	for id, wr := range w {
		switch gr, ok := g[id]; {
		case !ok:
			report("row %s is missing:\nserver: %s", id, wr)
		case gr != wr:
			report("row differs:\nrecast: %s\nserver: %s", gr, wr)
		}
	}
	for id, gr := range g {
		if _, ok := w[id]; !ok {
			report("row %s is extra:\nrecast: %s", id, gr)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rows differ", bad, len(want))
	}
}

// queryStrings returns the first column of every row of q.
func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rs.Err()
}

// tableRows renders every row of schema.name, in primary-key order, as
// name=HEX(value) of each column (NULL as \N): byte-exact, NULL-safe.
func tableRows(ctx context.Context, db *sql.DB, schema, name string) ([]string, error) {
	cols, err := queryStrings(ctx, db, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, name)
	if err != nil {
		return nil, err
	}
	var exprs []string
	for _, c := range cols {
		q := testutil.QuoteIdent(c)
		exprs = append(exprs, fmt.Sprintf("'%s=', IFNULL(HEX(CAST(%s AS BINARY)), '\\\\N')", c, q))
	}
	if len(exprs) == 0 {
		return nil, errors.New("no columns")
	}
	pkCols, err := queryStrings(ctx, db, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", schema, name)
	if err != nil {
		return nil, err
	}
	var pk []string
	for _, c := range pkCols {
		pk = append(pk, testutil.QuoteIdent(c))
	}
	rows, err := db.QueryContext(ctx, "SELECT CONCAT_WS(' ', "+strings.Join(exprs, ", ")+") FROM "+testutil.QuoteIdent(name)+" ORDER BY "+strings.Join(pk, ", "))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// TestZonedKeyNewUnique: a TIMESTAMP in the key that identifies rows, a
// zone other than UTC and a new unique key the table does not enforce: the
// rows set aside under that key are found again by a key the applier reads
// in UTC and the restore looks up in the zone, which missed them (a row
// lost). Refused in one line, the table untouched; under UTC it runs, and
// keeps every row.
func TestZonedKeyNewUnique(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL, ts TIMESTAMP NOT NULL, v INT NOT NULL, PRIMARY KEY (id, ts))",
		"INSERT INTO t VALUES (1, '2001-01-01 10:00:00', 1), (2, '2001-01-01 11:00:00', 2), (3, '2001-01-01 12:00:00', 3)")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "ADD UNIQUE KEY uv (v)")
	o.Conn.SetVars = map[string]string{"time_zone": "'+05:00'"}
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "TIMESTAMP column `ts`") || !strings.Contains(err.Error(), "`uv`") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v; want the one-line refusal naming ts and uv", err)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Fatal("the refusal changed the table")
	}
	o.Conn.SetVars = map[string]string{"time_zone": "'+00:00'"}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatalf("under UTC: %v", err)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Fatal("the migration under UTC changed the rows")
	}
}

// TestFidelityDSTKey: with a time zone that has daylight-saving changes,
// TIMESTAMP key values are ambiguous as text (the repeated hour), so a copy
// keyed on a TIMESTAMP is refused with one line; a fixed-offset zone is not.
func TestFidelityDSTKey(t *testing.T) {
	t.Parallel()
	loadZones(t, "Europe/Paris")
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (ts TIMESTAMP(3) NOT NULL, a INT, PRIMARY KEY (ts))",
		"INSERT INTO t VALUES ('2001-10-28 00:30:00', 1), ('2001-10-28 01:30:00', 2), ('2001-10-28 02:30:00', 3)")
	o := testOptions(t, schema, "t", "MODIFY a BIGINT")
	o.Conn.SetVars = map[string]string{"time_zone": "'Europe/Paris'"}
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "daylight-saving") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v; want the one-line daylight-saving refusal", err)
	}
	o.Conn.SetVars = map[string]string{"time_zone": "'+05:00'"}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatalf("a fixed-offset zone: %v", err)
	}
}

// loadZones loads the named zones (from /usr/share/zoneinfo) into the test
// server's time zone tables, each unless it is there (a second load of a
// zone fails on its name); the test is skipped without the tool.
func loadZones(t *testing.T, zones ...string) {
	t.Helper()
	tool, err := exec.LookPath("mariadb-tzinfo-to-sql")
	if err != nil {
		t.Skip("mariadb-tzinfo-to-sql is not installed")
	}
	sb := testutil.Sandbox(t)
	db := testutil.DB(t, "mysql")
	for _, z := range zones {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM mysql.time_zone_name WHERE Name = ?", z).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			continue
		}
		load := fmt.Sprintf("%s /usr/share/zoneinfo/%s %s | mariadb -h%s -P%d -u%s -p%s mysql",
			tool, z, z, sb.Primary.Host, sb.Primary.Port, sb.User, sb.Password)
		if out, err := exec.Command("sh", "-c", load).CombinedOutput(); err != nil {
			t.Skipf("load the %s zone: %v: %s", z, err, out)
		}
	}
}

// TestZoneSemantics: a zone is UTC for recast only if it is at every
// instant it samples, today's included: Africa/Casablanca was +00:00 all of
// 2001 and has been +01:00 since 2018 (sampled in 2001 alone it was taken
// for UTC, and values converted between TIMESTAMP and DATETIME were an
// hour off); America/Danmarkshavn (-03:00 until 1996) and Africa/Sao_Tome
// (+01:00 through 2018) are UTC today and were not in TIMESTAMP's range;
// Africa/Abidjan has been +00:00 since 1912; America/New_York changes its
// clocks; '+00:00' is UTC.
func TestZoneSemantics(t *testing.T) {
	t.Parallel()
	// Zones no other test loads: TestFidelityDSTKey loads Europe/Paris.
	loadZones(t, "Africa/Casablanca", "America/New_York", "America/Danmarkshavn", "Africa/Sao_Tome", "Africa/Abidjan")
	sb := testutil.Sandbox(t)
	for _, c := range []struct {
		zone     string
		utc, dst bool
	}{
		{"Africa/Casablanca", false, true}, // its offset differs between 2001 and now (and it changes clocks for Ramadan)
		{"America/New_York", false, true},
		{"America/Danmarkshavn", false, true},
		{"Africa/Sao_Tome", false, true},
		{"Africa/Abidjan", true, false},
		{"+00:00", true, false},
		{"+01:00", false, false},
	} {
		cfg := dbconn.Config{Host: sb.Primary.Host, Port: sb.Primary.Port, User: sb.User, Password: sb.Password,
			SetVars: map[string]string{"time_zone": dbconn.QuoteString(c.zone)}}
		db, err := dbconn.Open(ctxFor(t, time.Minute), cfg)
		if err != nil {
			t.Fatal(err)
		}
		sem, err := dbconn.ReadSemantics(ctxFor(t, time.Minute), db, cfg)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if sem.TimeZone != c.zone || sem.UTC != c.utc || sem.DST != c.dst {
			t.Errorf("%s: zone %q, UTC %v, DST %v; want UTC %v, DST %v", c.zone, sem.TimeZone, sem.UTC, sem.DST, c.utc, c.dst)
		}
	}
}

// TestFidelityNewAutoIncrement: making a column holding 0 AUTO_INCREMENT
// renumbers those rows in the server's ALTER (in its copy order), which the
// copy cannot reproduce: refused in one line, table untouched. With
// NO_AUTO_VALUE_ON_ZERO in the mode the server keeps the 0s, and so does
// recast.
func TestFidelityNewAutoIncrement(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a INT)", "INSERT INTO t VALUES (0, 1), (5, 2), (7, 3)")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "MODIFY id INT NOT NULL AUTO_INCREMENT")
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "NO_AUTO_VALUE_ON_ZERO") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v; want the one-line refusal", err)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Fatal("the table changed")
	}
	// The server's own ALTER does renumber (the reason for the refusal).
	testutil.Exec(t, db, "CREATE TABLE n LIKE t", "INSERT INTO n SELECT * FROM t", "ALTER TABLE n MODIFY id INT NOT NULL AUTO_INCREMENT")
	var zero int
	if err := db.QueryRow("SELECT COUNT(*) FROM n WHERE id = 0").Scan(&zero); err != nil || zero != 0 {
		t.Fatalf("the server's ALTER kept the 0 (%d, %v): the refusal is not needed", zero, err)
	}
	o.Conn.SetVars = map[string]string{"sql_mode": "'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatalf("with NO_AUTO_VALUE_ON_ZERO: %v", err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id = 0").Scan(&zero); err != nil || zero != 1 {
		t.Fatalf("the 0 row: %d, %v", zero, err)
	}
}

// TestGeneratedToPlainRefused: a STORED generated column that becomes a
// plain one keeps its values in the server's ALTER (MySQL), which neither
// the copy nor the applier would write: refused in one line, table
// untouched.
func TestGeneratedToPlainRefused(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a INT, g INT AS (a + 1) STORED, x INT)",
		"INSERT INTO t (id, a, x) VALUES (1, 10, 1), (2, 20, 2), (3, NULL, 3)")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	o := testOptions(t, schema, "t", "MODIFY g INT NULL, ADD INDEX (x)")
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "column `g` is generated in the old table and a plain column in the new one") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v; want the one-line refusal", err)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Fatal("the table changed")
	}
	// Where the server does this ALTER, it keeps the values (the reason
	// for the refusal).
	testutil.Exec(t, db, "CREATE TABLE n LIKE t", "INSERT INTO n (id, a, x) SELECT id, a, x FROM t")
	if _, err := db.Exec("ALTER TABLE n MODIFY g INT NULL, ADD INDEX (x)"); err != nil {
		t.Logf("the server refuses it too: %v", err)
		return
	}
	var sum sql.NullInt64
	if err := db.QueryRow("SELECT SUM(g) FROM n").Scan(&sum); err != nil || sum.Int64 != 32 {
		t.Fatalf("the server's ALTER: SUM(g) = %v, %v; want 32 (the values kept)", sum, err)
	}
}
