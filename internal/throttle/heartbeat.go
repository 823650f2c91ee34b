package throttle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Heartbeat writes a sequence number into a one-row table on the primary
// every Interval, through one dedicated connection, and remembers when each
// write committed (on recast's own monotonic clock). A replica's lag is read
// from the sequence number it shows: if it shows the newest committed beat it
// is current; otherwise it is missing beat s+1 and is behind by the time
// since that beat committed. Only recast's clock is used: the primary's and
// the replicas' clocks need not agree, and the lag is exact to one interval
// (100 ms by default). The row also carries the primary's UTC_TIMESTAMP(6)
// for people looking at it.
//
// The table's writes go to the binlog like any other; the migration's
// stream skips them (another table).
type Heartbeat struct {
	db       *sql.DB
	table    string // quoted schema.table
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	beats []beat // committed beats, ascending seq
	next  int64
	first time.Time // when the first beat was attempted
}

type beat struct {
	seq int64
	at  time.Time
}

// keepBeats bounds the memory of commit times: 10 minutes at 100 ms.
const keepBeats = 6000

// NewHeartbeat returns a heartbeat writing into table (quoted
// `schema`.`name`) through db every interval (default 100 ms).
func NewHeartbeat(db *sql.DB, table string, interval time.Duration, log *slog.Logger) *Heartbeat {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Sequence numbers start at the current time in ms, so that a row a
	// previous run left behind (on a lagging replica) reads as older than
	// every beat of this run.
	return &Heartbeat{db: db, table: table, interval: interval, log: log, now: time.Now, next: time.Now().UnixMilli()}
}

// Table is the quoted table name.
func (h *Heartbeat) Table() string { return h.table }

// Create creates the table if it does not exist and writes the first beat.
func (h *Heartbeat) Create(ctx context.Context) error {
	_, err := h.db.ExecContext(ctx, "/* recast */ CREATE TABLE IF NOT EXISTS "+h.table+
		" (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, seq BIGINT NOT NULL, ts DATETIME(6) NOT NULL)"+
		" ENGINE=InnoDB COMMENT='recast heartbeat'")
	if err != nil {
		return fmt.Errorf("create the heartbeat table %s: %w", h.table, err)
	}
	return h.beat(ctx, h.db)
}

// Drop drops the table.
func (h *Heartbeat) Drop(ctx context.Context) error {
	_, err := h.db.ExecContext(ctx, "/* recast */ DROP TABLE IF EXISTS "+h.table)
	return err
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func (h *Heartbeat) beat(ctx context.Context, ex execer) error {
	h.mu.Lock()
	seq := h.next
	h.next++
	if h.first.IsZero() {
		h.first = h.now()
	}
	h.mu.Unlock()
	_, err := ex.ExecContext(ctx, "/* recast */ INSERT INTO "+h.table+" (id, seq, ts) VALUES (1, ?, UTC_TIMESTAMP(6))"+
		" ON DUPLICATE KEY UPDATE seq = VALUES(seq), ts = VALUES(ts)", seq)
	if err != nil {
		return err
	}
	h.record(seq, h.now())
	return nil
}

func (h *Heartbeat) record(seq int64, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beats = append(h.beats, beat{seq, at})
	if len(h.beats) > keepBeats {
		h.beats = append(h.beats[:0], h.beats[len(h.beats)-keepBeats:]...)
	}
}

// Run writes a beat every interval until ctx ends, through one connection
// (re-opened after an error).
func (h *Heartbeat) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if conn == nil {
			c, err := h.db.Conn(ctx)
			if err != nil {
				if ctx.Err() == nil && time.Since(lastErr) > 10*time.Second {
					h.log.Warn("heartbeat: cannot connect to the primary", "err", err)
					lastErr = time.Now()
				}
				continue
			}
			conn = c
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.beat(wctx, conn)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if time.Since(lastErr) > 10*time.Second {
				h.log.Warn("heartbeat: write failed", "table", h.table, "err", err)
				lastErr = time.Now()
			}
			conn.Close()
			conn = nil
		}
	}
}

// ErrNoBeat: the replica does not show the heartbeat row (yet).
var ErrNoBeat = errors.New("no heartbeat row on the replica (the heartbeat table has not replicated yet)")

// LagOf returns how far behind a server showing beat seq is.
func (h *Heartbeat) LagOf(seq int64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	// The first committed beat after seq: the replica has not applied it.
	// (When seq is older than every beat remembered, the first one
	// remembered: a lower bound once older beats were forgotten.)
	i := sort.Search(len(h.beats), func(i int) bool { return h.beats[i].seq > seq })
	switch {
	case len(h.beats) == 0 && h.first.IsZero():
		return 0
	case len(h.beats) == 0:
		return max(now.Sub(h.first), 0) // nothing committed yet
	case i == len(h.beats):
		return 0 // it shows the newest committed beat
	}
	return max(now.Sub(h.beats[i].at), 0)
}

// Lag reads the beat a replica shows through db (a connection to the
// replica) and returns its lag.
func (h *Heartbeat) Lag(ctx context.Context, db *sql.DB) (time.Duration, error) {
	var seq int64
	err := db.QueryRowContext(ctx, "/* recast */ SELECT seq FROM "+h.table+" WHERE id = 1").Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNoBeat
	}
	if err != nil {
		return 0, err
	}
	return h.LagOf(seq), nil
}

// Replica returns a Replica whose lag is read through db.
func (h *Heartbeat) Replica(name string, db *sql.DB) Replica {
	return Replica{Name: name, Lag: func(ctx context.Context) (time.Duration, error) { return h.Lag(ctx, db) }}
}
