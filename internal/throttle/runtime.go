package throttle

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
)

// HeartbeatInterval is how often a migration's heartbeat row is written.
const HeartbeatInterval = 100 * time.Millisecond

// RuntimeConfig is what a migration's throttle runtime watches.
type RuntimeConfig struct {
	Primary *sql.DB
	// Conn is the primary's connection configuration: replica pools use
	// its credentials (and TLS), with the replica's address.
	Conn dbconn.Config
	// Schema and HeartbeatTable name the heartbeat table (unquoted).
	Schema, HeartbeatTable string
	// Replicas (host:port) whose lag is watched; empty: those the primary
	// lists (DiscoverReplicas). Lag is watched only when MaxLag > 0.
	Replicas []string

	MaxLag                time.Duration
	MaxLoad, CriticalLoad Thresholds
	CriticalLoadGrace     time.Duration
	FlagFile, PanicFile   string
	Query                 string        // --throttle-query
	HTTP                  string        // --throttle-http
	HTTPTimeout           time.Duration // one --throttle-http request
	Abort                 func(error)
	Logger                *slog.Logger
	// PaceRatio > 0 starts a Pacer (--max-latency-ratio): its probe writes
	// row 2 of the heartbeat table, created for it if lag is not watched.
	PaceRatio float64
	// AppWrites, when set, counts the application's row events the binlog
	// reader has seen (those of tables other than recast's own): a change
	// tells the pacer the application is active, as does another session
	// running a statement (the processlist).
	AppWrites func() uint64
	// AppWritesReady, when set, tells whether AppWrites counts the
	// application now: not while the binlog reader is still reading
	// history before its start position (MySQL reads the start file from
	// its beginning); until then the pacer gets no answer from it.
	AppWritesReady func() bool
}

// Runtime is a migration's throttling at run time: the replicas found, their
// connection pools, the heartbeat that measures their lag, and the
// Throttler deciding from them. Start builds it, Run starts watching, Stop
// ends it and drops the heartbeat table.
type Runtime struct {
	cfg      RuntimeConfig
	th       *Throttler
	hb       *Heartbeat
	replicas []*sql.DB
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	query    atomic.Pointer[string] // --throttle-query, changeable (SetQuery)
	pacer    *Pacer
}

// Start finds the replicas (when lag is watched), creates the heartbeat
// table, opens the replica pools and checks the load variables' names. On
// error nothing is left running; the heartbeat table, if created, is
// dropped by Stop.
func Start(ctx context.Context, cfg RuntimeConfig) (_ *Runtime, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rt := &Runtime{cfg: cfg}
	ctx, rt.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			rt.Stop(context.WithoutCancel(ctx))
		}
	}()
	var replicas []Replica
	if cfg.MaxLag > 0 {
		if replicas, err = rt.watchLag(ctx); err != nil {
			return nil, err
		}
	}
	if err := CheckLoadNames(ctx, cfg.Primary, append(append(Thresholds{}, cfg.MaxLoad...), cfg.CriticalLoad...)); err != nil {
		return nil, err
	}
	var checks []Check
	if cfg.Primary != nil {
		// Always polled (an empty query never throttles), so that a query
		// can be set while the migration runs.
		query := cfg.Query
		rt.query.Store(&query)
		checks = append(checks, LiveQueryCheck(cfg.Primary, &rt.query))
	}
	if cfg.HTTP != "" {
		checks = append(checks, HTTPCheck(cfg.HTTP, cfg.HTTPTimeout))
	}
	if cfg.PaceRatio > 0 && cfg.Primary != nil {
		if err := rt.startPacer(ctx); err != nil {
			return nil, err
		}
	}
	rt.th = New(Config{
		Load: StatusReader(cfg.Primary), MaxLoad: cfg.MaxLoad, CriticalLoad: cfg.CriticalLoad, CriticalLoadGrace: cfg.CriticalLoadGrace,
		Replicas: replicas, MaxLag: cfg.MaxLag, FlagFile: cfg.FlagFile, PanicFile: cfg.PanicFile, Checks: checks,
		Abort: cfg.Abort, Logger: cfg.Logger,
	})
	return rt, nil
}

