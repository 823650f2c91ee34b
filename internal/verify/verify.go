// Package verify keeps the proof that the ghost equals the source from the
// checksum up to the swap, so that nothing applied after the checksum goes
// unchecked and no row is lost on the way.
//
// Two things are tracked while the applier runs:
//
//   - Written keys: every identifying key the applier writes or deletes once
//     the checksum has taken its snapshot. Pass compares those rows between
//     the source and the ghost (the checksum's own per-row expressions) and
//     forgets the ones that are equal; the others stay (their event may not
//     be applied yet). A key that was equal and changes again is written
//     again, so it comes back. Final, run under the cut-over's lock after the
//     drain, compares what is left: nothing can be pending then, so any
//     difference is real and the swap is refused.
//
//   - Displaced rows: a row the applier removed from the ghost because the
//     row it wrote holds the same value under one of the ghost's unique keys
//     (package pipeline never lets a REPLACE do that silently). Under a key the
//     source enforces this is transient: the removed row changed after that
//     point and its own event restores it. Under a key the source does not
//     enforce (a new UNIQUE), both rows may really hold the value: writing
//     one silently deleted the other. Restore copies each displaced row back
//     from the source; if that meets the same conflict and the row in the way
//     equals its source row, the source really holds a duplicate under the
//     new key: the server's own ALTER would fail, and so does the migration,
//     naming the key and both rows. Final refuses to swap while a displaced
//     row is neither restored nor rewritten.
package verify

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/table"
)

// Config says what to compare.
type Config struct {
	Source, Ghost *table.Table
	// Mapped columns: source and ghost names, same order.
	SourceColumns, GhostColumns []string
	// Identifying key: source and ghost names, key order: the applier's
	// (pipeline.Config.KeySource), in which it reports written keys and
	// displaced rows.
	KeySource, KeyGhost []string
	// RangeKey: the copy's chunk key (source names), whose bounds Missing
	// takes; nil: KeySource.
	RangeKey []string
	// KeyCharsets: per key column, the source charset when the ghost
	// column's differs (image values are then CONVERTed for the ghost), as
	// pipeline.Config.KeyCharsets.
	KeyCharsets []string
	// KeyExprs: per key column, the applier's template for an image value
	// compared with the ghost's column ("" or missing: none), as
	// pipeline.Config.KeyExprs.
	KeyExprs []string
	// SourceExprs, if set, are the copy's SELECT expressions per mapped
	// column ("" or missing: the column itself); restores copy with them.
	SourceExprs []string
	// SourceExpr and GhostExpr are the per-row CRC expressions
	// (checksum.RowExprs).
	SourceExpr, GhostExpr string
	// Uniques are the ghost's unique keys other than the identifying one.
	Uniques []pipeline.Unique
	// TimeZone is the zone of the sessions the comparisons run in, when it
	// is not UTC ("" when it is): row images carry TIMESTAMPs as UTC text
	// (the applier's sessions run in UTC), so a TIMESTAMP key column's
	// value is converted to that zone before it is compared there. Bound as
	// is, it matched no row on either side, and those rows went unchecked.
	TimeZone string
	Logger   *slog.Logger
}

// ErrDuplicate means the source holds two rows with one value under a
// unique key of the new table: the ALTER cannot be applied to this data.
var ErrDuplicate = errors.New("duplicate under a unique key of the new table")

// ErrDifferent means a row differs between the source and the ghost with
// nothing left to apply (under the cut-over lock).
var ErrDifferent = errors.New("the new table differs from the original")

// ErrPending means displaced rows are neither restored nor rewritten yet;
// the cut-over attempt should be retried after Restore.
var ErrPending = errors.New("rows displaced by the applier are not restored yet")

const batchRows = 200

// Verifier tracks written keys and displaced rows. Its methods are safe for
// concurrent use; Pass, Restore and Final must not run concurrently with each
// other.
type Verifier struct {
	cfg Config

	mu        sync.Mutex
	written   map[string][]any // encoded key -> key (source values from row images)
	displaced []pipeline.Displacement

	checked, restored int64
}

