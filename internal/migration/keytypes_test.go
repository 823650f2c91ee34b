package migration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

// keyTypeCase is a table whose copy key has a column the copy cannot bind
// back as the server prints it: ENUM and SET (the index orders them by
// number, a string compares by name), BIT (its bytes compare as 0), FLOAT
// (it prints 6 digits) and DOUBLE.
type keyTypeCase struct {
	name   string
	create string
	// row returns one row's values for INSERT (cols order), key first.
	cols string
	row  func(r *rand.Rand) string
	// exact renders the columns for the comparison (FLOAT's every digit).
	exact string
	rows  int
}

func enumRow(members []string) func(r *rand.Rand) string {
	return func(r *rand.Rand) string {
		return fmt.Sprintf("(%d, '%s', %d)", 1+r.IntN(500), members[r.IntN(len(members))], r.IntN(1000))
	}
}

func randFloat(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		// The largest, 1e30, is stored as 1.0000000150474662e30 and
		// prints as 1e30: below itself, as 0.1 is.
		return []string{"0.1", "1.2345678", "-0.1", "1e30", "1e-30", "0.30000001"}[r.IntN(6)]
	case 1:
		return fmt.Sprintf("%d", r.IntN(100)-50)
	}
	return fmt.Sprintf("%.9g", float32(r.NormFloat64()*math.Pow(10, float64(r.IntN(12)-6))))
}

func randDouble(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return []string{"0.1e0+0.2e0", "1e0/3e0", "-2e0/3e0", "1.7976931348623157e308"}[r.IntN(4)]
	}
	return fmt.Sprintf("%.17g", r.NormFloat64()*math.Pow(10, float64(r.IntN(30)-15)))
}

var keyTypeCases = []keyTypeCase{
	// Members out of name order: 'sms' (1) sorts before 'email' (2) in the
	// index and after it as a string. Fewer rows than a chunk: one chunk,
	// bounded by the last member in index order.
	{name: "enum", create: "CREATE TABLE t (e ENUM('sms','email','push','a') NOT NULL PRIMARY KEY, v INT NULL)",
		cols: "e, v", rows: 4, exact: "e+0, v",
		row: func(r *rand.Rand) string {
			return fmt.Sprintf("('%s', %d)", []string{"sms", "email", "push", "a"}[r.IntN(4)], r.IntN(1000))
		}},
	{name: "int-enum", create: "CREATE TABLE t (id INT NOT NULL, kind ENUM('z','a','m','b') NOT NULL, v INT NULL, PRIMARY KEY (id, kind))",
		cols: "id, kind, v", rows: 1500, exact: "id, kind+0, v", row: enumRow([]string{"z", "a", "m", "b"})},
	{name: "int-set", create: "CREATE TABLE t (id INT NOT NULL, s SET('z','a','m') NOT NULL, v INT NULL, PRIMARY KEY (id, s))",
		cols: "id, s, v", rows: 1500, exact: "id, s+0, v", row: enumRow([]string{"", "z", "a", "m", "z,a", "a,m", "z,m", "z,a,m"})},
	{name: "bit", create: "CREATE TABLE t (b BIT(12) NOT NULL PRIMARY KEY, v INT NULL)",
		cols: "b, v", rows: 1500, exact: "b+0, v",
		row: func(r *rand.Rand) string { return fmt.Sprintf("(%d, %d)", r.IntN(4096), r.IntN(1000)) }},
	{name: "float", create: "CREATE TABLE t (f FLOAT NOT NULL PRIMARY KEY, v INT NULL)",
		cols: "f, v", rows: 1500, exact: "f+0e0, v",
		row: func(r *rand.Rand) string { return fmt.Sprintf("(%s, %d)", randFloat(r), r.IntN(1000)) }},
	{name: "int-float", create: "CREATE TABLE t (g INT NOT NULL, f FLOAT NOT NULL, v INT NULL, PRIMARY KEY (g, f))",
		cols: "g, f, v", rows: 1500, exact: "g, f+0e0, v",
		row: func(r *rand.Rand) string { return fmt.Sprintf("(%d, %s, %d)", r.IntN(4), randFloat(r), r.IntN(1000)) }},
	{name: "double", create: "CREATE TABLE t (d DOUBLE NOT NULL PRIMARY KEY, v INT NULL)",
		cols: "d, v", rows: 1500, exact: "d, v",
		row: func(r *rand.Rand) string { return fmt.Sprintf("(%s, %d)", randDouble(r), r.IntN(1000)) }},
	// Not a key type: columns whose DEFAULT is an expression, which MySQL
	// marks DEFAULT_GENERATED (their values were once not copied: every
	// row got the copy's time). Rows hold explicit values of other days;
	// the writers' UPDATEs set ts ON UPDATE.
	{name: "expression-defaults", create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, " +
		"ts TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), " +
		"dt DATETIME NULL DEFAULT CURRENT_TIMESTAMP, n INT NULL DEFAULT (7), v INT NULL)",
		cols: "id, ts, dt, n, v", rows: 300, exact: "id, ts, IFNULL(dt, 'N'), IFNULL(n, 'N'), v",
		row: func(r *rand.Rand) string {
			return fmt.Sprintf("(%d, '2001-%02d-%02d 10:11:12.%03d', '1999-%02d-03 04:05:06', %d, %d)",
				1+r.IntN(2000), 1+r.IntN(12), 1+r.IntN(28), r.IntN(1000), 1+r.IntN(12), r.IntN(100), r.IntN(1000))
		}},
}

