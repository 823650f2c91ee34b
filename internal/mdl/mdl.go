// Package mdl finds the sessions that hold, or wait for, a metadata lock on a
// table that an exclusive lock request (LOCK TABLES ... WRITE, RENAME, an
// INSTANT ALTER) would queue behind, and runs such a request under a policy:
// wait while blockers exist, then try with a short lock wait, back off,
// retry, optionally kill the blockers, and give up cleanly.
//
// Why it matters: a statement that waits for an exclusive metadata lock makes
// every new statement on the table queue behind it. One forgotten
// SELECT ... SLEEP(100), or one idle transaction that read the table, turns a
// one-second cut-over into an outage (MariaDB's lock_wait_timeout defaults to
// 86400 s). So recast looks before it asks.
//
// Two sources:
//
//   - information_schema.METADATA_LOCK_INFO, when the metadata_lock_info
//     plugin is loaded (INSTALL SONAME 'metadata_lock_info'; Config.LoadPlugin
//     does it when privileged): exactly who holds which lock on the table,
//     and for how long. Pending requests do not show there; a session that
//     waits shows in the processlist as "Waiting for table metadata lock".
//   - otherwise, the processlist and INNODB_TRX: running statements that name
//     the table are blockers; open transactions older than MinAge are
//     possible blockers (Certain false): without the plugin nobody can tell
//     which tables an idle transaction has read. Possible blockers are
//     reported, never waited for, never killed.
//
// Run judges holders by age against the lock timeout L (see tracker.wait):
// while an exclusive request is pending no new lock is granted, so an attempt
// succeeds if every current holder ends within L. Holders as old as L are
// waited for (and killed if the policy says so); younger ones are watched for
// at most L, the youngest for at most MinAge.
//
// recast's own sessions are never blockers: their statements start with
// dbconn.Tag, and connections holding locks (the cut-over's) register their
// ids with RegisterOwn.
package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
)

// Blocker is a session in the way of an exclusive metadata lock on the table.
type Blocker struct {
	ID      int64 // connection (thread) id
	User    string
	Host    string
	DB      string
	Command string // processlist COMMAND: Query, Sleep, Execute, ...
	State   string
	// Statement is the running statement, truncated to StatementMax
	// characters ("" when the session is idle).
	Statement string
	QueryID   int64
	// Time is how long the session has been in its current command
	// (running the statement, or idle).
	Time time.Duration
	// LockMode is the metadata lock held on the table (MDL_SHARED_READ, ...);
	// "" when not known (no plugin).
	LockMode string
	// LockAge is how long the lock has been held (plugin only).
	LockAge time.Duration
	// InTrx: the session has an open InnoDB transaction (an autocommit
	// read-only statement does not count).
	InTrx           bool
	TrxAge          time.Duration
	TrxRowsModified int64
	// TrxUnknown: the session sits idle holding a metadata lock on the
	// table, so a transaction (or LOCK TABLES) keeps it, but INNODB_TRX did
	// not list it: InnoDB refreshes that table only after 100 ms in which
	// nobody read it, so under frequent polling (monitoring, other tools)
	// it can be stale for as long as the polling lasts. TrxAge and
	// TrxRowsModified are then unknown and the blocker is never killed.
	// Also set on MySQL when INNODB_TRX could not be read (error 3854, see
	// mysqlTransactions): TrxAge is known, TrxRowsModified is not.
	TrxUnknown bool
	// Waiting: the session itself waits for a metadata lock on the table
	// (someone else's DDL, queued like recast's request would be).
	Waiting bool
	// Certain: the session is known to hold or want a lock on the table.
	// False for an open transaction whose tables are unknown (no plugin).
	Certain bool

	trxStarted string // identity of the transaction
}

// StatementMax is how much of a blocker's statement is kept.
const StatementMax = 200

// Age is how long the blocker has been in the way: the longest of the
// lock's, the transaction's and the running statement's age.
func (b Blocker) Age() time.Duration {
	a := max(b.LockAge, b.TrxAge)
	if b.Statement != "" {
		a = max(a, b.Time)
	}
	return a
}

