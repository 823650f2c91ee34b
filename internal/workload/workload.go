// Package workload runs a concurrent write load against a table while keeping
// an exact in-memory shadow of what the table must contain, and verifies the
// table against the shadow. It backs the randomized correctness test, the
// cut-over stress test, cmd/recastload and the demo.
//
// The table (CreateTable) has one column of each kind recast must carry
// across a migration: signed and unsigned integers with their extremes,
// DECIMAL, FLOAT, DOUBLE, CHAR, utf8mb4 VARCHAR and TEXT with 4-byte
// characters, BLOB, VARBINARY with 0x00 and 0xFF bytes, DATE, DATETIME(6),
// TIMESTAMP(6), ENUM, SET, BIT, JSON and a latin1 VARCHAR; id is the primary
// key (chosen by the writers, no AUTO_INCREMENT) and u a secondary unique key.
//
// Writer w of N owns the ids with id mod N == w (and the unique values
// prefixed "w<w>."), so no two writers touch the same row and each writer
// knows the commit order of its rows: the shadow is exact.
//
// With Config.KeyOnU the table's primary key is u instead (id stays a unique
// key, and writers still own rows by id), so the identifying key is a
// collation-sensitive string, and the writers also change keys to values that
// are equal under the collation but different in bytes (see keyonu.go).
package workload

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config describes a workload.
type Config struct {
	Schema, Table string
	Writers       int   // concurrent writer goroutines, each with its own connection
	Rows          int   // rows created by Prepare
	OpsPerSec     int   // total target rate across writers; 0 = as fast as possible
	Seed          int64 // seeds the random choices (0 is a valid seed)
	Logger        *slog.Logger
	// ClientPrepared makes the writers send statements as text with the
	// values inlined (like interpolateParams=true). By default they use
	// server-side prepared statements, as most applications do, whatever the
	// DSN of the pool says.
	ClientPrepared bool
	// Frozen names columns the writers never write once Start runs: inserts
	// leave them NULL, updates skip them. A migration that drops or renames
	// a column needs it frozen, as an application would stop writing it first.
	Frozen []string
	// KeyOnU makes u (VARCHAR(64) utf8mb4_general_ci) the primary key, with
	// a UNIQUE KEY uk_id (id) instead of uk_u: the table's identifying key
	// is a collation-sensitive string. The writers then also change keys to
	// values equal under the collation but different in bytes (case,
	// trailing spaces, accents), alone, in multi-statement transactions, and
	// next to deletes and re-inserts of the "same" key (see keyonu.go).
	KeyOnU bool
	// BulkEvery, when > 0, makes about one op in BulkEvery of each writer a
	// bulk UPDATE of BulkRows of its rows in one statement (default 2000):
	// the server logs it as many rows events, so a binlog position between
	// two of them is a position a reader cannot start from.
	BulkEvery int
	BulkRows  int
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c Config) writers() int {
	if c.Writers <= 0 {
		return 1
	}
	return c.Writers
}

func (c Config) tableName() string { return quoteIdent(c.Schema) + "." + quoteIdent(c.Table) }

// Session settings of every workload connection: TIMESTAMPs are written and
// read in UTC, text travels as utf8mb4, and a value the column cannot hold is
// an error rather than a silent change (which would make the shadow wrong).
var sessionSetup = []string{
	"SET NAMES utf8mb4",
	"SET SESSION time_zone='+00:00', sql_mode='STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'",
}

// Writers wait at most this long for a lock (the server's default is much longer).
const writerLockWait = "SET SESSION innodb_lock_wait_timeout=10, lock_wait_timeout=10"

func setupConn(ctx context.Context, conn *sql.Conn, extra ...string) error {
	for _, q := range append(append([]string{}, sessionSetup...), extra...) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("workload: %s: %w", q, err)
		}
	}
	return nil
}

// CreateTableSQL returns the CREATE TABLE statement of the workload table
// (with id as the primary key; see Config.KeyOnU for the other layout).
func CreateTableSQL(schema, table string) string { return createTableSQL(schema, table, false) }

