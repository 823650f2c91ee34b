package workload

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// VerifyOptions says how the table's columns relate to the shadow's now,
// after a migration changed them.
type VerifyOptions struct {
	// Dropped lists shadow columns the table no longer has; they are not compared.
	Dropped []string
	// Renamed maps a shadow column to its name in the table.
	Renamed map[string]string
	// MaxExamples caps Diff.Examples (default 10).
	MaxExamples int
}

// Diff is the result of Verify. Rows are matched by id.
type Diff struct {
	Rows      int // rows read from the table
	Missing   int // rows in the shadow, not in the table
	Extra     int // rows in the table, not in the shadow
	Different int // rows in both whose values differ in at least one column
	Examples  []string
}

// OK reports no difference.
func (d Diff) OK() bool { return d.Missing == 0 && d.Extra == 0 && d.Different == 0 }

func (d Diff) String() string {
	return fmt.Sprintf("%d rows verified: %d missing, %d extra, %d different", d.Rows, d.Missing, d.Extra, d.Different)
}

// selectColumns returns, for the shadow columns compared, their indexes and
// the canonical-text select list; the id column always comes first.
func selectColumns(opts VerifyOptions) (idx []int, exprs []string, idCol string, err error) {
	dropped := map[string]bool{}
	for _, c := range opts.Dropped {
		if _, ok := columnIndex[c]; !ok {
			return nil, nil, "", fmt.Errorf("workload: verify: dropped column %q is not a workload column", c)
		}
		dropped[c] = true
	}
	for c := range opts.Renamed {
		if _, ok := columnIndex[c]; !ok {
			return nil, nil, "", fmt.Errorf("workload: verify: renamed column %q is not a workload column", c)
		}
	}
	if dropped["id"] {
		return nil, nil, "", fmt.Errorf("workload: verify: the id column cannot be dropped")
	}
	for i, c := range columns {
		if dropped[c.name] {
			continue
		}
		name := c.name
		if to, ok := opts.Renamed[c.name]; ok {
			name = to
		}
		if i == colID {
			idCol = name
		}
		idx = append(idx, i)
		exprs = append(exprs, c.expr(name))
	}
	return idx, exprs, idCol, nil
}

// Verify compares the table's content with the shadow, row by row and column
// by column, with one SELECT of the whole table ordered by id. Columns of
// the table that the shadow does not know (added by a migration) are ignored.
// Verify must not run while a Load writes with sh.
func Verify(ctx context.Context, db *sql.DB, schema, table string, sh *Shadow, opts VerifyOptions) (Diff, error) {
	var d Diff
	maxEx := opts.MaxExamples
	if maxEx <= 0 {
		maxEx = 10
	}
	example := func(format string, args ...any) {
		if len(d.Examples) < maxEx {
			d.Examples = append(d.Examples, fmt.Sprintf(format, args...))
		}
	}
	idx, exprs, idCol, err := selectColumns(opts)
	if err != nil {
		return d, err
	}
	ids := sh.IDs()

	conn, err := db.Conn(ctx)
	if err != nil {
		return d, fmt.Errorf("workload: verify: %w", err)
	}
	defer conn.Close()
	if err := setupConn(ctx, conn); err != nil {
		return d, err
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + quoteIdent(schema) + "." + quoteIdent(table) +
		" ORDER BY " + quoteIdent(idCol)
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return d, fmt.Errorf("workload: verify %s.%s: %w", schema, table, err)
	}
	defer rows.Close()

	vals := make([]sql.NullString, len(idx))
	dest := make([]any, len(idx))
	for i := range vals {
		dest[i] = &vals[i]
	}
	next := 0 // next shadow id not yet matched
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return d, fmt.Errorf("workload: verify %s.%s: %w", schema, table, err)
		}
		d.Rows++
		id, err := strconv.ParseInt(vals[0].String, 10, 64)
		if err != nil {
			return d, fmt.Errorf("workload: verify: bad id %q: %w", vals[0].String, err)
		}
		for next < len(ids) && ids[next] < id {
			d.Missing++
			example("id %d: missing from the table", ids[next])
			next++
		}
		if next == len(ids) || ids[next] != id {
			d.Extra++
			example("id %d: in the table but not in the shadow", id)
			continue
		}
		next++
		p, _ := sh.get(id)
		want := unpack(p)
		var diffs []string
		for k, ci := range idx {
			got := vals[k]
			w := want[ci]
			// Byte for byte, in Go: never under a collation, so a key that
			// differs only in case, trailing spaces or accents ('abc' vs
			// 'ABC', 'abc ', 'àbc') is a difference (Config.KeyOnU).
			if got.Valid == !w.null && (w.null || got.String == w.v) {
				continue
			}
			diffs = append(diffs, fmt.Sprintf("%s: table %s, want %s", columns[ci].name,
				showValue(ci, got.String, !got.Valid), showValue(ci, w.v, w.null)))
		}
		if len(diffs) > 0 {
			d.Different++
			example("id %d: %s", id, strings.Join(diffs, "; "))
		}
	}
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("workload: verify %s.%s: %w", schema, table, err)
	}
	for ; next < len(ids); next++ {
		d.Missing++
		example("id %d: missing from the table", ids[next])
	}
	return d, nil
}

// Snapshot reads the workload table's current content into a new shadow, so
// that a Load can run on a table this process did not prepare. The table
// must not change while Snapshot reads it.
func Snapshot(ctx context.Context, db *sql.DB, schema, table string) (*Shadow, error) {
	idx, exprs, idCol, err := selectColumns(VerifyOptions{})
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("workload: snapshot: %w", err)
	}
	defer conn.Close()
	if err := setupConn(ctx, conn); err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+
		quoteIdent(schema)+"."+quoteIdent(table)+" ORDER BY "+quoteIdent(idCol))
	if err != nil {
		return nil, fmt.Errorf("workload: snapshot %s.%s: %w", schema, table, err)
	}
	defer rows.Close()
	sh := newShadow(0)
	vals := make([]sql.NullString, len(idx))
	dest := make([]any, len(idx))
	for i := range vals {
		dest[i] = &vals[i]
	}
	fs := make([]field, len(columns))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("workload: snapshot %s.%s: %w", schema, table, err)
		}
		id, err := strconv.ParseInt(vals[0].String, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("workload: snapshot: bad id %q: %w", vals[0].String, err)
		}
		for k, ci := range idx {
			fs[ci] = field{v: vals[k].String, null: !vals[k].Valid}
		}
		sh.put(id, pack(fs))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("workload: snapshot %s.%s: %w", schema, table, err)
	}
	return sh, nil
}