// New returns a Verifier.
func New(cfg Config) *Verifier {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Verifier{cfg: cfg, written: map[string][]any{}}
}

// Written records keys the applier wrote or deleted (pipeline.Config.Written).
func (v *Verifier) Written(keys [][]any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, k := range keys {
		v.written[encode(k)] = k
	}
}

// Displaced records a row the applier removed (pipeline.Config.Displaced).
func (v *Verifier) Displaced(d pipeline.Displacement) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.displaced = append(v.displaced, d)
}

// Stats reports what is still to verify and what was done.
type Stats struct {
	Written, Displaced int   // still pending
	Checked, Restored  int64 // rows verified equal, displaced rows restored
}

// Stats returns the counters.
func (v *Verifier) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Stats{Written: len(v.written), Displaced: len(v.displaced), Checked: v.checked, Restored: v.restored}
}

func (v *Verifier) takeWritten() [][]any {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([][]any, 0, len(v.written))
	for _, k := range v.written {
		out = append(out, k)
	}
	v.written = map[string][]any{}
	return out
}

// Pass compares the written keys' rows, reading the source through src and
// the ghost through ghost, and keeps the ones that differ for a later pass.
// It returns how many rows differed.
func (v *Verifier) Pass(ctx context.Context, src, ghost table.Querier) (int, error) {
	keys := v.takeWritten()
	differ := 0
	for len(keys) > 0 {
		n := min(batchRows, len(keys))
		batch := keys[:n]
		keys = keys[n:]
		diff, err := v.compare(ctx, src, ghost, batch)
		if err != nil {
			v.Written(batch)
			v.Written(keys)
			return differ, err
		}
		differ += len(diff)
		keep := make([][]any, len(diff))
		for i, d := range diff {
			keep[i] = batch[d]
		}
		v.Written(keep)
		v.mu.Lock()
		v.checked += int64(n - len(diff))
		v.mu.Unlock()
	}
	return differ, nil
}

// settled is how many differing rows Settle leaves to the next pass (or
// the cut-over lock): under a steady write load some rows always differ for
// a moment, because their events are on their way.
const settled = 100

