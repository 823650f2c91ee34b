package table

import (
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
