// Package checksum compares the source and the ghost table, chunk by chunk
// over the identifying key, from one consistent point, and repairs chunks
// that differ.
//
// The consistent point: MariaDB's START TRANSACTION WITH CONSISTENT SNAPSHOT
// reports the binlog position of its snapshot (Binlog_snapshot_file/position)
// without taking any lock. The caller holds the applier at exactly that
// position while a snapshot of the ghost is opened, so both snapshots show
// the same state: the source at P, and the ghost with every change before P
// applied and none after. The applier then goes on; the comparison reads
// only the two snapshots.
package checksum

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
)

// Config says what to compare.
type Config struct {
	Source *table.Table
	Ghost  *table.Table
	// Columns compared: source and ghost names, same order.
	SourceColumns []string
	GhostColumns  []string
	// SourceExprs, if set, are the copy's SELECT expressions per source
	// column ("" for the plain column), which a repair re-copies with.
	SourceExprs []string
	// Identifying key: source and ghost names, key order; KeyIndex on the source.
	KeySource []string
	KeyGhost  []string
	KeyIndex  string
	ChunkRows int
	// MaxChunkRows caps the rows one repair statement locks and writes
	// (--max-chunk-rows; 0: ChunkRows).
	MaxChunkRows int
	// Align stops the applier, calls openSource (which opens the source
	// snapshot and returns its binlog position P), lets the applier apply
	// everything before P and nothing after, calls openGhost, and lets the
	// applier go on.
	Align func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error
	// Rounds of repair and re-check before giving up.
	Rounds int
	// Pause, if set, is called at named points (tests corrupt the ghost there).
	Pause func(ctx context.Context, point string)
	// Throttle, if set, is called before each chunk and blocks while the
	// migration's copy would be paused (replica lag, --max-load, the flag
	// files).
	Throttle func(ctx context.Context) error
	// Gentle, if set, is asked before each chunk whether the application
	// is to be spared now (the pacer holds the copy back, or
	// --max-copy-rate applies). A gentle chunk is sized so that each of its
	// two sums takes about GentleChunkTime, and the sums run one after the
	// other (one CPU, not two); otherwise chunks are ChunkRows rows, summed
	// on both sides at once.
	Gentle          func() bool
	GentleChunkTime time.Duration
	// Pace, if set, is called after each chunk with the time its sums took
	// and its rows on the source, and may sleep (the migration's pacer).
	// Unpaced, the checksum of the 1M-row bench table held both CPUs of the
	// bench's VM for 4-5 s, and the application's p99 rose to 570-750 ms
	// meanwhile (docs/benchmarks.md, session 30).
	Pace func(ctx context.Context, took time.Duration, rows int64) error
	// Progress, if set, is called after each chunk of the first round with
	// the rows compared so far (the source's side), and with done once the
	// first round is over.
	Progress func(rows int64, done bool)
	Logger   *slog.Logger
}

// Result reports a comparison.
type Result struct {
	Chunks   int
	Rows     int64
	Repaired int // chunks repaired
	// RepairStatements counts the repair's INSERT ... SELECT statements
	// (each of at most MaxChunkRows rows).
	RepairStatements int
	Rounds           int
	Skipped          []string // columns not compared (type changed so their text differs)
	// Aligning is the time spent opening the consistent pair of snapshots
	// (mostly waiting for the applier to reach the source snapshot's
	// binlog position), over all rounds; Took is the whole run.
	Aligning, Took time.Duration
}

// ErrDifferent is returned when differences persist after repair.
var ErrDifferent = errors.New("the new table differs from the original")

type chunk struct{ lo, hi []any } // (lo, hi]; lo nil: from the start; hi nil: to the end

// Run compares the tables and repairs differing chunks; it returns
// ErrDifferent (wrapped, naming the first differing key) if a difference
// persists after cfg.Rounds repairs.
func Run(ctx context.Context, db *sql.DB, cfg Config) (res Result, _ error) {
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = 10000
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	if cfg.Pause == nil {
		cfg.Pause = func(context.Context, string) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GentleChunkTime <= 0 {
		cfg.GentleChunkTime = 10 * time.Millisecond
	}
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return Result{}, fmt.Errorf("checksum: %w", err)
	}
	c := &checker{db: db, cfg: cfg, mysql: srv.MySQL()}
	c.size.Store(int64(cfg.ChunkRows))
	if cfg.Gentle != nil && cfg.Gentle() {
		c.size.Store(int64(min(firstGentleRows, cfg.ChunkRows)))
	}
	c.buildExprs()
	res = Result{Skipped: c.skipped}
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	var todo []chunk // nil: every chunk
	for round := 1; ; round++ {
		res.Rounds = round
		cfg.Pause(ctx, fmt.Sprintf("checksum:round%d", round))
		diff, n, rows, aligning, err := c.compare(ctx, todo)
		res.Aligning += aligning
		if err != nil {
			return res, err
		}
		if round == 1 {
			res.Chunks, res.Rows = n, rows
			if cfg.Progress != nil {
				cfg.Progress(rows, true)
			}
		}
		if len(diff) == 0 {
			return res, nil
		}
		if round > cfg.Rounds {
			key, err := c.firstDifference(ctx, diff[0])
			if err != nil {
				return res, err
			}
			return res, fmt.Errorf("%w: %d chunk(s) still differ after %d repair round(s); first differing key: %s", ErrDifferent, len(diff), cfg.Rounds, key)
		}
		cfg.Logger.Warn("checksum: chunks differ, repairing", "chunks", len(diff), "round", round)
		for _, ch := range diff {
			n, err := c.repair(ctx, ch)
			res.RepairStatements += n
			if err != nil {
				return res, err
			}
			res.Repaired++
		}
		todo = diff
	}
}

