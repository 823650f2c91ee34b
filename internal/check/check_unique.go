package check

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "unique", Order: 120, CopyOnly: true, Run: checkUnique})
}

// checkUnique refuses an ALTER whose new definition has a unique key the
// current rows violate: a new UNIQUE or PRIMARY KEY over duplicate values,
// a unique key whose column gets a collation under which values become
// equal ('a' = 'A'), a unique prefix, a new column with one default value
// for every row. The copy writes with INSERT IGNORE, which would keep one row
// of each duplicate group and drop the others.
func checkUnique(ctx context.Context, in *Input) error {
	if in.Ghost == nil {
		return nil
	}
	toSource := map[string]string{}
	for _, p := range in.Pairs {
		toSource[strings.ToLower(p.Ghost)] = p.Source
	}
	for _, uk := range in.GhostUnique {
		var exprs, srcCols, notNull []string
		changed, skip := false, false
		for i, gname := range uk.Columns {
			gi := in.Ghost.ColumnIndex(gname)
			if gi < 0 {
				skip = true
				break
			}
			gc := in.Ghost.Columns[gi]
			src, ok := toSource[strings.ToLower(gname)]
			if !ok { // a new or generated column
				x := in.GhostCol[strings.ToLower(gname)]
				switch {
				case x.AutoIncrement, x.Generated: // distinct values, or computed: not checked here
					skip = true
				case !x.Default.Valid && gc.Nullable: // NULL in every row: no conflict
					skip = true
				case x.Default.Valid && strings.Contains(x.Default.String, "("): // an expression
					skip = true
				default:
					// one default value in every row: it distinguishes no rows,
					// so the other columns decide (all-constant keys: below)
				}
				continue
			}
			sc := in.Source.Columns[in.Source.ColumnIndex(src)]
			e := table.QuoteIdent(sc.Name)
			switch {
			case sc.Charset != "" && gc.Charset != "" && sc.Collation != gc.Collation:
				e = fmt.Sprintf("CONVERT(%s USING %s) COLLATE %s", e, gc.Charset, gc.Collation)
			case sc.Charset != "" && gc.Charset == "" && gc.DataType != sc.DataType:
				e = fmt.Sprintf("CAST(%s AS BINARY)", e)
			}
			if uk.Prefix[i] > 0 {
				e = fmt.Sprintf("LEFT(%s, %d)", e, uk.Prefix[i])
			}
			changed = changed || e != table.QuoteIdent(sc.Name)
			exprs = append(exprs, e)
			srcCols = append(srcCols, sc.Name)
			notNull = append(notNull, table.QuoteIdent(sc.Name)+" IS NOT NULL")
		}
		if skip || (!changed && uniqueInSource(in, srcCols)) {
			continue
		}
		desc := fmt.Sprintf("unique key %s (%s)", table.QuoteIdent(uk.Name), names(uk.Columns))
		if uk.Name == "PRIMARY" {
			desc = fmt.Sprintf("PRIMARY KEY (%s)", names(uk.Columns))
		}
		if len(exprs) == 0 {
			var n int64
			if err := in.DB.QueryRowContext(ctx, dbconn.Tag+"SELECT COUNT(*) FROM (SELECT 1 FROM "+in.quotedTable()+" LIMIT 2) x").Scan(&n); err != nil {
				return err
			}
			if n > 1 {
				return refusef("give the new column distinct values (AUTO_INCREMENT, or add it without the key, fill it, then add the key)",
					"the new table's %s holds only new columns with one default value for every row: all rows but one would be dropped", desc)
			}
			continue
		}
		where := strings.Join(notNull, " AND ")
		q := dbconn.Tag + "SELECT " + strings.Join(exprs, ", ") + ", COUNT(*) FROM " + in.quotedTable() +
			" WHERE " + where + " GROUP BY " + strings.Join(exprs, ", ") + " HAVING COUNT(*) > 1 LIMIT 1"
		vals := make([]sql.NullString, len(exprs))
		ptrs := make([]any, len(exprs)+1)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		var count int64
		ptrs[len(exprs)] = &count
		err := in.DB.QueryRowContext(ctx, q).Scan(ptrs...)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("look for duplicates of the new %s: %w", desc, err)
		}
		var eq []string
		var args []any
		for i, e := range exprs {
			eq = append(eq, e+" = ?")
			args = append(args, vals[i].String)
		}
		examples, err := exampleKeys(ctx, in, 2, strings.Join(eq, " AND "), args...)
		if err != nil {
			return err
		}
		how := ""
		if changed {
			how = " under the new definition"
		}
		ex := ""
		if len(examples) > 0 {
			more := ""
			if int64(len(examples)) < count {
				more = ", ..."
			}
			ex = " (rows " + strings.Join(examples, ", ") + more + ")"
		}
		return refusef("remove the duplicates first, or leave the key out of the ALTER",
			"the new table's %s would reject rows: %s appears %d times%s%s; copying would keep one of them and drop the others",
			desc, renderTuple(srcCols, vals), count, how, ex)
	}
	return nil
}

// uniqueInSource reports whether a unique key of the source lies within cols:
// then cols are unique already.
func uniqueInSource(in *Input, cols []string) bool {
	have := map[string]bool{}
	for _, c := range cols {
		have[strings.ToLower(c)] = true
	}
	for _, ix := range in.Source.Indexes {
		if !ix.Unique {
			continue
		}
		all := true
		for _, c := range ix.Columns {
			if !have[strings.ToLower(c)] {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