// Settle runs passes (and restores) until at most a few written keys differ
// or limit has passed; it returns what still differs. db reads both tables.
func (v *Verifier) Settle(ctx context.Context, db *sql.DB, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		if err := v.Restore(ctx, db); err != nil {
			return 0, err
		}
		differ, err := v.Pass(ctx, db, db)
		if err != nil || differ <= settled || time.Now().After(deadline) {
			return differ, err
		}
		select {
		case <-ctx.Done():
			return differ, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Final runs under the cut-over's lock, after the drain: locked is the
// session holding the lock on the source (the only one that can read it),
// db reads the ghost. Every written key must compare equal and every
// displaced row must be back; otherwise it returns ErrPending (displaced
// rows: retry after Restore) or ErrDifferent (never swap).
func (v *Verifier) Final(ctx context.Context, locked *sql.Conn, db *sql.DB) error {
	v.mu.Lock()
	displaced := v.displaced
	v.mu.Unlock()
	var left []pipeline.Displacement
	for _, d := range displaced {
		inGhost, err := exists(ctx, db, v.cfg.Ghost.QuotedName(), v.cfg.KeyGhost, d.GhostKey)
		if err != nil {
			return err
		}
		inSource := false
		if !inGhost {
			if inSource, err = exists(ctx, locked, v.cfg.Source.QuotedName(), v.cfg.KeySource, d.GhostKey); err != nil {
				return err
			}
		}
		if inSource {
			left = append(left, d)
		}
	}
	v.mu.Lock()
	v.displaced = append(left, v.displaced[len(displaced):]...)
	v.mu.Unlock()
	if len(left) > 0 {
		return fmt.Errorf("%w: %d row(s), e.g. %s (removed for the row %s under key %s)", ErrPending, len(left), left[0].Row, left[0].By, left[0].Key)
	}
	keys := v.takeWritten()
	for len(keys) > 0 {
		n := min(batchRows, len(keys))
		batch := keys[:n]
		keys = keys[n:]
		diff, err := v.compare(ctx, locked, db, batch)
		if err != nil {
			v.Written(batch)
			v.Written(keys)
			return err
		}
		if len(diff) > 0 {
			v.Written(batch)
			v.Written(keys)
			return fmt.Errorf("%w: with every change applied, %d row(s) still differ, e.g. (%s) = (%s); nothing is swapped",
				ErrDifferent, len(diff), strings.Join(v.cfg.KeySource, ","), renderKey(batch[diff[0]]))
		}
		v.mu.Lock()
		v.checked += int64(n)
		v.mu.Unlock()
	}
	return nil
}

// compare returns the indexes in keys whose rows differ (present on one side
// only, or with different CRCs).
func (v *Verifier) compare(ctx context.Context, src, ghost table.Querier, keys [][]any) ([]int, error) {
	s, err := v.crcs(ctx, src, v.cfg.Source, v.cfg.KeySource, nil, nil, v.cfg.SourceExpr, keys)
	if err != nil {
		return nil, err
	}
	g, err := v.crcs(ctx, ghost, v.cfg.Ghost, v.cfg.KeyGhost, v.cfg.KeyCharsets, v.cfg.KeyExprs, v.cfg.GhostExpr, keys)
	if err != nil {
		return nil, err
	}
	var diff []int
	for i := range keys {
		sc, sok := s[i]
		gc, gok := g[i]
		if sok != gok || sc != gc {
			diff = append(diff, i)
		}
	}
	return diff, nil
}

// crcs reads the per-row CRC of each key's row in tbl, by the key's index:
// the keys form a derived table with their ordinals, joined to tbl on the
// key columns, so rows match their keys whatever the key's type.
func (v *Verifier) crcs(ctx context.Context, q table.Querier, t *table.Table, keyCols, charsets, exprs []string, expr string, keys [][]any) (map[int]uint64, error) {
	tbl := t.QuotedName()
	var b strings.Builder
	args := make([]any, 0, len(keys)*(len(keyCols)+1))
	b.WriteString(dbconn.Tag + "SELECT rc__k.rc__i, " + expr + " FROM (")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ? AS rc__i")
		args = append(args, i)
		for j, c := range keyCols {
			ph, n := pipeline.Placeholder(j, charsets, exprs)
			ph, times := v.zoned(t, c, ph)
			n *= times
			fmt.Fprintf(&b, ", %s AS rc__k%d", ph, j)
			for range n {
				args = append(args, k[j])
			}
		}
	}
	b.WriteString(") rc__k JOIN " + tbl + " ON ")
	for j, c := range keyCols {
		if j > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "%s.%s = rc__k.rc__k%d", tbl, table.QuoteIdent(c), j)
	}
	rows, err := q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("verify rows of %s: %w", tbl, err)
	}
	defer rows.Close()
	out := make(map[int]uint64, len(keys))
	for rows.Next() {
		var i int
		var crc uint64
		if err := rows.Scan(&i, &crc); err != nil {
			return nil, err
		}
		out[i] = crc
	}
	return out, rows.Err()
}

// zoned returns ph, the SQL of a value of t's key column c as the applier
// writes it (UTC text for a TIMESTAMP), converted to the comparing
// sessions' zone when c is a TIMESTAMP and that zone is not UTC, and how
// many times the result holds ph. (CONVERT_TZ makes the zero TIMESTAMP
// NULL: it is kept as it is. Under a zone with clock changes the hour
// repeated in autumn stays ambiguous.)
func (v *Verifier) zoned(t *table.Table, c, ph string) (string, int) {
	if v.cfg.TimeZone == "" {
		return ph, 1
	}
	if i := t.ColumnIndex(c); i < 0 || t.Columns[i].DataType != "timestamp" {
		return ph, 1
	}
	return "COALESCE(CONVERT_TZ(" + ph + ", '+00:00', " + dbconn.QuoteString(v.cfg.TimeZone) + "), " + ph + ")", 2
}

