package check

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "table", Order: 40, Run: checkTable})
}

// checkTable: the table exists, is a base table and uses InnoDB; it loads
// the table's definition into in.Source.
func checkTable(ctx context.Context, in *Input) error {
	var typ string
	var engine sql.NullString
	err := in.DB.QueryRowContext(ctx, `SELECT TABLE_TYPE, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		in.Database, in.Table).Scan(&typ, &engine)
	if errors.Is(err, sql.ErrNoRows) {
		fix := "check --database and --table (names are case-sensitive)"
		var other string
		if in.DB.QueryRowContext(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND LOWER(TABLE_NAME) = LOWER(?) LIMIT 1`,
			in.Database, in.Table).Scan(&other) == nil {
			fix = fmt.Sprintf("did you mean --table %s? (names are case-sensitive)", other)
		}
		return refusef(fix, "table %s does not exist", in.quotedTable())
	}
	if err != nil {
		return fmt.Errorf("read %s from information_schema.TABLES: %w", in.quotedTable(), err)
	}
	switch typ {
	case "BASE TABLE", "SYSTEM VERSIONED": // the versioning check refuses the latter
	case "VIEW":
		return refusef("ALTER the view's base table instead (SHOW CREATE VIEW shows it)",
			"%s is a view: there are no rows of its own to copy", in.quotedTable())
	case "SEQUENCE":
		return refusef("change a sequence with ALTER SEQUENCE",
			"%s is a sequence, not a table", in.quotedTable())
	default:
		return refusef("recast changes base tables only",
			"%s is a %s, not a base table", in.quotedTable(), strings.ToLower(typ))
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return refusef(fmt.Sprintf("convert it first (ALTER TABLE %s ENGINE=InnoDB), or change it with a plain ALTER TABLE", in.quotedTable()),
			"%s uses the %s engine: recast copies InnoDB tables only (its row locks and consistent reads make the online copy safe)",
			in.quotedTable(), engine.String)
	}
	src, err := table.Load(ctx, in.DB, in.Database, in.Table)
	if err != nil {
		return err
	}
	in.Source = src
	return nil
}
