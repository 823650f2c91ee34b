package binlog

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/recast-osc/recast/internal/testutil"
)

// jsonDocs are JSON values with every scalar type MySQL's binary JSON
// keeps (as SQL expressions, evaluated by the server).
var jsonDocs = []string{
	`JSON_OBJECT('a', 1.50, 'b', CAST('2020-01-02' AS DATE), 'c', CAST('-838:59:58.5' AS TIME(1)), 'd', CAST('2021-02-03 04:05:06.789' AS DATETIME(3)))`,
	`JSON_ARRAY(0, -1, 32767, 32768, -32769, 2147483647, 2147483648, 4294967295, 4294967296, 9223372036854775807, -9223372036854775807 - 1)`,
	`JSON_ARRAY(CAST(0 AS UNSIGNED), CAST(65535 AS UNSIGNED), CAST(65536 AS UNSIGNED), CAST(4294967296 AS UNSIGNED), CAST(18446744073709551615 AS UNSIGNED))`,
	`JSON_ARRAY(1.0e0, -0.0e0, 1e300, 0.1e0, -2.5e-300, 123456789012345678e0, CAST(-123.456000 AS DECIMAL(20,6)), CAST(0.000000001 AS DECIMAL(30,20)), 99999999999999999999999999999999999.999999999999999999999999999999)`,
	`CAST('{"s": "", "e": "a\\"\\\\\\n\\t/é😀\\u0001", "n": null, "t": true, "f": false, "arr": [], "obj": {}, "nested": [[1, [2, {"x": [3]}]], {"k": {"k": {}}}]}' AS JSON)`,
	`CAST('"just a string"' AS JSON)`,
	`CAST('42' AS JSON)`,
	`CAST(CAST(42 AS UNSIGNED) AS JSON)`,
	`CAST(CAST(1.250 AS DECIMAL(6,3)) AS JSON)`,
	`CAST(CAST('1999-12-31' AS DATE) AS JSON)`,
	`CAST('null' AS JSON)`,
	`CAST('true' AS JSON)`,
	`CAST('[]' AS JSON)`,
	`JSON_OBJECT('big', REPEAT('x', 70000), 'n', 70000, 'arr', JSON_ARRAY(1, 2.5e0, 'z'))`, // large format
	`JSON_ARRAY(REPEAT('y', 70000), 5, CAST(7 AS UNSIGNED), -70000)`,
}

// TestJSONExact: a JSON value streamed from the binlog and written back
// (as the applier does) is the same value with the same scalar types: on
// MySQL, the copy's binlog image rebuilds to the same expression as the
// original's (the binary forms are equal), and both render the same text.
func TestJSONExact(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, j JSON NULL)", "CREATE TABLE t2 (id INT PRIMARY KEY, j JSON NULL)")
	docs := jsonDocs
	if !testutil.Server(t).MySQL() {
		// MariaDB's JSON is LONGTEXT with a CHECK (no CAST AS JSON): the
		// documents given as text.
		docs = nil
		for _, d := range jsonDocs[4:7] {
			docs = append(docs, strings.TrimSuffix(strings.TrimPrefix(d, "CAST("), " AS JSON)"))
		}
	}
	from := currentPos(t, db)
	for i, d := range docs {
		testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, %s)", i, d))
	}
	testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, NULL)", len(docs)))
	end := currentPos(t, db)
	c := collect(t, openStream(t, testConfig(t, loadTable(t, db, schema, "t"), ""), from), end)
	if len(c.rows) != len(docs)+1 {
		t.Fatalf("%d row changes, want %d", len(c.rows), len(docs)+1)
	}
	from2 := currentPos(t, db)
	for _, r := range c.rows {
		v := r.After[1]
		if e, ok := v.(SQLExpr); ok {
			testutil.Exec(t, db, fmt.Sprintf("INSERT INTO t2 VALUES (%d, %s)", r.After[0], e))
			continue
		}
		if testutil.Server(t).MySQL() && v != nil {
			t.Fatalf("row %v: JSON value of type %T on MySQL, want SQLExpr", r.After[0], v)
		}
		if _, err := db.Exec("INSERT INTO t2 VALUES (?, ?)", r.After[0], v); err != nil {
			t.Fatal(err)
		}
	}
	end2 := currentPos(t, db)
	c2 := collect(t, openStream(t, testConfig(t, loadTable(t, db, schema, "t2"), ""), from2), end2)
	if len(c2.rows) != len(c.rows) {
		t.Fatalf("t2: %d row changes, want %d", len(c2.rows), len(c.rows))
	}
	// A DECIMAL scalar's declared precision is not kept (it shows only in
	// JSON_STORAGE_SIZE: the server derives it from the expression, a CAST
	// gives more); its value and scale are.
	precision := regexp.MustCompile(`AS DECIMAL\(\d+,`)
	for i := range c.rows {
		a := precision.ReplaceAllString(fmt.Sprint(c.rows[i].After[1]), "AS DECIMAL(p,")
		b := precision.ReplaceAllString(fmt.Sprint(c2.rows[i].After[1]), "AS DECIMAL(p,")
		if a != b {
			t.Errorf("row %v: the copy's binlog value differs:\n original %.300s\n copy     %.300s", c.rows[i].After[0], a, b)
		}
	}
	compareTables(t, db, "t", "t2")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t JOIN t2 USING (id) WHERE NOT (t.j <=> t2.j) OR NOT (CAST(t.j AS CHAR) <=> CAST(t2.j AS CHAR))").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows differ as JSON or as text (%v)", n, err)
	}
}

// TestJSONOpaqueRefused: a JSON scalar whose type no SQL expression
// rebuilds (a binary string inside JSON) stops the stream with
// ErrJSONValue rather than being written as something else.
func TestJSONOpaqueRefused(t *testing.T) {
	t.Parallel()
	if !testutil.Server(t).MySQL() {
		t.Skip("MariaDB's JSON is text: no typed scalars")
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, j JSON NULL)")
	from := currentPos(t, db)
	testutil.Exec(t, db, "INSERT INTO t VALUES (1, JSON_ARRAY(X'00FF'))")
	err := nextErr(t, openStream(t, testConfig(t, loadTable(t, db, schema, "t"), ""), from))
	if !errors.Is(err, ErrJSONValue) {
		t.Fatalf("err = %v, want ErrJSONValue", err)
	}
	if !strings.Contains(err.Error(), "column j") {
		t.Errorf("the error does not name the column: %v", err)
	}
}
