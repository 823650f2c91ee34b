package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/recast-osc/recast/internal/apply"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/verify"
)

// ghostUniques are the ghost's unique keys other than the identifying one:
// the keys under which a row the applier writes could meet another row.
func ghostUniques(p *Plan) []apply.Unique {
	var out []apply.Unique
	for _, ix := range p.Ghost.Indexes {
		if !ix.Unique || slices.Equal(ix.Columns, p.KeyGhost) {
			continue
		}
		out = append(out, apply.Unique{Name: ix.Name, Columns: ix.Columns})
	}
	return out
}

// newVerifier returns the verifier that keeps the ghost proven equal to the
// source from the checksum to the swap (package verify).
func (m *migrator) newVerifier(plan *Plan) *verify.Verifier {
	cs := checksum.Config{
		Source: m.source, Ghost: plan.Ghost,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan),
		KeySource: plan.KeySource, KeyGhost: plan.KeyGhost, KeyIndex: plan.KeyIndex,
	}
	srcExpr, ghExpr := checksum.RowExprs(cs)
	var keyCharsets []string
	for i, k := range plan.KeySource {
		keyCharsets = append(keyCharsets, convertFrom(m.source, plan.Ghost, k, plan.KeyGhost[i]))
	}
	return verify.New(verify.Config{
		Source: m.source, Ghost: plan.Ghost,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan),
		KeySource: plan.KeySource, KeyGhost: plan.KeyGhost, KeyCharsets: keyCharsets,
		SourceExpr: srcExpr, GhostExpr: ghExpr,
		Uniques: ghostUniques(plan), Logger: m.opts.Logger,
	})
}

// keepVerified restores displaced rows and verifies the rows written since
// the last pass: run after the checksum, while the cut-over is postponed and
// before each cut-over attempt, so that what is left for the lock is small.
func (m *migrator) keepVerified(ctx context.Context, v *verify.Verifier, limit time.Duration) error {
	differ, err := v.Settle(ctx, m.db, limit)
	if err != nil {
		return err
	}
	st := v.Stats()
	m.opts.Logger.Debug("verified rows written since the checksum", "checked", st.Checked, "pending", st.Written,
		"differing_now", differ, "displaced", st.Displaced, "restored", st.Restored)
	return nil
}

// verifyUnderLock is the cut-over's last check, on the locking session after
// the drain: the rows written since the last pass must equal the source's,
// and no displaced row may be missing.
func (m *migrator) verifyUnderLock(v *verify.Verifier) func(ctx context.Context, locked *sql.Conn) error {
	return func(ctx context.Context, locked *sql.Conn) error {
		start := time.Now()
		pending := v.Stats().Written
		err := v.Final(ctx, locked, m.db)
		if errors.Is(err, verify.ErrPending) {
			return fmt.Errorf("%w: %w", cutover.ErrRetry, err)
		}
		if err != nil {
			return fmt.Errorf("verification under the cut-over lock: %w", err)
		}
		m.opts.Logger.Info("verified under lock", "rows", pending, "took", time.Since(start).Round(time.Microsecond))
		return nil
	}
}

// chainUnderLock runs hooks in order, stopping at the first error.
func chainUnderLock(hooks ...func(context.Context, *sql.Conn) error) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, c *sql.Conn) error {
		for _, h := range hooks {
			if h == nil {
				continue
			}
			if err := h(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
}
