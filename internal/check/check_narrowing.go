package check

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "narrowing", Order: 115, CopyOnly: true, Run: checkNarrowing})
}

// checkNarrowing refuses an ALTER that shortens a string column below
// values the table holds (VARCHAR(100) -> VARCHAR(5), TEXT -> TINYTEXT,
// VARBINARY(16) -> VARBINARY(4)), naming a row. The copy would stop on the
// truncation warning too, later and without an example; other narrowing
// changes (numbers, ENUM members) are left to it.
func checkNarrowing(ctx context.Context, in *Input) error {
	if in.Ghost == nil {
		return nil
	}
	for _, p := range in.Pairs {
		sc := in.Source.Columns[in.Source.ColumnIndex(p.Source)]
		gc := in.Ghost.Columns[in.Ghost.ColumnIndex(p.Ghost)]
		sl, ok1 := stringLimit(sc)
		gl, ok2 := stringLimit(gc)
		if !ok1 || !ok2 || sc.ColumnType == gc.ColumnType && sc.Charset == gc.Charset {
			continue
		}
		col := table.QuoteIdent(sc.Name)
		var measure, unit string
		switch {
		case gl.chars:
			measure, unit = "CHAR_LENGTH("+col+")", "characters"
		case gc.Charset != "" && gc.Charset != sc.Charset:
			measure, unit = fmt.Sprintf("LENGTH(CONVERT(%s USING %s))", col, gc.Charset), "bytes"
		default:
			measure, unit = "LENGTH("+col+")", "bytes"
		}
		if sl.chars == gl.chars && sl.n <= gl.n && sc.Charset == gc.Charset {
			continue // as wide or wider
		}
		where := fmt.Sprintf("%s > %d", measure, gl.n)
		ex, found, err := exampleKey(ctx, in, where)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		return refusef(fmt.Sprintf("shorten or fix those values first (they are WHERE %s), or keep the column wide enough", where),
			"the ALTER would change or lose data: column %s becomes %s (at most %d %s), but rows hold longer values, e.g. the row %s; copying would truncate them",
			col, gc.ColumnType, gl.n, unit, ex)
	}
	return nil
}

type limit struct {
	n     int64
	chars bool // n counts characters (CHAR, VARCHAR), else bytes
}

// stringLimit returns the longest value a string column takes.
func stringLimit(c table.Column) (limit, bool) {
	switch c.DataType {
	case "char", "varchar":
		n, ok := typeLength(c.ColumnType)
		return limit{n, true}, ok
	case "binary", "varbinary":
		n, ok := typeLength(c.ColumnType)
		return limit{n, false}, ok
	case "tinytext", "tinyblob":
		return limit{255, false}, true
	case "text", "blob":
		return limit{65535, false}, true
	case "mediumtext", "mediumblob":
		return limit{16777215, false}, true
	case "longtext", "longblob":
		return limit{4294967295, false}, true
	}
	return limit{}, false
}

// typeLength reads n of "varchar(n)".
func typeLength(columnType string) (int64, bool) {
	open := strings.IndexByte(columnType, '(')
	end := strings.IndexByte(columnType, ')')
	if open < 0 || end < open {
		return 0, false
	}
	n, err := strconv.ParseInt(columnType[open+1:end], 10, 64)
	return n, err == nil
}