// Restore copies displaced rows back from the source. A row that is in the
// ghost again (rewritten by its own event) or gone from the source is done;
// one that still meets another row's unique value stays, unless that other
// row equals its source row: then the source holds the duplicate, and
// Restore returns ErrDuplicate.
func (v *Verifier) Restore(ctx context.Context, db *sql.DB) error {
	v.mu.Lock()
	todo := v.displaced
	v.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	var left []pipeline.Displacement
	for _, d := range todo {
		done, err := v.restoreOne(ctx, db, d)
		if err != nil {
			return err
		}
		if !done {
			left = append(left, d)
		}
	}
	v.mu.Lock()
	v.restored += int64(len(todo) - len(left))
	v.displaced = append(left, v.displaced[len(todo):]...)
	v.mu.Unlock()
	return nil
}

func (v *Verifier) restoreOne(ctx context.Context, db *sql.DB, d pipeline.Displacement) (bool, error) {
	src, gh := v.cfg.Source.QuotedName(), v.cfg.Ghost.QuotedName()
	skey := tupleEq(v.cfg.KeySource)
	var done bool
	var dupErr error
	err := dbconn.Retry(ctx, 10, func(ctx context.Context) error {
		done, dupErr = false, nil
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit: no-op
		// The source row, read with a shared lock (as the copier does): it
		// cannot change until the ghost has this very state.
		res, err := tx.ExecContext(ctx, dbconn.Tag+"INSERT IGNORE INTO "+gh+" ("+table.QuoteIdents(v.cfg.GhostColumns)+") SELECT "+
			v.selectList()+" FROM "+src+" WHERE "+skey+" LOCK IN SHARE MODE", d.GhostKey...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			done = true
			return tx.Commit()
		}
		inSource, err := exists(ctx, tx, src, v.cfg.KeySource, d.GhostKey)
		if err != nil {
			return err
		}
		inGhost, err := exists(ctx, tx, gh, v.cfg.KeyGhost, d.GhostKey)
		if err != nil {
			return err
		}
		if !inSource || inGhost {
			done = true
			return tx.Commit()
		}
		// Still in the way: which row, and is it current?
		other, key, err := v.conflicting(ctx, tx, d.GhostKey)
		if err != nil || other == nil {
			return err
		}
		diff, err := v.compare(ctx, tx, tx, [][]any{other})
		if err != nil {
			return err
		}
		if len(diff) == 0 {
			srcRow, err := v.renderSource(ctx, tx, d.GhostKey)
			if err != nil {
				return err
			}
			otherRow, err := v.renderSource(ctx, tx, other)
			if err != nil {
				return err
			}
			dupErr = fmt.Errorf("%w %s: the original table has rows (%s) and (%s) with the same value under it; the server's own ALTER would fail with a duplicate-key error too. Remove the duplicate or change the ALTER; the original table is untouched",
				ErrDuplicate, table.QuoteIdent(key), srcRow, otherRow)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("restore a displaced row of %s: %w", gh, err)
	}
	return done, dupErr
}

// selectList is the copy's SELECT list over the mapped source columns.
func (v *Verifier) selectList() string {
	out := make([]string, len(v.cfg.SourceColumns))
	for i, c := range v.cfg.SourceColumns {
		out[i] = table.QuoteIdent(c)
		if i < len(v.cfg.SourceExprs) && v.cfg.SourceExprs[i] != "" {
			out[i] = v.cfg.SourceExprs[i]
		}
	}
	return strings.Join(out, ", ")
}

// conflicting finds the ghost row that holds the source row key's values
// under one of the Uniques; nil when none is found.
func (v *Verifier) conflicting(ctx context.Context, q table.Querier, key []any) ([]any, string, error) {
	src, gh := v.cfg.Source.QuotedName(), v.cfg.Ghost.QuotedName()
	for _, u := range v.cfg.Uniques {
		var conds []string
		ok := true
		for _, c := range u.Columns {
			i := slices.Index(v.cfg.GhostColumns, c)
			if i < 0 {
				ok = false
				break
			}
			conds = append(conds, "g."+table.QuoteIdent(c)+" = "+v.underGhostCollation(c, "s."+table.QuoteIdent(v.cfg.SourceColumns[i])))
		}
		if !ok {
			continue
		}
		gk := make([]string, len(v.cfg.KeyGhost))
		for i, c := range v.cfg.KeyGhost {
			gk[i] = "g." + table.QuoteIdent(c)
		}
		sk := make([]string, len(v.cfg.KeySource))
		for i, c := range v.cfg.KeySource {
			sk[i] = "s." + table.QuoteIdent(c) + " = ?"
		}
		query := dbconn.Tag + "SELECT " + strings.Join(gk, ", ") + " FROM " + gh + " g JOIN " + src + " s ON " +
			strings.Join(sk, " AND ") + " WHERE " + strings.Join(conds, " AND ") + " LIMIT 1"
		found, err := firstKey(ctx, q, query, len(gk), key)
		if err != nil {
			return nil, "", err
		}
		if found != nil {
			return found, u.Name, nil
		}
	}
	return nil, "", nil
}

// underGhostCollation is the source value expr of ghost column c as the
// new unique key compares it: in c's character set and collation, where
// they differ from the source column's (a key made case-insensitive finds
// the row in the way; compared as they are, a _bin source column's
// collation would win and miss it).
func (v *Verifier) underGhostCollation(c, expr string) string {
	if v.cfg.Ghost == nil || v.cfg.Source == nil {
		return expr
	}
	gi := v.cfg.Ghost.ColumnIndex(c)
	if gi < 0 {
		return expr
	}
	gc := v.cfg.Ghost.Columns[gi]
	if gc.Charset == "" || gc.Collation == "" {
		return expr
	}
	if si := v.cfg.Source.ColumnIndex(v.sourceOf(c)); si >= 0 {
		sc := v.cfg.Source.Columns[si]
		if strings.EqualFold(sc.Charset, gc.Charset) && strings.EqualFold(sc.Collation, gc.Collation) {
			return expr
		}
	}
	return "CONVERT(" + expr + " USING " + gc.Charset + ") COLLATE " + gc.Collation
}

// sourceOf is the source column mapped to ghost column c ("" if none).
func (v *Verifier) sourceOf(c string) string {
	if i := slices.Index(v.cfg.GhostColumns, c); i >= 0 && i < len(v.cfg.SourceColumns) {
		return v.cfg.SourceColumns[i]
	}
	return ""
}

// firstKey reads the first row of query (n raw columns), or nil.
func firstKey(ctx context.Context, q table.Querier, query string, n int, args []any) ([]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.RawBytes, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	found := make([]any, n)
	for i := range vals {
		found[i] = append([]byte(nil), vals[i]...)
	}
	return found, nil
}

func (v *Verifier) renderSource(ctx context.Context, q table.Querier, key []any) (string, error) {
	parts := make([]string, len(v.cfg.SourceColumns))
	for i, c := range v.cfg.SourceColumns {
		parts[i] = "CONCAT(" + dbconn.QuoteString(c+"=") + ", QUOTE(" + table.QuoteIdent(c) + "))"
	}
	var s string
	err := q.QueryRowContext(ctx, dbconn.Tag+"SELECT CONCAT_WS(', ', "+strings.Join(parts, ", ")+") FROM "+
		v.cfg.Source.QuotedName()+" WHERE "+tupleEq(v.cfg.KeySource), key...).Scan(&s)
	return s, err
}

func exists(ctx context.Context, q table.Querier, tbl string, keyCols []string, key []any) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, dbconn.Tag+"SELECT COUNT(*) FROM "+tbl+" WHERE "+tupleEq(keyCols), key...).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

func tupleEq(cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = table.QuoteIdent(c) + " = ?"
	}
	return strings.Join(parts, " AND ")
}

