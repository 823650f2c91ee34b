package migration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/verify"
)

func TestServerComputed(t *testing.T) {
	ghost := &table.Table{Schema: "s", Name: "_t_new", Columns: []table.Column{
		{Name: "id", DataType: "int"}, {Name: "ts", DataType: "timestamp"}, {Name: "dt", DataType: "datetime"},
		{Name: "v", DataType: "varchar"}, {Name: "g", DataType: "date", Generated: true},
		{Name: "vg", DataType: "date", Generated: true, Virtual: true}, {Name: "seq", DataType: "bigint", AutoIncrement: true},
		{Name: "ts2", DataType: "timestamp"}, {Name: "n", DataType: "int"},
	}, Indexes: []table.Index{{Name: "PRIMARY", Columns: []string{"id"}}}}
	cases := []struct {
		name   string
		line   string
		paired string // space-separated paired ghost columns (besides id)
		utc    bool
		want   string // "" = accepted; else a part of the refusal
	}{
		{"datetime default now, MariaDB", "`dt` datetime DEFAULT current_timestamp(),", "", false, "new column `dt` has a default that depends on the time zone"},
		{"datetime default now, MySQL", "`dt` datetime DEFAULT CURRENT_TIMESTAMP,", "", false, "depends on the time zone"},
		{"datetime default now, UTC", "`dt` datetime DEFAULT CURRENT_TIMESTAMP,", "", true, ""},
		{"datetime default now, copied", "`dt` datetime DEFAULT CURRENT_TIMESTAMP,", "dt", false, ""},
		{"datetime constant, on update", "`dt` datetime DEFAULT '2001-01-01 00:00:00' ON UPDATE CURRENT_TIMESTAMP,", "", false, ""},
		{"timestamp default now", "`ts` timestamp(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),", "", false, ""},
		{"timestamp default now() + interval", "`ts` timestamp NULL DEFAULT (now() + interval 1 day),", "", false, ""},
		{"timestamp default curdate", "`ts` timestamp NULL DEFAULT (curdate()),", "", false, "depends on the time zone"},
		{"string literal that reads like a function", "`v` varchar(40) DEFAULT 'now() curdate() nextval(s)',", "", false, ""},
		{"quoted quote", "`v` varchar(40) DEFAULT 'it''s now()' COMMENT 'x''now()',", "", false, ""},
		{"uuid default", "`v` char(36) DEFAULT (uuid()),", "", false, ""},
		{"sequence, MariaDB", "`n` int(11) DEFAULT nextval(`s`.`seq1`),", "", true, "takes its default from a sequence"},
		{"new auto-increment", "`seq` bigint NOT NULL AUTO_INCREMENT,", "", true, "adds AUTO_INCREMENT column `seq`"},
		{"auto-increment copied", "`seq` bigint NOT NULL AUTO_INCREMENT,", "seq", true, ""},
		{"stored generated on a timestamp", "`g` date GENERATED ALWAYS AS (cast(`ts` as date)) STORED,", "", false, "generated column `g` depends on the time zone"},
		{"stored generated on a timestamp, UTC", "`g` date GENERATED ALWAYS AS (cast(`ts` as date)) STORED,", "", true, ""},
		{"stored generated, from_unixtime", "`g` date GENERATED ALWAYS AS (from_unixtime(`n`)) STORED,", "", false, "depends on the time zone"},
		{"stored generated, no zone", "`g` date GENERATED ALWAYS AS (`dt` + interval 1 day) STORED,", "", false, ""},
		{"stored generated, a column named like a timestamp", "`g` date GENERATED ALWAYS AS (`ts2x`) STORED,", "", false, ""},
		{"virtual generated, not indexed", "`vg` date GENERATED ALWAYS AS (cast(`ts` as date)) VIRTUAL,", "", false, ""},
		{"functional key", "KEY `fx` ((cast(`ts` as date))),", "", false, "key KEY `fx`"},
		{"functional key, no zone", "KEY `fx` ((`n` + 1)),", "", false, ""},
	}
	for _, c := range cases {
		paired := map[string]bool{"id": true}
		for _, p := range strings.Fields(c.paired) {
			paired[p] = true
		}
		create := "CREATE TABLE `_t_new` (\n  `id` int NOT NULL,\n  " + c.line + "\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB"
		err := serverComputed(create, ghost, paired, c.utc, "+05:00")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
		}
	}
	// The virtual column is checked once a key holds it.
	ix := *ghost
	ix.Indexes = append(ix.Indexes, table.Index{Name: "k", Columns: []string{"vg"}})
	if err := serverComputed("CREATE TABLE x (\n  `vg` date GENERATED ALWAYS AS (cast(`ts` as date)) VIRTUAL,\n)", &ix, nil, false, "+05:00"); err == nil {
		t.Error("an indexed virtual column on a TIMESTAMP is accepted")
	}
}

