package workload

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/dbconn"
)

// Stats counts what the writers did. Every op is one transaction.
type Stats struct {
	Ops          int64 // ops attempted
	Committed    int64 // ops committed
	LockTimeouts int64 // ops that failed with 1205 (expected during a cut-over)
	Deadlocks    int64 // ops that failed with 1213
	NoSuchTable  int64 // ops that failed with 1146: a defect, must stay 0
	OtherErrors  int64 // any other failure (including lost connections)
	// FirstOtherError is the message of the first other error.
	FirstOtherError string

	// Key variants (Config.KeyOnU only), counted once committed: changes of
	// u to a value equal under its collation but different in bytes.
	CaseFlips   int64 // letters' case changed: "w3.k9x-12" <-> "W3.K9x-12"
	SpaceFlips  int64 // trailing spaces added or removed: "abc" <-> "abc "
	AccentFlips int64 // a character swapped for an equal one: "é" <-> "e", "ß" <-> "s", "😀" <-> "🎉"
	// Reinserts counts transactions that deleted a row and inserted one
	// whose key equals the deleted key under the collation.
	Reinserts int64
	// Bulk counts committed bulk UPDATEs (Config.BulkEvery).
	Bulk int64
}

// KeyVariants is the number of committed key changes to an equal-under-
// collation value (CaseFlips + SpaceFlips + AccentFlips).
func (s Stats) KeyVariants() int64 { return s.CaseFlips + s.SpaceFlips + s.AccentFlips }

// Failed reports errors that mean the load (or recast) misbehaved: a 1146 or
// any error other than a lock wait timeout or a deadlock.
func (s Stats) Failed() bool { return s.NoSuchTable > 0 || s.OtherErrors > 0 }

func (s Stats) String() string {
	out := fmt.Sprintf("ops %d, committed %d, lock-wait timeouts %d, deadlocks %d, no-such-table(1146) %d, other errors %d",
		s.Ops, s.Committed, s.LockTimeouts, s.Deadlocks, s.NoSuchTable, s.OtherErrors)
	if s.KeyVariants() > 0 || s.Reinserts > 0 {
		out += fmt.Sprintf(", key variants: case %d, space %d, accent %d, re-inserts %d",
			s.CaseFlips, s.SpaceFlips, s.AccentFlips, s.Reinserts)
	}
	if s.Bulk > 0 {
		out += fmt.Sprintf(", bulk updates %d", s.Bulk)
	}
	if s.FirstOtherError != "" {
		out += " (first: " + s.FirstOtherError + ")"
	}
	return out
}

type counters struct {
	ops, committed, lockTimeouts, deadlocks, noSuchTable, other atomic.Int64
	caseFlips, spaceFlips, accentFlips, reinserts, bulk         atomic.Int64
	mu                                                          sync.Mutex
	firstOther                                                  string
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	first := c.firstOther
	c.mu.Unlock()
	return Stats{
		Ops: c.ops.Load(), Committed: c.committed.Load(),
		LockTimeouts: c.lockTimeouts.Load(), Deadlocks: c.deadlocks.Load(),
		NoSuchTable: c.noSuchTable.Load(), OtherErrors: c.other.Load(),
		FirstOtherError: first,
		CaseFlips:       c.caseFlips.Load(), SpaceFlips: c.spaceFlips.Load(),
		AccentFlips: c.accentFlips.Load(), Reinserts: c.reinserts.Load(),
		Bulk: c.bulk.Load(),
	}
}

// Load is a running workload.
type Load struct {
	cfg      Config
	log      *slog.Logger
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	c        counters
	started  time.Time
}