type checker struct {
	db  *sql.DB
	cfg Config
	// size: the rows of the next chunk the walker reads a boundary for
	// (ChunkRows, or fewer while gentle: sizeFor).
	size    atomic.Int64
	mysql   bool   // MySQL: no Binlog_snapshot_file (see mysqlSnapshot)
	srcExpr string // CRC expression over the source columns
	ghExpr  string
	skipped []string
}

// buildExprs renders the per-row CRC over the compared columns, each as
// comparable text: character columns converted to utf8mb4, binary ones in
// hex, NULL marked apart from any value. Columns whose type changed so that
// their text differs (FLOAT to DOUBLE, DECIMAL scale, temporal precision) are
// left out and reported.
func (c *checker) buildExprs() {
	// Same-type character columns are compared by their stored bytes. If
	// they share one character set, each is relabelled <charset>_bin (no
	// copy: CAST(... AS BINARY) copies every value and made the checksum of
	// a sysbench table 60 % slower); a binary collation also keeps columns
	// of different collations from clashing inside CONCAT_WS. Several
	// character sets cannot be mixed under explicit collations: CAST then.
	//
	// Text the comparison converts (a changed column's utf8mb4, MySQL's
	// JSON) counts as utf8mb4: next to an explicit COLLATE utf8mb3_bin it
	// was converted to utf8mb3, where every 4-byte character is '?', and an
	// emoji made '?' compared equal.
	charsets := map[string]bool{}
	for i, s := range c.cfg.SourceColumns {
		sc := c.cfg.Source.Columns[c.cfg.Source.ColumnIndex(s)]
		gc := c.cfg.Ghost.Columns[c.cfg.Ghost.ColumnIndex(c.cfg.GhostColumns[i])]
		switch {
		case sc.ColumnType == gc.ColumnType && sc.Collation == gc.Collation:
			if sc.Charset != "" {
				charsets[sc.Charset] = true
			} else if sc.DataType == "json" {
				charsets["utf8mb4"] = true
			}
		case sc.Charset != "" || gc.Charset != "" || sc.DataType == "json" || gc.DataType == "json":
			charsets["utf8mb4"] = true
		}
	}
	raw := func(name, charset string) string {
		if len(charsets) == 1 {
			return table.QuoteIdent(name) + " COLLATE " + charset + "_bin"
		}
		return "CAST(" + table.QuoteIdent(name) + " AS BINARY)"
	}
	var src, gh, srcBin, ghBin []string
	for i, s := range c.cfg.SourceColumns {
		g := c.cfg.GhostColumns[i]
		sc := c.cfg.Source.Columns[c.cfg.Source.ColumnIndex(s)]
		gc := c.cfg.Ghost.Columns[c.cfg.Ghost.ColumnIndex(g)]
		if !comparableTypes(sc, gc) {
			se, ge, ok := convertedExprs(s, g, sc, gc)
			if !ok {
				c.skipped = append(c.skipped, s)
				continue
			}
			src = append(src, se, "ISNULL("+table.QuoteIdent(s)+")")
			gh = append(gh, ge, "ISNULL("+table.QuoteIdent(g)+")")
			continue
		}
		if sc.ColumnType == gc.ColumnType && sc.Collation == gc.Collation {
			// Same type on both sides: the stored bytes compare, with no
			// charset conversion.
			se, ge := table.QuoteIdent(s), table.QuoteIdent(g)
			if sc.DataType == "float" {
				// As a double: a FLOAT prints 6 significant digits, and
				// 1.2345678 compared equal to 1.23457. Times 1e0, not
				// plus 0e0: -0 + 0 is +0, and a -0 MySQL stores compared
				// equal to +0 (MariaDB stores every zero as +0).
				se, ge = "("+se+" * 1e0)", "("+ge+" * 1e0)"
			}
			if sc.Charset != "" {
				se, ge = raw(s, sc.Charset), raw(g, gc.Charset)
			} else if byteString(sc.DataType) {
				// Binary strings are hashed apart: next to character
				// strings of an explicit collation, MySQL converts them to
				// that charset and fails on bytes that are not valid
				// there (error 3854).
				srcBin = append(srcBin, se, "ISNULL("+table.QuoteIdent(s)+")")
				ghBin = append(ghBin, ge, "ISNULL("+table.QuoteIdent(g)+")")
				continue
			}
			src = append(src, se, "ISNULL("+table.QuoteIdent(s)+")")
			gh = append(gh, ge, "ISNULL("+table.QuoteIdent(g)+")")
			continue
		}
		src = append(src, textExpr(s, sc), "ISNULL("+table.QuoteIdent(s)+")")
		gh = append(gh, textExpr(g, gc), "ISNULL("+table.QuoteIdent(g)+")")
	}
	if len(srcBin) > 0 {
		src = append(src, rowHash("CONCAT_WS('#',"+strings.Join(srcBin, ",")+")"))
		gh = append(gh, rowHash("CONCAT_WS('#',"+strings.Join(ghBin, ",")+")"))
	}
	c.srcExpr = rowHash("CONCAT_WS('#'," + strings.Join(src, ",") + ")")
	c.ghExpr = rowHash("CONCAT_WS('#'," + strings.Join(gh, ",") + ")")
}

