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
// very end, renaming the old table to a name that is taken). The run's
// --initially-drop-ghost-table / --initially-drop-old-table let it drop the
// ghost (with the checkpoint and the swap-renamed ghost) / the old table
// instead; the sentry is never dropped that way: a table under its name can
// be the original of an interrupted swap (recast cleanup sorts it out).
func checkHelpers(ctx context.Context, in *Input) error {
	for _, h := range []struct {
		name    string
		old     bool
		resumed bool // expected when resuming
		dropped bool // the run drops it first
	}{
		{in.GhostName, false, true, in.DropGhostFirst}, {in.CheckpointName, false, true, in.DropGhostFirst}, {in.SwapName, false, true, in.DropGhostFirst},
		{in.SentryName, false, true, false}, {in.OldName, true, false, in.DropOldFirst},
	} {
		if h.name == "" || (h.old && in.DropOld) || (h.resumed && in.Resume) || h.dropped {
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
			return refusef(fmt.Sprintf("drop it (DROP TABLE %s) or rename it once you no longer need it, or pass --timestamp-old-table (keep this run's old table under a timestamped name), --initially-drop-old-table (drop it first) or --drop-old-table", in.quoted(h.name)),
				"table %s exists: it holds the original of an earlier migration, and this run would keep the old table under that name", in.quoted(h.name))
		}
		fix := fmt.Sprintf("continue that run with the same command plus --resume, or abandon it with `recast cleanup --database %s --table %s` (it keeps the table and %s)",
			in.Database, in.Table, in.quoted(in.OldName))
		if h.name != in.SentryName {
			fix += " or by passing --initially-drop-ghost-table"
		}
		if !h.resumed {
			fix = fmt.Sprintf("run `recast cleanup --database %s --table %s` (it keeps the table and %s)", in.Database, in.Table, in.quoted(in.OldName))
		}
		return refusef(fix, "helper table %s already exists: an earlier run on %s was interrupted", in.quoted(h.name), in.quotedTable())
	}
	return nil
}