// Start starts cfg.Writers writers, each with its own connection from db,
// that run until Stop (or until ctx ends). sh must be the shadow of the
// table's current content (from Prepare or Snapshot) and must not be used by
// another Load at the same time.
func Start(ctx context.Context, db *sql.DB, cfg Config, sh *Shadow) *Load {
	l := &Load{cfg: cfg, log: cfg.logger(), stop: make(chan struct{}), started: time.Now()}
	n := cfg.writers()

	// Each run gets its own nonce in the unique values it invents, so that
	// they never meet values of an earlier run on the same table.
	var nb [4]byte
	_, _ = rand.Read(nb[:])
	nonce := strconv.FormatUint(uint64(binary.LittleEndian.Uint32(nb[:])), 36)

	// Split the existing rows among the writers and find, for each id range,
	// where fresh ids start.
	owned := make([]*idSet, n)
	for w := range owned {
		owned[w] = newIDSet()
	}
	var maxLow, maxHigh, maxNeg int64 = 0, highBase, negBase
	for _, id := range sh.IDs() {
		owned[owner(id, n)].add(id)
		switch {
		case id >= highBase:
			maxHigh = max(maxHigh, id)
		case id < 0:
			maxNeg = max(maxNeg, id)
		default:
			maxLow = max(maxLow, id)
		}
	}
	var interval time.Duration
	if cfg.OpsPerSec > 0 {
		interval = time.Duration(n) * time.Second / time.Duration(cfg.OpsPerSec)
	}
	for w := range n {
		wr := &writer{
			l:        l,
			db:       db,
			sh:       sh,
			w:        w,
			n:        n,
			r:        mrand.New(mrand.NewPCG(uint64(cfg.Seed), uint64(w)+1)),
			owned:    owned[w],
			uprefix:  "w" + strconv.Itoa(w) + "." + nonce + "-",
			next:     [3]int64{firstOwned(maxLow+1, w, n), firstOwned(maxHigh+1, w, n), firstOwned(maxNeg+1, w, n)},
			interval: interval,
			table:    cfg.tableName(),
			stmts:    map[string]*sql.Stmt{},
			frozen:   frozenColumns(cfg.Frozen),
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			wr.run(ctx)
		}()
	}
	l.log.Info("workload started", "table", cfg.tableName(), "writers", n, "rows", sh.Len(), "ops_per_sec", cfg.OpsPerSec)
	return l
}

// Stats returns the counts so far.
func (l *Load) Stats() Stats { return l.c.snapshot() }

// Stop stops the writers after their current op and waits for them.
func (l *Load) Stop() Stats {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
	st := l.c.snapshot()
	l.log.Info("workload stopped", "elapsed", time.Since(l.started).Round(time.Millisecond), "stats", st.String())
	return st
}

// owner returns the writer owning id among n.
func owner(id int64, n int) int {
	m := id % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}

// firstOwned returns the smallest id >= from that writer w of n owns.
func firstOwned(from int64, w, n int) int64 {
	d := int64(w-owner(from, n)+n) % int64(n)
	return from + d
}

// idSet is a set of ids with uniform random choice.
type idSet struct {
	ids []int64
	pos map[int64]int
}

func newIDSet() *idSet { return &idSet{pos: map[int64]int{}} }

func (s *idSet) add(id int64) {
	if _, ok := s.pos[id]; ok {
		return
	}
	s.pos[id] = len(s.ids)
	s.ids = append(s.ids, id)
}

func (s *idSet) remove(id int64) {
	i, ok := s.pos[id]
	if !ok {
		return
	}
	last := s.ids[len(s.ids)-1]
	s.ids[i] = last
	s.pos[last] = i
	s.ids = s.ids[:len(s.ids)-1]
	delete(s.pos, id)
}

// writer is one writer goroutine and its connection.
type writer struct {
	l        *Load
	db       *sql.DB
	sh       *Shadow
	w, n     int
	r        *mrand.Rand
	owned    *idSet
	uprefix  string
	useq     int64
	next     [3]int64 // next fresh id in the low, high and negative ranges
	interval time.Duration
	table    string

	conn   *sql.Conn
	stmts  map[string]*sql.Stmt
	frozen map[int]bool
}