// startPacer creates the heartbeat table if lag is not watched and starts
// the pacer's probe: an autocommit write of the table's row 2 (the lag is
// read from row 1) through one connection of its own.
func (rt *Runtime) startPacer(ctx context.Context) error {
	cfg := rt.cfg
	tbl := quote(cfg.Schema) + "." + quote(cfg.HeartbeatTable)
	if rt.hb == nil {
		if err := NewHeartbeat(cfg.Primary, tbl, 0, cfg.Logger).Create(ctx); err != nil {
			return err
		}
	}
	var conn *sql.Conn
	probe := func(ctx context.Context) error {
		if conn == nil {
			c, err := cfg.Primary.Conn(ctx)
			if err != nil {
				return err
			}
			conn = c
		}
		_, err := conn.ExecContext(ctx, "/* recast */ INSERT INTO "+tbl+" (id, seq, ts) VALUES (2, 0, UTC_TIMESTAMP(6))"+
			" ON DUPLICATE KEY UPDATE ts = VALUES(ts)")
		if err != nil {
			conn.Close()
			conn = nil
		}
		return err
	}
	rt.pacer = NewPacer(PacerConfig{Ratio: cfg.PaceRatio, Probe: probe, Active: activity(cfg.Primary, cfg.Conn.Server.Processlist(), cfg.AppWrites, cfg.AppWritesReady, cfg.Logger), Logger: cfg.Logger})
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		rt.pacer.Run(ctx)
	}()
	return nil
}

// activeSessions lists the other sessions running a statement that is not
// recast's (dbconn.Tag) and not a SET (the driver's session set-up, which
// carries no tag): the application's reads and writes in flight.
// The table is the flavor's processlist (flavor.Server.Processlist: on MySQL
// information_schema's fails as a whole once any session's statement holds
// a 4-byte character).
const activeSessions = `/* recast */ SELECT ID, LEFT(IFNULL(INFO, ''), 100), IFNULL(TIME, 0) FROM %s
	WHERE ID <> CONNECTION_ID() AND COMMAND IN ('Query', 'Execute', 'Fetch', 'Prepare')
	AND (INFO IS NULL OR (INFO NOT LIKE '/* recast */%%' AND INFO NOT LIKE 'SET %%')) LIMIT 20`

// ActiveSession is a session running a statement that is not recast's.
type ActiveSession struct {
	ID        int64
	Statement string // its first 100 characters
	Seconds   int64  // how long it has been running (processlist TIME)
}

// load tells whether a session seen running counts as the application's
// load in activity's session rule: not a short write (INSERT, UPDATE,
// DELETE, REPLACE or COMMIT running for less than a second). Writes are
// judged by their rows events in the binlog, which the rows rule counts:
// a writer of 10 rows a second is a trickle there, but under a copy its
// commits wait, and the session rule saw it running often enough to call
// it a load (the bench's own heartbeat, session 11: 5 of 16 idle copies
// paced mid-copy, the worst at 15.8 s against 7.5-8.2 s). A write running
// a second or more (a batch) counts: its rows reach the binlog only at
// its commit.
func (a ActiveSession) load() bool {
	return a.Seconds >= 1 || !shortWrite(a.Statement)
}

// shortWrite tells whether stmt's first keyword (after comments) is
// INSERT, UPDATE, DELETE, REPLACE or COMMIT.
func shortWrite(stmt string) bool {
	s := stmt
	for {
		s = strings.TrimLeft(s, " \t\r\n(")
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return false
			}
			s = s[end+2:]
			continue
		case strings.HasPrefix(s, "#"), strings.HasPrefix(s, "-- "):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return false
			}
			s = s[end+1:]
			continue
		}
		break
	}
	word := s
	if i := strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }); i >= 0 {
		word = s[:i]
	}
	switch strings.ToUpper(word) {
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT":
		return true
	}
	return false
}

