package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// ErrUnresolvable is returned when a row cannot be written to the ghost
// because of a unique key whose conflicting row cannot be looked up (a key
// over a column the applier does not write: a new column or a generated one).
var ErrUnresolvable = errors.New("a row cannot be written to the new table")

// guarded reports whether a unique key of the ghost is not enforced by the
// source: then a REPLACE could delete a row for good.
func (a *Applier) guarded() bool {
	for _, u := range a.cfg.Uniques {
		if !u.Enforced {
			return true
		}
	}
	return false
}

// writeGuarded writes rows of tables with Uniques: per statement, a
// transaction deletes the rows' own keys and INSERTs them, so that a
// conflict under another unique key is an error (1062) instead of a silent
// deletion of the other row. With split, a statement that fails so is
// written again in halves, down to the single rows that still conflict;
// without it, the whole statement's rows are returned. The rows returned
// are written by writeDisplacing once the rest of the window is in.
func (a *Applier) writeGuarded(ctx context.Context, ops []op, split bool) ([]op, error) {
	var conflicts []op
	for len(ops) > 0 {
		n := a.batchLen(ops)
		batch := ops[:n]
		ops = ops[n:]
		var c []op
		var err error
		if split {
			c, err = a.bisect(ctx, batch)
		} else {
			var dup bool
			if dup, err = a.deleteInsert(ctx, batch); dup {
				c = batch
			}
		}
		conflicts = append(conflicts, c...)
		if err != nil {
			return conflicts, err
		}
	}
	return conflicts, nil
}

// bisect writes batch; if it meets a duplicate, it writes each half the
// same way, down to the single rows that conflict, which it returns.
func (a *Applier) bisect(ctx context.Context, batch []op) ([]op, error) {
	dup, err := a.deleteInsert(ctx, batch)
	if err != nil || !dup {
		return nil, err
	}
	if len(batch) == 1 {
		return batch, nil
	}
	h := len(batch) / 2
	c1, err := a.bisect(ctx, batch[:h])
	if err != nil {
		return c1, err
	}
	c2, err := a.bisect(ctx, batch[h:])
	return append(c1, c2...), err
}

// deleteInsert writes batch in one transaction; dup reports (after a
// rollback) that the INSERT met a duplicate under some unique key.
func (a *Applier) deleteInsert(ctx context.Context, batch []op) (dup bool, err error) {
	dq, dargs := a.deleteStmt(batch)
	iq, iargs := a.writeStmt("INSERT", batch)
	err = dbconn.Retry(ctx, 20, func(ctx context.Context) (err error) {
		defer func() { a.noteRetry(err) }()
		dup = false
		return a.onConn(ctx, func(ctx context.Context, conn *sql.Conn) error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck // after Commit: no-op
			if _, err := tx.ExecContext(ctx, dq, dargs...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, iq, iargs...); err != nil {
				if dbconn.Number(err) == dbconn.ErDupEntry {
					dup = true
					return nil
				}
				return err
			}
			return tx.Commit()
		})
	})
	if err != nil {
		return false, fmt.Errorf("apply %d row(s) to %s: %w", len(batch), a.cfg.Ghost, err)
	}
	if !dup {
		a.stmtCount.Add(2)
		a.rowsOut.Add(int64(len(batch)))
	}
	return dup, nil
}

// writeDisplacing writes one row that conflicts with other rows under the
// ghost's unique keys: in one transaction it removes those rows, reports
// each to Displaced (after the commit), and inserts the row.
func (a *Applier) writeDisplacing(ctx context.Context, o op) error {
	var displaced []Displacement
	err := dbconn.Retry(ctx, 20, func(ctx context.Context) (err error) {
		defer func() { a.noteRetry(err) }()
		displaced = displaced[:0]
		return a.onConn(ctx, func(ctx context.Context, conn *sql.Conn) error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck // after Commit: no-op
			dq, dargs := a.deleteStmt([]op{o})
			if _, err := tx.ExecContext(ctx, dq, dargs...); err != nil {
				return err
			}
			iq, iargs := a.writeStmt("INSERT", []op{o})
			for range 1 + len(a.cfg.Uniques) {
				_, err := tx.ExecContext(ctx, iq, iargs...)
				if err == nil {
					return tx.Commit()
				}
				if dbconn.Number(err) != dbconn.ErDupEntry {
					return err
				}
				found, err := a.removeConflicts(ctx, tx, o)
				if err != nil {
					return err
				}
				if len(found) == 0 {
					return fmt.Errorf("%w: %s holds a value that another row of %s already holds under a unique key over a column recast does not write (a new or generated column): the ALTER cannot be applied to this data",
						ErrUnresolvable, a.render(o.image), a.cfg.Ghost)
				}
				displaced = append(displaced, found...)
			}
			return fmt.Errorf("%w: %s still conflicts under a unique key after removing %d row(s)", ErrUnresolvable, a.render(o.image), len(displaced))
		})
	})
	if err != nil {
		return fmt.Errorf("apply a row to %s: %w", a.cfg.Ghost, err)
	}
	a.stmtCount.Add(2)
	a.rowsOut.Add(1)
	for _, d := range displaced {
		if d.enforced {
			continue // as REPLACE would: the row's own later event rewrites it
		}
		a.cfg.Logger.Debug("applier: a row took another row's unique value; the other row is removed until it is restored or proven a duplicate",
			"key", d.Key, "removed", d.Row, "by", d.By)
		if a.cfg.Displaced != nil {
			a.cfg.Displaced(d)
		}
	}
	return nil
}

