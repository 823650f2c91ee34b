package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/recast-osc/recast/internal/testutil"
)

// TestKeyVariantsEqualUnderCollation checks, against the server, what the
// KeyOnU ops rely on: a variant differs from its original in bytes but is
// equal to it under utf8mb4_general_ci, and keys of different bases are not
// equal.
func TestKeyVariantsEqualUnderCollation(t *testing.T) {
	ctx := context.Background()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := setupConn(ctx, conn); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_general_ci = CAST(? AS CHAR CHARACTER SET utf8mb4)"
	equal := func(a, b string) bool {
		t.Helper()
		var eq int
		if err := conn.QueryRowContext(ctx, q, a, b).Scan(&eq); err != nil {
			t.Fatal(err)
		}
		return eq == 1
	}
	for _, cl := range equalRunes {
		for _, c := range cl[1:] {
			if !equal("x"+string(cl[0])+"y", "x"+string(c)+"y") {
				t.Errorf("%q and %q differ under utf8mb4_general_ci", cl[0], c)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	kinds := map[variantKind]int{}
	for i := range 300 {
		base := "w" + strconv.Itoa(i%16) + "." + strconv.FormatUint(uint64(r.Uint32()), 36) + "-" + strconv.Itoa(i)
		u := keyValue(r, base).canon
		other := keyValue(r, base+"0").canon // another sequence number
		if equal(u, other) {
			t.Errorf("keys of different bases are equal: %q, %q", u, other)
		}
		for range 4 {
			v := keyVariant(r, u)
			kinds[variantKindOf(u, v)]++
			if v == u {
				t.Fatalf("variant of %q has the same bytes", u)
			}
			if utf8.RuneCountInString(v) > 64 { // VARCHAR(64) counts characters
				t.Fatalf("variant %q is longer than VARCHAR(64)", v)
			}
			if !equal(u, v) {
				t.Fatalf("variant %q of %q is not equal under utf8mb4_general_ci", v, u)
			}
			u = v
		}
	}
	t.Logf("variants by kind (case, space, accent): %d, %d, %d", kinds[variantCase], kinds[variantSpace], kinds[variantAccent])
	if kinds[variantCase] == 0 || kinds[variantSpace] == 0 || kinds[variantAccent] == 0 {
		t.Fatalf("a kind of variant never occurred: %v", kinds)
	}
}

func TestVariantKindOf(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want variantKind
	}{
		{"w3.k9x-12", "W3.K9X-12", variantCase},
		{"abc", "abc ", variantSpace},
		{"abc  ", "abc", variantSpace},
		{"abé", "abe", variantAccent},
		{"ab😀", "ab🎉", variantAccent},
		{"abc ", "ABC", variantAccent}, // case and spaces: counted with the others
	} {
		if got := variantKindOf(c.a, c.b); got != c.want {
			t.Errorf("variantKindOf(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if !strings.Contains(CreateTableSQL("s", "t"), "PRIMARY KEY (`id`),\n  UNIQUE KEY `uk_u` (`u`)") {
		t.Errorf("default table changed:\n%s", CreateTableSQL("s", "t"))
	}
	if !strings.Contains(createTableSQL("s", "t", true), "PRIMARY KEY (`u`),\n  UNIQUE KEY `uk_id` (`id`)") {
		t.Errorf("KeyOnU table:\n%s", createTableSQL("s", "t", true))
	}
}

// TestKeyOnULoadAndVerify runs the KeyOnU load and checks that the table
// equals the shadow byte for byte, that every kind of key variant was
// committed, and that Verify sees a key that differs from the shadow only
// in case, in trailing spaces or in accents.
func TestKeyOnULoadAndVerify(t *testing.T) {
	for _, clientPrepared := range []bool{false, true} {
		t.Run(fmt.Sprintf("clientPrepared=%v", clientPrepared), func(t *testing.T) {
			ctx := context.Background()
			schema := testutil.NewSchema(t)
			db := testutil.DB(t, schema)
			cfg := Config{Schema: schema, Table: "w", Writers: 4, Rows: 2000, Seed: 11, ClientPrepared: clientPrepared, KeyOnU: true}
			if err := CreateTable(ctx, db, cfg); err != nil {
				t.Fatal(err)
			}
			var pk string
			if err := db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(COLUMN_NAME) FROM information_schema.STATISTICS
				WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'w' AND INDEX_NAME = 'PRIMARY'`, schema).Scan(&pk); err != nil {
				t.Fatal(err)
			}
			if pk != "u" {
				t.Fatalf("primary key is (%s), want (u)", pk)
			}
			sh, err := Prepare(ctx, db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, 0)

			l := Start(ctx, db, cfg, sh)
			time.Sleep(3 * time.Second)
			st := l.Stop()
			t.Logf("stats: %s; shadow rows %d", st, sh.Len())
			if st.Failed() {
				t.Fatalf("load failed: %s", st)
			}
			if st.CaseFlips == 0 || st.SpaceFlips == 0 || st.AccentFlips == 0 || st.Reinserts == 0 {
				t.Fatalf("a kind of key variant was never committed: %s", st)
			}
			if float64(st.KeyVariants()) < 0.1*float64(st.Committed) {
				t.Fatalf("key variants are %d of %d committed ops, want at least 10%%", st.KeyVariants(), st.Committed)
			}
			checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, 0)

			// The table holds keys with capitals, trailing spaces and accents,
			// as the shadow says (Verify compared every byte).
			var upper, spaces, accents int
			if err := db.QueryRowContext(ctx, "SELECT SUM(BINARY `u` <> BINARY LOWER(`u`)), SUM(HEX(`u`) LIKE '%20'), "+
				"SUM(BINARY `u` <> BINARY CONVERT(`u` USING ascii)) FROM `w`").Scan(&upper, &spaces, &accents); err != nil {
				t.Fatal(err)
			}
			t.Logf("keys with capitals %d, trailing spaces %d, non-ASCII %d", upper, spaces, accents)
			if upper == 0 || spaces == 0 || accents == 0 {
				t.Fatalf("keys with capitals %d, trailing spaces %d, non-ASCII %d: want some of each", upper, spaces, accents)
			}

			// A key changed to an equal-under-the-collation value is a difference.
			r := rand.New(rand.NewPCG(5, 6))
			ids := sh.IDs()
			variants := []func(string) string{
				func(u string) string { return caseVariant(r, u) },
				func(u string) string { return spaceVariant(r, u) },
				func(u string) string {
					v, ok := accentVariant(r, u)
					if !ok {
						v = strings.Replace(u, "-", "-é", 1) // not equal: still a difference
					}
					return v
				},
			}
			for i, variant := range variants {
				id := ids[i*len(ids)/len(variants)]
				u, _, _ := sh.Value(id, "u")
				setU(t, db, id, variant(u))
				checkVerify(t, db, schema, sh, VerifyOptions{}, 0, 0, i+1)
			}
		})
	}
}

// setU sets row id's u to exactly v.
func setU(t *testing.T, db *sql.DB, id int64, v string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := setupConn(ctx, conn); err != nil {
		t.Fatal(err)
	}
	res, err := conn.ExecContext(ctx, "UPDATE `w` SET `u` = CAST(? AS CHAR CHARACTER SET utf8mb4) WHERE `id` = ?", v, id)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("set u of id %d to %q: %d rows affected", id, v, n)
	}
}
