// Package copier copies the source table into the ghost table in chunks of
// the identifying key, each chunk one short INSERT IGNORE ... SELECT ... LOCK
// IN SHARE MODE.
//
// Why a locking read: the binlog applier runs at the same time. If a chunk
// read a row without locking it, the application could delete (or change)
// the row and the applier apply that change to the ghost before the chunk's
// insert lands, and the chunk would then write the stale row back. The shared
// lock makes the application's change wait until the chunk has committed, so
// its event is applied after the chunk. The chunk is kept small and short
// (sized to a target time, capped in rows) so that the application never
// waits long behind it.
//
// Why INSERT IGNORE: a row the applier has already written keeps the
// applier's image. That image may be older than what the chunk read, but
// every change after the stream's start has an event that the applier writes
// later, so the ghost converges either way; IGNORE only avoids failing the
// chunk on a row that is already there.
//
// The copy covers keys up to the maximum present when the copy starts: rows
// inserted later were inserted after the binlog stream began, so the applier
// writes them.
package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Config says what to copy.
type Config struct {
	Source        *table.Table
	Ghost         string   // quoted ghost name
	SourceColumns []string // columns read from the source
	GhostColumns  []string // columns written in the ghost, same order
	// SourceExprs, if set, are the SELECT expressions per source column
	// ("" for the plain column): a conversion the server's ALTER makes
	// differently from INSERT ... SELECT of the plain column.
	SourceExprs []string
	KeyColumns  []string // identifying key of the source, key order
	KeyIndex    string   // name of the index holding KeyColumns
	ChunkTime   time.Duration
	MinChunk    int
	MaxChunk    int
	// Threads is the number of chunks copied at once.
	Threads int
	// Start resumes the copy after this key (nil: from the first row).
	Start []any
	// Throttle, if set, is called before each chunk and blocks while copying must pause.
	Throttle func(ctx context.Context) error
	// Pace, if set, is called by a copy thread after each chunk with the
	// chunk's duration and the rows it wrote, and may sleep (throttle.Pacer,
	// throttle.RateCap).
	Pace func(ctx context.Context, took time.Duration, rows int64) error
	// AfterChunk, if set, runs after each chunk is copied, with its range
	// (lo, hi]: the migration looks there for rows INSERT IGNORE skipped
	// because another row held their value under a unique key.
	AfterChunk func(ctx context.Context, lo, hi []any) error
	// Defer, if set, makes the copy lock-free (lockfree.go, docs/copy.md):
	// chunks read the source without locking it, and the pipeline holds
	// the changes to a chunk's range until the chunk is over. Marks is the
	// quoted watermark table (MarksName, CreateMarks) the binlog stream
	// watches. Nil: every chunk is a locking read.
	Defer Deferrer
	Marks string
	// OrderedCommits, with Defer (MySQL), makes each chunk read
	// @@GLOBAL.binlog_order_commits after its mark: a chunk that finds it
	// OFF (switched off while the copy runs) locks its rows.
	OrderedCommits bool
	Logger         *slog.Logger
}

// Copier copies chunk after chunk.
type Copier struct {
	db     *sql.DB
	cfg    Config
	copied atomic.Int64
	chunks atomic.Int64
	lf     *lockFree
	// lockedChunks counts the chunks of a lock-free copy that locked
	// anyway (a prepared XA transaction existed).
	lockedChunks atomic.Int64
	// rechecked counts the chunks whose warnings were examined again apart
	// (recheckChunk).
	rechecked atomic.Int64
	chunk     atomic.Int64 // current chunk size
	done      atomic.Bool
	// end: the copy's upper bound fixed by FixEnd (nil: read by Run).
	end      []any
	endFixed bool

	// Settings that may change while running (SetThreads, SetChunkTime,
	// SetChunkBounds); cfg holds the initial values.
	threads, chunkTime, minChunk, maxChunk atomic.Int64
	inFlight                               atomic.Int64
	wakeMu                                 sync.Mutex
	wake                                   chan struct{} // closed when threads changes

	// Low watermark: chunks finish out of order; the watermark is the end of
	// the last chunk before which every chunk has finished.
	wmu       sync.Mutex
	watermark []any
	nextSeq   int
	finished  map[int][]any // seq -> hi of finished chunks not yet absorbed
}

