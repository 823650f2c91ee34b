package table

import (
	"fmt"
	"reflect"
	"testing"
)

func TestRangeWhere(t *testing.T) {
	cases := []struct {
		cols   []string
		lo, hi []any
		want   string
		args   []any
	}{
		{[]string{"id"}, nil, nil, "1=1", nil},
		{[]string{"id"}, []any{1}, nil, "((`id` > ?))", []any{1}},
		{[]string{"id"}, nil, []any{9}, "((`id` <= ?))", []any{9}},
		{[]string{"a", "b"}, []any{1, 2}, []any{3, 4},
			"((`a` > ?) OR (`a` = ? AND `b` > ?)) AND ((`a` < ?) OR (`a` = ? AND `b` <= ?))",
			[]any{1, 1, 2, 3, 3, 4}},
	}
	for _, c := range cases {
		got, args := RangeWhere(c.cols, c.lo, c.hi)
		if got != c.want || !reflect.DeepEqual(args, c.args) {
			t.Errorf("RangeWhere(%v, %v, %v) = %q %v, want %q %v", c.cols, c.lo, c.hi, got, args, c.want, c.args)
		}
	}
}

func TestKeyArg(t *testing.T) {
	enum := Column{Name: "e", DataType: "enum", Elements: []string{"sms", "email", "1"}}
	set := Column{Name: "s", DataType: "set", Elements: []string{"x", "y", "z"}}
	cases := []struct {
		col  Column
		text string
		want any
	}{
		{enum, "sms", uint64(1)},
		{enum, "email", uint64(2)},
		{enum, "1", uint64(3)}, // a member named "1" is the third, not the first
		{enum, "", uint64(0)},
		{set, "x,z", uint64(5)},
		{set, "", uint64(0)},
		{Column{Name: "b", DataType: "bit"}, "\x0a\xaa", uint64(2730)},
		{Column{Name: "f", DataType: "float"}, "0.10000000149011612", float64(float32(0.1))},
		{Column{Name: "f", DataType: "float"}, "3.3999999521443642e38", float64(float32(3.4e38))},
		{Column{Name: "d", DataType: "double"}, "0.30000000000000004", 0.30000000000000004}, // 0.1e0 + 0.2e0
		{Column{Name: "v", DataType: "varbinary"}, "ab", []byte("ab")},
		{Column{Name: "c", DataType: "varchar", Charset: "utf8mb4"}, "ab", "ab"},
		{Column{Name: "i", DataType: "int"}, "-7", "-7"},
		{Column{Name: "dt", DataType: "datetime"}, "2026-11-28 10:00:00", "2026-11-28 10:00:00"},
	}
	for _, c := range cases {
		got, err := KeyArg(c.col, c.text)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("KeyArg(%s %s, %q) = %#v, %v; want %#v", c.col.Name, c.col.DataType, c.text, got, err, c.want)
			continue
		}
		// The checkpoint's form (fmt %v, bytes as they are) parses back to it.
		var raw []byte
		if b, ok := got.([]byte); ok {
			raw = b
		} else {
			raw = fmt.Appendf(nil, "%v", got)
		}
		back, err := ParseKeyArg(c.col, raw)
		if err != nil || !reflect.DeepEqual(back, c.want) {
			t.Errorf("ParseKeyArg(%s, %q) = %#v, %v; want %#v", c.col.Name, raw, back, err, c.want)
		}
	}
	for _, bad := range []struct {
		col  Column
		text string
	}{{enum, "EMAIL"}, {set, "x,w"}, {Column{Name: "b", DataType: "bit"}, "123456789"}, {Column{Name: "f", DataType: "float"}, "1.2.3"}} {
		if v, err := KeyArg(bad.col, bad.text); err == nil {
			t.Errorf("KeyArg(%s, %q) = %#v; want an error", bad.col.Name, bad.text, v)
		}
	}
}

func TestKeySelect(t *testing.T) {
	tb := &Table{Columns: []Column{{Name: "a", DataType: "int"}, {Name: "f", DataType: "float"}, {Name: "d", DataType: "double"}}}
	if got, want := KeySelect(tb, []string{"a", "F", "d"}), "`a`, (`F` + 0e0), `d`"; got != want {
		t.Errorf("KeySelect = %q, want %q", got, want)
	}
}

func TestGeneratedExtra(t *testing.T) {
	for extra, want := range map[string]bool{
		"":                  false,
		"auto_increment":    false,
		"DEFAULT_GENERATED": false, // MySQL: DEFAULT CURRENT_TIMESTAMP or (expr)
		"DEFAULT_GENERATED on update CURRENT_TIMESTAMP": false,
		"on update current_timestamp()":                 false,
		"VIRTUAL GENERATED":                             true,
		"STORED GENERATED":                              true,
		"PERSISTENT GENERATED":                          true,
		"virtual generated":                             true,
		"VIRTUAL GENERATED INVISIBLE":                   true,
		"DEFAULT_GENERATED INVISIBLE":                   false,
	} {
		if got := GeneratedExtra(extra); got != want {
			t.Errorf("GeneratedExtra(%q) = %v, want %v", extra, got, want)
		}
	}
}

func TestDescOrder(t *testing.T) {
	if got := DescOrder([]string{"a", "b`c"}); got != "`a` DESC, `b``c` DESC" {
		t.Errorf("desc = %q", got)
	}
}
