package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }

func TestLoadAndVerify(t *testing.T) {
	for _, clientPrepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("clientPrepared=%v", clientPrepared), func(t *testing.T) {
			ctx := context.Background()
			schema := testutil.NewSchema(t)
			db := testutil.DB(t, schema)
			cfg := Config{Schema: schema, Table: "w", Writers: 4, Rows: 2000, Seed: 7, ClientPrepared: clientPrepared}
			if err := CreateTable(ctx, db, cfg); err != nil {
				t.Fatal(err)
			}
			sh, err := Prepare(ctx, db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if sh.Len() != 2000 {
				t.Fatalf("shadow has %d rows, want 2000", sh.Len())
			}
			checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, 0)

			l := Start(ctx, db, cfg, sh)
			time.Sleep(3 * time.Second)
			st := l.Stop()
			t.Logf("stats: %s; shadow rows %d", st, sh.Len())
			if st.Committed == 0 {
				t.Fatal("no op committed")
			}
			if st.Failed() {
				t.Fatalf("load failed: %s", st)
			}
			checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, 0)

			ids := sh.IDs()
			victim := ids[len(ids)/2]
			testutil.Exec(t, db, fmt.Sprintf("UPDATE `w` SET `u`=CONCAT(`u`,'-corrupt') WHERE `id`=%d", victim))
			checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, 1)

			testutil.Exec(t, db, fmt.Sprintf("DELETE FROM `w` WHERE `id`=%d", ids[0]))
			checkVerify(t, db, schema, sh, VerifyOptions{}, 1, 0, 1)
		})
	}
}

// TestVerifyOptions checks renamed and dropped columns, extra table columns
// and extra rows.
func TestVerifyOptions(t *testing.T) {
	ctx := context.Background()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	cfg := Config{Schema: schema, Table: "w", Rows: 300, Seed: 1}
	if err := CreateTable(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	sh, err := Prepare(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, db,
		"ALTER TABLE `w` RENAME COLUMN `vc` TO `vc2`, DROP COLUMN `txt`, ADD COLUMN `note` VARCHAR(10) NULL, MODIFY `i` BIGINT NULL")
	if _, err := Verify(ctx, db, schema, "w", sh, VerifyOptions{}); err == nil {
		t.Fatal("Verify without options succeeded on a table without vc and txt")
	}
	opts := VerifyOptions{Renamed: map[string]string{"vc": "vc2"}, Dropped: []string{"txt"}}
	checkVerify(t, db, schema, sh, opts, 0, 0, 0)

	// A snapshot equals the prepared shadow.
	testutil.Exec(t, db, "ALTER TABLE `w` RENAME COLUMN `vc2` TO `vc`, ADD COLUMN `txt` TEXT NULL")
	snap, err := Snapshot(ctx, db, schema, "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range sh.IDs() {
		a, _ := sh.get(id)
		b, _ := snap.get(id)
		fa, fb := unpack(a), unpack(b)
		for i := range fa {
			if columns[i].name == "txt" {
				continue
			}
			if fa[i] != fb[i] {
				t.Fatalf("snapshot of id %d differs in %s: %+v vs %+v", id, columns[i].name, fa[i], fb[i])
			}
		}
	}
	testutil.Exec(t, db, "UPDATE `w` SET `txt`=NULL")
	testutil.Exec(t, db, "INSERT INTO `w` (`id`,`u`) VALUES (-1, 'extra')")
	checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 1, sh.Len()-countNull(sh, "txt"))
}

func countNull(sh *Shadow, col string) int {
	n := 0
	for _, id := range sh.IDs() {
		if _, null, _ := sh.Value(id, col); null {
			n++
		}
	}
	return n
}

func checkVerify(t *testing.T, db *sql.DB, schema string, sh *Shadow, opts VerifyOptions, missing, extra, different int) {
	t.Helper()
	d, err := Verify(context.Background(), db, schema, "w", sh, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Missing != missing || d.Extra != extra || d.Different != different {
		t.Fatalf("verify: %s, want %d missing, %d extra, %d different; examples:\n%v", d, missing, extra, different, d.Examples)
	}
	if d.Rows != sh.Len()-missing+extra {
		t.Fatalf("verify read %d rows, want %d", d.Rows, sh.Len()-missing+extra)
	}
}

func TestPackUnpack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		vals := randomRow(r, r.Int64(), "x")
		fs := make([]field, len(vals))
		for i, v := range vals {
			fs[i] = field{v: v.canon, null: v.null}
		}
		got := unpack(pack(fs))
		if len(got) != len(fs) {
			t.Fatalf("unpack: %d fields, want %d", len(got), len(fs))
		}
		for i := range fs {
			if got[i] != fs[i] {
				t.Fatalf("field %d: %+v, want %+v", i, got[i], fs[i])
			}
		}
	}
}

func TestInterpolate(t *testing.T) {
	got, err := interpolate("INSERT INTO t VALUES (?,?,?,?,?,?)",
		[]any{nil, int64(-5), uint64(18446744073709551615), "a'b\\c\x00\n\r\x1a😀", []byte{0, 0xff}, 0.25})
	if err != nil {
		t.Fatal(err)
	}
	want := `INSERT INTO t VALUES (NULL,-5,18446744073709551615,'a\'b\\c\0\n\r\Z😀',X'00ff',0.25)`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := interpolate("?", nil); err == nil {
		t.Fatal("missing argument not reported")
	}
}

func TestFirstOwned(t *testing.T) {
	for _, n := range []int{1, 3, 4} {
		for _, from := range []int64{-9, -1, 0, 1, 7, highBase + 1, negBase + 1} {
			for w := range n {
				id := firstOwned(from, w, n)
				if id < from || id >= from+int64(n) || owner(id, n) != w {
					t.Fatalf("firstOwned(%d, %d, %d) = %d", from, w, n, id)
				}
			}
		}
	}
}
