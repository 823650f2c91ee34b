package check

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "not-null", Order: 110, CopyOnly: true, Run: checkNotNull})
}

// checkNotNull refuses an ALTER that makes a column NOT NULL (MODIFY, or a
// new PRIMARY KEY over it) while rows hold NULL in it: strict mode would
// stop the copy halfway, a lax one would turn the NULLs into 0 or ”.
func checkNotNull(ctx context.Context, in *Input) error {
	if in.Ghost == nil {
		return nil
	}
	if err := newNotNullNoDefault(in); err != nil {
		return err
	}
	for _, p := range in.Pairs {
		sc := in.Source.Columns[in.Source.ColumnIndex(p.Source)]
		gc := in.Ghost.Columns[in.Ghost.ColumnIndex(p.Ghost)]
		if !sc.Nullable || gc.Nullable {
			continue
		}
		ex, found, err := exampleKey(ctx, in, table.QuoteIdent(sc.Name)+" IS NULL")
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		col := table.QuoteIdent(sc.Name)
		if !strings.EqualFold(p.Source, p.Ghost) {
			col += " (new name " + table.QuoteIdent(p.Ghost) + ")"
		}
		return refusef(fmt.Sprintf("set those rows first (UPDATE %s SET %s = ... WHERE %s IS NULL), or keep the column NULL-able",
			in.quotedTable(), table.QuoteIdent(sc.Name), table.QuoteIdent(sc.Name)),
			"the ALTER makes column %s NOT NULL, but rows hold NULL in it, e.g. the row %s", col, ex)
	}
	return nil
}

// exampleKey returns the chunk key of one row matching where, rendered as
// "id=5" or "(a, b)=(1, 'x')".
func exampleKey(ctx context.Context, in *Input, where string, args ...any) (string, bool, error) {
	ks, err := exampleKeys(ctx, in, 1, where, args...)
	if err != nil || len(ks) == 0 {
		return "", false, err
	}
	return ks[0], true, nil
}

// exampleKeys returns the chunk keys of up to n rows matching where.
func exampleKeys(ctx context.Context, in *Input, n int, where string, args ...any) ([]string, error) {
	key := in.Key
	if len(key) == 0 {
		key = []string{in.Source.Columns[0].Name}
	}
	rows, err := in.DB.QueryContext(ctx, dbconn.Tag+"SELECT "+table.QuoteIdents(key)+" FROM "+in.quotedTable()+
		" WHERE "+where+fmt.Sprintf(" LIMIT %d", n), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(key))
		ptrs := make([]any, len(key))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, renderTuple(key, vals))
	}
	return out, rows.Err()
}

// renderTuple renders column names and values as "a=1" or "(a, b)=(1, 'x')".
func renderTuple(cols []string, vals []sql.NullString) string {
	vs := make([]string, len(vals))
	for i, v := range vals {
		switch {
		case !v.Valid:
			vs[i] = "NULL"
		case isNumber(v.String):
			vs[i] = v.String
		default:
			vs[i] = quoteString(v.String)
		}
	}
	if len(cols) == 1 {
		return cols[0] + "=" + vs[0]
	}
	return "(" + strings.Join(cols, ", ") + ")=(" + strings.Join(vs, ", ") + ")"
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c >= '0' && c <= '9') && !(c == '-' && i == 0) && c != '.' {
			return false
		}
	}
	return true
}

// newNotNullNoDefault refuses a new NOT NULL column without a DEFAULT
// (neither generated nor AUTO_INCREMENT): the server's ALTER gives the
// existing rows the type's implicit default (0, ”, the zero date), where
// the copy, which does not name the column, met warning 1364 on each row
// and stopped after creating the ghost table, and the strict applier
// failed on the first row written.
func newNotNullNoDefault(in *Input) error {
	paired := map[string]bool{}
	for _, p := range in.Pairs {
		paired[strings.ToLower(p.Ghost)] = true
	}
	for _, gc := range in.Ghost.Columns {
		name := strings.ToLower(gc.Name)
		if paired[name] || gc.Nullable || gc.Generated || gc.AutoIncrement {
			continue
		}
		if x, ok := in.GhostCol[name]; !ok || x.Default.Valid || x.AutoIncrement || x.Generated {
			continue
		}
		return refusef(fmt.Sprintf("give it a DEFAULT (ADD COLUMN %s %s NOT NULL DEFAULT ...), or let it be NULL", table.QuoteIdent(gc.Name), gc.ColumnType),
			"new column %s %s is NOT NULL without a DEFAULT: the server's ALTER fills the existing rows with the type's implicit default, which recast's strict copy and applier do not write",
			table.QuoteIdent(gc.Name), gc.ColumnType)
	}
	return nil
}