// ActiveSessions lists (up to 20 of) the other sessions running a statement
// that is not recast's: the application's reads and writes in flight, read
// from processlist (flavor.Server.Processlist).
func ActiveSessions(ctx context.Context, db *sql.DB, processlist string) ([]ActiveSession, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(activeSessions, processlist))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ActiveSession
	for rows.Next() {
		var a ActiveSession
		if err := rows.Scan(&a.ID, &a.Statement, &a.Seconds); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// The application counts as active when, over the last activityWindow
// polls of activity (activeEvery apart: 2 s; Every apart while the pacer
// is still learning, see idleMinPolls), the binlog reader saw its rows
// events at activeRowsRate or more (and at least activeRowsMin of them),
// or a poll found one of its sessions running a statement (not a short
// write: ActiveSession.load) at least activePolls times. Below that it is
// a heartbeat or a trickle (a pt-heartbeat writes once a second), not a
// load a paced copy would protect. The rate is over the time the window's
// polls cover, so that polls closer together need proportionally fewer
// events.
const (
	activityWindow = 8
	activeRowsRate = 25 // rows events a second (50 over a window of 2 s)
	activeRowsMin  = 8
	activePolls    = 2
)

// activity is the pacer's Active, by the rule above. While ready says the
// counter of writes does not count the application yet, it has no answer
// (ErrNoAnswer): during MySQL's history before the start position it
// counted nothing of the writers already there, and the pacer called
// them idle (two paced randomized-correctness runs copied unpaced).
func activity(db *sql.DB, processlist string, writes func() uint64, ready func() bool, log *slog.Logger) func(ctx context.Context) (bool, error) {
	var w activityWindowState
	return func(ctx context.Context) (bool, error) {
		if writes != nil && ready != nil && !ready() {
			return false, ErrNoAnswer
		}
		var n uint64
		if writes != nil {
			n = writes()
		}
		active, err := ActiveSessions(ctx, db, processlist)
		if err != nil {
			return true, err
		}
		load := slices.DeleteFunc(active, func(a ActiveSession) bool { return !a.load() })
		if len(load) > 0 && log.Enabled(ctx, slog.LevelDebug) {
			log.Debug("pacing: application session active", "id", load[0].ID, "statement", load[0].Statement, "sessions", len(load))
		}
		busy := w.add(time.Now(), n, len(load) > 0)
		if busy && log.Enabled(ctx, slog.LevelDebug) {
			events, covered, polls := w.totals()
			log.Debug("pacing: the application is active", "rows_events", events, "over", covered.Round(time.Millisecond), "session_polls", polls)
		}
		return busy, nil
	}
}

// activityWindowState is the window of activity's last polls.
type activityWindowState struct {
	events   [activityWindow]uint64        // rows events seen since the previous poll
	spans    [activityWindow]time.Duration // time since the previous poll
	sessions [activityWindow]bool          // the poll found an application session
	i        int
	last     uint64    // the counter at the previous poll ...
	lastAt   time.Time // ... and when it was (zero before the first)
}

// add records one poll at now: the binlog's application rows events
// counter and whether a session was found; it tells whether the window
// shows activity.
func (w *activityWindowState) add(now time.Time, counter uint64, session bool) bool {
	var d uint64
	var span time.Duration
	if !w.lastAt.IsZero() {
		if counter >= w.last {
			d = counter - w.last
		}
		span = max(now.Sub(w.lastAt), 0)
	}
	w.last, w.lastAt = counter, now
	w.events[w.i], w.spans[w.i], w.sessions[w.i] = d, span, session
	w.i = (w.i + 1) % activityWindow
	events, covered, polls := w.totals()
	busy := events >= activeRowsMin && float64(events) >= activeRowsRate*covered.Seconds()
	return busy || polls >= activePolls
}

// totals: the window's rows events, the time its polls cover, and the
// polls that found an application session.
func (w *activityWindowState) totals() (events uint64, covered time.Duration, polls int) {
	for k := range activityWindow {
		events += w.events[k]
		covered += w.spans[k]
		if w.sessions[k] {
			polls++
		}
	}
	return events, covered, polls
}

// Pacer is the copy's pacer, nil unless PaceRatio > 0.
func (rt *Runtime) Pacer() *Pacer { return rt.pacer }

// watchLag finds the replicas, starts the heartbeat and opens a pool on
// each replica.
func (rt *Runtime) watchLag(ctx context.Context) ([]Replica, error) {
	cfg := rt.cfg
	addrs, err := rt.replicaAddrs(ctx)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			cfg.Logger.Info("no replicas found (SHOW SLAVE HOSTS): replica lag is not watched")
		}
		return nil, err
	}
	rt.hb = NewHeartbeat(cfg.Primary, quote(cfg.Schema)+"."+quote(cfg.HeartbeatTable), HeartbeatInterval, cfg.Logger)
	if err := rt.hb.Create(ctx); err != nil {
		return nil, err
	}
	rt.wg.Add(1)
	go func() { defer rt.wg.Done(); rt.hb.Run(ctx) }()
	var replicas []Replica
	for _, a := range addrs {
		db, err := replicaDB(cfg.Conn, a)
		if err != nil {
			return nil, err
		}
		rt.replicas = append(rt.replicas, db)
		replicas = append(replicas, rt.hb.Replica(a, db))
	}
	waitBeat(ctx, replicas, time.Second)
	cfg.Logger.Info("watching replica lag", "replicas", addrs, "max_lag", cfg.MaxLag, "heartbeat", rt.hb.Table())
	return replicas, nil
}