// rowHash is a row's hash, as a 64-bit unsigned number: the first 64 bits
// of the SHA-256 of its text (MySQL 9.7 has neither MD5 nor SHA1). A
// chunk's is the BIT_XOR of its rows'. It was the CRC32, which is linear
// over XOR: the same wrong bytes at the same distance from the end of two
// rows' text changed their CRCs by the same value, and the two changes
// cancelled in the chunk's BIT_XOR ('a' made 'b' in rows 9 and 10 of a
// chunk passed), as any even number of them did.
func rowHash(text string) string {
	return "CAST(CONV(LEFT(SHA2(" + text + ", 256), 16), 16, 10) AS UNSIGNED)"
}

// byteString reports the types whose values are binary strings: byte
// strings, BIT and the spatial types.
func byteString(dataType string) bool {
	switch dataType {
	case "bit", "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection":
		return true
	}
	return table.IsBinaryType(dataType)
}

func textExpr(name string, c table.Column) string {
	q := table.QuoteIdent(name)
	switch {
	case c.Charset != "":
		return "CONVERT(" + q + " USING utf8mb4)"
	case table.IsBinaryType(c.DataType):
		return "HEX(" + q + ")"
	case c.DataType == "bit":
		return "CAST(" + q + " AS UNSIGNED)"
	}
	return q
}

// convertedExprs returns the texts that compare a column whose type changed:
// the new column's value against the server's own conversion of the old
// value to the new type (a CAST that converts as storing into that type
// does), both rendered under the same session. ok is false for the
// conversions no CAST reproduces (those columns are left out and reported).
func convertedExprs(sname, gname string, s, g table.Column) (se, ge string, ok bool) {
	sq, gq := table.QuoteIdent(sname), table.QuoteIdent(gname)
	cast := func(to string) (string, string, bool) {
		return "CAST(" + sq + " AS " + to + ")", gq, true
	}
	numeric := func(t string) bool {
		switch t {
		case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "year", "bit":
			return true
		}
		return false
	}
	temporal := func(t string) bool {
		switch t {
		case "date", "datetime", "timestamp", "time":
			return true
		}
		return false
	}
	args := func(ct string) string {
		_, rest, _ := strings.Cut(ct, "(")
		a, _, _ := strings.Cut(rest, ")")
		return a
	}
	fsp := func(c table.Column) string {
		if a := args(c.ColumnType); a != "" {
			return "(" + a + ")"
		}
		return ""
	}
	switch g.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint":
		if !numeric(s.DataType) && !temporal(s.DataType) && s.DataType != "enum" && s.DataType != "set" {
			return "", "", false
		}
		if g.Unsigned {
			return cast("UNSIGNED")
		}
		return cast("SIGNED")
	case "decimal":
		if !numeric(s.DataType) && !temporal(s.DataType) {
			return "", "", false
		}
		return cast("DECIMAL(" + args(g.ColumnType) + ")")
	case "double", "float":
		if !numeric(s.DataType) {
			return "", "", false
		}
		return cast(strings.ToUpper(g.DataType))
	case "date":
		if !temporal(s.DataType) {
			return "", "", false
		}
		return cast("DATE")
	case "datetime", "timestamp":
		if !temporal(s.DataType) || s.DataType == "time" {
			return "", "", false
		}
		return cast("DATETIME" + fsp(g))
	case "time":
		if !temporal(s.DataType) {
			return "", "", false
		}
		return cast("TIME" + fsp(g))
	case "bit":
		if !numeric(s.DataType) {
			return "", "", false
		}
		return "CAST(" + sq + " AS UNSIGNED)", "CAST(" + gq + " AS UNSIGNED)", true
	case "binary":
		// BINARY(n) stores the old value's bytes (a number's text) padded
		// with 0x00 to n bytes, as CAST to BINARY(n) pads them.
		switch s.DataType {
		case "tinyint", "smallint", "mediumint", "int", "bigint", "decimal":
		default:
			if !table.IsStringType(s.DataType) {
				return "", "", false
			}
		}
		return "HEX(CAST(" + sq + " AS BINARY(" + args(g.ColumnType) + ")))", "HEX(" + gq + ")", true
	}
	if g.Charset == "" || g.DataType == "enum" || g.DataType == "set" {
		if (g.DataType == "enum" || g.DataType == "set") && s.Charset != "" {
			return "CONVERT(" + sq + " USING utf8mb4)", "CONVERT(" + gq + " USING utf8mb4)", true
		}
		return "", "", false
	}
	// A character column: the text the server stores for the old value.
	switch {
	case s.Charset != "":
		se = "CONVERT(" + sq + " USING utf8mb4)"
	case s.DataType == "float":
		se = "CONVERT(CONCAT(" + sq + ") USING utf8mb4)" // FLOAT's own digits, as ALTER stores them
	case s.DataType == "bit" && strings.HasSuffix(g.DataType, "text"):
		// Into TEXT the server copies the column's bytes.
		se = "CONVERT(CONVERT(CAST(" + sq + " AS BINARY) USING " + g.Charset + ") USING utf8mb4)"
	case s.DataType == "bit":
		se = "CAST(CAST(" + sq + " AS UNSIGNED) AS CHAR CHARACTER SET utf8mb4)"
	case numeric(s.DataType) || temporal(s.DataType):
		se = "CAST(" + sq + " AS CHAR CHARACTER SET utf8mb4)"
	default:
		return "", "", false
	}
	return se, "CONVERT(" + gq + " USING utf8mb4)", true
}