func createTableSQL(schema, table string, keyOnU bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s.%s (\n", quoteIdent(schema), quoteIdent(table))
	for _, c := range columns {
		fmt.Fprintf(&b, "  %s %s,\n", quoteIdent(c.name), c.ddl)
	}
	if keyOnU {
		b.WriteString("  PRIMARY KEY (`u`),\n  UNIQUE KEY `uk_id` (`id`)\n")
	} else {
		b.WriteString("  PRIMARY KEY (`id`),\n  UNIQUE KEY `uk_u` (`u`)\n")
	}
	b.WriteString(") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")
	return b.String()
}

// CreateTable creates the workload table cfg.Schema.cfg.Table (which must
// not exist).
func CreateTable(ctx context.Context, db *sql.DB, cfg Config) error {
	if _, err := db.ExecContext(ctx, createTableSQL(cfg.Schema, cfg.Table, cfg.KeyOnU)); err != nil {
		return fmt.Errorf("workload: create table %s: %w", cfg.tableName(), err)
	}
	return nil
}

// Id ranges. Most ids are small and dense; a few live near the top of the
// BIGINT range and a few are negative, so that copying by primary key
// meets large gaps and negative keys.
const (
	highBase int64 = 4_000_000_000_000_000_000
	negBase  int64 = -4_000_000_000_000_000_000
)

// prepareBatch is the number of rows per multi-row INSERT in Prepare.
const prepareBatch = 500

// prepareConns is the number of connections Prepare inserts on; each
// generates its batches itself (generation costs about as much as the insert).
const prepareConns = 4

// Prepare inserts cfg.Rows rows into the (empty) workload table with
// multi-row INSERTs on a few connections and returns the shadow of the
// table. The rows depend only on cfg.Seed and cfg.Rows.
func Prepare(ctx context.Context, db *sql.DB, cfg Config) (*Shadow, error) {
	log := cfg.logger()
	start := time.Now()
	sh := newShadow(cfg.Rows)
	nBatches := (cfg.Rows + prepareBatch - 1) / prepareBatch
	batches := make(chan int, nBatches)
	for i := range nBatches {
		batches <- i
	}
	close(batches)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		firstEr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstEr = err; cancel() })
	}
	head := insertHead(cfg.tableName())
	for range min(prepareConns, nBatches) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(ctx)
			if err != nil {
				fail(fmt.Errorf("workload: prepare: %w", err))
				return
			}
			defer conn.Close()
			if err := setupConn(ctx, conn); err != nil {
				fail(err)
				return
			}
			var b strings.Builder
			for bi := range batches {
				if ctx.Err() != nil {
					return
				}
				b.Reset()
				b.WriteString(head)
				r := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(bi)))
				first := bi*prepareBatch + 1
				last := min(first+prepareBatch-1, cfg.Rows)
				fs := make([]field, len(columns))
				for k := first; k <= last; k++ {
					id := prepareID(k)
					vals := randomRow(r, id, "p-"+strconv.Itoa(k))
					if cfg.KeyOnU {
						vals[colU] = keyValue(r, "p-"+strconv.Itoa(k))
					}
					if k > first {
						b.WriteByte(',')
					}
					b.WriteByte('(')
					for i, v := range vals {
						if i > 0 {
							b.WriteByte(',')
						}
						b.WriteString(literal(v.param))
						fs[i] = field{v: v.canon, null: v.null}
					}
					b.WriteByte(')')
					sh.put(id, pack(fs))
				}
				if _, err := conn.ExecContext(ctx, b.String()); err != nil {
					fail(fmt.Errorf("workload: prepare insert into %s: %w", cfg.tableName(), err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstEr != nil {
		return nil, firstEr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log.Info("workload prepared", "table", cfg.tableName(), "rows", cfg.Rows, "elapsed", time.Since(start).Round(time.Millisecond))
	return sh, nil
}

// prepareID returns the id of the k-th prepared row (1-based): mostly k, a
// few near the top of the BIGINT range and a few negative.
func prepareID(k int) int64 {
	switch {
	case k%199 == 0:
		return highBase + int64(k)
	case k%211 == 0:
		return negBase + int64(k)
	}
	return int64(k)
}

// value is a generated column value.
type value struct {
	param any // what is sent (nil: NULL)
	canon string
	null  bool
}

// uniqueSuffixes make u values non-ASCII now and then; uniqueness comes from
// the prefix, which never compares equal between two values.
var uniqueSuffixes = []string{"", "", "", "-é", "-😀", "-ß", "-x y"}

func uniqueValue(r *rand.Rand, prefix string) value {
	u := prefix + uniqueSuffixes[r.IntN(len(uniqueSuffixes))]
	return value{param: u, canon: u}
}

// randomRow returns a full row for id with a unique u built from uprefix.
func randomRow(r *rand.Rand, id int64, uprefix string) []value {
	vals := make([]value, len(columns))
	vals[colID] = value{param: id, canon: strconv.FormatInt(id, 10)}
	vals[colU] = uniqueValue(r, uprefix)
	for i := colU + 1; i < len(columns); i++ {
		vals[i] = randomValue(r, i)
	}
	return vals
}

func randomValue(r *rand.Rand, i int) value {
	p, c, null := columns[i].gen(r)
	if null {
		return value{null: true}
	}
	return value{param: p, canon: c}
}

func insertHead(table string) string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = quoteIdent(c.name)
	}
	return "INSERT INTO " + table + " (" + strings.Join(names, ",") + ") VALUES "
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// literal renders a parameter as an SQL literal for a utf8mb4 connection
// without NO_BACKSLASH_ESCAPES.
func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			panic("workload: non-finite float")
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []byte:
		if len(v) == 0 {
			return "''"
		}
		return "X'" + hex.EncodeToString(v) + "'"
	case string:
		var b strings.Builder
		b.Grow(len(v) + 2)
		b.WriteByte('\'')
		for i := 0; i < len(v); i++ {
			switch c := v[i]; c {
			case '\'':
				b.WriteString("\\'")
			case '\\':
				b.WriteString("\\\\")
			case 0:
				b.WriteString("\\0")
			case '\n':
				b.WriteString("\\n")
			case '\r':
				b.WriteString("\\r")
			case 0x1a:
				b.WriteString("\\Z")
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('\'')
		return b.String()
	default:
		panic(fmt.Sprintf("workload: no literal for %T", v))
	}
}

// interpolate replaces the ? placeholders of q (which has no other '?')
// with the literals of args.
func interpolate(q string, args []any) (string, error) {
	var b strings.Builder
	b.Grow(len(q) + 16*len(args))
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		if n >= len(args) {
			return "", errors.New("workload: more placeholders than arguments")
		}
		b.WriteString(literal(args[n]))
		n++
	}
	if n != len(args) {
		return "", errors.New("workload: more arguments than placeholders")
	}
	return b.String(), nil
}