// TestServerComputedRefused: what the server computes while recast writes
// rows (a new AUTO_INCREMENT column, a new DATETIME defaulting to the
// current time, a stored column derived from a TIMESTAMP) is refused in
// one line in a zone other than UTC, the table untouched; a TIMESTAMP
// defaulting to the current time, the same instant in every zone, is not.
func TestServerComputedRefused(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, ts TIMESTAMP NULL, x INT)",
		"INSERT INTO t VALUES (1, '2001-02-03 04:05:06', 1), (2, NULL, 2)")
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	for _, c := range []struct{ alter, zone, want string }{
		{"ADD COLUMN c DATETIME NULL DEFAULT CURRENT_TIMESTAMP", "+05:00", "new column `c` has a default that depends on the time zone"},
		{"ADD COLUMN g DATE AS (CAST(ts AS DATE)) STORED", "+05:00", "generated column `g` depends on the time zone"},
		{"ADD COLUMN seq BIGINT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (seq)", "+00:00", "adds AUTO_INCREMENT column `seq`"},
	} {
		for _, dry := range []bool{true, false} {
			o := testOptions(t, schema, "t", c.alter)
			o.Conn.SetVars = map[string]string{"time_zone": "'" + c.zone + "'"}
			o.Execute = !dry
			_, err := runT(ctxFor(t, time.Minute), o)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s (dry run %v): %v; want the one-line refusal %q", c.alter, dry, err, c.want)
			}
		}
		if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
			t.Fatalf("%s: the table changed", c.alter)
		}
	}
	o := testOptions(t, schema, "t", "ADD COLUMN c TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP")
	o.Conn.SetVars = map[string]string{"time_zone": "'+05:00'"}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatalf("a TIMESTAMP defaulting to the current time: %v", err)
	}
}

// TestZonedTimestampRange: a DATETIME made TIMESTAMP under a zone other
// than UTC, and a row changed during the migration to a local time outside
// TIMESTAMP's range there: the server's own ALTER refuses that value, and
// so must the migration (its applier stored it unconverted, another
// instant, and the swap went through). Both ends of the range, which ends
// in 2106 on MariaDB 11.5 and later (flavor.Server.TimestampMax); a value
// just inside it is converted.
func TestZonedTimestampRange(t *testing.T) {
	t.Parallel()
	srv := testutil.Server(t)
	late, inside := "2038-01-18 23:30:00", "2038-01-18 20:00:00" // 04:30 and 01:00 UTC on the 19th
	if srv.MariaDB && srv.AtLeast(11, 5, 0) {
		late, inside = "2106-02-07 03:00:00", "2106-02-07 01:00:00" // 08:00 and 06:00 UTC
	}
	for _, c := range []struct {
		zone, value string
		refused     bool
	}{
		{"+05:00", "1970-01-01 03:00:00", true}, // 1969-12-31 22:00 UTC
		{"-05:00", late, true},
		{"-05:00", inside, false},
		{"+05:00", "1970-01-01 06:00:00", false}, // 01:00 UTC
	} {
		schema := testutil.NewSchema(t)
		db := testutil.DB(t, schema)
		testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, dt DATETIME NULL, x INT)",
			"INSERT INTO t VALUES (1, '2001-01-01 10:00:00', 1), (2, NULL, 2), (3, '2020-06-30 23:59:59', 3)")
		o := testOptions(t, schema, "t", "MODIFY dt TIMESTAMP NULL")
		o.Conn.SetVars = map[string]string{"time_zone": "'" + c.zone + "'"}
		o.Checksum = false // the applier alone must refuse it
		o.DropOldTable = false
		o.Pause = func(ctx context.Context, point string) {
			if point == "caught-up" {
				testutil.Exec(t, db, "UPDATE t SET dt = '"+c.value+"' WHERE id = 1")
			}
		}
		_, err := runT(ctxFor(t, time.Minute), o)
		// The oracle: the server's ALTER on the same data, in that zone.
		src := "t"
		if err == nil {
			src = OldName("t")
		}
		testutil.Exec(t, db, "CREATE TABLE n LIKE "+src, "INSERT INTO n SELECT * FROM "+src)
		conn, cerr := db.Conn(ctxFor(t, time.Minute))
		if cerr != nil {
			t.Fatal(cerr)
		}
		_, oerr := conn.ExecContext(context.Background(), "SET time_zone = '"+c.zone+"'")
		if oerr == nil {
			_, oerr = conn.ExecContext(context.Background(), "ALTER TABLE n MODIFY dt TIMESTAMP NULL")
		}
		if _, err := conn.ExecContext(context.Background(), "SET time_zone = '+00:00'"); err != nil { // the pool's setting, back
			t.Fatal(err)
		}
		conn.Close()
		t.Logf("%s %s: recast: %v; server: %v", c.zone, c.value, err, oerr)
		if (oerr != nil) != c.refused {
			t.Fatalf("%s %s: the server's ALTER: %v; the test expects refused=%v", c.zone, c.value, oerr, c.refused)
		}
		if c.refused {
			if err == nil {
				t.Errorf("%s %s: the migration went through; the server's ALTER refuses the value", c.zone, c.value)
			}
			var typ string
			if qerr := db.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'dt'", schema).Scan(&typ); qerr != nil || typ != "datetime" {
				t.Errorf("%s: t.dt is %q (%v) after the run; want the original datetime", c.zone, typ, qerr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", c.zone, c.value, err)
		}
		rows := func(name string) string {
			got, err := queryStrings(ctxFor(t, time.Minute), db, "SELECT CONCAT_WS(' ', id, IFNULL(dt, 'N')) FROM "+name+" ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			return strings.Join(got, "; ")
		}
		if got, want := rows("t"), rows("n"); got != want {
			t.Errorf("%s %s: recast: %s\nserver: %s", c.zone, c.value, got, want)
		}
	}
}

