package ddl

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/recast-osc/recast/internal/table"
)

// tbl builds a table: columns "name" (NOT NULL int), "name?" (nullable),
// "name*" (generated); keys "PRIMARY:a,b", "u:c" (unique), "i:d" (not unique).
func tbl(cols string, keys ...string) *table.Table {
	t := &table.Table{Schema: "db", Name: "t", Engine: "InnoDB"}
	for _, c := range strings.Fields(cols) {
		col := table.Column{Name: strings.TrimRight(c, "?*"), DataType: "int", ColumnType: "int(11)"}
		col.Nullable = strings.HasSuffix(c, "?")
		col.Generated = strings.HasSuffix(c, "*")
		t.Columns = append(t.Columns, col)
	}
	for _, k := range keys {
		name, cols, _ := strings.Cut(k, ":")
		unique := name == "PRIMARY" || strings.HasPrefix(name, "u")
		t.Indexes = append(t.Indexes, table.Index{Name: name, Unique: unique, Columns: strings.Split(cols, ",")})
	}
	return t
}

func mustAnalyze(t *testing.T, body string) *Analysis {
	t.Helper()
	a, err := Analyze(body)
	if err != nil {
		t.Fatalf("Analyze(%q): %v", body, err)
	}
	return a
}

func pairs(s string) []ColumnPair { // "a>b c" -> {a b} {c c}
	var out []ColumnPair
	for _, f := range strings.Fields(s) {
		src, gh, ok := strings.Cut(f, ">")
		if !ok {
			gh = src
		}
		out = append(out, ColumnPair{src, gh})
	}
	return out
}

func TestMap(t *testing.T) {
	cases := []struct {
		name          string
		source, ghost *table.Table
		alter         string
		want          string
	}{
		{"same", tbl("id a b"), tbl("id a b"), "ADD INDEX (a)", "id a b"},
		{"added", tbl("id a"), tbl("id a c"), "ADD COLUMN c INT", "id a"},
		{"renamed CHANGE", tbl("id a b"), tbl("id a2 b"), "CHANGE a a2 BIGINT", "id a>a2 b"},
		{"renamed RENAME COLUMN", tbl("id a b"), tbl("id a2 b"), "RENAME COLUMN a TO a2", "id a>a2 b"},
		{"renamed case-insensitively", tbl("id A b"), tbl("id a2 b"), "CHANGE `a` a2 INT", "id A>a2 b"},
		{"swapped", tbl("id a b"), tbl("id b a"), "CHANGE a b INT, CHANGE b a INT", "id a>b b>a"},
		{"dropped", tbl("id a b"), tbl("id a"), "DROP COLUMN b", "id a"},
		{"dropped and added again", tbl("id a b"), tbl("id a b"), "DROP COLUMN b, ADD COLUMN b INT", "id a"},
		{"dropped, other renamed onto its name", tbl("id a b"), tbl("id b"), "DROP COLUMN b, CHANGE a b INT", "id a>b"},
		{"generated in source", tbl("id a g*"), tbl("id a g*"), "ADD INDEX (a)", "id a"},
		{"becomes generated", tbl("id a g"), tbl("id a g*"), "MODIFY g INT AS (a + 1) VIRTUAL", "id a"},
		{"ghost order", tbl("id a b"), tbl("b id a"), "MODIFY b INT FIRST", "b id a"},
		{"case differs", tbl("ID a"), tbl("id A"), "FORCE", "ID>id a>A"},
	}
	for _, tc := range cases {
		got, err := Map(tc.source, tc.ghost, mustAnalyze(t, tc.alter))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if want := pairs(tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Map = %v, want %v", tc.name, got, want)
		}
	}
	if got, err := Map(tbl("id a"), tbl("id a"), nil); err != nil || !reflect.DeepEqual(got, pairs("id a")) {
		t.Errorf("Map with nil analysis = %v, %v", got, err)
	}
}

func TestMapMismatch(t *testing.T) {
	cases := []struct {
		source, ghost *table.Table
		alter, want   string
	}{
		{tbl("id a b"), tbl("id a"), "ADD INDEX (a)", "column `b` of the old table is missing from the new table"},
		{tbl("id a b"), tbl("id a b"), "CHANGE a x INT", "renames column `a` to `x`, but the new table has no column `x`"},
		{tbl("id a b"), tbl("id b"), "RENAME COLUMN a TO b", "both be copied to column `b`"},
		{tbl("id a g*"), tbl("id a g"), "MODIFY g INT NULL", "column `g` is generated in the old table and a plain column in the new one"},
		{tbl("id a g*"), tbl("id a h"), "CHANGE g h INT", "column `g` is generated in the old table and a plain column in the new one"},
	}
	for _, tc := range cases {
		_, err := Map(tc.source, tc.ghost, mustAnalyze(t, tc.alter))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Map for %q: %v, want *Error containing %q", tc.alter, err, tc.want)
		}
	}
}

func TestSharedKey(t *testing.T) {
	cases := []struct {
		name          string
		source, ghost *table.Table
		alter         string
		src, gh       []string
	}{
		{"primary kept", tbl("id a", "PRIMARY:id"), tbl("id a c?", "PRIMARY:id"), "ADD COLUMN c INT", []string{"id"}, []string{"id"}},
		{"primary column renamed", tbl("id a", "PRIMARY:id"), tbl("pk a", "PRIMARY:pk"), "CHANGE id pk BIGINT", []string{"id"}, []string{"pk"}},
		{"composite primary", tbl("a b c", "PRIMARY:a,b"), tbl("a b c", "PRIMARY:a,b"), "FORCE", []string{"a", "b"}, []string{"a", "b"}},
		{"new primary, old one kept as unique", tbl("id a b", "PRIMARY:id"), tbl("id a b", "PRIMARY:a,b", "u_id:id"),
			"DROP PRIMARY KEY, ADD PRIMARY KEY (a, b), ADD UNIQUE u_id (id)", []string{"id"}, []string{"id"}},
		{"old unique becomes primary in another order", tbl("id a b", "PRIMARY:id", "u_ab:a,b"), tbl("a b", "PRIMARY:b,a"),
			"DROP COLUMN id, ADD PRIMARY KEY (b, a)", []string{"a", "b"}, []string{"a", "b"}},
		{"unique with renamed column", tbl("x? a b", "u_ab:a,b"), tbl("x? a2 b", "u_ab:b,a2"),
			"CHANGE a a2 INT NOT NULL", []string{"a", "b"}, []string{"a2", "b"}},
		{"nullable unique skipped", tbl("id a? b", "PRIMARY:id", "u_a:a", "u_b:b"), tbl("a? b", "u_a:a", "u_b:b"),
			"DROP COLUMN id", []string{"b"}, []string{"b"}},
	}
	for _, tc := range cases {
		a := mustAnalyze(t, tc.alter)
		ps, err := Map(tc.source, tc.ghost, a)
		if err != nil {
			t.Errorf("%s: Map: %v", tc.name, err)
			continue
		}
		src, gh, err := SharedKey(tc.source, tc.ghost, ps)
		if err != nil || !reflect.DeepEqual(src, tc.src) || !reflect.DeepEqual(gh, tc.gh) {
			t.Errorf("%s: SharedKey = %v, %v, %v; want %v, %v", tc.name, src, gh, err, tc.src, tc.gh)
		}
	}
}

// TestSharedKeyWidened: an old unique key inside a new one (gh-ost's
// shared-uk) chunks the copy; the new key identifies rows for the applier.
func TestSharedKeyWidened(t *testing.T) {
	src, gh := tbl("id a", "PRIMARY:id"), tbl("id a", "PRIMARY:id,a")
	ps, err := Map(src, gh, mustAnalyze(t, "DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)"))
	if err != nil {
		t.Fatal(err)
	}
	ks, kg, err := SharedKey(src, gh, ps)
	if err != nil || !reflect.DeepEqual(ks, []string{"id"}) || !reflect.DeepEqual(kg, []string{"id"}) {
		t.Fatalf("SharedKey = %v, %v, %v; want [id], [id]", ks, kg, err)
	}
	as, ag := ApplyKey(src, gh, ps, ks, kg)
	if !reflect.DeepEqual(as, []string{"id", "a"}) || !reflect.DeepEqual(ag, []string{"id", "a"}) {
		t.Fatalf("ApplyKey = %v, %v; want [id a], [id a]", as, ag)
	}
	// Not widening: the key itself.
	as, ag = ApplyKey(src, src, ps, ks, kg)
	if !reflect.DeepEqual(as, ks) || !reflect.DeepEqual(ag, kg) {
		t.Fatalf("ApplyKey of an unchanged key = %v, %v", as, ag)
	}
}

func TestSharedKeyNone(t *testing.T) {
	cases := []struct {
		name          string
		source, ghost *table.Table
		alter         string
	}{
		{"primary replaced", tbl("id a", "PRIMARY:id"), tbl("id a", "PRIMARY:a"), "DROP PRIMARY KEY, ADD PRIMARY KEY (a)"},
		{"primary column dropped", tbl("id a", "PRIMARY:id"), tbl("a", "u_a:a"), "DROP COLUMN id, ADD UNIQUE u_a (a)"},
		{"ghost key nullable", tbl("id a", "PRIMARY:id"), tbl("id? a", "u_id:id"), "DROP PRIMARY KEY, MODIFY id INT NULL, ADD UNIQUE u_id (id)"},
		{"no key at all", tbl("id a"), tbl("id a"), "FORCE"},
		{"non-unique index only", tbl("id a", "i_id:id"), tbl("id a", "i_id:id"), "FORCE"},
		{"generated key column", tbl("id g*", "u_g:g"), tbl("id g*", "u_g:g"), "FORCE"},
	}
	for _, tc := range cases {
		ps, err := Map(tc.source, tc.ghost, mustAnalyze(t, tc.alter))
		if err != nil {
			t.Errorf("%s: Map: %v", tc.name, err)
			continue
		}
		src, gh, err := SharedKey(tc.source, tc.ghost, ps)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(),
			"no usable key: recast needs a PRIMARY KEY or a UNIQUE key on NOT NULL columns present in both the old and the new table") ||
			!strings.Contains(e.Fix, "add one first") {
			t.Errorf("%s: SharedKey = %v, %v, %v; want the no-usable-key error", tc.name, src, gh, err)
		}
	}
}

