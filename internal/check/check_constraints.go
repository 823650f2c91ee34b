package check

import (
	"context"
	"fmt"
	"regexp"
)

func init() {
	Register(Check{Name: "check-constraint-names", Order: 75, CopyOnly: true, Run: checkConstraintNames})
}

// checkConstraintNames refuses, on MySQL, a table with a CHECK constraint
// named by its user: CREATE TABLE … LIKE, which builds the new table, gives
// every CHECK constraint a generated name (T_chk_N; names are unique in a
// schema, so the old one cannot be kept while the old table exists), while
// the server's ALTER keeps the name. MariaDB's names are the table's own,
// and LIKE keeps them.
func checkConstraintNames(ctx context.Context, in *Input) error {
	if in.Flavor != "mysql" {
		return nil
	}
	rows, err := in.DB.QueryContext(ctx, `SELECT CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_TYPE = 'CHECK' ORDER BY CONSTRAINT_NAME`, in.Database, in.Table)
	if err != nil {
		return fmt.Errorf("read information_schema.TABLE_CONSTRAINTS: %w", err)
	}
	defer rows.Close()
	generated := regexp.MustCompile(`^` + regexp.QuoteMeta(in.Table) + `_chk_[0-9]+$`)
	var named []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		if !generated.MatchString(n) {
			named = append(named, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(named) == 0 {
		return nil
	}
	return refusef("change the table with the server's own ALTER TABLE, or drop the constraints and add them back unnamed (or after recast)",
		"%s has CHECK constraints named %s: MySQL's CREATE TABLE … LIKE, which recast builds the new table with, gives them generated names (%s_chk_N), and the swapped-in table would lose the names the server's ALTER keeps", in.quotedTable(), names(named), in.Table)
}
