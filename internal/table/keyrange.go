package table

import (
	"context"
	"database/sql"
	"errors"
	"strings"
)

// RangeWhere renders lo < key <= hi for a possibly composite key, expanded so
// that the optimizer uses a range scan: (a > ?) OR (a = ? AND b > ?) ...
// A nil lo means no lower bound, a nil hi no upper bound.
func RangeWhere(cols []string, lo, hi []any) (string, []any) {
	var parts []string
	var args []any
	if lo != nil {
		s, a := tupleCompare(cols, lo, ">")
		parts, args = append(parts, s), append(args, a...)
	}
	if hi != nil {
		s, a := tupleCompare(cols, hi, "<=")
		parts, args = append(parts, s), append(args, a...)
	}
	if len(parts) == 0 {
		return "1=1", nil
	}
	return strings.Join(parts, " AND "), args
}

// tupleCompare renders (cols) op (vals) for op ">" or "<=".
func tupleCompare(cols []string, vals []any, op string) (string, []any) {
	strict := "<"
	if op == ">" {
		strict = ">"
	}
	var ors []string
	var args []any
	for i := range cols {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, QuoteIdent(cols[j])+" = ?")
			args = append(args, vals[j])
		}
		cmp := strict
		if i == len(cols)-1 && op == "<=" {
			cmp = "<="
		}
		ands = append(ands, QuoteIdent(cols[i])+" "+cmp+" ?")
		args = append(args, vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// ScanKey runs a query returning one row of key values (of t's columns
// cols) and returns them ready to bind back: character columns as strings
// (so they compare under the column's collation), binary columns as bytes,
// numbers and temporals as their text. No row: nil, nil.
func ScanKey(ctx context.Context, q Querier, t *Table, cols []string, query string, args ...any) ([]any, error) {
	raw := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	err := q.QueryRowContext(ctx, query, args...).Scan(ptrs...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	for i, name := range cols {
		col := t.Columns[t.ColumnIndex(name)]
		if col.Charset == "" && IsBinaryType(col.DataType) {
			vals[i] = []byte(raw[i].String)
		} else {
			vals[i] = raw[i].String
		}
	}
	return vals, nil
}

// IsBinaryType reports the byte-string types.
func IsBinaryType(dataType string) bool {
	switch dataType {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return true
	}
	return false
}
