// Package check holds recast's preflight checks: everything that can be
// found wrong before a migration creates anything. Each check lives in its
// own file (check_*.go) and registers itself in init(); Run runs them in a
// fixed order (Check.Order) and stops at the first failure.
//
// The checks come in stages, each relying on what the earlier ones found:
//
//	10..29  the server and recast's session (--set-vars, binlog settings)
//	30..39  the user's privileges
//	40..49  the table (exists, base table, InnoDB, not system-versioned): Input.Source
//	50..59  the ALTER (parsed, nothing a copy cannot do): Input.Analysis
//	60..79  what a copy cannot carry over (triggers, foreign keys)
//	80..99  other runs (the per-table lock, helper tables left behind)
//	100..   the new definition, on a TEMPORARY copy: Input.Ghost, the chunk
//	        key, and the rows it would reject or change (NULLs, too-long
//	        strings, duplicates of a unique key)
//
// Checks marked CopyOnly matter only to the copy method; Input.Scope runs
// them apart (e.g. once the method is known).
//
// Every refusal is an *Error: one line with the cause and the fix.
package check

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/ddl"
	"github.com/recast-osc/recast/internal/table"
)

// Check is one preflight check.
type Check struct {
	// Name identifies the check in errors and tests ("binlog", "privileges").
	Name string
	// Order places the check; lower runs first. Orders are unique.
	Order int
	// CopyOnly: the check matters to the copy method only (ghost table,
	// chunked copy, swap), not to an ALTER the server runs in place.
	CopyOnly bool
	// Run returns nil when the check passes, an *Error when it refuses, or
	// another error when it could not find out (a query failed).
	Run func(ctx context.Context, in *Input) error
}

// Scope says which checks Run runs.
type Scope int

const (
	All      Scope = iota // every check
	Common                // all but the CopyOnly checks
	CopyOnly              // the CopyOnly checks only (after Common, on the same Input)
)

// Error is a refusal: what is wrong and what the user can do about it.
type Error struct {
	Check string // the check's name
	Cause string
	Fix   string
}

// Error is one line: "<cause>; fix: <fix>".
func (e *Error) Error() string {
	if e.Fix == "" {
		return e.Cause
	}
	return e.Cause + "; fix: " + e.Fix
}

func refuse(cause, fix string) *Error { return &Error{Cause: cause, Fix: fix} }

func refusef(fix, format string, args ...any) *Error {
	return &Error{Cause: fmt.Sprintf(format, args...), Fix: fix}
}

// Input is what the checks look at. The caller fills the first block; the
// checks fill the rest as they go.
type Input struct {
	DB *sql.DB
	// Conn is how DB was opened (user, host, --set-vars); the password is
	// never used here.
	Conn     dbconn.Config
	Database string
	Table    string
	Alter    string
	// Helper tables recast creates next to Table.
	GhostName, OldName, SentryName, CheckpointName, SwapName string
	// DropOld: the old table is dropped after the swap, so OldName is not used.
	DropOld bool
	// DropOldFirst, DropGhostFirst: the run drops a table under OldName, or
	// an interrupted run's ghost, checkpoint and swap-renamed ghost, before
	// it starts (--initially-drop-old-table, --initially-drop-ghost-table):
	// they are not refused.
	DropOldFirst, DropGhostFirst bool
	// Resume: the run continues an interrupted one, whose ghost and
	// checkpoint tables are expected.
	Resume bool
	// DST: the migration's time zone has daylight-saving changes (check
	// "key-type").
	DST    bool
	Logger *slog.Logger
	// Scope selects the checks (default All).
	Scope Scope

	// Server: filled by Run before the first check unless already set
	// (tests set them to fake a server).
	Version string            // @@version
	Flavor  string            // "mariadb" or "mysql"
	Globals map[string]string // lower-case name -> GLOBAL value
	Session map[string]string // lower-case name -> value in recast's session (after --set-vars)

	// Filled by the checks.
	Source   *table.Table  // the table (check "table")
	Analysis *ddl.Analysis // the ALTER (check "alter")
	// Ghost is the new definition, read from a temporary copy (check
	// "chunk-key"); nil when InnoDB has no temporary table of this kind
	// (FULLTEXT, partitions): the ghost table is then checked when created
	// (CheckGhost), and ghostLater is set until it is.
	Ghost    *table.Table
	GhostCol map[string]Col // lower(ghost column) -> default/extra (check "chunk-key")
	// GhostUnique are the new definition's unique keys (check "chunk-key").
	GhostUnique []UniqueKey
	Pairs       []ddl.ColumnPair // old -> new columns (check "chunk-key")
	Key         []string         // the chunk key's columns in the source (check "chunk-key")

	lock       *Lock // the per-table lock (check "lock"), held until Release
	ghostLater bool
}