// comparableTypes reports whether the text of a value is the same in both column types.
func comparableTypes(s, g table.Column) bool {
	if s.ColumnType == g.ColumnType {
		return true
	}
	if g.DataType == "binary" {
		return false // padded with 0x00 to its length (convertedExprs)
	}
	family := func(c table.Column) string {
		switch c.DataType {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			return "int"
		case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
			return "text"
		case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
			if c.Charset == "" {
				return "bytes"
			}
			return "text"
		case "enum", "set":
			return "text"
		}
		return c.ColumnType // anything else must match exactly
	}
	return family(s) == family(g)
}

// compare opens the consistent pair of snapshots and compares the chunks
// (all of them when todo is nil). It returns the differing chunks.
func (c *checker) compare(ctx context.Context, todo []chunk) (diff []chunk, n int, rows int64, aligning time.Duration, err error) {
	// The snapshots need REPEATABLE READ; the pool's sessions are READ
	// COMMITTED (no gap locks for the repair's and the copier's locking
	// reads). The session's level, not SET TRANSACTION's: that covers only
	// the next transaction, and Align may open the source snapshot again
	// (the reader was ahead), which then ran READ COMMITTED and read rows
	// committed after its binlog position (TestSnapshotAfterRetry). The two
	// sessions are discarded, not handed back to the pool, so the setting
	// (and the open snapshot) ends with them.
	srcConn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer discard(srcConn)
	ghConn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer discard(ghConn)
	for _, conn := range []*sql.Conn{srcConn, ghConn} {
		if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	alignStart := time.Now()
	err = c.cfg.Align(ctx, func() (binlog.Position, error) {
		if c.mysql {
			return c.mysqlSnapshot(ctx, srcConn)
		}
		if _, err := srcConn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
			return binlog.Position{}, fmt.Errorf("open the source snapshot: %w", err)
		}
		return snapshotPosition(ctx, srcConn)
	}, func() error {
		_, err := ghConn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
		return err
	})
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("checksum: align the snapshots: %w", err)
	}
	aligning = time.Since(alignStart)
	c.cfg.Pause(ctx, "checksum:snapshots-open")

	// The chunk boundaries are read ahead on a connection of their own,
	// while the two snapshots sum the previous chunk: boundaries need no
	// snapshot (chunks are consecutive ranges, lo = the previous hi, the
	// last one open-ended, so they cover every key whatever moves), and
	// finding one costs a scan of ChunkRows keys that would otherwise sit
	// between two sums.
	//
	// The walk ends at the source snapshot's last key: the chunk after it
	// is open-ended, and holds on both sides only what the snapshots hold.
	// Boundaries read from the current state past it would follow the
	// application's inserts, and a paced checksum of 100-row chunks could
	// trail an application appending faster than it compares for ever.
	var last []any
	if todo == nil {
		if last, err = table.HighestKey(ctx, srcConn, c.cfg.Source, c.cfg.KeySource, c.cfg.KeyIndex); err != nil {
			return nil, 0, 0, 0, fmt.Errorf("checksum: the last key of %s: %w", c.cfg.Source.QuotedName(), err)
		}
	}
	walkCtx, stopWalk := context.WithCancel(ctx)
	defer stopWalk()
	// The walker holds up to two boundaries ahead (one sent, one waiting
	// to be): a chunk's size follows the sums before it (sizeFor) with a
	// delay of two chunks at most.
	chunks := make(chan chunk, 1)
	walkErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		next := c.walker(todo, last)
		for {
			ch, ok, err := next(walkCtx)
			if err != nil || !ok {
				walkErr <- err
				return
			}
			select {
			case chunks <- ch:
			case <-walkCtx.Done():
				walkErr <- walkCtx.Err()
				return
			}
		}
	}()
	for ch := range chunks {
		n++
		if c.cfg.Throttle != nil {
			if err := c.cfg.Throttle(ctx); err != nil {
				return nil, 0, 0, 0, err
			}
		}
		gentle := c.cfg.Gentle != nil && c.cfg.Gentle()
		start := time.Now()
		var sc, gc int64
		var scrc, gcrc uint64
		srcSum := func(ctx context.Context) (err error) {
			sc, scrc, err = c.sum(ctx, srcConn, c.cfg.Source.QuotedName(), c.srcExpr, c.cfg.KeySource, ch)
			return err
		}
		ghSum := func(ctx context.Context) (err error) {
			gc, gcrc, err = c.sum(ctx, ghConn, c.cfg.Ghost.QuotedName(), c.ghExpr, c.cfg.KeyGhost, ch)
			return err
		}
		var slowest time.Duration // the longer of the two sums
		if gentle {
			// One after the other: one CPU, the other left to the application.
			if err := srcSum(ctx); err != nil {
				return nil, 0, 0, 0, err
			}
			mid := time.Now()
			if err := ghSum(ctx); err != nil {
				return nil, 0, 0, 0, err
			}
			slowest = max(mid.Sub(start), time.Since(mid))
		} else {
			// Both sides at once: each snapshot has its own connection.
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return srcSum(gctx) })
			g.Go(func() error { return ghSum(gctx) })
			if err := g.Wait(); err != nil {
				return nil, 0, 0, 0, err
			}
			slowest = time.Since(start)
		}
		took := time.Since(start)
		rows += sc
		if sc != gc || scrc != gcrc {
			diff = append(diff, ch)
			c.logRowDiffs(ctx, srcConn, ghConn, ch)
		}
		if todo == nil {
			c.size.Store(sizeFor(c.size.Load(), max(sc, gc), slowest, gentle, c.cfg.GentleChunkTime, c.cfg.ChunkRows))
			if c.cfg.Progress != nil {
				c.cfg.Progress(rows, false)
			}
		}
		if c.cfg.Pace != nil {
			if err := c.cfg.Pace(ctx, took, sc); err != nil {
				return nil, 0, 0, 0, err
			}
		}
	}
	if err := <-walkErr; err != nil {
		return nil, 0, 0, 0, err
	}
	return diff, n, rows, aligning, nil
}