// TestExplicitAutoIncrement: AUTO_INCREMENT=N in the ALTER sets the counter
// as the server's ALTER does (N, or past the highest id), not the old
// table's higher counter nor the ghost's after a row inserted and deleted
// during the migration.
func TestExplicitAutoIncrement(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, x INT) AUTO_INCREMENT=1000",
		"INSERT INTO t VALUES (1, 1), (500, 2)")
	showCounter := func(name string) string {
		var n, create string
		if err := db.QueryRow("SHOW CREATE TABLE "+name).Scan(&n, &create); err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`AUTO_INCREMENT=(\d+)`).FindStringSubmatch(create)
		if m == nil {
			return "none"
		}
		return m[1]
	}
	o := testOptions(t, schema, "t", "AUTO_INCREMENT=600, MODIFY x BIGINT")
	o.Pause = func(ctx context.Context, point string) {
		if point == "ghost-created" {
			testutil.Exec(t, db, "INSERT INTO t VALUES (900, 3)", "DELETE FROM t WHERE id = 900")
		}
	}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, db, "CREATE TABLE n (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, x INT) AUTO_INCREMENT=1000",
		"INSERT INTO n VALUES (1, 1), (500, 2)", "ALTER TABLE n AUTO_INCREMENT=600, MODIFY x BIGINT")
	if got, want := showCounter("t"), showCounter("n"); got != want || want != "600" {
		t.Fatalf("counter %s, the server's ALTER %s (want 600)", got, want)
	}
}

// appliedCase: a table, an ALTER, and changes made after the copy (the
// applier writes them); the rows must equal the server's ALTER of the old
// table's final content, column by column (shown as cols renders them).
type appliedCase struct {
	name, create, insert, alter, cols string
	changes                           []string
}

