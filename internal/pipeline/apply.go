// Package pipeline is the change pipeline: the pump (pump.go) reads the
// binlog stream and feeds the applier, which writes the watched table's row
// changes to the ghost table straight from their row images, never reading
// the source table.
//
// Changes are gathered into windows. Within a window only the last image of
// each key is kept (a row written 1,000 times is written once), and the
// window's surviving operations are split by key over Workers connections,
// each sending multi-row DELETE and REPLACE statements. A window is applied
// completely before the next one starts; its end position is then "applied".
//
// Why this converges to the source (the invariant the tests check): the last
// image of a key in a window is that row's state at the window's end, so the
// images written in one window are a consistent snapshot of the rows they
// touch and cannot collide with each other on any unique key the source
// enforces. A REPLACE may still delete a ghost row that holds a stale or
// not-yet-current unique value; such a row differs from the source at the
// window's end, so it has an event of its own at or after that point, which a
// later window applies. Order across workers inside a window therefore does
// not matter, and order across windows is binlog order.
//
// Keys whose values can be equal without being byte-equal (character columns
// under a case-insensitive or PAD SPACE collation: 'A' = 'a', 'x' = 'x ')
// cannot be partitioned by their bytes: two spellings of one row could land
// on different workers. Such tables use one worker. Coalescing by exact bytes
// stays correct there if deletes run before replaces: row images carry the
// stored bytes, so among the spellings of one row seen in a window, the last
// operation of every spelling but the row's final one is a delete (it stopped
// being stored), and the final spelling's last operation is a replace, or a
// delete if the row is gone. Deleting first and replacing last leaves exactly
// the final state.
package pipeline

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Config describes what to write where.
type Config struct {
	Ghost string // quoted `schema`.`table` of the ghost
	// Source column ordinals written, and the ghost columns they go to.
	SourceColumns []int
	GhostColumns  []string
	// The identifying key: source column ordinals and ghost column names, in key order.
	KeySource []int
	KeyGhost  []string
	// Charsets, per written column (and per key column), name the source
	// column's character set when the ghost column's differs: row images
	// carry raw bytes in the source charset, so such values are written as
	// CONVERT(? USING charset) and the server converts them. Empty: as is.
	Charsets    []string
	KeyCharsets []string
	// Exprs, per written column (and KeyExprs per key column), are SQL
	// templates written instead of a plain placeholder, each "?" in them
	// standing for the column's value (e.g. a time-zone conversion that the
	// server's own ALTER makes). Empty: as Charsets says. They win over
	// Charsets.
	Exprs    []string
	KeyExprs []string
	// Ordered forces one worker (set when any key column is collation-sensitive).
	Ordered bool
	// Workers is the number of parallel writer connections (ignored when Ordered).
	Workers int
	// BatchRows and BatchBytes cap one statement.
	BatchRows  int
	BatchBytes int
	// WindowRows caps the operations gathered before a window is applied.
	WindowRows int
	// Uniques are the ghost's unique keys other than the identifying one.
	// With none, a REPLACE can only meet the row of its own key and is
	// used as is. With some, a REPLACE could silently delete another row
	// that holds the same unique value (under a key the source may not
	// enforce: data loss), so rows are written by DELETE of their own key
	// and INSERT, and a conflict displaces the other row explicitly: it is
	// removed, reported to Displaced, and must be restored or proven to be
	// a duplicate the source holds (package verify) before the swap.
	Uniques []Unique
	// Displaced receives each row removed from the ghost because a written
	// row took its unique value. Called from the goroutine that flushes.
	Displaced func(Displacement)
	// Written, if set, receives the identifying key (source values, in key
	// order) of every row written or deleted, once its window is applied
	// and only while tracking is on (StartTracking).
	Written func(keys [][]any)
	Logger  *slog.Logger
}

