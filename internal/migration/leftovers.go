package migration

import (
	"context"
	"fmt"
	"time"

	"github.com/recast-osc/recast/internal/checkpoint"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/table"
)

// leftovers returns the helper tables that exist and that this run drops
// before it starts: a table under the old table's name
// (--initially-drop-old-table), an interrupted run's ghost, checkpoint and
// swap-renamed ghost (--initially-drop-ghost-table). Only recast's own
// helper names; never the sentry's (it can hold an original table).
func (m *migrator) leftovers(ctx context.Context) ([]string, error) {
	o := m.opts
	var names []string
	if o.InitiallyDropGhostTable {
		// The checkpoint first (killedAfterSwap).
		names = append(names, checkpoint.TableName(o.Table), GhostName(o.Table), cutover.SwapName(o.Table))
	}
	if o.InitiallyDropOldTable {
		names = append(names, m.oldName)
	}
	var out []string
	for _, n := range names {
		ok, _, err := table.Exists(ctx, m.db, o.Database, n)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// dropLeftovers drops the leftovers. DROP TABLE needs an exclusive metadata
// lock on the table dropped: not the application's table, but a session
// reading it (a DBA's query, a backup) would hold the DROP up, and whatever
// queues on it behind the DROP. So each DROP runs under the cut-over's
// metadata-lock policy: never requested while a known blocker runs, each
// attempt bounded by --cut-over-lock-timeout, blockers killed only as
// --kill-blockers-after allows, given up after --cut-over-budget.
func (m *migrator) dropLeftovers(ctx context.Context) error {
	o := m.opts
	names, err := m.leftovers(ctx)
	if err != nil {
		return err
	}
	waitSecs := max(1, int(o.CutOverLockTimeout/time.Second))
	for _, n := range names {
		q := table.QuoteIdent(o.Database) + "." + table.QuoteIdent(n)
		f, err := mdl.NewFinder(ctx, m.db, mdl.Config{Schema: o.Database, Table: n, LoadPlugin: o.LoadMDLPlugin, Logger: m.rt.Logger})
		if err != nil {
			m.rt.Logger.Warn("cannot look for metadata-lock blockers; the DROP's lock attempts stay bounded by --cut-over-lock-timeout", "table", q, "err", err)
			f = nil
		}
		pol := mdl.Policy{Finder: f, LockWaitTimeout: o.CutOverLockTimeout, Attempts: o.CutOverAttempts, Budget: o.CutOverBudget,
			KillAfter: o.KillBlockersAfter, KillMaxRows: o.KillMaxRows, Logger: m.rt.Logger}
		start := time.Now()
		_, err = mdl.Run(ctx, pol, "drop "+n, func(ctx context.Context) error {
			return execWithLockWait(ctx, m.db, waitSecs, dbconn.Tag+"DROP TABLE IF EXISTS "+q)
		}, dbconn.IsLockTimeout)
		if err != nil {
			return fmt.Errorf("drop the leftover table %s before starting: %w; nothing else was changed", q, err)
		}
		m.rt.Logger.Info("dropped a leftover helper table before starting", "table", q, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