var appliedCases = []appliedCase{
	// A BIT made a BLOB or TEXT holds the column's bytes (BIT(12): two);
	// made a VARBINARY, the number's decimal text.
	{name: "bit-to-binary",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, b BIT(12) NULL, c BIT(8) NULL, d BIT(16) NULL, e BIT(12) NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 5, 1, 1, 1, 1), (2, 4095, 255, 65535, 4095, 2), (3, NULL, NULL, NULL, NULL, 3), (4, 0, 0, 0, 0, 4), (5, 300, 7, 300, 300, 5)",
		alter:  "MODIFY b VARBINARY(4) NULL, MODIFY c BLOB NULL, MODIFY d TEXT CHARACTER SET latin1 NULL, MODIFY e MEDIUMBLOB NULL",
		cols:   "IFNULL(HEX(b), 'N'), IFNULL(HEX(c), 'N'), IFNULL(HEX(d), 'N'), IFNULL(HEX(e), 'N')",
		changes: []string{"UPDATE t SET b = b'101', c = 65, d = 16706, e = 65 WHERE id = 1",
			"UPDATE t SET b = b + 1, c = 9, d = d + 1, e = e + 1 WHERE id >= 4", "INSERT INTO t VALUES (6, 258, 10, 258, 258, 6)"}},
	// A TIME made a TIMESTAMP is today at that time (the server's zone is
	// UTC here: testOptions takes the sandbox's): its image as a plain
	// literal, '10:11:12', read as the date 2010-11-12 (MySQL's relaxed
	// date parsing), and the checksum leaves TIME to TIMESTAMP out. The
	// date is compared to today loosely: the test may run at midnight.
	{name: "time-to-timestamp-utc",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, tm TIME NULL, d DECIMAL(14,0) NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, '01:02:03', 20200102030405, 1), (2, NULL, NULL, 2), (3, '23:59:59', 19991231235959, 3)",
		alter:  "MODIFY tm TIMESTAMP NULL, MODIFY d TIMESTAMP NULL",
		cols:   "IFNULL(TIME(tm), 'N'), IFNULL(DATE(tm) BETWEEN CURDATE() - INTERVAL 1 DAY AND CURDATE() + INTERVAL 1 DAY, 'N'), IFNULL(d, 'N')",
		changes: []string{"UPDATE t SET tm = '10:11:12', d = 20211112131415 WHERE id = 1", "UPDATE t SET tm = '12:01:31' WHERE id = 3",
			"INSERT INTO t VALUES (4, '05:06:07', 20010203040506, 4)"}},
	// Members holding a newline, a carriage return, a NUL: the server
	// prints them escaped in the column's type ('a\nb'), and read as
	// "anb" the applier wrote the member 'anb' instead.
	{name: "enum-escaped-members",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, e ENUM('anb', 'a\\nb', 'crd', 'c\\rd', '0', '\\0') NULL, s SET('anb', 'a\\nb') NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 'anb', 'anb', 1), (2, 'crd', '', 2), (3, '0', 'anb', 3)",
		alter:  "MODIFY e ENUM('anb', 'a\\nb', 'crd', 'c\\rd', '0', '\\0', 'new') NULL, MODIFY s SET('anb', 'a\\nb', 'new') NULL",
		cols:   "IFNULL(HEX(e), 'N'), IFNULL(e + 0, 'N'), IFNULL(HEX(s), 'N'), IFNULL(s + 0, 'N')",
		changes: []string{"UPDATE t SET e = 'a\\nb', s = 'a\\nb' WHERE id = 1", "UPDATE t SET e = 'c\\rd', s = 'anb,a\\nb' WHERE id = 2",
			"UPDATE t SET e = '\\0' WHERE id = 3", "INSERT INTO t VALUES (4, 'a\\nb', 'a\\nb', 4)"}},
	// -0 in a FLOAT or DOUBLE: the server's ALTER keeps it; bound as an
	// argument the driver wrote "-0", an integer, and the ghost held +0.
	{name: "float-negative-zero",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, f FLOAT NULL, d DOUBLE NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 1.5, 2.5, 1), (2, -0e0, -0e0, 2), (3, NULL, 0, 3)",
		alter:  "MODIFY f DOUBLE NULL",
		cols:   "IFNULL(CONCAT(f), 'N'), IFNULL(CONCAT(d), 'N')",
		changes: []string{"UPDATE t SET f = -0e0, d = -0e0 WHERE id = 1", "UPDATE t SET x = 9 WHERE id = 2",
			"INSERT INTO t VALUES (4, -0e0, -0e0, 4), (5, -1.25, 0e0, 5)"}},
	// YEAR 0 reads '0000' as text; a TIME(3) with no fraction '…00.000'.
	{name: "year-time-to-text",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, y YEAR NULL, tm TIME(3) NULL, t0 TIME NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 2001, '01:02:03.456', '01:02:03', 1), (2, 0, '00:00:00', '-838:59:59', 2), (3, NULL, NULL, NULL, 3), (4, 1999, '-12:00:00.5', '12:00:00', 4)",
		alter:  "MODIFY y VARCHAR(10) NULL, MODIFY tm VARCHAR(20) NULL, MODIFY t0 CHAR(12) NULL",
		cols:   "IFNULL(y, 'N'), IFNULL(tm, 'N'), IFNULL(t0, 'N')",
		changes: []string{"UPDATE t SET y = 0, tm = '12:34:56', t0 = '23:00:01' WHERE id = 1",
			"UPDATE t SET y = y + 1, tm = ADDTIME(tm, '1:00:00') WHERE id >= 2", "INSERT INTO t VALUES (5, 0, '-01:00:00.000', '00:00:00', 5)"}},
	// Numbers made JSON: MySQL's ALTER parses the number's text (a DOUBLE 3
	// is the integer 3, a DECIMAL 1.50 the double 1.5, a FLOAT its 6
	// digits); INSERT … SELECT of the number itself fails (3140).
	{name: "number-to-json",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, d DOUBLE NULL, dc DECIMAL(10,2) NULL, i INT NULL, f FLOAT NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 3, 1.50, 7, 0.1, 1), (2, 0.1, -2.00, -1, 3, 2), (3, NULL, NULL, NULL, NULL, 3), (4, 1e300, 0, 0, -1.5e30, 4)",
		alter:  "MODIFY d JSON NULL, MODIFY dc JSON NULL, MODIFY i JSON NULL, MODIFY f JSON NULL",
		cols:   "IFNULL(CAST(d AS CHAR), 'N'), IFNULL(CAST(dc AS CHAR), 'N'), IFNULL(CAST(i AS CHAR), 'N'), IFNULL(CAST(f AS CHAR), 'N')",
		changes: []string{"UPDATE t SET d = 3, dc = 1.50, i = 8, f = 0.2 WHERE id = 1",
			"UPDATE t SET d = d * 2, dc = dc + 1, f = f * 3 WHERE id >= 2", "INSERT INTO t VALUES (5, 2, 2.5, 2, 7, 5)"}},
	// A BIGINT key made text: the applier's DELETE by key compared the
	// bound number with the text as a DOUBLE, and 1500000000000000001
	// matched '1500000000000000002' too (both 1.5e18 as doubles): the
	// row nobody touched was gone.
	{name: "bigint-key-to-varchar",
		create: "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, x INT)",
		insert: "INSERT INTO t VALUES (1500000000000000001, 1), (1500000000000000002, 2), (1500000000000000003, 3), (1500000000000000300, 4), (7, 5)",
		alter:  "MODIFY id VARCHAR(32) NOT NULL",
		cols:   "x",
		changes: []string{"DELETE FROM t WHERE id = 1500000000000000001", "UPDATE t SET x = x + 10 WHERE id = 1500000000000000003",
			"INSERT INTO t VALUES (1500000000000000004, 6)"}},
	{name: "bigint-key-to-varbinary",
		create:  "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, x INT)",
		insert:  "INSERT INTO t VALUES (15000000000000000001, 1), (15000000000000000002, 2), (15000000000000000003, 3), (7, 4)",
		alter:   "MODIFY id VARBINARY(32) NOT NULL",
		cols:    "x",
		changes: []string{"DELETE FROM t WHERE id = 15000000000000000001", "UPDATE t SET x = x + 10 WHERE id = 15000000000000000003"}},
	{name: "bigint-key-to-binary",
		create: "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, x INT)",
		insert: "INSERT INTO t VALUES (1500000000000000001, 1), (1500000000000000002, 2), (1500000000000000003, 3), (-7, 4)",
		alter:  "MODIFY id BINARY(24) NOT NULL",
		cols:   "x",
		changes: []string{"DELETE FROM t WHERE id = 1500000000000000001", "UPDATE t SET x = x + 10 WHERE id = 1500000000000000003",
			"UPDATE t SET x = x + 10 WHERE id = -7"}},
	// A byte string made BINARY(n) (not a key: the key-type check refuses
	// that): the server pads it with 0x00 to n bytes.
	{name: "bytes-to-binary",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v VARBINARY(8) NULL, b BINARY(4) NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 'ab', 'q', 1), (2, NULL, NULL, 2), (3, 'ef', 'r\\0', 3), (4, 0x00ff, 's', 4)",
		alter:  "MODIFY v BINARY(16) NULL, MODIFY b BINARY(8) NULL",
		cols:   "IFNULL(HEX(v), 'N'), IFNULL(HEX(b), 'N'), x",
		changes: []string{"UPDATE t SET v = 'cd', b = 'v' WHERE id = 1", "UPDATE t SET x = x + 10, v = 0x00 WHERE id = 2",
			"UPDATE t SET x = x + 1 WHERE id >= 3", "INSERT INTO t VALUES (5, 'kl', 'w', 6)"}},
	// Text made JSON with rows that hold JSON: on MySQL the image's bytes,
	// bound as _binary, were refused by the JSON column (3144), and the
	// first change made during the migration stopped it.
	{name: "text-to-json",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, doc TEXT CHARACTER SET utf8mb4 NULL, lat VARCHAR(100) CHARACTER SET latin1 NULL, x INT)",
		insert: `INSERT INTO t VALUES (1, '{"a": 1}', '[1, "é"]', 1), (2, '[]', '"x"', 2), (3, NULL, NULL, 3), (4, '{"k": [1, {"z": null}]}', '2.50', 4)`,
		alter:  "MODIFY doc JSON NULL, MODIFY lat JSON NULL",
		cols:   "IFNULL(CAST(doc AS CHAR), 'N'), IFNULL(CAST(lat AS CHAR), 'N')",
		changes: []string{`UPDATE t SET doc = '{"b": [1, 2]}', lat = '{"é": true}' WHERE id = 1`, "UPDATE t SET x = x + 1 WHERE id >= 2",
			`INSERT INTO t VALUES (5, '{"ü": "é"}', '[null]', 5)`}},
	// YEAR 0 made text is '0000' in the server's ALTER, in the copy too
	// (row 1 is not changed after it).
	{name: "year-zero-copied",
		create:  "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, y YEAR NULL, x INT)",
		insert:  "INSERT INTO t VALUES (1, 0, 1), (2, 2001, 2), (3, NULL, 3)",
		alter:   "MODIFY y VARCHAR(10) NULL",
		cols:    "IFNULL(y, 'N')",
		changes: []string{"UPDATE t SET x = x + 1 WHERE id = 2", "INSERT INTO t VALUES (4, 0, 4)"}},
	// A latin1 ENUM or SET made bytes: the member's latin1 bytes ('é' is
	// E9), where the binlog image is the member's name in UTF-8 (C3A9).
	{name: "latin1-enum-set-to-binary",
		create:  "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, e ENUM('é','b') CHARACTER SET latin1 NULL, s SET('é','b') CHARACTER SET latin1 NULL, x INT)",
		insert:  "INSERT INTO t VALUES (1, 'b', 'b', 1), (2, 'é', 'é,b', 2), (3, NULL, NULL, 3)",
		alter:   "MODIFY e VARBINARY(10) NULL, MODIFY s BLOB NULL",
		cols:    "IFNULL(HEX(e), 'N'), IFNULL(HEX(s), 'N')",
		changes: []string{"UPDATE t SET e = 'é', s = 'é' WHERE id = 1", "UPDATE t SET x = x + 1 WHERE id = 2", "INSERT INTO t VALUES (4, 'é', 'b,é', 4)"}},
	// An ENUM or SET made a number is its index or bits: under _bin 'A' is
	// not 'a' (the connection's collation would make it so), and a member
	// may hold a '?'.
	{name: "enum-set-bin-to-number",
		create: "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, e ENUM('a','A','b?c','x') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, s SET('a','A','q?') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, x INT)",
		insert: "INSERT INTO t VALUES (1, 'a', 'a', 1), (2, 'A', 'A', 2), (3, 'b?c', 'A,q?', 3), (4, NULL, NULL, 4), (5, 'x', '', 5)",
		alter:  "MODIFY e INT NULL, MODIFY s BIGINT NULL",
		cols:   "IFNULL(e, 'N'), IFNULL(s, 'N')",
		changes: []string{"UPDATE t SET e = 'A', s = 'A' WHERE id = 1", "UPDATE t SET e = 'b?c', s = 'q?,A' WHERE id = 2",
			"UPDATE t SET x = x + 1 WHERE id >= 3", "INSERT INTO t VALUES (6, 'A', 'a,A,q?', 6), (7, 'x', 'A', 7)"}},
}

