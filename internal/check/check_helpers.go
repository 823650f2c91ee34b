package check

import (
	"context"
	"fmt"
)

func init() {
	Register(Check{Name: "helper-tables", Order: 90, CopyOnly: true, Run: checkHelpers})
}

// checkHelpers refuses to start when a table under one of recast's helper
// names exists: the ghost or the cut-over sentry left by an interrupted run,
// or the old table kept by an earlier migration (the swap would fail at the
// very end, renaming the old table to a name that is taken).
func checkHelpers(ctx context.Context, in *Input) error {
	for _, h := range []struct {
		name    string
		old     bool
		resumed bool // expected when resuming
	}{{in.GhostName, false, true}, {in.CheckpointName, false, true}, {in.SwapName, false, true}, {in.SentryName, false, true}, {in.OldName, true, false}} {
		if h.name == "" || (h.old && in.DropOld) || (h.resumed && in.Resume) {
			continue
		}
		var n int
		if err := in.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
			in.Database, h.name).Scan(&n); err != nil {
			return fmt.Errorf("look for helper tables: %w", err)
		}
		if n == 0 {
			continue
		}
		if h.old {
			return refusef(fmt.Sprintf("drop it (DROP TABLE %s) or rename it once you no longer need it, or pass --drop-old-table", in.quoted(h.name)),
				"table %s exists: it holds the original of an earlier migration, and this run would keep the old table under that name", in.quoted(h.name))
		}
		fix := fmt.Sprintf("continue that run with the same command plus --resume, or abandon it with `recast cleanup --database %s --table %s` (it keeps the table and %s)",
			in.Database, in.Table, in.quoted(in.OldName))
		if !h.resumed {
			fix = fmt.Sprintf("run `recast cleanup --database %s --table %s` (it keeps the table and %s)", in.Database, in.Table, in.quoted(in.OldName))
		}
		return refusef(fix, "helper table %s already exists: an earlier run on %s was interrupted", in.quoted(h.name), in.quotedTable())
	}
	return nil
}