// Key identifies the blocker across observations: the session and its
// transaction, or its statement when it has no transaction.
func (b Blocker) Key() string {
	if b.InTrx {
		return fmt.Sprintf("%d/trx@%s", b.ID, b.trxStarted)
	}
	return fmt.Sprintf("%d/q%d", b.ID, b.QueryID)
}

// Idle reports whether the session runs no statement.
func (b Blocker) Idle() bool { return b.Statement == "" || b.Command == "Sleep" }

// String describes the blocker in one line, for logs and error messages.
func (b Blocker) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "thread %d (%s@%s", b.ID, b.User, b.Host)
	if b.DB != "" {
		fmt.Fprintf(&s, ", db %s", b.DB)
	}
	s.WriteString(")")
	switch {
	case b.Waiting:
		fmt.Fprintf(&s, " waiting %s for the table's metadata lock: %q", round(b.Time), b.Statement)
	case b.Idle():
		fmt.Fprintf(&s, " idle %s", round(b.Time))
	default:
		fmt.Fprintf(&s, " running %s", round(b.Time))
		if b.State != "" {
			fmt.Fprintf(&s, " (%s)", b.State)
		}
		fmt.Fprintf(&s, ": %q", b.Statement)
	}
	switch {
	case b.TrxUnknown && b.TrxAge > 0:
		fmt.Fprintf(&s, "; transaction open %s, its size unknown (INNODB_TRX unreadable)", round(b.TrxAge))
	case b.TrxUnknown:
		s.WriteString("; transaction open, its age and size unknown (not yet listed in INNODB_TRX)")
	case b.InTrx:
		fmt.Fprintf(&s, "; transaction open %s, %d row(s) modified", round(b.TrxAge), b.TrxRowsModified)
	}
	if b.LockMode != "" {
		fmt.Fprintf(&s, "; holds %s", b.LockMode)
		if b.LockAge > 0 {
			fmt.Fprintf(&s, " for %s", round(b.LockAge))
		}
	}
	if !b.Certain {
		s.WriteString("; possible blocker: its tables are unknown without the metadata_lock_info plugin")
	}
	return s.String()
}

// LogValue renders the blocker as a group of attributes.
func (b Blocker) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Int64("thread", b.ID), slog.String("user", b.User+"@"+b.Host),
		slog.String("command", b.Command), slog.Duration("time", round(b.Time)),
	}
	if b.DB != "" {
		attrs = append(attrs, slog.String("db", b.DB))
	}
	if b.State != "" {
		attrs = append(attrs, slog.String("state", b.State))
	}
	if b.Statement != "" {
		attrs = append(attrs, slog.String("statement", b.Statement))
	}
	switch {
	case b.TrxUnknown && b.TrxAge > 0:
		attrs = append(attrs, slog.Duration("trx_age", round(b.TrxAge)), slog.String("trx", "size unknown (INNODB_TRX unreadable)"))
	case b.TrxUnknown:
		attrs = append(attrs, slog.String("trx", "open, not yet listed in INNODB_TRX"))
	case b.InTrx:
		attrs = append(attrs, slog.Duration("trx_age", round(b.TrxAge)), slog.Int64("rows_modified", b.TrxRowsModified))
	}
	if b.LockMode != "" {
		attrs = append(attrs, slog.String("lock", b.LockMode))
	}
	if b.Waiting {
		attrs = append(attrs, slog.Bool("waiting", true))
	}
	if !b.Certain {
		attrs = append(attrs, slog.Bool("possible", true))
	}
	return slog.GroupValue(attrs...)
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// own holds the connection ids of recast's own lock-holding sessions.
var own sync.Map

// RegisterOwn marks a connection id as recast's own: it is never reported or
// killed. The returned function unregisters it.
func RegisterOwn(id int64) (unregister func()) {
	own.Store(id, struct{}{})
	return func() { own.Delete(id) }
}

func isOwn(id int64) bool {
	_, ok := own.Load(id)
	return ok
}