// TestSharedKeyBoundsCarry: a key column the copy binds as a number of its
// type's making (ENUM, SET, BIT, FLOAT, DOUBLE) must keep its type, so that
// the old table's bounds select the same rows in the new one; otherwise
// another key is picked, or none.
func TestSharedKeyBoundsCarry(t *testing.T) {
	typed := func(tb *table.Table, col, dataType, columnType string) *table.Table {
		i := tb.ColumnIndex(col)
		tb.Columns[i].DataType, tb.Columns[i].ColumnType = dataType, columnType
		return tb
	}
	cases := []struct {
		name          string
		source, ghost *table.Table
		alter         string
		want          []string // nil: no usable key
	}{
		{"enum kept", typed(tbl("a e b", "PRIMARY:a,e"), "e", "enum", "enum('x','y')"),
			typed(tbl("a e b", "PRIMARY:a,e"), "e", "enum", "enum('x','y')"), "FORCE", []string{"a", "e"}},
		{"enum reordered, no other key", typed(tbl("a e b", "PRIMARY:a,e"), "e", "enum", "enum('x','y')"),
			typed(tbl("a e b", "PRIMARY:a,e"), "e", "enum", "enum('y','x')"), "MODIFY e ENUM('y','x') NOT NULL", nil},
		{"enum reordered, unique id instead", typed(tbl("a e id", "PRIMARY:a,e", "u_id:id"), "e", "enum", "enum('x','y')"),
			typed(tbl("a e id", "PRIMARY:a,e", "u_id:id"), "e", "enum", "enum('y','x')"), "MODIFY e ENUM('y','x') NOT NULL", []string{"id"}},
		{"float to double", typed(tbl("f b", "PRIMARY:f"), "f", "float", "float"),
			typed(tbl("f b", "PRIMARY:f"), "f", "double", "double"), "MODIFY f DOUBLE NOT NULL", nil},
		{"int to bigint (text bounds)", tbl("id b", "PRIMARY:id"), typed(tbl("id b", "PRIMARY:id"), "id", "bigint", "bigint(20)"),
			"MODIFY id BIGINT NOT NULL", []string{"id"}},
	}
	for _, tc := range cases {
		ps, err := Map(tc.source, tc.ghost, mustAnalyze(t, tc.alter))
		if err != nil {
			t.Errorf("%s: Map: %v", tc.name, err)
			continue
		}
		src, _, err := SharedKey(tc.source, tc.ghost, ps)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "must keep its type") {
				t.Errorf("%s: SharedKey = %v, %v; want the no-usable-key error naming the type rule", tc.name, src, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(src, tc.want) {
			t.Errorf("%s: SharedKey = %v, %v; want %v", tc.name, src, err, tc.want)
		}
	}
}

// strCol is a column of type typ(20) under collation coll ("": none).
func strCol(typ, coll string) table.Column {
	c := table.Column{DataType: typ, ColumnType: typ + "(20)", Collation: coll}
	if coll != "" {
		c.Charset, _, _ = strings.Cut(coll, "_")
	}
	return c
}

func TestReorders(t *testing.T) {
	col := strCol
	for _, c := range []struct {
		src, gh table.Column
		want    bool
	}{
		{col("varchar", "utf8mb4_general_ci"), col("varchar", "utf8mb4_bin"), true},
		{col("varchar", "latin1_bin"), col("varchar", "utf8mb4_bin"), true},
		{col("varchar", "utf8mb3_bin"), col("varchar", "utf8mb4_bin"), false},
		{col("varchar", "utf8mb4_bin"), col("char", "utf8mb4_bin"), false},
		{col("varbinary", ""), col("varchar", "utf8mb4_bin"), true},
		{col("varchar", "utf8mb4_bin"), col("varbinary", ""), true},
		{col("varbinary", ""), col("binary", ""), false},
		{col("varchar", "utf8mb4_bin"), col("int", ""), true},
		{col("bigint", ""), col("varchar", "utf8mb4_bin"), false},
		{col("datetime", ""), col("varchar", "utf8mb4_bin"), false},
	} {
		if got := reorders(c.src, c.gh); got != c.want {
			t.Errorf("reorders(%s %s -> %s %s) = %v, want %v", c.src.DataType, c.src.Collation, c.gh.DataType, c.gh.Collation, got, c.want)
		}
	}
}

func TestCoarsens(t *testing.T) {
	str := strCol
	cases := []struct {
		src, gh table.Column
		want    bool
	}{
		{str("varchar", "utf8mb4_bin"), str("varchar", "utf8mb4_general_ci"), true},
		{str("varchar", "latin1_general_cs"), str("varchar", "latin1_swedish_ci"), true},
		{str("varchar", "utf8mb4_0900_as_cs"), str("varchar", "utf8mb4_0900_ai_ci"), true},
		{str("varbinary", ""), str("varchar", "utf8mb4_general_ci"), true},
		{str("varbinary", ""), str("varchar", "utf8mb4_bin"), true}, // PAD SPACE: 'a' = 'a '
		{str("varbinary", ""), str("varchar", "utf8mb4_0900_bin"), false},
		{str("varchar", "utf8mb4_0900_ai_ci"), str("varchar", "utf8mb4_general_ci"), true}, // NO PAD to PAD
		{str("varchar", "utf8mb4_0900_bin"), str("char", "utf8mb4_0900_bin"), true},        // CHAR strips spaces
		{str("varchar", "utf8mb4_bin"), str("varchar", "utf8mb4_bin"), false},
		{str("varchar", "utf8mb3_bin"), str("varchar", "utf8mb4_bin"), false},
		{str("varchar", "utf8mb3_general_ci"), str("varchar", "utf8mb4_general_ci"), false},
		{str("varchar", "latin1_bin"), str("varchar", "utf8mb4_bin"), false},
		{str("varchar", "utf8mb4_general_ci"), str("varchar", "utf8mb4_bin"), false},          // finer
		{str("varchar", "latin1_swedish_ci"), str("varchar", "utf8mb4_general_ci"), true},     // 'u' = 'ü' only under the new one
		{str("varchar", "utf8mb4_general_ci"), str("varchar", "utf8mb4_unicode_ci"), true},    // 'ss' = 'ß' only under the new one
		{str("varchar", "utf8mb4_general_ci"), str("varchar", "utf8mb4_uca1400_ai_ci"), true}, // (the same)
		{str("varchar", "utf8mb4_0900_as_ci"), str("varchar", "utf8mb4_0900_ai_ci"), true},    // accents
		{str("varchar", "latin1_swedish_ci"), str("varchar", "utf8mb4_0900_as_cs"), true},     // NFC and NFD é equal under UCA
		{str("varchar", "utf8mb4_bin"), str("varchar", "utf8mb4_0900_as_cs"), true},
		{str("varchar", "latin1_swedish_ci"), str("varchar", "latin1_bin"), false}, // into code points
		{str("varchar", "utf8mb4_bin"), str("varbinary", ""), false},
		{table.Column{DataType: "int", ColumnType: "int(11)"}, table.Column{DataType: "bigint", ColumnType: "bigint(20)"}, false},
		{table.Column{DataType: "int", ColumnType: "int(11)"}, str("varchar", "utf8mb4_general_ci"), false}, // distinct numbers, distinct texts
	}
	for _, c := range cases {
		if got := Coarsens(c.src, c.gh); got != c.want {
			t.Errorf("Coarsens(%s %s -> %s %s) = %v, want %v", c.src.DataType, c.src.Collation, c.gh.DataType, c.gh.Collation, got, c.want)
		}
	}
}