// New returns a Copier.
func New(db *sql.DB, cfg Config) (*Copier, error) {
	if len(cfg.KeyColumns) == 0 || len(cfg.SourceColumns) != len(cfg.GhostColumns) || len(cfg.SourceColumns) == 0 {
		return nil, errors.New("copier: key and column mapping are required")
	}
	if cfg.ChunkTime <= 0 {
		cfg.ChunkTime = 200 * time.Millisecond
	}
	if cfg.MinChunk <= 0 {
		cfg.MinChunk = 100
	}
	if cfg.MaxChunk <= 0 {
		cfg.MaxChunk = 5000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Threads < 1 {
		cfg.Threads = 1
	}
	c := &Copier{db: db, cfg: cfg, watermark: cfg.Start, finished: map[int][]any{}, wake: make(chan struct{})}
	if cfg.Defer != nil {
		if cfg.Marks == "" {
			return nil, errors.New("copier: a lock-free copy needs its watermark table")
		}
		c.lf = &lockFree{def: cfg.Defer, marks: cfg.Marks}
	}
	c.chunk.Store(int64(min(1000, cfg.MaxChunk)))
	c.threads.Store(int64(min(cfg.Threads, MaxThreads)))
	c.chunkTime.Store(int64(cfg.ChunkTime))
	c.minChunk.Store(int64(cfg.MinChunk))
	c.maxChunk.Store(int64(cfg.MaxChunk))
	return c, nil
}

// Progress is a snapshot for progress reporting.
type Progress struct {
	// Rows: the rows the chunks covered, inserted or found already
	// written by the applier (by the walk's count of each chunk's keys).
	Rows      int64
	Chunks    int64
	ChunkSize int64
	InFlight  int64 // chunks being copied now
	Done      bool
}

// LockFree reports whether chunks read without locks, and how many of them
// locked anyway because a prepared XA transaction existed.
func (c *Copier) LockFree() (on bool, locked int64) {
	return c.lf != nil, c.lockedChunks.Load()
}

// Progress returns the counters.
func (c *Copier) Progress() Progress {
	return Progress{Rows: c.copied.Load(), Chunks: c.chunks.Load(), ChunkSize: c.chunk.Load(), InFlight: c.inFlight.Load(), Done: c.done.Load()}
}

type chunk struct {
	seq    int
	lo, hi []any
	// rows: the keys in (lo, hi] when the walk found the chunk. Its
	// INSERT IGNORE reports only the rows it inserted, not those the
	// applier had written first (skipped as duplicates): progress counts
	// the larger of the two, the rows the chunk covered.
	rows int64
}

// Watermark returns the highest key such that every row at or below it has
// been copied (nil: none yet), and whether the copy is complete.
func (c *Copier) Watermark() ([]any, bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.watermark, c.done.Load()
}

func (c *Copier) finish(ch chunk) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.finished[ch.seq] = ch.hi
	for {
		hi, ok := c.finished[c.nextSeq]
		if !ok {
			return
		}
		delete(c.finished, c.nextSeq)
		c.watermark = hi
		c.nextSeq++
	}
}