// Config describes what a Finder looks for.
type Config struct {
	Schema, Table string
	// MinAge: Find reports no session in the way for less than this: a
	// short query ends long before a lock wait would matter, and on a busy
	// table there always are some. Before requesting the lock, Run gives
	// such young holders up to MinAge to end. Default 500 ms.
	MinAge time.Duration
	// LoadPlugin installs the metadata_lock_info plugin when it is not
	// loaded (needs the privilege to INSERT into mysql.plugin).
	LoadPlugin bool
	// NoPlugin ignores the plugin even when it is loaded (tests of the
	// fallback).
	NoPlugin bool
	// Exclude, if set, names further sessions that are never blockers.
	Exclude func(id int64) bool
	Logger  *slog.Logger
}

// Finder finds the blockers of one table.
type Finder struct {
	db      *sql.DB
	cfg     Config
	plugin  bool
	lockAge bool // METADATA_LOCK_INFO has LOCK_TIME_MS
	// mysql: a MySQL server, whose metadata locks are in
	// performance_schema.metadata_locks (plugin is then true when that
	// table can be read) and whose processlist has no TIME_MS or QUERY_ID.
	mysql bool
}

// NewFinder checks whether the metadata_lock_info plugin is loaded (and loads
// it if cfg.LoadPlugin asks); without it the Finder falls back to the
// processlist and INNODB_TRX.
func NewFinder(ctx context.Context, db *sql.DB, cfg Config) (*Finder, error) {
	if cfg.Schema == "" || cfg.Table == "" {
		return nil, errors.New("mdl: schema and table are required")
	}
	if cfg.MinAge <= 0 {
		cfg.MinAge = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Finder{db: db, cfg: cfg}
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("mdl: %w", err)
	}
	f.mysql = srv.MySQL()
	if cfg.NoPlugin {
		return f, nil
	}
	if f.mysql {
		// performance_schema.metadata_locks needs performance_schema on
		// and the wait/lock/metadata/sql/mdl instrument (on by default).
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.setup_instruments
			WHERE NAME = 'wait/lock/metadata/sql/mdl' AND ENABLED = 'YES'`).Scan(&n)
		if err != nil || n == 0 {
			cfg.Logger.Warn("performance_schema.metadata_locks is not available (performance_schema off or the wait/lock/metadata/sql/mdl instrument disabled); finding metadata-lock blockers from the processlist and INNODB_TRX", "err", err)
			return f, nil
		}
		f.plugin = true
		return f, nil
	}
	loaded, err := PluginLoaded(ctx, db)
	if err != nil {
		return nil, err
	}
	if !loaded && cfg.LoadPlugin {
		if err := LoadPlugin(ctx, db); err != nil {
			cfg.Logger.Warn("could not load the metadata_lock_info plugin; finding metadata-lock blockers from the processlist and INNODB_TRX (idle transactions that read the table are only possible blockers)", "err", err)
		} else {
			cfg.Logger.Info("loaded the metadata_lock_info plugin")
			loaded = true
		}
	}
	f.plugin = loaded
	if loaded {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = 'METADATA_LOCK_INFO' AND COLUMN_NAME = 'LOCK_TIME_MS'`).Scan(&n); err != nil {
			return nil, fmt.Errorf("mdl: %w", err)
		}
		f.lockAge = n > 0
	}
	return f, nil
}

// Plugin reports whether the Finder reads METADATA_LOCK_INFO.
func (f *Finder) Plugin() bool { return f.plugin }

// Source names where the Finder looks, for logs and the dry run.
func (f *Finder) Source() string {
	switch {
	case f.mysql && f.plugin:
		return "performance_schema.metadata_locks"
	case f.mysql:
		return "processlist and INNODB_TRX (performance_schema.metadata_locks not available)"
	}
	if f.plugin {
		return "information_schema.METADATA_LOCK_INFO (metadata_lock_info plugin)"
	}
	return "processlist and INNODB_TRX (metadata_lock_info plugin not loaded: --load-mdl-plugin)"
}