// removeConflicts finds and deletes, inside tx, the ghost rows that hold
// o's values under one of the Uniques.
func (a *Applier) removeConflicts(ctx context.Context, tx *sql.Tx, o op) ([]Displacement, error) {
	var out []Displacement
	for _, u := range a.cfg.Uniques {
		where, args, ok := a.uniqueWhere(u, o.image)
		if !ok {
			continue
		}
		found, err := a.findConflicts(ctx, tx, u, where, args, o)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			q := dbconn.Tag + "DELETE FROM " + a.cfg.Ghost + " WHERE (" + table.QuoteIdents(a.cfg.KeyGhost) + ") = (" + placeholders(len(d.GhostKey), nil, nil) + ")"
			if _, err := tx.ExecContext(ctx, q, d.GhostKey...); err != nil {
				return nil, err
			}
		}
		out = append(out, found...)
	}
	return out, nil
}

// findConflicts reads (FOR UPDATE) the ghost rows matching where under u.
func (a *Applier) findConflicts(ctx context.Context, tx *sql.Tx, u Unique, where string, args []any, o op) ([]Displacement, error) {
	q := dbconn.Tag + "SELECT " + table.QuoteIdents(a.cfg.KeyGhost) + ", " + a.renderGhostExpr() +
		" FROM " + a.cfg.Ghost + " WHERE " + where + " FOR UPDATE"
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []Displacement
	for rows.Next() {
		vals := make([]sql.RawBytes, len(a.cfg.KeyGhost)+1)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		key := make([]any, len(a.cfg.KeyGhost))
		for i := range key {
			key[i] = append([]byte(nil), vals[i]...)
		}
		found = append(found, Displacement{Key: u.Name, GhostKey: key, Row: string(vals[len(vals)-1]), By: a.render(o.image), enforced: u.Enforced})
	}
	return found, rows.Err()
}

// uniqueWhere renders "unique key columns = o's values"; ok is false when
// a column of the key is not written by the applier.
func (a *Applier) uniqueWhere(u Unique, image []any) (string, []any, bool) {
	var conds []string
	var args []any
	for _, c := range u.Columns {
		i := slices.Index(a.cfg.GhostColumns, c)
		if i < 0 {
			return "", nil, false
		}
		var ph strings.Builder
		args = writeValue(&ph, args, image[a.cfg.SourceColumns[i]], a.cfg.Charsets, a.cfg.Exprs, i)
		conds = append(conds, table.QuoteIdent(c)+" = "+ph.String())
	}
	return strings.Join(conds, " AND "), args, true
}

// renderGhostExpr renders a ghost row as "col=value, ..." on the server.
func (a *Applier) renderGhostExpr() string {
	parts := make([]string, len(a.cfg.GhostColumns))
	for i, c := range a.cfg.GhostColumns {
		parts[i] = "CONCAT(" + dbconn.QuoteString(c+"=") + ", QUOTE(" + table.QuoteIdent(c) + "))"
	}
	return "CONCAT_WS(', ', " + strings.Join(parts, ", ") + ")"
}

// render renders a row image's written columns as "col=value, ...".
func (a *Applier) render(image []any) string {
	parts := make([]string, len(a.cfg.GhostColumns))
	for i, c := range a.cfg.GhostColumns {
		v := image[a.cfg.SourceColumns[i]]
		switch x := v.(type) {
		case nil:
			parts[i] = c + "=NULL"
		case []byte:
			parts[i] = fmt.Sprintf("%s=%q", c, x)
		case string:
			parts[i] = fmt.Sprintf("%s=%q", c, x)
		default:
			parts[i] = fmt.Sprintf("%s=%v", c, x)
		}
	}
	return strings.Join(parts, ", ")
}

func (a *Applier) batchLen(ops []op) int {
	n, size := 0, 0
	for n < len(ops) && n < a.cfg.BatchRows && (n == 0 || size+ops[n].bytes <= a.cfg.BatchBytes) {
		size += ops[n].bytes
		n++
	}
	return n
}