// maxLoggedDiffs caps the differing rows logged per chunk.
const maxLoggedDiffs = 5

// logRowDiffs logs, at Warn, the rows of a differing chunk that differ
// between the two snapshots (at most maxLoggedDiffs): the key's bytes in
// hex (keys equal under a collation but not byte-equal show apart) and
// each side's row. A repair follows, so this is the only record of what
// the applier or the copy got wrong.
func (c *checker) logRowDiffs(ctx context.Context, srcConn, ghConn *sql.Conn, ch chunk) {
	read := func(conn *sql.Conn, tbl, expr string, key, cols []string) (map[string][2]string, []string, error) {
		where, args := rangeWhere(key, ch)
		hexKey := make([]string, len(key))
		for i, k := range key {
			hexKey[i] = "HEX(" + table.QuoteIdent(k) + ")"
		}
		quoted := make([]string, len(cols))
		for i, col := range cols {
			quoted[i] = "QUOTE(" + table.QuoteIdent(col) + ")"
		}
		q := dbconn.Tag + "SELECT CONCAT_WS(',', " + strings.Join(hexKey, ", ") + "), " + expr + ", CONCAT_WS(', ', " + strings.Join(quoted, ", ") + ") FROM " + tbl + " WHERE " + where
		rows, err := conn.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, nil, err
		}
		defer rows.Close()
		m := map[string][2]string{}
		var order []string
		for rows.Next() {
			var k, crc string
			var row sql.NullString
			if err := rows.Scan(&k, &crc, &row); err != nil {
				return nil, nil, err
			}
			m[k] = [2]string{crc, row.String}
			order = append(order, k)
		}
		return m, order, rows.Err()
	}
	src, sorder, err := read(srcConn, c.cfg.Source.QuotedName(), c.srcExpr, c.cfg.KeySource, c.cfg.SourceColumns)
	if err != nil {
		c.cfg.Logger.Warn("checksum: reading the differing chunk's rows failed", "err", err)
		return
	}
	gh, gorder, err := read(ghConn, c.cfg.Ghost.QuotedName(), c.ghExpr, c.cfg.KeyGhost, c.cfg.GhostColumns)
	if err != nil {
		c.cfg.Logger.Warn("checksum: reading the differing chunk's rows failed", "err", err)
		return
	}
	var out []string
	for _, k := range sorder {
		g, ok := gh[k]
		switch {
		case !ok:
			out = append(out, "key 0x"+k+": only in the source: "+src[k][1])
		case g[0] != src[k][0]:
			out = append(out, "key 0x"+k+": source "+src[k][1]+" | new table "+g[1])
		}
	}
	for _, k := range gorder {
		if _, ok := src[k]; !ok {
			out = append(out, "key 0x"+k+": only in the new table: "+gh[k][1])
		}
	}
	n := len(out)
	if n > maxLoggedDiffs {
		out = out[:maxLoggedDiffs]
	}
	c.cfg.Logger.Warn("checksum: rows differ between the snapshots", "chunk_lo", fmt.Sprint(ch.lo), "chunk_hi", fmt.Sprint(ch.hi),
		"rows", n, "first", strings.Join(out, "; "))
}