// Unique is one unique key of the ghost.
type Unique struct {
	Name    string
	Columns []string // ghost column names, key order
	// Enforced: a unique key of the source implies this one, so a row in
	// the way under it is one whose own later event rewrites it (removing
	// it is what REPLACE does, and is safe). Tables whose Uniques are all
	// Enforced are written with REPLACE.
	Enforced bool
}

// Displacement is a ghost row removed by the applier because the row it
// wrote holds the same value under a unique key.
type Displacement struct {
	Key      string // unique key name
	GhostKey []any  // the removed row's identifying key, as read from the ghost (KeyGhost order)
	Row      string // the removed row, rendered for messages
	By       string // the row written in its place, rendered for messages

	enforced bool // under a key the source enforces: not reported
}

// Applier gathers row changes into windows and applies them.
type Applier struct {
	db  *sql.DB
	cfg Config

	mu      sync.Mutex
	window  *window
	applied binlog.Position
	waiters []chan struct{}

	// hurry wakes the pump's flusher before its window time is up: a
	// caller waits for a position (WaitApplied) or the window is full.
	hurry chan struct{}
	eager atomic.Bool // SetEager

	seed maphash.Seed

	tracking atomic.Bool

	// counters for progress reporting
	eventsIn  atomic.Int64 // row changes received
	rowsOut   atomic.Int64 // rows written (after coalescing)
	stmtCount atomic.Int64
	retries   atomic.Int64 // statements tried again (deadlock, lock wait timeout, lost connection)
}

// noteRetry counts a statement's failure that Retry tries again after.
func (a *Applier) noteRetry(err error) {
	if err != nil && dbconn.Retryable(err) {
		a.retries.Add(1)
		a.cfg.Logger.Debug("applier: statement failed, trying again", "errno", dbconn.Number(err), "err", err)
	}
}

// New returns an Applier writing through db.
func New(db *sql.DB, cfg Config) (*Applier, error) {
	if cfg.Ghost == "" || len(cfg.SourceColumns) == 0 || len(cfg.SourceColumns) != len(cfg.GhostColumns) {
		return nil, fmt.Errorf("apply: ghost table and column mapping are required")
	}
	if len(cfg.KeySource) == 0 || len(cfg.KeySource) != len(cfg.KeyGhost) {
		return nil, fmt.Errorf("apply: an identifying key is required")
	}
	if cfg.Workers < 1 || cfg.Ordered {
		cfg.Workers = 1
	}
	if cfg.BatchRows <= 0 {
		cfg.BatchRows = 500
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 4 << 20
	}
	if cfg.WindowRows <= 0 {
		cfg.WindowRows = 20000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Applier{db: db, cfg: cfg, seed: maphash.MakeSeed(), hurry: make(chan struct{}, 1)}
	a.window = a.newWindow()
	return a, nil
}

// op is one operation on one key: delete the row, or replace it with image.
type op struct {
	key    string
	delete bool
	image  []any // source row (full image); for delete the before image
	bytes  int
}

type window struct {
	byKey map[string]int // exact key -> index in ops (exact mode only)
	ops   []op
	end   binlog.Position
	empty bool
}

func (a *Applier) newWindow() *window {
	return &window{byKey: map[string]int{}, empty: true}
}

// Add records one stream event. It returns true when the current window is
// full and should be flushed.
func (a *Applier) Add(ev binlog.Event) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.window
	for _, rc := range ev.Rows {
		a.eventsIn.Add(1)
		switch rc.Kind {
		case binlog.Insert:
			a.put(w, op{key: a.keyOf(rc.After), image: rc.After})
		case binlog.Delete:
			a.put(w, op{key: a.keyOf(rc.Before), delete: true, image: rc.Before})
		case binlog.Update:
			kb, ka := a.keyOf(rc.Before), a.keyOf(rc.After)
			if kb != ka {
				a.put(w, op{key: kb, delete: true, image: rc.Before})
			}
			a.put(w, op{key: ka, image: rc.After})
		}
	}
	if ev.Boundary && !ev.Pos.IsZero() { // Applied() is always a transaction boundary
		w.end = ev.Pos
		w.empty = false
	}
	full := len(w.ops) >= a.cfg.WindowRows
	if full {
		a.wake()
	}
	return full
}

