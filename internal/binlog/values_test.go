package binlog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/recast-osc/recast/internal/table"
)

func TestNormalise(t *testing.T) {
	tb := &table.Table{Schema: "s", Name: "t", Columns: []table.Column{
		{Name: "tu", DataType: "tinyint", Unsigned: true},
		{Name: "su", DataType: "smallint", Unsigned: true},
		{Name: "mu", DataType: "mediumint", Unsigned: true},
		{Name: "iu", DataType: "int", Unsigned: true},
		{Name: "bu", DataType: "bigint", Unsigned: true},
		{Name: "mi", DataType: "mediumint"},
		{Name: "e", DataType: "enum", Elements: []string{"a", "b"}},
		{Name: "s", DataType: "set", Elements: []string{"x", "y", "z"}},
		{Name: "bn", DataType: "binary", ColumnType: "binary(3)"},
		{Name: "vc", DataType: "varchar"},
		{Name: "y", DataType: "year"},
		{Name: "bt", DataType: "bit"},
	}}
	cols, err := prepareColumns(tb)
	if err != nil {
		t.Fatal(err)
	}
	got, err := normaliseRow([]any{int8(-1), int16(-1), int32(-1), int32(-1), int64(-1), int32(-8388608),
		int64(2), int64(5), "a", "", 2024, int64(-1)}, cols)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{uint64(255), uint64(65535), uint64(16777215), uint64(4294967295), uint64(18446744073709551615), int64(-8388608),
		"b", "x,z", []byte{'a', 0, 0}, []byte{}, int64(2024), uint64(18446744073709551615)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	if got[9] == nil || got[9].([]byte) == nil {
		t.Error("empty string became a nil []byte (NULL)")
	}

	for i, bad := range []struct {
		col int
		v   any
	}{{6, int64(3)}, {6, int64(-1)}, {7, int64(8)}, {0, "x"}, {9, 12}, {10, int64(1)}} {
		row := make([]any, len(cols))
		row[bad.col] = bad.v
		if _, err := normaliseRow(row, cols); err == nil {
			t.Errorf("case %d: %v for %s accepted", i, bad.v, cols[bad.col].def.Name)
		}
	}

	if err := CheckTable(&table.Table{Schema: "s", Name: "t", Columns: []table.Column{{Name: "u", DataType: "uuid", ColumnType: "uuid"}}}); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("uuid: %v", err)
	}
}