// PluginLoaded reports whether the metadata_lock_info plugin is active.
func PluginLoaded(ctx context.Context, db *sql.DB) (bool, error) {
	var status string
	err := db.QueryRowContext(ctx, `SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO'`).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mdl: read information_schema.PLUGINS: %w", err)
	}
	return status == "ACTIVE", nil
}

// CanLoadPlugin reports whether the current user may install the
// metadata_lock_info plugin (INSERT on mysql.plugin, granted globally, on
// the mysql schema or on the table; roles are not looked at).
func CanLoadPlugin(ctx context.Context, db *sql.DB) (bool, error) {
	const grantee = `CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')`
	var n int
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = `+grantee+` AND PRIVILEGE_TYPE = 'INSERT') +
		(SELECT COUNT(*) FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = `+grantee+` AND TABLE_SCHEMA = 'mysql' AND PRIVILEGE_TYPE = 'INSERT') +
		(SELECT COUNT(*) FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = `+grantee+` AND TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'plugin' AND PRIVILEGE_TYPE = 'INSERT')`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("mdl: read the privileges: %w", err)
	}
	return n > 0, nil
}

// LoadPlugin installs the metadata_lock_info plugin (MariaDB). MySQL needs
// none: its metadata locks are in performance_schema.metadata_locks.
func LoadPlugin(ctx context.Context, db *sql.DB) error {
	if srv, err := flavor.Detect(ctx, db); err != nil {
		return fmt.Errorf("mdl: %w", err)
	} else if srv.MySQL() {
		return nil
	}
	_, err := db.ExecContext(ctx, dbconn.Tag+"INSTALL SONAME 'metadata_lock_info'")
	if err != nil && !strings.Contains(err.Error(), "already") {
		return err
	}
	return nil
}

type proc struct {
	id                      int64
	user, host, db, command string
	state, info             string
	queryID                 int64
	time                    time.Duration
}

type trx struct {
	started      string
	age          time.Duration
	rowsModified int64
	autocommitRO bool
	// autocommit: MySQL reports the transaction as a single autocommit
	// statement's (events_transactions_current.AUTOCOMMIT); its age is then
	// at most the statement's (MySQL's trx_started can be older).
	autocommit bool
	// sizeUnknown: read from performance_schema (INNODB_TRX failed, see
	// mysqlTransactions): rows modified unknown, so never killed.
	sizeUnknown bool
}

// Find returns the sessions in the way of an exclusive lock on the table,
// ordered by thread id: certain blockers (holders, and waiting DDL) older
// than MinAge and, without the plugin, possible ones (open transactions older
// than MinAge).
func (f *Finder) Find(ctx context.Context) ([]Blocker, error) {
	return f.find(ctx, f.cfg.MinAge)
}

// find is Find with another age limit (0: every holder).
func (f *Finder) find(ctx context.Context, minAge time.Duration) ([]Blocker, error) {
	procs, err := f.processlist(ctx)
	if err != nil {
		return nil, err
	}
	trxs, err := f.transactions(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[int64]*Blocker{}
	mk := func(p proc) *Blocker {
		if b := byID[p.id]; b != nil {
			return b
		}
		b := &Blocker{ID: p.id, User: p.user, Host: p.host, DB: p.db, Command: p.command, State: p.state,
			QueryID: p.queryID, Time: p.time}
		if p.command != "Sleep" {
			b.Statement = truncate(p.info, StatementMax)
		}
		if t, ok := trxs[p.id]; ok && !t.autocommitRO {
			if t.autocommit && p.command != "Sleep" {
				t.age = min(t.age, p.time)
			}
			b.InTrx, b.TrxAge, b.TrxRowsModified, b.trxStarted = true, t.age, t.rowsModified, t.started
			b.TrxUnknown = t.sizeUnknown
		}
		byID[p.id] = b
		return b
	}
	if f.plugin {
		locks, err := f.locks(ctx)
		if err != nil {
			return nil, err
		}
		for id, l := range locks {
			p, ok := procs[id]
			if !ok {
				continue // ended in between
			}
			b := mk(p)
			b.LockMode, b.LockAge, b.Certain = l.mode, l.age, true
			if f.mysql && p.command == "Sleep" {
				// MySQL shows no lock age; an idle session took its lock
				// before its last statement ended, p.time ago.
				b.LockAge = max(b.LockAge, p.time)
			}
			b.Waiting = p.state == waitingMDL
			if p.command == "Sleep" && !b.InTrx {
				// Idle yet holding the lock: only an open transaction or
				// LOCK TABLES keeps a table lock past its statement.
				// INNODB_TRX can lag (see TrxUnknown); this cannot.
				b.InTrx, b.TrxUnknown = true, true
			}
		}
	}
	for _, p := range procs {
		if _, done := byID[p.id]; done || !f.references(p.db, p.info) {
			continue
		}
		switch {
		case p.state == waitingMDL:
			if !isDML(p.info) {
				b := mk(p)
				b.Waiting, b.Certain = true, true
			}
		case !f.plugin && p.command != "Sleep":
			mk(p).Certain = true
		}
	}
	if !f.plugin {
		for id, t := range trxs {
			p, ok := procs[id]
			if _, done := byID[id]; done || !ok || t.autocommitRO {
				continue
			}
			mk(p) // possible
		}
	}
	var out []Blocker
	for _, b := range byID {
		if b.Age() < minAge && !(b.Waiting && b.Time >= minAge) {
			continue
		}
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

const waitingMDL = "Waiting for table metadata lock"

func (f *Finder) excluded(p proc) bool {
	switch {
	case strings.HasPrefix(strings.TrimLeftFunc(p.info, unicode.IsSpace), strings.TrimSpace(dbconn.Tag)):
		return true
	case isOwn(p.id), f.cfg.Exclude != nil && f.cfg.Exclude(p.id):
		return true
	case p.command == "Daemon", strings.HasPrefix(p.command, "Binlog Dump"), p.user == "system user":
		return true
	}
	return false
}

// mysqlProcesslist is MySQL's processlist with the columns of MariaDB's
// (ID, USER, HOST, DB, COMMAND, TIME_MS, STATE, INFO, QUERY_ID). MySQL's
// TIME is whole seconds, so the time comes from the session's statement in
// events_statements_current: a running statement's TIMER_WAIT (so far), an
// idle session's time since its last statement ended (TIMER_END against the
// TIMER_START of this very query; timers are picoseconds). MySQL has no
// query id: the running statement's EVENT_ID (per thread) stands in for it,
// and is checked again right before KILL QUERY (see tracker.kill).
const mysqlProcesslist = dbconn.Tag + `SELECT t.PROCESSLIST_ID, IFNULL(t.PROCESSLIST_USER, ''), IFNULL(t.PROCESSLIST_HOST, ''),
		IFNULL(t.PROCESSLIST_DB, ''), IFNULL(t.PROCESSLIST_COMMAND, ''),
		IFNULL(CASE WHEN e.THREAD_ID IS NULL THEN t.PROCESSLIST_TIME * 1000
			WHEN e.END_EVENT_ID IS NULL THEN e.TIMER_WAIT / 1000000000
			ELSE GREATEST(CAST(me.now AS DECIMAL(30,0)) - CAST(e.TIMER_END AS DECIMAL(30,0)), 0) / 1000000000 END, 0),
		IFNULL(t.PROCESSLIST_STATE, ''), IFNULL(t.PROCESSLIST_INFO, ''), IF(e.END_EVENT_ID IS NULL, IFNULL(e.EVENT_ID, 0), 0)
		FROM performance_schema.threads t
		LEFT JOIN performance_schema.events_statements_current e ON e.THREAD_ID = t.THREAD_ID AND (e.NESTING_EVENT_TYPE IS NULL OR e.NESTING_EVENT_TYPE = 'TRANSACTION')
		CROSS JOIN (SELECT MAX(TIMER_START) AS now FROM performance_schema.events_statements_current
			WHERE THREAD_ID = PS_CURRENT_THREAD_ID()) me
		WHERE t.PROCESSLIST_ID IS NOT NULL`

func (f *Finder) processlist(ctx context.Context) (map[int64]proc, error) {
	q := dbconn.Tag + `SELECT ID, IFNULL(USER, ''), IFNULL(HOST, ''), IFNULL(DB, ''), IFNULL(COMMAND, ''),
		IFNULL(TIME_MS, 0), IFNULL(STATE, ''), IFNULL(INFO, ''), IFNULL(QUERY_ID, 0)
		FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()`
	if f.mysql {
		q = mysqlProcesslist + ` AND t.PROCESSLIST_ID <> CONNECTION_ID()`
	}
	rows, err := f.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("mdl: read the processlist: %w", err)
	}
	defer rows.Close()
	out := map[int64]proc{}
	for rows.Next() {
		var p proc
		var ms float64
		if err := rows.Scan(&p.id, &p.user, &p.host, &p.db, &p.command, &ms, &p.state, &p.info, &p.queryID); err != nil {
			return nil, fmt.Errorf("mdl: read the processlist: %w", err)
		}
		p.time = time.Duration(ms * float64(time.Millisecond))
		if !f.excluded(p) {
			out[p.id] = p
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mdl: read the processlist: %w", err)
	}
	return out, nil
}

func (f *Finder) transactions(ctx context.Context) (map[int64]trx, error) {
	q := dbconn.Tag + `SELECT trx_mysql_thread_id, CAST(trx_started AS CHAR),
		TIMESTAMPDIFF(MICROSECOND, trx_started, NOW(6)), trx_rows_modified, trx_autocommit_non_locking, 0
		FROM information_schema.INNODB_TRX`
	if f.mysql {
		// The transaction's identity is performance_schema's THREAD_ID/
		// EVENT_ID, as in mysqlTransactions: the same whichever of the two
		// queries read it (a blocker promoted after a failed attempt must
		// be recognised when INNODB_TRX becomes unreadable, or readable
		// again).
		q = dbconn.Tag + `SELECT x.trx_mysql_thread_id, IFNULL(MAX(CONCAT(et.THREAD_ID, '/', et.EVENT_ID)), CAST(x.trx_started AS CHAR)),
		TIMESTAMPDIFF(MICROSECOND, x.trx_started, NOW(6)), x.trx_rows_modified, x.trx_autocommit_non_locking,
		IFNULL(MAX(et.AUTOCOMMIT = 'YES'), 0)
		FROM information_schema.INNODB_TRX x
		LEFT JOIN performance_schema.threads t ON t.PROCESSLIST_ID = x.trx_mysql_thread_id
		LEFT JOIN performance_schema.events_transactions_current et ON et.THREAD_ID = t.THREAD_ID AND et.STATE = 'ACTIVE'
		GROUP BY x.trx_mysql_thread_id, x.trx_started, x.trx_rows_modified, x.trx_autocommit_non_locking`
	}
	out, err := f.readTransactions(ctx, q)
	if f.mysql && dbconn.Number(err) == erCannotConvertString {
		// MySQL fills INNODB_TRX whole, trx_query (utf8mb3) included, and
		// fails as soon as one transaction runs a statement with 4-byte or
		// binary text: read performance_schema instead, without the
		// transactions' sizes (such blockers are never killed).
		out, err = f.readTransactions(ctx, mysqlTransactions)
		for id, t := range out {
			t.sizeUnknown = true
			out[id] = t
		}
	}
	return out, err
}

// erCannotConvertString: MySQL's "Cannot convert string ... from utf8mb4 to
// utf8mb3" (ER_CANNOT_CONVERT_STRING).
const erCannotConvertString = 3854

// mysqlTransactions lists MySQL's open transactions from
// performance_schema.events_transactions_current, in the columns of the
// INNODB_TRX query: the transaction's age from its TIMER_START against this
// query's (picoseconds), its identity THREAD_ID/EVENT_ID, rows modified 0
// (unknown: see trx.sizeUnknown), and "autocommit non-locking" (an
// autocommit plain SELECT, as INNODB_TRX's trx_autocommit_non_locking).
const mysqlTransactions = dbconn.Tag + `SELECT t.PROCESSLIST_ID, CONCAT(et.THREAD_ID, '/', et.EVENT_ID),
		GREATEST(CAST(me.now AS DECIMAL(30,0)) - CAST(et.TIMER_START AS DECIMAL(30,0)), 0) DIV 1000000, 0,
		IFNULL(et.AUTOCOMMIT = 'YES' AND UPPER(TRIM(t.PROCESSLIST_INFO)) LIKE 'SELECT%'
			AND UPPER(t.PROCESSLIST_INFO) NOT LIKE '% FOR UPDATE%' AND UPPER(t.PROCESSLIST_INFO) NOT LIKE '% FOR SHARE%'
			AND UPPER(t.PROCESSLIST_INFO) NOT LIKE '% LOCK IN SHARE MODE%', 0),
		et.AUTOCOMMIT = 'YES'
		FROM performance_schema.events_transactions_current et
		JOIN performance_schema.threads t ON t.THREAD_ID = et.THREAD_ID
		CROSS JOIN (SELECT MAX(TIMER_START) AS now FROM performance_schema.events_statements_current
			WHERE THREAD_ID = PS_CURRENT_THREAD_ID()) me
		WHERE et.STATE = 'ACTIVE' AND t.PROCESSLIST_ID IS NOT NULL`

func (f *Finder) readTransactions(ctx context.Context, q string) (map[int64]trx, error) {
	rows, err := f.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("mdl: read information_schema.INNODB_TRX (needs the PROCESS privilege): %w", err)
	}
	defer rows.Close()
	out := map[int64]trx{}
	for rows.Next() {
		var id, us int64
		var t trx
		var ro, ac int
		if err := rows.Scan(&id, &t.started, &us, &t.rowsModified, &ro, &ac); err != nil {
			return nil, fmt.Errorf("mdl: read INNODB_TRX: %w", err)
		}
		t.age, t.autocommitRO, t.autocommit = time.Duration(max(us, 0))*time.Microsecond, ro == 1, ac == 1
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mdl: read INNODB_TRX: %w", err)
	}
	return out, nil
}

type lock struct {
	mode string
	age  time.Duration
}

// lockStrength orders the modes a session may hold on one table, to report
// the strongest.
var lockStrength = map[string]int{
	"MDL_SHARED_READ": 1, "MDL_SHARED_WRITE": 2, "MDL_SHARED_UPGRADABLE": 3, "MDL_SHARED_READ_ONLY": 4,
	"MDL_SHARED_NO_WRITE": 5, "MDL_SHARED_NO_READ_WRITE": 6, "MDL_EXCLUSIVE": 7,
}

// locks returns, per thread, the strongest metadata lock held on the table
// that an exclusive request conflicts with for more than a moment (every
// mode but MDL_SHARED and MDL_SHARED_HIGH_PRIO, which are taken briefly to
// read definitions).
func (f *Finder) locks(ctx context.Context) (map[int64]lock, error) {
	age := "0"
	if f.lockAge {
		age = "IFNULL(LOCK_TIME_MS, 0)"
	}
	q := dbconn.Tag + `SELECT THREAD_ID, LOCK_MODE, ` + age + `, TABLE_SCHEMA, TABLE_NAME
		FROM information_schema.METADATA_LOCK_INFO
		WHERE LOCK_TYPE = 'Table metadata lock' AND TABLE_SCHEMA = ? AND TABLE_NAME = ?`
	if f.mysql {
		// Granted table locks, by owner connection; the lock's age is unknown.
		q = dbconn.Tag + `SELECT t.PROCESSLIST_ID, CONCAT('MDL_', m.LOCK_TYPE), 0, m.OBJECT_SCHEMA, m.OBJECT_NAME
		FROM performance_schema.metadata_locks m JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
		WHERE m.OBJECT_TYPE = 'TABLE' AND m.LOCK_STATUS = 'GRANTED' AND t.PROCESSLIST_ID IS NOT NULL
		AND m.OBJECT_SCHEMA = ? AND m.OBJECT_NAME = ?`
	}
	rows, err := f.db.QueryContext(ctx, q, f.cfg.Schema, f.cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("mdl: read information_schema.METADATA_LOCK_INFO: %w", err)
	}
	defer rows.Close()
	out := map[int64]lock{}
	for rows.Next() {
		var id int64
		var mode, schema, tbl string
		var ms float64
		if err := rows.Scan(&id, &mode, &ms, &schema, &tbl); err != nil {
			return nil, fmt.Errorf("mdl: read METADATA_LOCK_INFO: %w", err)
		}
		if schema != f.cfg.Schema || tbl != f.cfg.Table || mode == "MDL_SHARED" || mode == "MDL_SHARED_HIGH_PRIO" {
			continue
		}
		l := lock{mode: mode, age: time.Duration(ms * float64(time.Millisecond))}
		if prev, ok := out[id]; ok {
			if lockStrength[prev.mode] > lockStrength[mode] {
				l.mode = prev.mode
			}
			l.age = max(l.age, prev.age)
		}
		out[id] = l
	}
	return out, rows.Err()
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// references reports whether stmt, run with default database db, names the
// table: as table, `table`, schema.table or `schema`.`table`, outside string
// literals and comments. Names compare exactly (MariaDB on Linux with
// lower_case_table_names=0); a column of the same name is a false positive,
// which at worst makes recast wait for a statement that was not in its way.
func (f *Finder) references(db, stmt string) bool {
	if stmt == "" {
		return false
	}
	toks := tokens(stmt)
	for i, t := range toks {
		if t.dot || t.name != f.cfg.Table {
			continue
		}
		if i >= 2 && toks[i-1].dot && !toks[i-2].dot {
			if toks[i-2].name == f.cfg.Schema {
				return true
			}
			continue // another schema's table of the same name
		}
		if db == f.cfg.Schema {
			return true
		}
	}
	return false
}

// token is an identifier (bare or backquoted) or a '.'.
type token struct {
	name string
	dot  bool
}

// tokens lists the identifiers and dots of a statement, skipping string
// literals, comments, numbers and other punctuation (which separates: a dot
// only qualifies when nothing else stands between it and its neighbours).
func tokens(s string) []token {
	var out []token
	sep := func() {
		if len(out) > 0 && out[len(out)-1].name != "" {
			out = append(out, token{}) // a separator: neither identifier nor dot
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(s, i, c)
			sep()
		case c == '#' || (c == '-' && strings.HasPrefix(s[i:], "-- ")):
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(s)
			}
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			if j := strings.Index(s[i+2:], "*/"); j >= 0 {
				i += j + 4
			} else {
				i = len(s)
			}
		case c == '.':
			out = append(out, token{dot: true})
			i++
		case c == '`':
			j := i + 1
			var b strings.Builder
			for j < len(s) {
				if s[j] == '`' {
					if j+1 < len(s) && s[j+1] == '`' {
						b.WriteByte('`')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			out = append(out, token{name: b.String()})
			i = min(j+1, len(s))
		case isIdentByte(c):
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			if allDigits(s[i:j]) {
				sep()
			} else {
				out = append(out, token{name: s[i:j]})
			}
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			sep()
			i++
		}
	}
	return out
}

func skipQuoted(s string, i int, q byte) int {
	j := i + 1
	for j < len(s) {
		switch s[j] {
		case '\\':
			j += 2
			continue
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j += 2
				continue
			}
			return j + 1
		}
		j++
	}
	return len(s)
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDML reports whether a statement only reads or writes rows (a session
// waiting with it is a victim of someone else's lock, not a blocker).
func isDML(stmt string) bool {
	ts := tokens(stmt)
	if len(ts) == 0 {
		return false
	}
	switch strings.ToUpper(ts[0].name) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "VALUES", "TABLE", "CALL", "DO", "HANDLER", "LOAD", "EXECUTE":
		return true
	}
	return false
}
