package check

import (
	"context"
	"fmt"
)

func init() {
	Register(Check{Name: "triggers", Order: 60, CopyOnly: true, Run: checkTriggers})
}

// checkTriggers refuses a table with triggers: triggers stay with the old
// table when the new one is swapped in, so they would silently stop firing.
func checkTriggers(ctx context.Context, in *Input) error {
	rows, err := in.DB.QueryContext(ctx, `SELECT TRIGGER_NAME FROM information_schema.TRIGGERS
		WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME`, in.Database, in.Table)
	if err != nil {
		return fmt.Errorf("read information_schema.TRIGGERS: %w", err)
	}
	defer rows.Close()
	var trg []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		trg = append(trg, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(trg) == 0 {
		return nil
	}
	return refusef("save them (SHOW CREATE TRIGGER), drop them, run recast, recreate them on the new table; or change the table with a plain ALTER TABLE",
		"%s has triggers (%s): they would stay with the old table at the swap, and recast does not recreate them yet", in.quotedTable(), names(trg))
}