// minGentleRows: a gentle chunk's fewest rows (sizeFor); firstGentleRows:
// the first chunk's rows when the checksum starts gentle.
const (
	minGentleRows   = 100
	firstGentleRows = 1000
)

// sizeFor is the next chunk's rows after a chunk of rows rows whose slower
// sum took slowest: ChunkRows unless gentle; gentle, the rows one sum reads
// in about target at the rate just seen (at most twice the last size, and
// between minGentleRows and ChunkRows).
func sizeFor(last, rows int64, slowest time.Duration, gentle bool, target time.Duration, chunkRows int) int64 {
	if !gentle {
		return int64(chunkRows)
	}
	if rows <= 0 || slowest <= 0 {
		return min(last, int64(chunkRows))
	}
	want := int64(float64(rows) * float64(target) / float64(slowest))
	want = min(want, 2*max(last, minGentleRows))
	return min(max(want, minGentleRows), int64(chunkRows))
}

// walker yields the chunks: the given ones, or consecutive key ranges of
// c.size rows of the source (read from its current state, from the pool)
// up to last (the snapshot's last key; nil: none), then the open-ended one
// after them.
func (c *checker) walker(todo []chunk, last []any) func(context.Context) (chunk, bool, error) {
	if todo != nil {
		i := 0
		return func(context.Context) (chunk, bool, error) {
			if i >= len(todo) {
				return chunk{}, false, nil
			}
			i++
			return todo[i-1], true, nil
		}
	}
	var lo []any
	done := false
	order := table.QuoteIdents(c.cfg.KeySource)
	return func(ctx context.Context) (chunk, bool, error) {
		if done {
			return chunk{}, false, nil
		}
		if last == nil {
			done = true
			return chunk{lo: lo}, true, nil // an empty snapshot: one open-ended chunk
		}
		where, args := table.RangeWhere(c.cfg.KeySource, lo, last)
		q := dbconn.Tag + "SELECT " + table.KeySelect(c.cfg.Source, c.cfg.KeySource) + " FROM " + c.cfg.Source.QuotedName() +
			" FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where +
			" ORDER BY " + order + fmt.Sprintf(" LIMIT 1 OFFSET %d", max(c.size.Load(), 1)-1)
		hi, err := table.ScanKey(ctx, c.db, c.cfg.Source, c.cfg.KeySource, q, args...)
		if err != nil {
			return chunk{}, false, fmt.Errorf("checksum: walk %s: %w", c.cfg.Source.QuotedName(), err)
		}
		ch := chunk{lo: lo, hi: hi} // hi nil: the last chunk, to the end
		if hi == nil {
			done = true
		}
		lo = hi
		return ch, true, nil
	}
}

func (c *checker) sum(ctx context.Context, conn *sql.Conn, tbl, expr string, key []string, ch chunk) (int64, uint64, error) {
	where, args := rangeWhere(key, ch)
	var n int64
	var crc sql.Null[uint64]
	q := dbconn.Tag + "SELECT COUNT(*), BIT_XOR(" + expr + ") FROM " + tbl + " WHERE " + where
	if err := conn.QueryRowContext(ctx, q, args...).Scan(&n, &crc); err != nil {
		return 0, 0, fmt.Errorf("checksum %s: %w", tbl, err)
	}
	return n, crc.V, nil
}