// TestAppliedAfterCopy runs appliedCases, without the checksum (which would
// repair a difference it sees) and with it (which must compare the values
// as the server stores them).
func TestAppliedAfterCopy(t *testing.T) {
	t.Parallel()
	for _, c := range appliedCases {
		for _, checksum := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/checksum=%v", c.name, checksum), func(t *testing.T) { appliedAfterCopy(t, c, checksum) })
		}
	}
}

func appliedAfterCopy(t *testing.T, c appliedCase, checksum bool) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, c.create, c.insert)
	o := testOptions(t, schema, "t", c.alter)
	o.DropOldTable = false
	o.Checksum = checksum
	o.Pause = func(ctx context.Context, point string) {
		if point == "caught-up" { // after the copy: the applier writes these
			testutil.Exec(t, db, c.changes...)
		}
	}
	if _, err := runT(ctxFor(t, time.Minute), o); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, db, "CREATE TABLE n LIKE "+OldName("t"), "INSERT INTO n SELECT * FROM "+OldName("t"), "ALTER TABLE n "+c.alter)
	rows := func(name string) string {
		got, err := queryStrings(ctxFor(t, time.Minute), db, "SELECT CONCAT_WS(' ', id, "+c.cols+") FROM "+name+" ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, "; ")
	}
	if got, want := rows("t"), rows("n"); got != want {
		t.Fatalf("recast: %s\nserver: %s", got, want)
	}
}

