package binlog

import (
	"errors"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/recast-osc/recast/internal/table"
)

// These tests need no server (go test -short ./internal/binlog runs them
// without starting one).

func TestPositionCompare(t *testing.T) {
	// In order: file order first, then offset.
	ordered := []Position{
		{},
		{File: "bin.000001", Offset: 0},
		{File: "bin.000001", Offset: 4},
		{File: "bin.000001", Offset: 4294967295},
		{File: "bin.000002", Offset: 4},
		{File: "bin.000010", Offset: 4},
		{File: "bin.999999", Offset: 1},
	}
	for i, p := range ordered {
		for j, q := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := p.Compare(q); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", p, q, got, want)
			}
		}
	}
	if !(Position{}).IsZero() || !(Position{Offset: 4}).IsZero() || (Position{File: "b"}).IsZero() {
		t.Error("IsZero: a position is unset exactly when it has no file")
	}
	if got := (Position{File: "bin.000003", Offset: 120}).String(); got != "bin.000003:120" {
		t.Errorf("String = %q", got)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Insert: "insert", Update: "update", Delete: "delete", 0: "unknown", 9: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d) = %q, want %q", k, got, want)
		}
	}
}

func TestFullImage(t *testing.T) {
	cases := []struct {
		bitmap []byte
		n      int
		want   bool
	}{
		{nil, 0, true},
		{[]byte{0xff}, 8, true},
		{[]byte{0x7f}, 7, true},
		{[]byte{0x7f}, 8, false},
		{[]byte{0xff, 0x01}, 9, true},
		{[]byte{0xff, 0x00}, 9, false},
		{[]byte{0xfe, 0xff}, 9, false}, // first column missing (minimal image)
		{[]byte{0xff}, 9, false},       // bitmap too short
		{[]byte{0xff, 0xff, 0xff}, 17, true},
	}
	for _, c := range cases {
		if got := fullImage(c.bitmap, make([]column, c.n)); got != c.want {
			t.Errorf("fullImage(%08b, %d) = %v, want %v", c.bitmap, c.n, got, c.want)
		}
	}
	// A VIRTUAL generated column may be missing (MariaDB 11.x); any other not.
	cols := make([]column, 8)
	cols[7].def.Generated, cols[7].def.Virtual = true, true
	if !fullImage([]byte{0x7f}, cols) {
		t.Error("fullImage: a missing VIRTUAL column counts as a partial image")
	}
	if fullImage([]byte{0xbf}, cols) {
		t.Error("fullImage: a missing ordinary column goes unnoticed")
	}
}

func TestTypeLength(t *testing.T) {
	cases := []struct {
		in string
		n  int
		ok bool
	}{
		{"binary(16)", 16, true},
		{"binary(0)", 0, true},
		{"binary", 0, false},
		{"binary()", 0, false},
		{"binary(x)", 0, false},
		{"binary(-1)", 0, false},
		{"binary(3", 0, false},
		{"decimal(10,2)", 0, false},
	}
	for _, c := range cases {
		if n, ok := typeLength(c.in); n != c.n || ok != c.ok {
			t.Errorf("typeLength(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
}

// TestCheckTableMap: a table map that does not describe the definition the
// stream decodes with is a schema change, never silently decoded.
func TestCheckTableMap(t *testing.T) {
	tb := &table.Table{Schema: "s", Name: "t", Columns: []table.Column{
		{Name: "id", DataType: "bigint", ColumnType: "bigint(20)"},
		{Name: "v", DataType: "varchar", ColumnType: "varchar(10)", Charset: "utf8mb4"},
	}}
	cols, err := prepareColumns(tb)
	if err != nil {
		t.Fatal(err)
	}
	tm := func(types ...byte) *replication.TableMapEvent {
		return &replication.TableMapEvent{Schema: []byte("s"), Table: []byte("t"), ColumnCount: uint64(len(types)), ColumnType: types}
	}
	if err := checkTableMap(tm(mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR), cols); err != nil {
		t.Errorf("matching table map: %v", err)
	}
	for i, bad := range []*replication.TableMapEvent{
		tm(mysql.MYSQL_TYPE_LONGLONG),
		tm(mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_LONG),
		tm(mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_VARCHAR),
		tm(mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_BLOB),
	} {
		if err := checkTableMap(bad, cols); !errors.Is(err, ErrSchemaChanged) {
			t.Errorf("case %d: %v, want ErrSchemaChanged", i, err)
		}
	}
}