// Col is what SHOW FULL COLUMNS says of a column beyond table.Column.
type Col struct {
	Default       sql.NullString
	AutoIncrement bool
	Generated     bool
}

// Lock returns the per-table lock the "lock" check took, or nil.
func (in *Input) Lock() *Lock { return in.lock }

// Release releases what the checks hold (the per-table lock). The caller
// calls it when the migration ends, whether the checks passed or not.
func (in *Input) Release() {
	if in.lock != nil {
		in.lock.Release()
		in.lock = nil
	}
}

func (in *Input) quotedTable() string {
	return table.QuoteIdent(in.Database) + "." + table.QuoteIdent(in.Table)
}

func (in *Input) quoted(name string) string {
	return table.QuoteIdent(in.Database) + "." + table.QuoteIdent(name)
}

func (in *Input) logger() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

var (
	mu       sync.Mutex
	registry []Check
)

// Register adds a check; called from init(). It panics on a duplicate name
// or order: the order must be total.
func Register(c Check) {
	mu.Lock()
	defer mu.Unlock()
	if c.Name == "" || c.Run == nil {
		panic("check: Register needs a name and a Run function")
	}
	for _, r := range registry {
		if r.Name == c.Name || r.Order == c.Order {
			panic(fmt.Sprintf("check: %q (order %d) clashes with %q (order %d)", c.Name, c.Order, r.Name, r.Order))
		}
	}
	registry = append(registry, c)
}

// Checks returns the registered checks in the order Run runs them.
func Checks() []Check {
	mu.Lock()
	defer mu.Unlock()
	out := append([]Check(nil), registry...)
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out
}

// Run loads the server's settings into in (unless set) and runs every check
// in order. It returns the first failure: an *Error for a refusal. The
// caller must call in.Release() in any case.
func Run(ctx context.Context, in *Input) error {
	if err := in.loadServer(ctx); err != nil {
		return err
	}
	for _, c := range Checks() {
		if (in.Scope == Common && c.CopyOnly) || (in.Scope == CopyOnly && !c.CopyOnly) {
			continue
		}
		if err := runOne(ctx, in, c); err != nil {
			return err
		}
	}
	return nil
}

// runOne runs check c; a refusal names it.
func runOne(ctx context.Context, in *Input, c Check) error {
	start := time.Now()
	err := c.Run(ctx, in)
	in.logger().Debug("preflight check", "check", c.Name, "took", time.Since(start).Round(time.Millisecond), "err", err)
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		if ce.Check == "" {
			ce.Check = c.Name
		}
		return ce
	}
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("preflight check %s: %w", c.Name, err)
}

// serverVars are the variables the checks read.
var serverVars = []string{"log_bin", "binlog_format", "binlog_row_image", "log_bin_compress", "version", "version_comment",
	"binlog_transaction_compression", "binlog_row_value_options"} // the last two: MySQL

// loadServer reads the version and the GLOBAL and SESSION values of serverVars.
func (in *Input) loadServer(ctx context.Context) error {
	if in.Globals != nil {
		return nil
	}
	in.Globals, in.Session = map[string]string{}, map[string]string{}
	for _, scope := range []string{"GLOBAL", "SESSION"} {
		m := in.Globals
		if scope == "SESSION" {
			m = in.Session
		}
		if err := in.loadVars(ctx, scope, m); err != nil {
			return fmt.Errorf("read server variables: %w", err)
		}
	}
	in.Version = in.Globals["version"]
	in.Flavor = "mysql"
	if strings.Contains(strings.ToLower(in.Version+" "+in.Globals["version_comment"]), "mariadb") {
		in.Flavor = "mariadb"
	}
	return nil
}

// loadVars reads the scope's values of serverVars into m.
func (in *Input) loadVars(ctx context.Context, scope string, m map[string]string) error {
	// One connection: session values are recast's own (with --set-vars).
	rows, err := in.DB.QueryContext(ctx, "SHOW "+scope+" VARIABLES WHERE Variable_name IN ('"+strings.Join(serverVars, "','")+"')")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		m[strings.ToLower(k)] = v
	}
	return rows.Err()
}

// discard closes a connection for good instead of returning it to the pool
// (its session holds state: a lock, a temporary table).
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// quoteString renders s as an SQL string literal for messages.
func quoteString(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		s = s[:maxLen] + "…"
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\x00", `\0`).Replace(s) + "'"
}

// names renders a list of names for a message: `a`, `b`, `c`.
func names(ns []string) string {
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = table.QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