// repair re-copies a chunk: its ghost rows are replaced by the source's
// current rows, read with a shared lock (see the copier for why), in pieces
// of at most MaxChunkRows rows, each its own transaction: consecutive key
// ranges (lo, mid], (mid, ...], ... read from the source's current state,
// so together they cover the chunk whatever moves. It returns the number of
// INSERT ... SELECT statements run.
func (c *checker) repair(ctx context.Context, ch chunk) (int, error) {
	maxRows := c.cfg.MaxChunkRows
	if maxRows <= 0 || maxRows > c.cfg.ChunkRows {
		maxRows = c.cfg.ChunkRows
	}
	order := table.QuoteIdents(c.cfg.KeySource)
	all := c.allPairs()
	sel := make([]string, len(all.source)) // the copy's own conversions (SourceExprs)
	for i, col := range all.source {
		sel[i] = table.QuoteIdent(col)
		if i < len(c.cfg.SourceExprs) && c.cfg.SourceExprs[i] != "" {
			sel[i] = c.cfg.SourceExprs[i]
		}
	}
	n := 0
	lo := ch.lo
	for {
		// The piece's upper end: the maxRows-th key after lo, below ch.hi.
		where, args := table.RangeWhere(c.cfg.KeySource, lo, ch.hi)
		q := dbconn.Tag + "SELECT " + table.KeySelect(c.cfg.Source, c.cfg.KeySource) + " FROM " + c.cfg.Source.QuotedName() +
			" FORCE INDEX (" + table.QuoteIdent(c.cfg.KeyIndex) + ") WHERE " + where +
			" ORDER BY " + order + fmt.Sprintf(" LIMIT 1 OFFSET %d", maxRows-1)
		mid, err := table.ScanKey(ctx, c.db, c.cfg.Source, c.cfg.KeySource, q, args...)
		if err != nil {
			return n, fmt.Errorf("checksum repair: walk %s: %w", c.cfg.Source.QuotedName(), err)
		}
		piece := chunk{lo: lo, hi: mid}
		if mid == nil {
			piece.hi = ch.hi // the last piece, to the chunk's end
		}
		gwhere, gargs := rangeWhere(c.cfg.KeyGhost, piece)
		swhere, sargs := rangeWhere(c.cfg.KeySource, piece)
		err = dbconn.Retry(ctx, 10, func(ctx context.Context) error {
			tx, err := c.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback() //nolint:errcheck
			if _, err := tx.ExecContext(ctx, dbconn.Tag+"DELETE FROM "+c.cfg.Ghost.QuotedName()+" WHERE "+gwhere, gargs...); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, dbconn.Tag+"INSERT IGNORE INTO "+c.cfg.Ghost.QuotedName()+" ("+table.QuoteIdents(all.ghost)+") SELECT "+
				strings.Join(sel, ", ")+" FROM "+c.cfg.Source.QuotedName()+" WHERE "+swhere+" LOCK IN SHARE MODE", sargs...); err != nil {
				return err
			}
			if err := repairWarnings(ctx, tx, c.cfg.Ghost.QuotedName(), piece); err != nil {
				return err // rolled back
			}
			return tx.Commit()
		})
		n++
		if err != nil || mid == nil {
			return n, err
		}
		lo = mid
	}
}

// ErrRepairChanged is returned when a repair's INSERT IGNORE raised a
// warning that changes data (a value truncated or replaced): the copy's and
// the applier's writes are strict, and the repair must not store what they
// would have refused.
var ErrRepairChanged = errors.New("checksum repair: the conversion would change a value")

// repairWarnings rolls a repair piece back unless every warning it raised
// leaves the data as the server's ALTER would: a conversion that truncates
// or replaces a value is what the copy and the applier (both strict) refuse
// too. A duplicate key passes: the piece's ghost range was emptied first,
// so it is a row outside it under a unique key the source does not
// enforce, most likely one the applier has not rewritten yet; the skipped
// row leaves the chunk differing, and the next round compares it again
// (and fails the run when it still differs after the last).
func repairWarnings(ctx context.Context, tx *sql.Tx, ghost string, piece chunk) error {
	n, err := dbconn.CountWarnings(ctx, tx)
	if err != nil || n == 0 {
		return err
	}
	ws, err := dbconn.ReadWarnings(ctx, tx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if !w.Benign() {
			return fmt.Errorf("%w: writing %s after key %v raised %s %d: %s", ErrRepairChanged, ghost, piece.lo, w.Level, w.Code, w.Msg)
		}
	}
	if len(ws) < n {
		return fmt.Errorf("%w: writing %s after key %v raised %d warnings, of which the server kept %d (max_error_count): lower --max-chunk-rows", ErrRepairChanged, ghost, piece.lo, n, len(ws))
	}
	return nil
}

