package check

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "foreign-keys", Order: 70, CopyOnly: true, Run: checkForeignKeys})
}

const fkFix = "; recast does not support foreign keys yet"

// checkForeignKeys refuses a table that has foreign keys or is referenced by
// some, and an ALTER that adds one. A child's foreign key follows the old
// table through the swap's RENAME (it would point to _T_old); the new
// table's own foreign keys would need the parents' rows checked during the
// copy. Support is a later capability.
func checkForeignKeys(ctx context.Context, in *Input) error {
	children, parents, err := foreignKeys(ctx, in)
	if err != nil {
		return err
	}
	if len(children) > 0 {
		return refusef("drop them on the referencing tables, run recast, add them back (or change the table with a plain ALTER TABLE)",
			"%s is referenced by foreign keys (%s): they would follow the old table at the swap%s", in.quotedTable(), strings.Join(children, ", "), fkFix)
	}
	if len(parents) > 0 {
		return refusef("drop them (ALTER TABLE "+in.quotedTable()+" DROP FOREIGN KEY ...), run recast, add them back; or change the table with a plain ALTER TABLE",
			"%s has foreign keys (%s)%s", in.quotedTable(), strings.Join(parents, ", "), fkFix)
	}
	if in.Analysis != nil && in.Analysis.AddsForeignKey {
		return refuse("the ALTER adds a foreign key"+fkFix,
			"leave it out and add it with a plain ALTER TABLE after recast")
	}
	return nil
}

// foreignKeys returns the foreign keys referencing the table (children:
// "`fk` of `db`.`child`") and those the table has (parents: "`fk` ->
// `db`.`parent`"). information_schema.REFERENTIAL_CONSTRAINTS lists only
// the tables the user has privileges on; InnoDB's own list
// (INNODB_SYS_FOREIGN, needs PROCESS) covers the others.
func foreignKeys(ctx context.Context, in *Input) (children, parents []string, err error) {
	seen := map[string]bool{}
	add := func(list *[]string, s string) {
		if !seen[s] {
			seen[s] = true
			*list = append(*list, s)
		}
	}
	rows, err := in.DB.QueryContext(ctx, `SELECT CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME
		FROM information_schema.REFERENTIAL_CONSTRAINTS
		WHERE (CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?) OR (UNIQUE_CONSTRAINT_SCHEMA = ? AND REFERENCED_TABLE_NAME = ?)`,
		in.Database, in.Table, in.Database, in.Table)
	if err != nil {
		return nil, nil, fmt.Errorf("read information_schema.REFERENTIAL_CONSTRAINTS: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var cs, cn, tn, rs, rt string
		if err := rows.Scan(&cs, &cn, &tn, &rs, &rt); err != nil {
			return nil, nil, err
		}
		if cs == in.Database && tn == in.Table {
			add(&parents, fmt.Sprintf("%s -> %s", table.QuoteIdent(cn), table.QuoteIdent(rs)+"."+table.QuoteIdent(rt)))
		}
		if rs == in.Database && rt == in.Table {
			add(&children, fmt.Sprintf("%s of %s", table.QuoteIdent(cn), table.QuoteIdent(cs)+"."+table.QuoteIdent(tn)))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read information_schema.REFERENTIAL_CONSTRAINTS: %w", err)
	}
	// InnoDB names tables "db/table" (plain names are stored as they are).
	if plainName.MatchString(in.Database) && plainName.MatchString(in.Table) {
		me := in.Database + "/" + in.Table
		rows, err := in.DB.QueryContext(ctx, `SELECT ID, FOR_NAME, REF_NAME FROM information_schema.INNODB_SYS_FOREIGN WHERE FOR_NAME = ? OR REF_NAME = ?`, me, me)
		if err != nil {
			in.logger().Debug("cannot read INNODB_SYS_FOREIGN", "err", err)
			return children, parents, nil
		}
		defer rows.Close()
		for rows.Next() {
			var id, forName, refName string
			if err := rows.Scan(&id, &forName, &refName); err != nil {
				return nil, nil, err
			}
			_, fk, _ := strings.Cut(id, "/")
			if forName == me {
				add(&parents, fmt.Sprintf("%s -> %s", table.QuoteIdent(fk), innodbName(refName)))
			}
			if refName == me {
				add(&children, fmt.Sprintf("%s of %s", table.QuoteIdent(fk), innodbName(forName)))
			}
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	sort.Strings(children)
	sort.Strings(parents)
	return children, parents, nil
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// innodbName renders InnoDB's "db/table" as `db`.`table`.
func innodbName(s string) string {
	db, t, _ := strings.Cut(s, "/")
	return table.QuoteIdent(db) + "." + table.QuoteIdent(t)
}