// wake asks the pump's flusher to apply the window now.
func (a *Applier) wake() {
	select {
	case a.hurry <- struct{}{}:
	default:
	}
}

// Hurry receives when the window should be applied before its time is up
// (Urgent says whether that still holds).
func (a *Applier) Hurry() <-chan struct{} { return a.hurry }

// Urgent says whether the window should be applied without waiting for it
// to fill: a caller waits for a position (WaitApplied), it is full, or the
// applier is eager.
func (a *Applier) Urgent() bool {
	if a.eager.Load() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiters) > 0 || len(a.window.ops) >= a.cfg.WindowRows
}

// SetEager makes every window urgent from now on: the cut-over's drain under
// its lock then finds at most a few milliseconds of changes to apply, not a
// whole window's time of them.
func (a *Applier) SetEager() {
	a.eager.Store(true)
	a.wake()
}

func (a *Applier) put(w *window, o op) {
	o.bytes = imageBytes(o.image)
	if i, ok := w.byKey[o.key]; ok {
		w.ops[i] = o
		return
	}
	w.byKey[o.key] = len(w.ops)
	w.ops = append(w.ops, o)
}

// Pending is the number of operations waiting in the current window.
func (a *Applier) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.window.ops)
}

// Flush applies the current window. Only one Flush may run at a time; Add may
// be called concurrently and goes into the next window.
func (a *Applier) Flush(ctx context.Context) error {
	a.mu.Lock()
	w := a.window
	a.window = a.newWindow()
	a.mu.Unlock()
	if w.empty && len(w.ops) == 0 {
		return nil
	}
	if err := a.applyWindow(ctx, w); err != nil {
		return err
	}
	a.mu.Lock()
	if !w.end.IsZero() && w.end.Compare(a.applied) > 0 {
		a.applied = w.end
	}
	waiters := a.waiters
	a.waiters = nil
	a.mu.Unlock()
	for _, c := range waiters {
		close(c)
	}
	return nil
}

// Applied is the position through which every change has been applied.
func (a *Applier) Applied() binlog.Position {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// SetApplied sets the starting position (nothing before it needs applying).
func (a *Applier) SetApplied(p binlog.Position) {
	a.mu.Lock()
	a.applied = p
	a.mu.Unlock()
}

// WaitApplied blocks until Applied() >= p or ctx ends.
func (a *Applier) WaitApplied(ctx context.Context, p binlog.Position) error {
	for {
		a.mu.Lock()
		if a.applied.Compare(p) >= 0 {
			a.mu.Unlock()
			return nil
		}
		c := make(chan struct{})
		a.waiters = append(a.waiters, c)
		a.mu.Unlock()
		a.wake()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c:
		}
	}
}

// Stats are counters for progress reporting.
type Stats struct {
	Changes    int64 // row changes received
	Rows       int64 // rows written after coalescing
	Statements int64
	Retries    int64 // statements tried again (deadlocks, lock wait timeouts, lost connections)
}

// Stats returns the counters.
func (a *Applier) Stats() Stats {
	return Stats{Changes: a.eventsIn.Load(), Rows: a.rowsOut.Load(), Statements: a.stmtCount.Load(), Retries: a.retries.Load()}
}

// StartTracking turns on the Written callback for windows applied from now on.
func (a *Applier) StartTracking() { a.tracking.Store(true) }

func (a *Applier) applyWindow(ctx context.Context, w *window) error {
	if err := a.applyParallel(ctx, w); err != nil {
		return err
	}
	if a.cfg.Written != nil && a.tracking.Load() && len(w.ops) > 0 {
		keys := make([][]any, len(w.ops))
		for i, o := range w.ops {
			k := make([]any, len(a.cfg.KeySource))
			for j, c := range a.cfg.KeySource {
				k[j] = o.image[c]
			}
			keys[i] = k
		}
		a.cfg.Written(keys)
	}
	return nil
}