// corruptAfterApplied sets o up so that, before its first cut-over attempt
// (o gets 2), the row where holds sets v = 1000 on the source and, once the
// applier has written that to the ghost, v = 999 in the ghost: a stand-in
// for an applier bug after the checksum, which the verification must stop.
func corruptAfterApplied(t *testing.T, db *sql.DB, o *testOpts, where string) {
	o.DropOldTable = false
	o.CutOverAttempts = 2
	var once sync.Once
	o.Pause = func(ctx context.Context, point string) {
		if point != "cutover:before-lock" {
			return
		}
		once.Do(func() {
			testutil.Exec(t, db, "UPDATE t SET v = 1000 WHERE "+where)
			for {
				var v int
				if err := db.QueryRowContext(ctx, "SELECT v FROM "+GhostName("t")+" WHERE "+where).Scan(&v); err != nil {
					t.Error(err)
					return
				}
				if v == 1000 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			testutil.Exec(t, db, "UPDATE "+GhostName("t")+" SET v = 999 WHERE "+where)
		})
	}
}

// TestVerifyWidenedKey: with the applier's key widened to one that does not
// start with the copy's (PRIMARY KEY (id) -> (k, id)), the verification
// from the checksum to the swap checks the rows the applier wrote, by that
// key: a ghost row made wrong after the applier wrote it (a stand-in for an
// applier bug) is not swapped in.
func TestVerifyWidenedKey(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, v INT NOT NULL)")
	for i := 1; i <= 200; i++ {
		testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %d, %d)", i, 201-i, i))
	}
	o := testOptions(t, schema, "t", "DROP PRIMARY KEY, ADD PRIMARY KEY (k, id)")
	corruptAfterApplied(t, db, &o, "id = 7")
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	var v int
	if qerr := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); qerr != nil {
		t.Fatal(qerr)
	}
	if v != 1000 {
		t.Fatalf("row 7 holds v = %d after the run (%v); the source holds 1000", v, err)
	}
	// The refusal must be the verification's, naming the row: a run that
	// failed anywhere else (before the corruption, say) proves nothing.
	if !errors.Is(err, verify.ErrDifferent) || !regexp.MustCompile(`still differ, e\.g\. \(k,id\) = \("?194"?,"?7"?\)`).MatchString(err.Error()) {
		t.Fatalf("Run = %v; want the verification's refusal (%v) naming row (k,id) = (194,7)", err, verify.ErrDifferent)
	}
}