// replicaAddrs are the replicas to watch: the configured ones, or those the
// primary lists.
func (rt *Runtime) replicaAddrs(ctx context.Context) ([]string, error) {
	cfg := rt.cfg
	if len(cfg.Replicas) > 0 {
		return cfg.Replicas, nil
	}
	found, err := DiscoverReplicas(ctx, cfg.Primary, cfg.Conn.Host, cfg.Conn.Port)
	if err != nil {
		return nil, fmt.Errorf("%w (name the replicas with --replica HOST:PORT, or --max-lag 0 to ignore replica lag)", err)
	}
	var out []string
	for _, d := range found {
		out = append(out, d.Addr)
		switch d.Via {
		case "processlist":
			cfg.Logger.Warn("replica found in the processlist; its port is assumed to be the primary's (name it with --replica HOST:PORT if wrong)", "replica", d.Addr)
		case "SHOW REPLICAS+processlist":
			cfg.Logger.Info("replica registered without report_host: its address is its binlog connection's (name it with --replica HOST:PORT if wrong)", "replica", d.Addr)
		}
	}
	return out, nil
}

// Throttler is the runtime's decision maker.
func (rt *Runtime) Throttler() *Throttler { return rt.th }

// SetQuery replaces the --throttle-query (empty: none) from the next poll
// on (within a second).
func (rt *Runtime) SetQuery(q string) { rt.query.Store(&q) }

// LagWatched reports whether the heartbeat runs (replicas found, MaxLag > 0
// at the start): only then can max-lag be raised from 0 at run time.
func (rt *Runtime) LagWatched() bool { return rt.hb != nil }

// Run decides once (before the first chunk) and keeps watching until Stop.
func (rt *Runtime) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	stop := rt.cancel
	rt.cancel = func() { cancel(); stop() }
	rt.th.Prime(ctx)
	rt.wg.Add(1)
	go func() { defer rt.wg.Done(); rt.th.Run(ctx) }()
}

// Stop ends the watching, closes the replica pools and drops the heartbeat
// table (also one a killed run left, when this run does not watch lag).
func (rt *Runtime) Stop(ctx context.Context) {
	rt.cancel()
	rt.wg.Wait()
	for _, db := range rt.replicas {
		db.Close()
	}
	rt.replicas = nil
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	drop := rt.hb
	if drop == nil {
		var n int
		err := rt.cfg.Primary.QueryRowContext(dctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
			rt.cfg.Schema, rt.cfg.HeartbeatTable).Scan(&n)
		if err == nil && n > 0 {
			drop = NewHeartbeat(rt.cfg.Primary, quote(rt.cfg.Schema)+"."+quote(rt.cfg.HeartbeatTable), 0, nil)
		}
	}
	if drop != nil {
		if err := drop.Drop(dctx); err != nil {
			rt.cfg.Logger.Warn("dropping the heartbeat table failed; recast cleanup removes it", "table", drop.Table(), "err", err)
		}
	}
}

// waitBeat waits (at most d) until every replica shows the heartbeat, so
// that the table's creation replicating is not taken for lag.
func waitBeat(ctx context.Context, replicas []Replica, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, r := range replicas {
		for time.Now().Before(deadline) {
			rctx, cancel := context.WithTimeout(ctx, time.Until(deadline))
			_, err := r.Lag(rctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// replicaDB is a small pool on a replica, with the primary's credentials.
// It connects on first use: a replica that cannot be reached counts as
// lagging, with the reason.
func replicaDB(conn dbconn.Config, addr string) (*sql.DB, error) {
	host, port, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	conn.Host, conn.Port, conn.Schema, conn.MaxOpen = host, port, "", 2
	conn.Socket = "" // a replica is reached by host and port, not by the primary's socket
	return dbconn.OpenLazy(conn)
}

// CheckLoadNames fails when a --max-load/--critical-load variable is not a
// numeric global status variable of the server (a typo would throttle
// forever).
func CheckLoadNames(ctx context.Context, db *sql.DB, th Thresholds) error {
	if len(th) == 0 {
		return nil
	}
	vals, err := StatusReader(db)(ctx, th.Names())
	if err != nil {
		return fmt.Errorf("read the server's status variables: %w", err)
	}
	for _, l := range th {
		if _, ok := vals[strings.ToLower(l.Var)]; !ok {
			return fmt.Errorf("%s is not a numeric status variable of the server (SHOW GLOBAL STATUS)", l.Var)
		}
	}
	return nil
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