// testKeyTypes migrates tables keyed by such columns, with small chunks,
// while writers insert, update (key-changing and multi-row ones too) and
// delete; without the checksum, which would repair what the copy left out.
// The server's ALTER on a copy of the old table's final content is the
// oracle: the same rows, every digit. Run by TestFidelity (the server's
// time zone and sql_mode set for it).
func testKeyTypes(t *testing.T) {
	for i, c := range keyTypeCases {
		t.Run(c.name, func(t *testing.T) {
			// Without writers first: the copy alone must read every row (a
			// writer's change makes the applier write its row, and would
			// hide a row the copy left out).
			t.Run("copy-only", func(t *testing.T) { runKeyType(t, uint64(i), c, "none", 0) })
			for _, lock := range []string{"none", "share"} {
				t.Run(lock, func(t *testing.T) { runKeyType(t, uint64(i), c, lock, 2) })
			}
		})
	}
}

func runKeyType(t *testing.T, seed uint64, c keyTypeCase, copyLock string, writers int) {
	ctx := ctxFor(t, 3*time.Minute)
	schema := testutil.NewSchema(t)
	db := serverDB(t, schema)
	cmp := testutil.DB(t, schema)
	r := rand.New(rand.NewPCG(seed, 23))
	testutil.Exec(t, db, c.create)
	insert := func(ctx context.Context, r *rand.Rand, n int) error {
		vals := make([]string, n)
		for i := range vals {
			vals[i] = c.row(r)
		}
		_, err := db.ExecContext(ctx, "INSERT IGNORE INTO t ("+c.cols+") VALUES "+strings.Join(vals, ", "))
		return err
	}
	for n := 0; n < c.rows; n += 50 {
		if err := insert(ctx, r, min(50, c.rows-n)); err != nil {
			t.Fatal(err)
		}
	}
	key := strings.Split(c.cols, ", ")
	keyCols := key[:len(key)-1] // v is last, never in the key
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	var firstErr error
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(seed, uint64(50+w)))
			for wctx.Err() == nil {
				var err error
				switch op := wr.IntN(10); {
				case op < 3:
					err = insert(ctx, wr, 1+wr.IntN(3))
				case op < 5: // multi-row, in key order
					_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE t SET v = v + 1 ORDER BY %s LIMIT %d", strings.Join(keyCols, ", "), 1+wr.IntN(40)))
				case op < 7: // moves a row to another key (or fails on a duplicate)
					_, err = db.ExecContext(ctx, "UPDATE IGNORE t SET "+keySet(keyCols, c.row(wr))+" ORDER BY RAND() LIMIT 1")
				case op < 8:
					_, err = db.ExecContext(ctx, "DELETE FROM t ORDER BY RAND() LIMIT 1")
				default:
					_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE t SET v = %d WHERE v < %d", wr.IntN(1000), wr.IntN(50)))
				}
				mu.Lock()
				if err == nil {
					writes++
				} else if firstErr == nil && wctx.Err() == nil {
					firstErr = err
				}
				mu.Unlock()
				time.Sleep(time.Duration(wr.IntN(3)) * time.Millisecond)
			}
		}()
	}
	var once sync.Once
	stop := func() { once.Do(func() { stopWriters(); wg.Wait() }) }
	defer stop()

	o := testOptions(t, schema, "t", "ADD COLUMN note INT NULL")
	o.MaxChunkRows = 7
	o.Checksum = false
	o.DropOldTable = false
	o.CopyLock = copyLock
	// The cut-over waits 1.5 s once caught up: the writers' changes go
	// through the applier alone for a while, as well as during the copy.
	flag := filepath.Join(t.TempDir(), "postpone")
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o.PostponeCutOverFlagFile = flag
	o.Pause = func(ctx context.Context, point string) {
		switch point {
		case "caught-up":
			time.AfterFunc(1500*time.Millisecond, func() { os.Remove(flag) })
		case "cutover:before-lock":
			stop()
		}
	}
	_, err := runT(ctx, o)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("%d concurrent writes (first error: %v)", writes, firstErr)
	if writers > 0 && writes == 0 {
		t.Errorf("no concurrent write succeeded: %v", firstErr)
	}
	mu.Unlock()
	testutil.Exec(t, db, "CREATE TABLE oracle LIKE "+OldName("t"),
		"INSERT INTO oracle SELECT * FROM "+OldName("t"),
		"ALTER TABLE oracle ADD COLUMN note INT NULL")
	rows := func(name string) []string {
		got, err := queryStrings(ctx, cmp, "SELECT CONCAT_WS(' ', "+c.exact+", IFNULL(note, 'N')) FROM "+name)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	got, want := rows("t"), rows("oracle")
	if len(want) == 0 {
		t.Fatal("the old table is empty")
	}
	var missing, extra []string
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			extra = append(extra, g)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%d rows (the server's ALTER: %d): missing %d %v, extra or different %d %v",
			len(got), len(want), len(missing), head(missing, 5), len(extra), head(extra, 5))
	}
}

// keySet renders "(a, b) = (x, y)"'s SET form from a row literal "(x, y, v)":
// the key columns set to the row's key values.
func keySet(cols []string, row string) string {
	vals := splitRow(row)
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c + " = " + vals[i]
	}
	return strings.Join(parts, ", ")
}

// splitRow splits a row literal "(x, 'a,b', v)" into its values.
func splitRow(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "("), ")")
	var out []string
	var cur strings.Builder
	quoted := false
	for _, ch := range row {
		switch {
		case ch == '\'':
			quoted = !quoted
			cur.WriteRune(ch)
		case ch == ',' && !quoted:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(ch)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }
