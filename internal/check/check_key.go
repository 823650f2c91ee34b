package check

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/ddl"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "chunk-key", Order: keyOrder, CopyOnly: true, Run: checkKey})
}

// checkKey lets the server build the new definition on a TEMPORARY copy of
// the table (session-only, not replicated, gone with the session), maps the
// columns and picks the chunk key: a PRIMARY KEY or a UNIQUE key on NOT NULL
// columns that old and new table share. It sets in.Ghost, in.GhostCol,
// in.Pairs and in.Key. InnoDB has no temporary tables with FULLTEXT indexes
// or partitions: the new definition is then read from the ghost table once
// it is created (CheckGhost), and the checks that need it run there.
func checkKey(ctx context.Context, in *Input) error {
	conn, err := in.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer discard(conn) // drops the temporary table with the session
	name := in.GhostName
	if name == "" {
		name = "_" + in.Table + "_new"
	}
	q := in.quoted(name)
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"CREATE TEMPORARY TABLE "+q+" LIKE "+in.quotedTable()); err != nil {
		// E.g. FULLTEXT indexes or partitions: InnoDB has no temporary
		// tables with those. The ghost table itself will tell.
		in.ghostLater = true
		in.logger().Info("the new definition is checked on the ghost table once it is created", "reason", mysqlMessage(err))
		return nil
	}
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"ALTER TABLE "+q+" "+in.Analysis.GhostStatement); err != nil {
		if n := dbconn.Number(err); n == erNoFulltextTemporary || n == erCreateOptionTemporary {
			in.ghostLater = true
			in.logger().Info("the new definition is checked on the ghost table once it is created", "reason", mysqlMessage(err))
			return nil
		}
		return refusef("correct the ALTER (it was tried on an empty temporary copy of the table; nothing was changed)",
			"the server rejects the ALTER: %s", mysqlMessage(err))
	}
	err = in.describeGhost(ctx, conn, name)
	_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DROP TEMPORARY TABLE IF EXISTS "+q)
	return err
}

// describeGhost reads the new definition from table name (a temporary copy
// of conn's session, or the ghost table) and sets in.Ghost, in.GhostCol,
// in.GhostUnique, in.Pairs and in.Key.
func (in *Input) describeGhost(ctx context.Context, conn *sql.Conn, name string) error {
	q := in.quoted(name)
	// Read with SHOW (LoadTemporary): information_schema does not list
	// temporary tables on MariaDB 10.11.
	ghost, err := table.LoadTemporary(ctx, conn, in.Database, name)
	if err != nil {
		return err
	}
	cols, err := columnExtras(ctx, conn, q)
	if err != nil {
		return err
	}
	uniques, err := uniqueKeys(ctx, conn, q)
	if err != nil {
		return err
	}
	pairs, err := ddl.Map(in.Source, ghost, in.Analysis)
	if err != nil {
		return asRefusal(err)
	}
	key, _, err := ddl.SharedKey(in.Source, ghost, pairs)
	if err != nil {
		return asRefusal(err)
	}
	in.Ghost, in.GhostCol, in.GhostUnique, in.Pairs, in.Key = ghost, cols, uniques, pairs, key
	return nil
}

// CheckGhost runs, on the ghost table name just created (empty), what
// chunk-key and the checks after it could not run on a temporary copy:
// the new definition is read from it, and every check ordered after
// chunk-key runs as in Run. It does nothing when they already ran.
func CheckGhost(ctx context.Context, in *Input, name string) error {
	if in == nil || !in.ghostLater {
		return nil
	}
	conn, err := in.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := in.describeGhost(ctx, conn, name); err != nil {
		var ce *Error
		if errors.As(err, &ce) && ce.Check == "" {
			ce.Check = "chunk-key"
		}
		return err
	}
	in.ghostLater = false
	for _, c := range Checks() {
		if c.Order <= keyOrder {
			continue
		}
		if err := runOne(ctx, in, c); err != nil {
			return err
		}
	}
	return nil
}

// keyOrder is chunk-key's Order: the checks after it read the new definition.
const keyOrder = 100

// Errors of temporary InnoDB tables that a real table would not raise.
const (
	erNoFulltextTemporary   = 1796 // Cannot create FULLTEXT index on temporary InnoDB table
	erCreateOptionTemporary = 1478 // storage engine 'partition' does not support the create option 'TEMPORARY'
)

// UniqueKey is a unique index with its columns' prefix lengths (0: whole column).
type UniqueKey struct {
	Name    string
	Columns []string
	Prefix  []int
}

// uniqueKeys reads the unique indexes of a table, prefix lengths included
// (table.Table counts a unique prefix index as not unique).
func uniqueKeys(ctx context.Context, conn *sql.Conn, quoted string) ([]UniqueKey, error) {
	rows, err := conn.QueryContext(ctx, "SHOW INDEX FROM "+quoted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []UniqueKey
	byName := map[string]int{}
	for rows.Next() {
		vals := make([]sql.NullString, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		get := func(n string) sql.NullString {
			for i, c := range names {
				if strings.EqualFold(c, n) {
					return vals[i]
				}
			}
			return sql.NullString{}
		}
		if get("Non_unique").String != "0" {
			continue
		}
		key := get("Key_name").String
		i, ok := byName[key]
		if !ok {
			i = len(out)
			byName[key] = i
			out = append(out, UniqueKey{Name: key})
		}
		prefix := 0
		if sp := get("Sub_part"); sp.Valid {
			if prefix, err = strconv.Atoi(sp.String); err != nil {
				return nil, fmt.Errorf("index %s: Sub_part %q: %w", key, sp.String, err)
			}
		}
		out[i].Columns = append(out[i].Columns, get("Column_name").String)
		out[i].Prefix = append(out[i].Prefix, prefix)
	}
	return out, rows.Err()
}

// columnExtras reads defaults and AUTO_INCREMENT / generated flags.
func columnExtras(ctx context.Context, conn *sql.Conn, quoted string) (map[string]Col, error) {
	rows, err := conn.QueryContext(ctx, "SHOW FULL COLUMNS FROM "+quoted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Col{}
	for rows.Next() {
		var name, typ, null, extra string
		var collation, key, privileges, comment sql.NullString
		var c Col
		if err := rows.Scan(&name, &typ, &collation, &null, &key, &c.Default, &extra, &privileges, &comment); err != nil {
			return nil, err
		}
		extra = strings.ToLower(extra)
		c.AutoIncrement = strings.Contains(extra, "auto_increment")
		c.Generated = table.GeneratedExtra(extra)
		out[strings.ToLower(name)] = c
	}
	return out, rows.Err()
}

// asRefusal turns a *ddl.Error into an *Error.
func asRefusal(err error) error {
	var de *ddl.Error
	if errors.As(err, &de) {
		return refuse(de.Cause, de.Fix)
	}
	return err
}

// mysqlMessage is the server's message of err without the driver's prefix
// "Error 1054 (42S22): ".
func mysqlMessage(err error) string {
	msg := err.Error()
	if n := dbconn.Number(err); n != 0 {
		if _, rest, ok := strings.Cut(msg, "): "); ok {
			return fmt.Sprintf("%s (error %d)", rest, n)
		}
	}
	return msg
}