// Run copies every row whose key is at most the maximum key present now:
// one goroutine walks the key to find chunk boundaries, Threads goroutines
// copy the chunks.
func (c *Copier) Run(ctx context.Context) error {
	k := c.cfg.KeyColumns
	src := c.cfg.Source.QuotedName()
	force := " FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ")"
	order := strings.Join(quoteAll(k), ", ")
	hi, err := c.end, error(nil)
	if !c.endFixed {
		if hi, err = c.highestKey(ctx); err != nil {
			return err
		}
	}
	if hi == nil {
		c.done.Store(true)
		return nil // empty table
	}
	if c.cfg.Start != nil {
		// Resuming past the end: nothing is left to copy.
		where, args := table.RangeWhere(k, c.cfg.Start, hi)
		past, err := table.ScanKey(ctx, c.db, c.cfg.Source, k, dbconn.Tag+"SELECT "+table.KeySelect(c.cfg.Source, k)+" FROM "+src+force+" WHERE "+where+" LIMIT 1", args...)
		if err != nil {
			return fmt.Errorf("copy: resume after %v: %w", c.cfg.Start, err)
		}
		if past == nil {
			c.done.Store(true)
			return nil
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	chunks := make(chan chunk)
	walked := make(chan struct{}) // closed once every chunk has been handed out
	g.Go(func() error {
		defer close(walked)
		defer close(chunks)
		lo := c.cfg.Start // nil: before the first row
		for seq := 0; ; seq++ {
			if c.cfg.Throttle != nil {
				if err := c.cfg.Throttle(gctx); err != nil {
					return err
				}
			}
			size := c.chunk.Load()
			// The chunk's end: the size-th key after lo, or hi when fewer remain.
			where, args := table.RangeWhere(k, lo, hi)
			q := dbconn.Tag + "SELECT " + table.KeySelect(c.cfg.Source, k) + " FROM " + src + force + " WHERE " + where +
				" ORDER BY " + order + fmt.Sprintf(" LIMIT 1 OFFSET %d", size-1)
			end, err := c.scanKey(gctx, q, args...)
			if err != nil {
				return fmt.Errorf("copy: find the next chunk of %s: %w", src, err)
			}
			last := end == nil
			rows := size
			if last {
				end = hi
				// Fewer than size keys remain: count them (at most one
				// chunk's worth, on the key's index).
				var n int64
				q := dbconn.Tag + "SELECT COUNT(*) FROM " + src + force + " WHERE " + where
				if err := c.db.QueryRowContext(gctx, q, args...).Scan(&n); err != nil {
					return fmt.Errorf("copy: count the last chunk of %s: %w", src, err)
				}
				rows = n
			}
			select {
			case chunks <- chunk{seq, lo, end, rows}:
			case <-gctx.Done():
				return gctx.Err()
			}
			if last {
				return nil
			}
			lo = end
		}
	})
	// MaxThreads workers; those numbered at or above the current thread
	// count wait (SetThreads changes it while running).
	for i := range MaxThreads {
		g.Go(func() error {
			for c.await(gctx, i, walked) {
				var ch chunk
				var ok bool
				select {
				case ch, ok = <-chunks:
				case <-gctx.Done():
					return gctx.Err()
				}
				if !ok {
					return nil
				}
				if c.cfg.Throttle != nil {
					if err := c.cfg.Throttle(gctx); err != nil {
						return err
					}
				}
				start := time.Now()
				c.inFlight.Add(1)
				var n int64
				var err error
				if c.lf != nil {
					n, err = c.copyChunkLockFree(gctx, i, ch.lo, ch.hi)
				} else {
					n, err = c.copyChunk(gctx, ch.lo, ch.hi)
				}
				c.inFlight.Add(-1)
				if err != nil {
					return err
				}
				c.copied.Add(max(n, ch.rows))
				c.chunks.Add(1)
				c.finish(ch)
				took := time.Since(start)
				c.adjust(took)
				if c.cfg.Pace != nil {
					if err := c.cfg.Pace(gctx, took, n); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.done.Store(true)
	return nil
}

func (c *Copier) adjust(took time.Duration) {
	size := float64(c.chunk.Load())
	target := float64(c.chunkTime.Load())
	ratio := target / float64(max(took, time.Millisecond))
	ratio = min(max(ratio, 0.5), 2)
	next := int64(size * ratio)
	next = min(max(next, c.minChunk.Load()), c.maxChunk.Load())
	c.chunk.Store(next)
}

// MaxThreads caps Threads.
const MaxThreads = 64

// await blocks worker i while i is at or above the thread count; false: the
// walk is over or ctx ended.
func (c *Copier) await(ctx context.Context, i int, walked <-chan struct{}) bool {
	for {
		c.wakeMu.Lock()
		wake := c.wake
		c.wakeMu.Unlock()
		if int64(i) < c.threads.Load() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-walked:
			return false
		case <-wake:
		}
	}
}

// SetThreads changes the number of chunks copied at once (1..MaxThreads)
// while running: chunks in flight finish, then the new count applies.
func (c *Copier) SetThreads(n int) {
	c.threads.Store(int64(min(max(n, 1), MaxThreads)))
	c.wakeMu.Lock()
	close(c.wake)
	c.wake = make(chan struct{})
	c.wakeMu.Unlock()
}

// SetChunkTime changes the target duration of one chunk while running.
// The chunk size is scaled with it (within the bounds): a chunk time 20
// times shorter starts from a chunk 20 times smaller. Left to adjust,
// which halves it at most per chunk, a paced copy's first chunks were the
// unpaced copy's 1,000 rows, each thread's first four chunks too long.
func (c *Copier) SetChunkTime(d time.Duration) {
	if d <= 0 {
		return
	}
	old := c.chunkTime.Swap(int64(d))
	if old <= 0 || old == int64(d) {
		return
	}
	next := int64(float64(c.chunk.Load()) * float64(d) / float64(old))
	c.chunk.Store(min(max(next, c.minChunk.Load()), c.maxChunk.Load()))
}

// SetChunkBounds changes the chunk size limits while running; the current
// chunk size is clamped into them at once.
func (c *Copier) SetChunkBounds(minRows, maxRows int) {
	minRows, maxRows = max(minRows, 1), max(maxRows, 1)
	minRows = min(minRows, maxRows)
	c.minChunk.Store(int64(minRows))
	c.maxChunk.Store(int64(maxRows))
	c.chunk.Store(min(max(c.chunk.Load(), int64(minRows)), int64(maxRows)))
}

// Settings returns the current thread count, target chunk time and chunk
// size limits.
func (c *Copier) Settings() (threads int, chunkTime time.Duration, minRows, maxRows int) {
	return int(c.threads.Load()), time.Duration(c.chunkTime.Load()), int(c.minChunk.Load()), int(c.maxChunk.Load())
}

func (c *Copier) copyChunk(ctx context.Context, lo, hi []any) (int64, error) {
	k := c.cfg.KeyColumns
	where, args := table.RangeWhere(k, lo, hi)
	q := dbconn.Tag + "INSERT IGNORE INTO " + c.cfg.Ghost + " (" + table.QuoteIdents(c.cfg.GhostColumns) + ") SELECT " +
		c.selectList() + " FROM " + c.cfg.Source.QuotedName() +
		" FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where +
		" LOCK IN SHARE MODE"
	var rows int64
	err := dbconn.Retry(ctx, 30, func(ctx context.Context) error {
		conn, err := c.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		rows, _ = res.RowsAffected()
		return c.checkWarnings(ctx, conn, lo, hi)
	})
	if errors.Is(err, ErrDataChange) {
		return 0, err // names the row already
	}
	if err != nil {
		return 0, fmt.Errorf("copy chunk after %v: %w", lo, err)
	}
	if c.cfg.AfterChunk != nil {
		if err := c.cfg.AfterChunk(ctx, lo, hi); err != nil {
			return 0, fmt.Errorf("copy chunk after %v: %w", lo, err)
		}
	}
	return rows, nil
}

// ErrDataChange is returned when copying a row would change its data
// (truncation, invalid value): the ALTER would lose data.
var ErrDataChange = errors.New("the ALTER would change or lose data")

// atRow finds "at row N" in a warning's message: the 1-based position of the
// offending row among the rows the statement read.
var atRow = regexp.MustCompile(`at row (\d+)`)

// checkWarnings examines every warning of the chunk just copied (counted
// first, then all read: the sessions keep up to dbconn.MaxErrorCount). It
// accepts duplicate-key warnings (INSERT IGNORE meets rows the applier has
// already written) and notes (what the server's own ALTER also does without
// complaint, e.g. rounding a DECIMAL to a smaller scale); any other warning
// fails the chunk, naming the key of the row it is about.
func (c *Copier) checkWarnings(ctx context.Context, conn *sql.Conn, lo, hi []any) error {
	n, err := dbconn.CountWarnings(ctx, conn)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	ws, err := dbconn.ReadWarnings(ctx, conn)
	if err != nil {
		return err
	}
	var bad *dbconn.Warning
	for i := range ws {
		if ws[i].Benign() {
			continue
		}
		bad = &ws[i]
		break
	}
	if bad == nil && len(ws) < n {
		// Most likely duplicate keys: rows the applier wrote before the
		// chunk (a hot key range). Conversions do not depend on what the
		// ghost holds: the chunk's rows are converted again into an empty
		// temporary copy of the ghost, where only their own warnings rise.
		return c.recheckChunk(ctx, conn, lo, hi, n, len(ws))
	}
	if bad == nil {
		return nil
	}
	return c.badWarning(ctx, lo, hi, *bad)
}

// badWarning is the error for a warning that changes data, naming the row's
// key when the warning says "at row N".
func (c *Copier) badWarning(ctx context.Context, lo, hi []any, bad dbconn.Warning) error {
	where := fmt.Sprintf("the chunk after key %v", lo)
	if m := atRow.FindStringSubmatch(bad.Msg); m != nil {
		if row, err := strconv.Atoi(m[1]); err == nil && row > 0 {
			if key, err := c.keyAt(ctx, lo, hi, row); err == nil && key != nil {
				where = fmt.Sprintf("the row with key (%s) = %s", strings.Join(c.cfg.KeyColumns, ", "), formatKey(key))
			}
		}
	}
	return fmt.Errorf("%w: copying %s raised %s %d: %s; fix the data or the ALTER", ErrDataChange, where, bad.Level, bad.Code, bad.Msg)
}

// recheckTable is the session's temporary copy of the ghost that
// recheckChunk converts a chunk into.
const recheckTable = "_recast_recheck"

// recheckChunk examines the warnings of a chunk whose statement raised more
// (n) than the session kept (kept; MySQL without SESSION_VARIABLES_ADMIN
// keeps 1024), all kept ones benign: it converts the chunk's rows again into
// an empty temporary table like the ghost, where the duplicate-key warnings
// of rows the applier had already written cannot rise, and examines those
// warnings as checkWarnings does. A row that changed in between is
// converted as it is now; its own event rewrites the ghost's copy anyway
// (strictly, by the applier). The temporary table is dropped before conn
// goes back to the pool.
func (c *Copier) recheckChunk(ctx context.Context, conn *sql.Conn, lo, hi []any, n, kept int) error {
	tmp := table.QuoteIdent(c.cfg.Source.Schema) + "." + table.QuoteIdent(recheckTable)
	if _, err := conn.ExecContext(ctx, dbconn.Tag+"CREATE TEMPORARY TABLE "+tmp+" LIKE "+c.cfg.Ghost); err != nil {
		return fmt.Errorf("re-examine the chunk after key %v (%d warnings, %d kept): %w", lo, n, kept, err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TEMPORARY TABLE IF EXISTS "+tmp)
	}()
	where, args := table.RangeWhere(c.cfg.KeyColumns, lo, hi)
	q := dbconn.Tag + "INSERT IGNORE INTO " + tmp + " (" + table.QuoteIdents(c.cfg.GhostColumns) + ") SELECT " +
		c.selectList() + " FROM " + c.cfg.Source.QuotedName() +
		" FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where
	if _, err := conn.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("re-examine the chunk after key %v (%d warnings, %d kept): %w", lo, n, kept, err)
	}
	m, err := dbconn.CountWarnings(ctx, conn)
	if err != nil {
		return err
	}
	c.rechecked.Add(1)
	c.cfg.Logger.Info("copy: a chunk raised more warnings than the session keeps; its rows were converted again apart to examine them",
		"after", fmt.Sprint(lo), "warnings", n, "kept", kept, "warnings_apart", m)
	if m == 0 {
		return nil
	}
	ws, err := dbconn.ReadWarnings(ctx, conn)
	if err != nil {
		return err
	}
	for i := range ws {
		if ws[i].Benign() {
			continue
		}
		return c.badWarning(ctx, lo, hi, ws[i])
	}
	if len(ws) < m {
		return fmt.Errorf("%w: copying the chunk after key %v raised %d warnings (%d with its rows apart), of which the server kept only %d (max_error_count): lower --max-chunk-rows, or grant recast's user SESSION_VARIABLES_ADMIN so that it keeps them all", ErrDataChange, lo, n, m, len(ws))
	}
	return nil
}

// Rechecked is the number of chunks whose warnings overflowed the session's
// max_error_count and were examined again apart.
func (c *Copier) Rechecked() int64 { return c.rechecked.Load() }

// keyAt returns the key of the row-th row (1-based) of the chunk (lo, hi] in
// key order, the order the chunk's INSERT ... SELECT reads it in.
func (c *Copier) keyAt(ctx context.Context, lo, hi []any, row int) ([]any, error) {
	k := c.cfg.KeyColumns
	order := strings.Join(quoteAll(k), ", ")
	where, args := table.RangeWhere(k, lo, hi)
	q := dbconn.Tag + "SELECT " + table.KeySelect(c.cfg.Source, k) + " FROM " + c.cfg.Source.QuotedName() + " FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where +
		" ORDER BY " + order + fmt.Sprintf(" LIMIT 1 OFFSET %d", row-1)
	return c.scanKey(ctx, q, args...)
}

func formatKey(key []any) string {
	parts := make([]string, len(key))
	for i, v := range key {
		switch v := v.(type) {
		case []byte:
			parts[i] = fmt.Sprintf("0x%X", v)
		default:
			parts[i] = fmt.Sprintf("'%v'", v)
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// selectList renders the columns read from the source.
func (c *Copier) selectList() string {
	out := make([]string, len(c.cfg.SourceColumns))
	for i, col := range c.cfg.SourceColumns {
		out[i] = table.QuoteIdent(col)
		if i < len(c.cfg.SourceExprs) && c.cfg.SourceExprs[i] != "" {
			out[i] = c.cfg.SourceExprs[i]
		}
	}
	return strings.Join(out, ", ")
}

// highestKey reads the source's highest key now: the copy's upper bound
// (every row above it is the applier's alone). nil: the table is empty.
//
// A row above the bound must be in the stream: its transaction committed
// after the bound was read, so after the stream's start position. A
// transaction already in the binlog before that position but not yet
// visible breaks this (it inserted a key above the bound: neither streamed
// nor copied). Where commits become visible in binlog order, the
// checkpoint the run writes after reading its start position commits after
// every such transaction, so the bound sees them. Where they may not (the
// locking copy, which is also the fallback for MySQL's
// binlog_order_commits OFF; a lock-free copy while a prepared XA
// transaction exists or binlog_order_commits has been turned off: the
// conditions under which its chunks lock), the bound is read with LOCK IN
// SHARE MODE, which waits for the transaction holding the last row; a lock
// wait timeout or deadlock is retried, as a chunk's.
func (c *Copier) highestKey(ctx context.Context) ([]any, error) {
	var hi []any
	err := dbconn.Retry(ctx, 30, func(ctx context.Context) error {
		lock, err := c.boundLocks(ctx)
		if err != nil {
			return err
		}
		read := table.HighestKey
		if lock {
			read = table.HighestKeyLocked
		}
		hi, err = read(ctx, c.db, c.cfg.Source, c.cfg.KeyColumns, c.cfg.KeyIndex)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("copy: read the highest key of %s: %w", c.cfg.Source.QuotedName(), err)
	}
	return hi, nil
}

// boundLocks reports whether the copy's upper bound is read with a lock
// (highestKey).
func (c *Copier) boundLocks(ctx context.Context) (bool, error) {
	if c.lf == nil {
		return true, nil
	}
	if xa, err := preparedXA(ctx, c.db); err != nil || xa {
		return xa, err
	}
	if !c.cfg.OrderedCommits {
		return false, nil
	}
	var ordered int
	err := c.db.QueryRowContext(ctx, "SELECT @@GLOBAL.binlog_order_commits").Scan(&ordered)
	return ordered == 0, err
}

// FixEnd reads the copy's upper bound now (the source's highest key; nil
// for an empty table) instead of when Run starts, and returns it. The
// stream must already be at its start position: a row inserted above the
// bound after this is in the stream. Call it before Run.
func (c *Copier) FixEnd(ctx context.Context) ([]any, error) {
	hi, err := c.highestKey(ctx)
	if err != nil {
		return nil, err
	}
	c.end, c.endFixed = hi, true
	return hi, nil
}

func (c *Copier) scanKey(ctx context.Context, q string, args ...any) ([]any, error) {
	return table.ScanKey(ctx, c.db, c.cfg.Source, c.cfg.KeyColumns, q, args...)
}

func quoteAll(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = table.QuoteIdent(c)
	}
	return out
}
