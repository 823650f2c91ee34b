package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/verify"
)

// ghostUniques are the ghost's unique keys other than the identifying one:
// the keys under which a row the applier writes could meet another row.
func ghostUniques(p *Plan) []pipeline.Unique {
	var out []pipeline.Unique
	for _, ix := range p.Ghost.Indexes {
		if !ix.Enforced || (ix.Unique && (slices.Equal(ix.Columns, p.KeyGhost) || slices.Equal(ix.Columns, p.ApplyKeyGhost))) {
			continue
		}
		out = append(out, pipeline.Unique{Name: ix.Name, Columns: ix.Columns, Enforced: ix.Unique && enforcedBySource(p, ix.Columns)})
	}
	return out
}

// enforcedBySource reports whether a unique key of the source (over whole
// columns) has all its columns among the ghost columns cols, each copied
// unchanged (same type, collation and nullability): then the source cannot
// hold two rows equal under cols either.
func enforcedBySource(p *Plan, cols []string) bool {
	ghostOf := map[string]string{}
	for _, pr := range p.Pairs {
		ghostOf[pr.Source] = pr.Ghost
	}
	for _, s := range p.Source.Indexes {
		if !s.Unique {
			continue
		}
		ok := true
		for _, sc := range s.Columns {
			gc, mapped := ghostOf[sc]
			si, gi := p.Source.ColumnIndex(sc), p.Ghost.ColumnIndex(gc)
			if !mapped || !slices.Contains(cols, gc) || si < 0 || gi < 0 {
				ok = false
				break
			}
			a, b := p.Source.Columns[si], p.Ghost.Columns[gi]
			if a.ColumnType != b.ColumnType || a.Collation != b.Collation || a.Nullable != b.Nullable {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// newVerifier returns the verifier that keeps the ghost proven equal to the
// source from the checksum to the swap (package verify).
func (m *migrator) newVerifier(plan *Plan) *verify.Verifier {
	cs := checksum.Config{
		Source: m.source, Ghost: plan.Ghost,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
		KeySource: plan.KeySource, KeyGhost: plan.KeyGhost, KeyIndex: plan.KeyIndex,
	}
	srcExpr, ghExpr := checksum.RowExprs(cs)
	// The applier's key (it reports written keys and displaced rows in it):
	// a widened key may not start with the copy's (PRIMARY KEY (id) ->
	// (k, id)).
	var keyCharsets []string
	for i, k := range plan.ApplyKeySource {
		keyCharsets = append(keyCharsets, convertFrom(m.source, plan.Ghost, k, plan.ApplyKeyGhost[i]))
	}
	zone := m.sem.TimeZone // the pool's sessions'
	if m.sem.UTC {
		zone = ""
	}
	return verify.New(verify.Config{
		Source: m.source, Ghost: plan.Ghost, TimeZone: zone,
		SourceColumns: pairSources(plan), GhostColumns: pairGhosts(plan), SourceExprs: plan.CopyExprs,
		KeySource: plan.ApplyKeySource, KeyGhost: plan.ApplyKeyGhost, KeyCharsets: keyCharsets, KeyExprs: plan.KeyExprs, RangeKey: plan.KeySource,
		SourceExpr: srcExpr, GhostExpr: ghExpr,
		Uniques: ghostUniques(plan), Logger: m.rt.Logger,
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
	m.rt.Logger.Debug("verified rows written since the checksum", "checked", st.Checked, "pending", st.Written,
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
		m.rt.Logger.Info("verified under lock", "rows", pending, "took", time.Since(start).Round(time.Microsecond))
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