// maxCachedStmts bounds the server-side statements a writer keeps prepared.
const maxCachedStmts = 64

func (wr *writer) run(ctx context.Context) {
	// Statements run with a context Stop does not cancel: an op interrupted
	// half-way (a killed COMMIT) would leave the shadow unsure of the outcome.
	// Every statement is bounded by the lock wait timeouts anyway.
	sctx := context.WithoutCancel(ctx)
	defer wr.closeConn()
	nextAt := time.Now()
	for {
		if wr.stopped(ctx) {
			return
		}
		if wr.interval > 0 {
			now := time.Now()
			if nextAt.After(now) {
				t := time.NewTimer(nextAt.Sub(now))
				select {
				case <-t.C:
				case <-wr.l.stop:
					t.Stop()
					return
				case <-ctx.Done():
					t.Stop()
					return
				}
			} else if now.Sub(nextAt) > time.Second {
				nextAt = now // fell behind (a long lock wait): don't burst
			}
			nextAt = nextAt.Add(wr.interval)
		}
		if wr.conn == nil {
			if err := wr.connect(sctx); err != nil {
				wr.count(err)
				if wr.sleep(ctx, time.Second) {
					return
				}
				continue
			}
		}
		wr.l.c.ops.Add(1)
		err := wr.op(sctx)
		if err == nil {
			wr.l.c.committed.Add(1)
			continue
		}
		wr.count(err)
		if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) {
			wr.closeConn()
		} else {
			switch dbconn.Number(err) {
			case dbconn.ErServerGone, dbconn.ErServerLost, dbconn.ErConnectionKilled:
				wr.closeConn()
			}
		}
	}
}

func (wr *writer) stopped(ctx context.Context) bool {
	select {
	case <-wr.l.stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// sleep waits d; it reports true if the writer should stop.
func (wr *writer) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-wr.l.stop:
		return true
	case <-ctx.Done():
		return true
	}
}

func (wr *writer) count(err error) {
	c := &wr.l.c
	switch dbconn.Number(err) {
	case dbconn.ErLockWaitTimeout:
		c.lockTimeouts.Add(1)
		wr.l.log.Debug("workload: lock wait timeout", "writer", wr.w)
	case dbconn.ErLockDeadlock:
		c.deadlocks.Add(1)
		wr.l.log.Debug("workload: deadlock", "writer", wr.w)
	case dbconn.ErNoSuchTable:
		c.noSuchTable.Add(1)
		wr.l.log.Error("workload: table does not exist", "writer", wr.w, "err", err)
	default:
		if c.other.Add(1) == 1 {
			c.mu.Lock()
			c.firstOther = err.Error()
			c.mu.Unlock()
		}
		wr.l.log.Warn("workload: write failed", "writer", wr.w, "err", err)
	}
}

func (wr *writer) connect(ctx context.Context) error {
	conn, err := wr.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("workload: writer %d: connect: %w", wr.w, err)
	}
	if err := setupConn(ctx, conn, writerLockWait); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discard the connection
		_ = conn.Close()
		return err
	}
	wr.conn = conn
	return nil
}

func (wr *writer) closeConn() {
	for q, st := range wr.stmts {
		_ = st.Close()
		delete(wr.stmts, q)
	}
	if wr.conn != nil {
		// Hand the connection back as bad, so that the pool drops it: its
		// session settings are the writer's own.
		_ = wr.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = wr.conn.Close()
		wr.conn = nil
	}
}