// TestVerifyTimestampKeyZoned: with a TIMESTAMP key under a fixed zone
// other than UTC, the verification from the checksum to the swap checks the
// rows the applier writes: a ghost row made wrong after the applier wrote
// it is not swapped in. (Its keys, UTC text in the row images, were bound
// as they are in a +05:00 session: they matched no row on either side, and
// the row went unchecked.)
func TestVerifyTimestampKeyZoned(t *testing.T) {
	t.Parallel()
	// Row 7, and the zero TIMESTAMP (CONVERT_TZ makes it NULL: converted
	// alone it matched no row again).
	// (On MySQL the zero TIMESTAMP is left out: under the suite's global
	// sql_mode, NO_ZERO_DATE, its own ALTER refuses the row, error 1292,
	// and so does the copy.)
	rows := []string{"FROM_UNIXTIME(1600000000 + 7 * 3600)", "'0000-00-00 00:00:00'"}
	if testutil.Server(t).MySQL() {
		rows = rows[:1]
	}
	for _, row := range rows {
		schema := testutil.NewSchema(t)
		db := testutil.DB(t, schema) // a UTC session: the literals below are UTC
		testutil.Exec(t, db, "CREATE TABLE t (ts TIMESTAMP NOT NULL PRIMARY KEY, v INT NOT NULL)",
			"INSERT INTO t SELECT FROM_UNIXTIME(1600000000 + seq * 3600), seq FROM seq_1_to_200")
		if len(rows) > 1 {
			testutil.Exec(t, db, "INSERT INTO t VALUES ('0000-00-00 00:00:00', 0)")
		}
		o := testOptions(t, schema, "t", "ADD COLUMN z INT NULL")
		o.Conn.SetVars = map[string]string{"time_zone": "'+05:00'"}
		corruptAfterApplied(t, db, &o, "ts = "+row)
		_, err := runT(ctxFor(t, 2*time.Minute), o)
		var v int
		if qerr := db.QueryRow("SELECT v FROM t WHERE ts = " + row).Scan(&v); qerr != nil {
			t.Fatal(qerr)
		}
		if v != 1000 {
			t.Fatalf("%s: the row holds v = %d after the run (%v); the source holds 1000", row, v, err)
		}
		if !errors.Is(err, verify.ErrDifferent) || !strings.Contains(err.Error(), "still differ") {
			t.Fatalf("%s: Run = %v; want the verification's refusal (%v)", row, err, verify.ErrDifferent)
		}
	}
}

// TestKeyCollationCoarsens: a key whose new collation makes distinct values
// equal ('a' and 'A' under _ci after _bin; 'ss' and 'ß' under unicode_ci
// after general_ci, two insensitive collations) cannot identify rows: alone
// it is refused; next to another key, that one identifies rows and the
// coarsened key is guarded like any new unique key. Then a twin inserted
// after the checksum while the first value exists fails the run when both
// are there at the end (the server's ALTER fails too), and does not cost
// the first when it is deleted again.
func TestKeyCollationCoarsens(t *testing.T) {
	t.Parallel()
	for _, coll := range []struct {
		name, from, to string
		first, twin    string // distinct under from, equal under to
	}{
		{"bin-to-ci", "utf8mb4_bin", "utf8mb4_general_ci", "a", "A"},
		{"ci-to-ci", "utf8mb4_general_ci", "utf8mb4_unicode_ci", "ss", "ß"},
	} {
		t.Run(coll.name, func(t *testing.T) {
			t.Parallel()
			testKeyCollationCoarsens(t, coll.from, coll.to, coll.first, coll.twin)
		})
	}
}

func testKeyCollationCoarsens(t *testing.T, from, to, first, twin string) {
	alter := "MODIFY code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE " + to + " NOT NULL"
	setup := func(t *testing.T, unique string) (string, *sql.DB) {
		schema := testutil.NewSchema(t)
		db := testutil.DB(t, schema)
		testutil.Exec(t, db, "CREATE TABLE t (code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE "+from+" NOT NULL PRIMARY KEY, id INT NOT NULL, v INT"+unique+")")
		for i := 1; i <= 50; i++ {
			testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t VALUES ('k%d', %d, %d)", i, i, i))
		}
		testutil.Exec(t, db, "INSERT INTO t VALUES (_utf8mb4'"+first+"', 100, 100)")
		return schema, db
	}
	t.Run("alone", func(t *testing.T) {
		schema, db := setup(t, "")
		before := testutil.TableChecksum(t, db, schema, "t", "code")
		_, err := runT(ctxFor(t, time.Minute), testOptions(t, schema, "t", alter))
		if err == nil || !strings.Contains(err.Error(), "no usable key") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Run = %v; want the one-line refusal", err)
		}
		if after := testutil.TableChecksum(t, db, schema, "t", "code"); after != before {
			t.Fatal("the table changed")
		}
	})
	insertTwin := "INSERT INTO t VALUES (_utf8mb4'" + twin + "', 101, 101)"
	for _, c := range []struct {
		name    string
		changes []string
		fails   bool
	}{
		{"both-stay", []string{insertTwin}, true},
		{"inserted-and-deleted", []string{insertTwin, "DELETE FROM t WHERE id = 101"}, false},
		{"inserted-and-deleted-apart", []string{insertTwin, "wait", "DELETE FROM t WHERE id = 101"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema, db := setup(t, ", UNIQUE KEY (id)")
			o := testOptions(t, schema, "t", alter)
			o.DropOldTable = false
			o.CutOverAttempts = 2
			var once sync.Once
			o.Pause = func(ctx context.Context, point string) {
				if point != "cutover:before-lock" {
					return
				}
				once.Do(func() {
					for _, q := range c.changes {
						if q == "wait" { // the insert applied first, in a window of its own
							for {
								var n int
								if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+GhostName("t")+" WHERE id = 101").Scan(&n); err != nil || n == 1 {
									break
								}
								time.Sleep(10 * time.Millisecond)
							}
							continue
						}
						testutil.Exec(t, db, q)
					}
				})
			}
			_, err := runT(ctxFor(t, 2*time.Minute), o)
			if c.fails {
				// The refusal must name the duplicate, as the server's ALTER
				// does (1062), and leave the original table as it is.
				if err == nil {
					t.Fatalf("recast swapped in a table where the server's ALTER fails (duplicate %q/%q)", first, twin)
				}
				if !errors.Is(err, verify.ErrDuplicate) || !strings.Contains(err.Error(), "PRIMARY") {
					t.Fatalf("Run = %v; want the duplicate-key refusal (%v) under PRIMARY", err, verify.ErrDuplicate)
				}
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id IN (100, 101)").Scan(&n); err != nil || n != 2 {
					t.Fatalf("the original table's %q and %q: %d rows (%v); want both", first, twin, n, err)
				}
				t.Logf("run: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id = 100 AND code = _utf8mb4'" + first + "' COLLATE utf8mb4_bin").Scan(&n); err != nil || n != 1 {
				t.Fatalf("row %q: %d rows, %v", first, n, err)
			}
			testutil.Exec(t, db, "CREATE TABLE n LIKE "+OldName("t"), "INSERT INTO n SELECT * FROM "+OldName("t"), "ALTER TABLE n "+alter)
			if got, want := testutil.TableChecksum(t, db, schema, "t", "id"), testutil.TableChecksum(t, db, schema, "n", "id"); got != want {
				t.Fatal("the table differs from the server's ALTER")
			}
		})
	}
}