func renderKey(k []any) string {
	parts := make([]string, len(k))
	for i, x := range k {
		switch y := x.(type) {
		case []byte:
			parts[i] = fmt.Sprintf("%q", y)
		case string:
			parts[i] = fmt.Sprintf("%q", y)
		default:
			parts[i] = fmt.Sprint(y)
		}
	}
	return strings.Join(parts, ",")
}

// encode renders a key so that two keys encode equally exactly when their
// values are equal with the same Go types.
func encode(k []any) string {
	var b []byte
	for _, x := range k {
		switch y := x.(type) {
		case nil:
			b = append(b, 0)
		case int64:
			b = binary.BigEndian.AppendUint64(append(b, 1), uint64(y))
		case uint64:
			b = binary.BigEndian.AppendUint64(append(b, 2), y)
		case []byte:
			b = append(binary.AppendUvarint(append(b, 3), uint64(len(y))), y...)
		case string:
			b = append(binary.AppendUvarint(append(b, 4), uint64(len(y))), y...)
		case float64:
			b = binary.BigEndian.AppendUint64(append(b, 5), math.Float64bits(y))
		default:
			s := fmt.Sprintf("%T:%v", y, y)
			b = append(binary.AppendUvarint(append(b, 6), uint64(len(s))), s...)
		}
	}
	return string(b)
}