// exec runs one statement on the writer's connection, as a server-side
// prepared statement or, with ClientPrepared, as text.
func (wr *writer) exec(ctx context.Context, q string, args ...any) (int64, error) {
	var (
		res sql.Result
		err error
	)
	switch {
	case len(args) == 0:
		res, err = wr.conn.ExecContext(ctx, q)
	case wr.l.cfg.ClientPrepared:
		var text string
		if text, err = interpolate(q, args); err != nil {
			return 0, err
		}
		res, err = wr.conn.ExecContext(ctx, text)
	default:
		st, ok := wr.stmts[q]
		if !ok {
			if len(wr.stmts) >= maxCachedStmts {
				for k, s := range wr.stmts {
					_ = s.Close()
					delete(wr.stmts, k)
				}
			}
			if st, err = wr.conn.PrepareContext(ctx, q); err != nil {
				return 0, err
			}
			wr.stmts[q] = st
		}
		res, err = st.ExecContext(ctx, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// An effect is applied to the shadow (and the writer's id set) once the
// transaction that made it committed.
type effect func()

// tx is one transaction being built: the rows it touched (so that a
// multi-statement transaction never touches a row twice) and its effects.
type tx struct {
	touched map[int64]bool
	effects []effect
}

// Op weights (out of 100).
const (
	wInsert = 22
	wUpdate = 35
	wDelete = 16
	wPK     = 8
	wSwap   = 8
	// the rest: multi-op transactions
)

func (wr *writer) op(ctx context.Context) error {
	if wr.l.cfg.KeyOnU {
		return wr.opKeyOnU(ctx)
	}
	t := &tx{touched: map[int64]bool{}}
	if b := wr.l.cfg.BulkEvery; b > 0 && wr.r.IntN(b) == 0 {
		if err := wr.bulkUpdate(ctx, t); err != nil {
			return err
		}
		wr.apply(t)
		return nil
	}
	p := wr.r.IntN(100)
	if p < wInsert+wUpdate+wDelete+wPK+wSwap {
		if p >= wInsert+wUpdate+wDelete+wPK { // swap: two rows, one transaction
			return wr.inTx(ctx, t, func() error { return wr.swapU(ctx, t) })
		}
		// single statement, autocommit
		if err := wr.subOp(ctx, t, p); err != nil {
			return err
		}
		wr.apply(t)
		return nil
	}
	k := 2 + wr.r.IntN(4)
	return wr.inTx(ctx, t, func() error {
		for range k {
			var err error
			if q := wr.r.IntN(100); q < wInsert+wUpdate+wDelete+wPK {
				err = wr.subOp(ctx, t, q)
			} else {
				err = wr.swapU(ctx, t)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// subOp runs the single-statement op chosen by p.
func (wr *writer) subOp(ctx context.Context, t *tx, p int) error {
	switch {
	case p < wInsert:
		return wr.insert(ctx, t)
	case p < wInsert+wUpdate:
		return wr.update(ctx, t)
	case p < wInsert+wUpdate+wDelete:
		return wr.delete(ctx, t)
	default:
		return wr.updatePK(ctx, t)
	}
}

// inTx runs body inside BEGIN ... COMMIT and applies its effects after the
// commit; on error it rolls back.
func (wr *writer) inTx(ctx context.Context, t *tx, body func() error) error {
	if _, err := wr.exec(ctx, "BEGIN"); err != nil {
		return err
	}
	err := body()
	if err == nil {
		if _, err = wr.exec(ctx, "COMMIT"); err == nil {
			wr.apply(t)
			return nil
		}
	}
	if _, rerr := wr.exec(ctx, "ROLLBACK"); rerr != nil {
		wr.l.log.Debug("workload: rollback failed", "writer", wr.w, "err", rerr)
	}
	return err
}

func (wr *writer) apply(t *tx) {
	for _, e := range t.effects {
		e()
	}
}

// pick returns a random owned row not yet touched by t.
func (wr *writer) pick(t *tx) (int64, bool) {
	if len(wr.owned.ids) == 0 {
		return 0, false
	}
	for range 8 {
		id := wr.owned.ids[wr.r.IntN(len(wr.owned.ids))]
		if !t.touched[id] {
			return id, true
		}
	}
	return 0, false
}

// freshID returns an id this writer owns that was never used in this run.
func (wr *writer) freshID() int64 {
	rng := 0
	switch p := wr.r.IntN(100); {
	case p < 3:
		rng = 1
	case p < 6:
		rng = 2
	}
	id := wr.next[rng]
	wr.next[rng] += int64(wr.n)
	return id
}

func (wr *writer) freshU() value {
	wr.useq++
	if wr.l.cfg.KeyOnU {
		return keyValue(wr.r, wr.uprefix+strconv.FormatInt(wr.useq, 10))
	}
	return uniqueValue(wr.r, wr.uprefix+strconv.FormatInt(wr.useq, 10))
}

func (wr *writer) insert(ctx context.Context, t *tx) error {
	id := wr.freshID()
	vals := randomRow(wr.r, id, "")
	vals[colU] = wr.freshU()
	fs, err := wr.insertRow(ctx, id, vals)
	if err != nil {
		return err
	}
	t.touched[id] = true
	packed := pack(fs)
	t.effects = append(t.effects, func() {
		wr.sh.put(id, packed)
		wr.owned.add(id)
	})
	return nil
}

// insertRow inserts the row vals (frozen columns left NULL) and returns its
// fields as the shadow holds them.
func (wr *writer) insertRow(ctx context.Context, id int64, vals []value) ([]field, error) {
	var args []any
	var names, marks []string
	fs := make([]field, len(vals))
	for i, v := range vals {
		if wr.frozen[i] {
			fs[i] = field{null: true}
			continue
		}
		args = append(args, v.param)
		fs[i] = field{v: v.canon, null: v.null}
		names = append(names, quoteIdent(columns[i].name))
		marks = append(marks, "?")
	}
	q := "INSERT INTO " + wr.table + " (" + strings.Join(names, ",") + ") VALUES (" + strings.Join(marks, ",") + ")"
	n, err := wr.exec(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, fmt.Errorf("insert of id %d affected %d rows", id, n)
	}
	return fs, nil
}

// update sets 1..5 random columns (sometimes u) of a row.
func (wr *writer) update(ctx context.Context, t *tx) error {
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	cur, ok := wr.sh.get(id)
	if !ok {
		return fmt.Errorf("workload: shadow lost id %d", id)
	}
	fs := unpack(cur)
	k := 1 + wr.r.IntN(5)
	chosen := map[int]bool{}
	var (
		sets []string
		args []any
	)
	for range k {
		i := colU + wr.r.IntN(len(columns)-colU)
		if chosen[i] || wr.frozen[i] {
			continue
		}
		chosen[i] = true
		var v value
		if i == colU {
			v = wr.freshU()
		} else {
			v = randomValue(wr.r, i)
		}
		sets = append(sets, quoteIdent(columns[i].name)+"=?")
		args = append(args, v.param)
		fs[i] = field{v: v.canon, null: v.null}
	}
	if len(sets) == 0 {
		return wr.insert(ctx, t)
	}
	args = append(args, id)
	q := "UPDATE " + wr.table + " SET " + strings.Join(sets, ",") + " WHERE `id`=?"
	n, err := wr.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n > 1 {
		return fmt.Errorf("update of id %d affected %d rows", id, n)
	}
	t.touched[id] = true
	packed := pack(fs)
	t.effects = append(t.effects, func() { wr.sh.put(id, packed) })
	return nil
}

// bulkUpdate sets one column to one value on up to BulkRows of the rows
// this writer owns, in one statement.
func (wr *writer) bulkUpdate(ctx context.Context, t *tx) error {
	n := wr.l.cfg.BulkRows
	if n <= 0 {
		n = 2000
	}
	var i int
	for range 8 {
		if i = colU + 1 + wr.r.IntN(len(columns)-colU-1); !wr.frozen[i] {
			break
		}
	}
	if wr.frozen[i] || len(wr.owned.ids) == 0 {
		return wr.insert(ctx, t)
	}
	start := wr.r.IntN(len(wr.owned.ids))
	var ids []int64
	for j := 0; j < len(wr.owned.ids) && len(ids) < n; j++ {
		ids = append(ids, wr.owned.ids[(start+j)%len(wr.owned.ids)])
	}
	v := randomValue(wr.r, i)
	args := []any{v.param}
	marks := make([]string, len(ids))
	for j, id := range ids {
		marks[j] = "?"
		args = append(args, id)
	}
	q := "UPDATE " + wr.table + " SET " + quoteIdent(columns[i].name) + "=? WHERE `id` IN (" + strings.Join(marks, ",") + ")"
	if _, err := wr.exec(ctx, q, args...); err != nil {
		return err
	}
	wr.l.c.bulk.Add(1)
	for _, id := range ids {
		t.touched[id] = true
	}
	t.effects = append(t.effects, func() {
		for _, id := range ids {
			cur, ok := wr.sh.get(id)
			if !ok {
				continue
			}
			fs := unpack(cur)
			fs[i] = field{v: v.canon, null: v.null}
			wr.sh.put(id, pack(fs))
		}
	})
	return nil
}

func (wr *writer) delete(ctx context.Context, t *tx) error {
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	n, err := wr.exec(ctx, "DELETE FROM "+wr.table+" WHERE `id`=?", id)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("delete of id %d affected %d rows", id, n)
	}
	t.touched[id] = true
	t.effects = append(t.effects, func() {
		wr.sh.del(id)
		wr.owned.remove(id)
	})
	return nil
}

// updatePK moves a row to a fresh id.
func (wr *writer) updatePK(ctx context.Context, t *tx) error {
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	nid := wr.freshID()
	n, err := wr.exec(ctx, "UPDATE "+wr.table+" SET `id`=? WHERE `id`=?", nid, id)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("update of id %d to %d affected %d rows", id, nid, n)
	}
	t.touched[id], t.touched[nid] = true, true
	t.effects = append(t.effects, func() {
		cur, _ := wr.sh.get(id)
		wr.sh.del(id)
		wr.sh.put(nid, withID(cur, nid))
		wr.owned.remove(id)
		wr.owned.add(nid)
	})
	return nil
}

// swapU swaps the unique values of two rows through a temporary value:
// three UPDATEs, which must run inside a transaction.
func (wr *writer) swapU(ctx context.Context, t *tx) error {
	a, ok1 := wr.pick(t)
	if ok1 {
		t.touched[a] = true // so that b differs
	}
	b, ok2 := wr.pick(t)
	if !ok1 || !ok2 {
		if ok1 {
			delete(t.touched, a)
		}
		return wr.insert(ctx, t)
	}
	pa, _ := wr.sh.get(a)
	pb, _ := wr.sh.get(b)
	fa, fb := unpack(pa), unpack(pb)
	ua, ub := fa[colU].v, fb[colU].v
	tmp := wr.uprefix + "swap"
	steps := []struct {
		u  string
		id int64
	}{{tmp, a}, {ua, b}, {ub, a}}
	for _, s := range steps {
		n, err := wr.exec(ctx, "UPDATE "+wr.table+" SET `u`=? WHERE `id`=?", s.u, s.id)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("swap: update of u of id %d affected %d rows", s.id, n)
		}
	}
	t.touched[b] = true
	fa[colU], fb[colU] = field{v: ub}, field{v: ua}
	na, nb := pack(fa), pack(fb)
	t.effects = append(t.effects, func() {
		wr.sh.put(a, na)
		wr.sh.put(b, nb)
	})
	return nil
}

// frozenColumns maps the named columns to their indexes.
func frozenColumns(names []string) map[int]bool {
	out := map[int]bool{}
	for _, n := range names {
		for i, c := range columns {
			if strings.EqualFold(c.name, n) {
				out[i] = true
			}
		}
	}
	return out
}