func (a *Applier) applyParallel(ctx context.Context, w *window) error {
	var deferred []op // rows whose INSERT met another row's unique value
	var serial []op   // operations a worker left when its statement deadlocked
	var dmu sync.Mutex
	run := func(ctx context.Context, ops []op, yield bool) error {
		conflicts, err := a.applyUnordered(ctx, ops, yield)
		dmu.Lock()
		defer dmu.Unlock()
		deferred = append(deferred, conflicts...)
		var y *yielded
		if errors.As(err, &y) {
			serial = append(serial, y.rest...)
			return nil
		}
		return err
	}
	if workers := a.workersFor(len(w.ops)); workers == 1 {
		if err := run(ctx, w.ops, false); err != nil {
			return err
		}
	} else {
		parts := make([][]op, workers)
		for _, o := range w.ops {
			i := maphash.String(a.seed, o.key) % uint64(workers)
			parts[i] = append(parts[i], o)
		}
		g, gctx := errgroup.WithContext(ctx)
		for _, p := range parts {
			if len(p) == 0 {
				continue
			}
			g.Go(func() error { return run(gctx, p, true) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		// What deadlocked workers left, written by one once the others
		// are done: no one to deadlock with (retried in parallel, each
		// after a growing backoff, the workers met each other again and
		// again: docs/applier.md).
		if len(serial) > 0 {
			a.cfg.Logger.Debug("applier: operations left by deadlocked workers are written by one", "ops", len(serial))
			if err := run(ctx, serial, false); err != nil {
				return err
			}
		}
	}
	// The statements that met a duplicate are written again together once
	// every other row of the window is in: rows that traded unique values
	// (a swap split between workers or statements) then delete and insert
	// as one, where written apart each waits on the other's old value.
	// What still conflicts is resolved one row at a time.
	deferred, err := a.writeGuarded(ctx, deferred, true)
	if err != nil {
		return err
	}
	for _, o := range deferred {
		if err := a.writeDisplacing(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// minOpsPerWorker: a window is split over more workers only when each gets
// at least this many operations. Every worker writes its share in statements
// of its own, each an autocommit transaction that the primary commits and
// every replica replays (serially, on a replica that applies in order): at a
// light load, windows of a few dozen rows split four ways were three such
// transactions per application transaction (docs/applier.md, *Windows*).
const minOpsPerWorker = 100

// workersFor is the number of workers a window of n operations is split over.
func (a *Applier) workersFor(n int) int {
	return min(a.cfg.Workers, max(1, n/minOpsPerWorker))
}

// applyUnordered writes operations on distinct keys: deletes, then replaces
// (the order the single-worker collation case relies on). It returns the
// replaces of the statements that met another row's unique value (only with
// Uniques).
//
// With yield (a worker among others), a statement chosen as a deadlock's
// victim is not tried again: the error is a *yielded holding every
// operation not written yet, for one worker to write after the others.
func (a *Applier) applyUnordered(ctx context.Context, ops []op, yield bool) ([]op, error) {
	var dels, reps []op
	for _, o := range ops {
		if o.delete {
			dels = append(dels, o)
		} else {
			reps = append(reps, o)
		}
	}
	if err := a.writeRuns(ctx, dels, yield); err != nil {
		var y *yielded
		if errors.As(err, &y) {
			return nil, &yielded{rest: append(y.rest, reps...)}
		}
		return nil, err
	}
	if a.guarded() {
		return a.writeGuarded(ctx, reps, false)
	}
	return nil, a.writeRuns(ctx, reps, yield)
}

// yielded: a worker's statement was a deadlock's victim (rolled back);
// rest are the operations it has not written, that statement's included.
type yielded struct{ rest []op }

func (y *yielded) Error() string {
	return fmt.Sprintf("deadlock: %d operation(s) left for one worker", len(y.rest))
}

// writeRuns writes ops (all of one kind) in statements capped by rows and
// bytes. With yield, a deadlock returns a *yielded (applyUnordered).
func (a *Applier) writeRuns(ctx context.Context, ops []op, yield bool) error {
	for len(ops) > 0 {
		n := a.batchLen(ops)
		batch := ops[:n]
		ops = ops[n:]
		var query string
		var args []any
		if batch[0].delete {
			query, args = a.deleteStmt(batch)
		} else {
			query, args = a.writeStmt("REPLACE", batch)
		}
		attempt := func(ctx context.Context) error {
			err := a.onConn(ctx, func(ctx context.Context, conn *sql.Conn) error {
				_, err := conn.ExecContext(ctx, query, args...)
				return err
			})
			a.noteRetry(err)
			return err
		}
		var err error
		if yield {
			if err = attempt(ctx); dbconn.Number(err) == dbconn.ErLockDeadlock {
				rest := make([]op, 0, len(batch)+len(ops))
				return &yielded{rest: append(append(rest, batch...), ops...)}
			}
		}
		if !yield || (err != nil && dbconn.Retryable(err)) {
			err = dbconn.Retry(ctx, 20, attempt)
		}
		if err != nil {
			return fmt.Errorf("apply %d row(s) to %s: %w", len(batch), a.cfg.Ghost, err)
		}
		a.stmtCount.Add(1)
		a.rowsOut.Add(int64(len(batch)))
	}
	return nil
}

// onConn runs fn on a connection of the pool. When fn fails leaving its
// statement's fate unknown (the connection lost), the session may still be
// running that statement on the server, and may commit it after whatever is
// written next: a REPLACE of a row's older image committing after the
// retry and a later window's newer one (InnoDB need not grant row locks in
// the order they were asked for) would leave the older image in the ghost
// for good. The session is ended first (KILL, then waited for until the
// server has let it go), also after driver.ErrBadConn, which the driver
// returns when it sent nothing of the statement at hand but which leaves a
// transaction's earlier statements (guarded.go) holding their locks. If it
// cannot be ended, the error is dbconn.NotRetryable and the run fails.
func (a *Applier) onConn(ctx context.Context, fn func(ctx context.Context, conn *sql.Conn) error) error {
	conn, err := a.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	id, err := dbconn.SessionID(ctx, conn)
	if err != nil {
		return err
	}
	err = fn(ctx, conn)
	if err == nil || !dbconn.StatementFateUnknown(err) || !dbconn.Retryable(err) || ctx.Err() != nil {
		// Not a lost connection (nothing is left running), or one the
		// statement is not tried again after: the run fails (a cancelled
		// ctx too), and the server ends the session once it notices.
		return err
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // never back to the pool
	if kerr := dbconn.KillAndWait(context.WithoutCancel(ctx), a.db, id); kerr != nil {
		return &dbconn.NotRetryable{Err: fmt.Errorf("%w (and ending the applier's session %d, which may still be running the statement, failed: %w)", err, id, kerr)}
	}
	level := slog.LevelWarn
	if errors.Is(err, driver.ErrBadConn) {
		level = slog.LevelDebug // a connection found closed before anything was sent
	}
	a.cfg.Logger.Log(ctx, level, "applier: connection lost during a statement; its session was ended before the statement is tried again", "session", id, "err", err)
	return err
}

// writeStmt renders verb (REPLACE or INSERT) INTO the ghost for batch.
func (a *Applier) writeStmt(verb string, batch []op) (string, []any) {
	var b strings.Builder
	b.WriteString(dbconn.Tag + verb + " INTO " + a.cfg.Ghost + " (" + table.QuoteIdents(a.cfg.GhostColumns) + ") VALUES ")
	args := writeTuples(&b, batch, a.cfg.SourceColumns, a.cfg.Charsets, a.cfg.Exprs)
	return b.String(), args
}

// writeTuples writes one parenthesised tuple of cols per op of batch,
// separated by commas, and returns the arguments of its placeholders. A
// tuple holding a value written inline (hasExpr: MySQL's binary JSON) is
// written value by value; the others share one placeholder template.
func writeTuples(b *strings.Builder, batch []op, cols []int, charsets, exprs []string) []any {
	tuple := "(" + placeholders(len(cols), charsets, exprs) + ")"
	args := make([]any, 0, len(batch)*len(cols))
	for i, o := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		if hasExpr(o.image, cols) {
			b.WriteByte('(')
			for j, c := range cols {
				if j > 0 {
					b.WriteByte(',')
				}
				args = writeValue(b, args, o.image[c], charsets, exprs, j)
			}
			b.WriteByte(')')
			continue
		}
		b.WriteString(tuple)
		for j, c := range cols {
			args = appendArg(args, o.image[c], exprs, j)
		}
	}
	return args
}

func (a *Applier) deleteStmt(batch []op) (string, []any) {
	var b strings.Builder
	b.WriteString(dbconn.Tag + "DELETE FROM " + a.cfg.Ghost + " WHERE (" + table.QuoteIdents(a.cfg.KeyGhost) + ") IN (")
	args := writeTuples(&b, batch, a.cfg.KeySource, a.cfg.KeyCharsets, a.cfg.KeyExprs)
	b.WriteByte(')')
	return b.String(), args
}

// appendArg appends column j's value v once per placeholder of its template.
func appendArg(args []any, v any, exprs []string, j int) []any {
	n := 1
	if j < len(exprs) && exprs[j] != "" {
		n = placeholderCount(exprs[j])
	}
	for range n {
		args = append(args, v)
	}
	return args
}

// Placeholder renders column j's placeholder as placeholders does, and
// how many times its value is bound there.
func Placeholder(j int, charsets, exprs []string) (string, int) {
	if j < len(exprs) && exprs[j] != "" {
		return exprs[j], placeholderCount(exprs[j])
	}
	if j < len(charsets) && charsets[j] != "" {
		return "CONVERT(? USING " + charsets[j] + ")", 1
	}
	return "?", 1
}

// placeholders renders n comma-separated placeholders: a column's template
// when it has one, else converted from the charsets given.
func placeholders(n int, charsets, exprs []string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		ph, _ := Placeholder(i, charsets, exprs)
		b.WriteString(ph)
	}
	return b.String()
}

// keyOf encodes the key columns of a row image into a string that is equal
// for two images exactly when their key values are equal byte for byte.
func (a *Applier) keyOf(image []any) string {
	var b []byte
	for _, c := range a.cfg.KeySource {
		b = appendValue(b, image[c])
	}
	return string(b)
}

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 0)
	case int64:
		b = append(b, 1)
		return binary.BigEndian.AppendUint64(b, uint64(x))
	case uint64:
		b = append(b, 2)
		return binary.BigEndian.AppendUint64(b, x)
	case []byte:
		b = append(b, 3)
		b = binary.AppendUvarint(b, uint64(len(x)))
		return append(b, x...)
	case string:
		b = append(b, 4)
		b = binary.AppendUvarint(b, uint64(len(x)))
		return append(b, x...)
	case float64:
		b = append(b, 5)
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	case float32:
		b = append(b, 6)
		return binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	case time.Time:
		b = append(b, 7)
		return x.UTC().AppendFormat(b, time.RFC3339Nano)
	default:
		s := fmt.Sprintf("%T:%v", v, v)
		b = append(b, 8)
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
}

func imageBytes(image []any) int {
	n := 0
	for _, v := range image {
		switch x := v.(type) {
		case binlog.SQLExpr:
			n += len(x)
		case []byte:
			n += len(x) + 4
		case string:
			n += len(x) + 4
		default:
			n += 8
		}
	}
	return n
}