// discard closes conn without handing its session back to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

type pairs struct{ source, ghost []string }

// allPairs are every mapped column (the compared ones plus those skipped).
func (c *checker) allPairs() pairs {
	return pairs{c.cfg.SourceColumns, c.cfg.GhostColumns}
}

// firstDifference finds the first key in a chunk whose row differs.
func (c *checker) firstDifference(ctx context.Context, ch chunk) (string, error) {
	read := func(tbl, expr string, key []string) (map[string]uint64, []string, error) {
		where, args := rangeWhere(key, ch)
		rows, err := c.db.QueryContext(ctx, dbconn.Tag+"SELECT CONCAT_WS(',', "+table.QuoteIdents(key)+"), "+expr+" FROM "+tbl+" WHERE "+where+" ORDER BY "+table.QuoteIdents(key), args...)
		if err != nil {
			return nil, nil, err
		}
		defer rows.Close()
		m := map[string]uint64{}
		var order []string
		for rows.Next() {
			var k string
			var crc uint64
			if err := rows.Scan(&k, &crc); err != nil {
				return nil, nil, err
			}
			m[k] = crc
			order = append(order, k)
		}
		return m, order, rows.Err()
	}
	src, sorder, err := read(c.cfg.Source.QuotedName(), c.srcExpr, c.cfg.KeySource)
	if err != nil {
		return "", err
	}
	gh, gorder, err := read(c.cfg.Ghost.QuotedName(), c.ghExpr, c.cfg.KeyGhost)
	if err != nil {
		return "", err
	}
	for _, k := range sorder {
		if g, ok := gh[k]; !ok {
			return fmt.Sprintf("(%s) = (%s): missing from the new table", strings.Join(c.cfg.KeySource, ","), k), nil
		} else if g != src[k] {
			return fmt.Sprintf("(%s) = (%s): values differ", strings.Join(c.cfg.KeySource, ","), k), nil
		}
	}
	for _, k := range gorder {
		if _, ok := src[k]; !ok {
			return fmt.Sprintf("(%s) = (%s): only in the new table", strings.Join(c.cfg.KeyGhost, ","), k), nil
		}
	}
	return "(the difference moved: the tables are being written)", nil
}

// mysqlSnapshot opens the source snapshot on MySQL, which does not report
// the binlog position of a consistent snapshot: another session holds LOCK
// TABLES source READ while srcConn opens its snapshot and the binlog
// position P is read, then unlocks. Under that lock every transaction that
// wrote the source has committed (engine and binlog: its metadata lock is
// released only after its commit), so the snapshot holds every source change
// before P, and no source change can be logged between the snapshot and P.
// Writers to the source wait for the lock for those few milliseconds; the
// lock itself waits at most 5 s (lock_wait_timeout) for running writers.
func (c *checker) mysqlSnapshot(ctx context.Context, srcConn *sql.Conn) (binlog.Position, error) {
	lockConn, err := c.db.Conn(ctx)
	if err != nil {
		return binlog.Position{}, err
	}
	// Its lock_wait_timeout changes: never back into the pool.
	defer func() {
		_ = lockConn.Raw(func(any) error { return driver.ErrBadConn })
		_ = lockConn.Close()
	}()
	if _, err := lockConn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 5"); err != nil {
		return binlog.Position{}, err
	}
	if _, err := lockConn.ExecContext(ctx, dbconn.Tag+"LOCK TABLES "+c.cfg.Source.QuotedName()+" READ"); err != nil {
		return binlog.Position{}, fmt.Errorf("lock the source to open the snapshot: %w", err)
	}
	defer lockConn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES") //nolint:errcheck
	if _, err := srcConn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return binlog.Position{}, fmt.Errorf("open the source snapshot: %w", err)
	}
	return binlog.CurrentPosition(ctx, lockConn)
}

func snapshotPosition(ctx context.Context, conn *sql.Conn) (binlog.Position, error) {
	rows, err := conn.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return binlog.Position{}, err
	}
	defer rows.Close()
	var p binlog.Position
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return p, err
		}
		switch strings.ToLower(k) {
		case "binlog_snapshot_file":
			p.File = v
		case "binlog_snapshot_position":
			var off uint64
			if _, err := fmt.Sscan(v, &off); err != nil {
				return p, fmt.Errorf("parse %s=%q: %w", k, v, err)
			}
			p.Offset = uint32(off)
		}
	}
	if p.File == "" {
		return p, errors.New("the server reports no Binlog_snapshot_file: recast's checksum needs MariaDB's consistent snapshot with binlog position")
	}
	return p, rows.Err()
}

func rangeWhere(key []string, ch chunk) (string, []any) { return table.RangeWhere(key, ch.lo, ch.hi) }