// Missing looks for rows of the source range (lo, hi] that are not in the
// ghost (a copy chunk's INSERT IGNORE skips a row another row's unique value
// stands in the way of) and records them as displaced, to be restored or
// proven duplicates like the applier's. Rows merely not applied yet are
// found too; Restore settles them. Only tables with Uniques need this.
func (v *Verifier) Missing(ctx context.Context, db *sql.DB, lo, hi []any) error {
	guarded := false
	for _, u := range v.cfg.Uniques {
		guarded = guarded || !u.Enforced
	}
	if !guarded {
		return nil // INSERT IGNORE skips only rows whose own events rewrite them
	}
	// The range's column names are unqualified: in the outer WHERE they
	// can only mean s's columns.
	rk := v.cfg.RangeKey
	if rk == nil {
		rk = v.cfg.KeySource
	}
	where, args := table.RangeWhere(rk, lo, hi)
	var on []string
	for i, c := range v.cfg.KeyGhost {
		on = append(on, "g."+table.QuoteIdent(c)+" = s."+table.QuoteIdent(v.cfg.KeySource[i]))
	}
	q := dbconn.Tag + "SELECT " + strings.Join(quotedPrefixed("s.", v.cfg.KeySource), ", ") + " FROM " + v.cfg.Source.QuotedName() + " s WHERE " + where +
		" AND NOT EXISTS (SELECT 1 FROM " + v.cfg.Ghost.QuotedName() + " g WHERE " + strings.Join(on, " AND ") + ")"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("look for rows the copy skipped: %w", err)
	}
	defer rows.Close()
	var found []pipeline.Displacement
	for rows.Next() {
		vals := make([]sql.RawBytes, len(v.cfg.KeySource))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		key := make([]any, len(vals))
		for i := range vals {
			key[i] = append([]byte(nil), vals[i]...)
		}
		found = append(found, pipeline.Displacement{Key: "(a unique key)", GhostKey: key, Row: "(" + renderKey(key) + ")", By: "the copy"})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, d := range found {
		v.Displaced(d)
	}
	return nil
}

func quotedPrefixed(alias string, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = alias + table.QuoteIdent(c)
	}
	return out
}
