package table

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/recast-osc/recast/internal/dbconn"
	"slices"
	"strconv"
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

// KeySelect renders the select list that reads t's key columns cols for
// ScanKey: the columns, FLOAT ones as DOUBLE (KeyArg).
func KeySelect(t *Table, cols []string) string {
	out := make([]string, len(cols))
	for i, name := range cols {
		out[i] = QuoteIdent(name)
		if j := t.ColumnIndex(name); j >= 0 && t.Columns[j].DataType == "float" {
			out[i] = "(" + out[i] + " + 0e0)"
		}
	}
	return strings.Join(out, ", ")
}

// HighestKey reads t's highest key of cols (the index index's order) through
// q: the current state on a pool, a snapshot's on a connection holding one.
// nil: no row.
func HighestKey(ctx context.Context, q Querier, t *Table, cols []string, index string) ([]any, error) {
	return ScanKey(ctx, q, t, cols, highestKeyQuery(t, cols, index))
}

// HighestKeyLocked is HighestKey read with LOCK IN SHARE MODE: the newest
// committed key, after waiting for a transaction that holds the last row
// (one that inserted a key above it and has not committed yet).
func HighestKeyLocked(ctx context.Context, q Querier, t *Table, cols []string, index string) ([]any, error) {
	return ScanKey(ctx, q, t, cols, highestKeyQuery(t, cols, index)+" LOCK IN SHARE MODE")
}

func highestKeyQuery(t *Table, cols []string, index string) string {
	return dbconn.Tag + "SELECT " + KeySelect(t, cols) + " FROM " + t.QuotedName() +
		" FORCE INDEX (" + QuoteIdent(index) + ") ORDER BY " + DescOrder(cols) + " LIMIT 1"
}

// DescOrder renders an ORDER BY list of cols, each descending.
func DescOrder(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = QuoteIdent(c) + " DESC"
	}
	return strings.Join(q, ", ")
}

// ScanKey runs a query returning one row of key values (of t's columns
// cols, read with KeySelect's select list) and returns them ready to bind
// back (KeyArg). No row: nil, nil.
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
		v, err := KeyArg(t.Columns[t.ColumnIndex(name)], raw[i].String)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// KeyArg turns a key column's value, as the server prints it, into the
// value to bind back so that the server compares it as it orders the key:
//   - character columns: a string (compared under the column's collation);
//   - binary strings: bytes;
//   - ENUM and SET: the member's number (ENUM's index, SET's bit mask): the
//     index orders them by number, and a string bound would be compared
//     with the members' names (ENUM('sms','email') orders 'sms' first,
//     'email' < 'sms' as a string: the copy's last chunk left rows out);
//   - BIT: its number (its bytes, bound as a string, compare as 0);
//   - FLOAT and DOUBLE: a float64 holding the stored value exactly. A FLOAT
//     column prints 6 digits (1.23457 for 1.2345678, 0.1 for the stored
//     0.100000001490116...), so `key <= '0.1'` left that row out: KeySelect
//     reads it as a DOUBLE, which prints the digits that round-trip;
//   - other numbers and temporals: their text.
//
// KeyNumbered tells which columns get numbers (their checkpoint form is the
// number, ParseKeyArg).
func KeyArg(c Column, s string) (any, error) {
	switch {
	case c.DataType == "enum":
		for i, e := range c.Elements {
			if e == s {
				return uint64(i + 1), nil
			}
		}
		if s == "" {
			return uint64(0), nil // the error value '' (index 0)
		}
		return nil, fmt.Errorf("key column %s: %q is not one of its ENUM members", QuoteIdent(c.Name), s)
	case c.DataType == "set":
		var mask uint64
		if s == "" {
			return mask, nil
		}
		for _, part := range strings.Split(s, ",") {
			i := slices.Index(c.Elements, part)
			if i < 0 || i >= 64 {
				return nil, fmt.Errorf("key column %s: %q is not one of its SET members", QuoteIdent(c.Name), part)
			}
			mask |= 1 << i
		}
		return mask, nil
	case c.DataType == "bit":
		if len(s) > 8 {
			return nil, fmt.Errorf("key column %s: a BIT value of %d bytes", QuoteIdent(c.Name), len(s))
		}
		var n uint64
		for i := 0; i < len(s); i++ {
			n = n<<8 | uint64(s[i])
		}
		return n, nil
	case c.DataType == "float" || c.DataType == "double" || c.DataType == "real":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", QuoteIdent(c.Name), err)
		}
		return f, nil
	case c.Charset == "" && IsBinaryType(c.DataType):
		return []byte(s), nil
	}
	return s, nil
}

// KeyNumbered reports whether KeyArg binds the column's values as numbers
// of its own making (ENUM, SET, BIT, FLOAT, DOUBLE): their text in a
// checkpoint is that number, not what the server prints.
func KeyNumbered(c Column) bool {
	switch c.DataType {
	case "enum", "set", "bit", "float", "double", "real":
		return true
	}
	return false
}

// ParseKeyArg turns a key value's checkpoint form (fmt's %v of KeyArg's
// value, or the bytes) back into the value to bind.
func ParseKeyArg(c Column, b []byte) (any, error) {
	switch {
	case c.DataType == "float" || c.DataType == "double" || c.DataType == "real":
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", QuoteIdent(c.Name), err)
		}
		return f, nil
	case KeyNumbered(c):
		n, err := strconv.ParseUint(string(b), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", QuoteIdent(c.Name), err)
		}
		return n, nil
	case c.Charset == "" && IsBinaryType(c.DataType):
		return b, nil
	}
	return string(b), nil
}

// IsBinaryType reports the byte-string types.
// IsStringType reports whether dataType is a character or binary string
// type (CHAR, VARCHAR, the TEXT types, and IsBinaryType's): not ENUM, SET
// or JSON.
func IsStringType(dataType string) bool {
	switch dataType {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return true
	}
	return IsBinaryType(dataType)
}

func IsBinaryType(dataType string) bool {
	switch dataType {
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return true
	}
	return false
}