// TestKeyCollationFiner: a key made _bin from _ci keeps its values apart
// (no coarsening) but orders them otherwise ('B1' before 'a2'): the
// checksum's ranges, bound by the old table's values, do not select the
// same rows in the new table, and with more rows than one checksum chunk
// the run failed after its copy ("missing from the new table"). Alone, the
// key is refused before anything is copied; next to another key, that one
// chunks the copy and the result is the server's ALTER's.
func TestKeyCollationFiner(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT NOT NULL)")
	for b := 0; b < 25; b++ {
		var vals []string
		for i := b * 1000; i < (b+1)*1000; i++ {
			vals = append(vals, fmt.Sprintf("('%s%d', %d)", []string{"a", "B", "c", "D"}[i%4], i, i))
		}
		testutil.Exec(t, db, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	}
	const alter = "MODIFY code VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
	before := testutil.TableChecksum(t, db, schema, "t", "v")
	o := testOptions(t, schema, "t", alter)
	o.DropOldTable = false
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "no usable key") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v; want the one-line refusal", err)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "v"); after != before {
		t.Fatal("the table changed")
	}
	testutil.Exec(t, db, "ALTER TABLE t ADD UNIQUE KEY (v)")
	if _, err := runT(ctxFor(t, 2*time.Minute), o); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, db, "CREATE TABLE n LIKE "+OldName("t"), "INSERT INTO n SELECT * FROM "+OldName("t"), "ALTER TABLE n "+alter)
	if got, want := testutil.TableChecksum(t, db, schema, "t", "v"), testutil.TableChecksum(t, db, schema, "n", "v"); got != want {
		t.Fatal("the table differs from the server's ALTER")
	}
}

// TestDataDirectoryRefused: a table placed with DATA DIRECTORY would move
// into the data directory with the copy (CREATE TABLE … LIKE leaves the
// option out; the server's ALTER keeps it): refused in one line, the table
// untouched.
func TestDataDirectoryRefused(t *testing.T) {
	t.Parallel()
	if testutil.Server(t).MySQL() {
		t.Skip("MySQL places tables only in innodb_directories, which the test server does not name; TestPlacedIn reads MySQL's SHOW CREATE TABLE")
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	dir := t.TempDir()
	// Not logged: the test's replica runs on this machine, and its copy of
	// the CREATE would find the primary's file in dir and stop replicating.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Raw(func(any) error { return driver.ErrBadConn }); _ = conn.Close() }()
	for _, q := range []string{"SET SESSION sql_log_bin = 0", "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT) DATA DIRECTORY='" + dir + "'", "INSERT INTO t VALUES (1, 1), (2, 2)"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // before dir goes; not logged either
		if _, err := db.Exec("SET STATEMENT sql_log_bin = 0 FOR DROP TABLE IF EXISTS t"); err != nil {
			t.Error(err)
		}
	})
	var mode string
	if err := db.QueryRow("SELECT @@GLOBAL.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	// Also with sql_mode NO_DIR_IN_CREATE (--set-vars), under which SHOW
	// CREATE TABLE leaves the option out.
	for _, vars := range []map[string]string{nil, {"sql_mode": dbconn.QuoteString(dbconn.WithMode(mode, "NO_DIR_IN_CREATE"))}} {
		o := testOptions(t, schema, "t", "ADD COLUMN w INT, FORCE")
		o.Conn.SetVars = vars
		_, err = runT(ctxFor(t, time.Minute), o)
		if err == nil || !strings.Contains(err.Error(), "DATA DIRECTORY='"+dir) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Run (set-vars %v) = %v; want the one-line refusal naming DATA DIRECTORY", vars, err)
		}
	}
	var name, create string
	if err := db.QueryRow("SHOW CREATE TABLE t").Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(create, "DATA DIRECTORY") || strings.Contains(create, "`w`") {
		t.Fatalf("the table changed: %s", create)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME <> 't'", schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d helper tables left (%v)", n, err)
	}
}
