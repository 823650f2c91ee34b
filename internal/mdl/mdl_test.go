package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }

func TestReferences(t *testing.T) {
	f := &Finder{cfg: Config{Schema: "shop", Table: "orders"}}
	for _, tc := range []struct {
		db, stmt string
		want     bool
	}{
		{"shop", "SELECT * FROM orders WHERE 1=1 AND SLEEP(100)", true},
		{"shop", "select * from `orders` o join x using (id)", true},
		{"other", "SELECT * FROM orders", false},
		{"other", "SELECT * FROM shop.orders", true},
		{"other", "SELECT * FROM `shop` . `orders`", true},
		{"shop", "SELECT * FROM other.orders", false},
		{"shop", "SELECT * FROM orders_archive", false},
		{"shop", "SELECT * FROM x_orders", false},
		{"shop", "SELECT 'orders' FROM x", false},
		{"shop", "SELECT 1 FROM x /* orders */ -- orders\n", false},
		{"shop", "SELECT 1 FROM x # orders\n WHERE a = \"orders\"", false},
		{"shop", "UPDATE orders SET a = 1", true},
		{"shop", "SELECT 1.5, orders.id FROM orders", true},
		{"", "SELECT 1", false},
		{"shop", "", false},
	} {
		if got := f.references(tc.db, tc.stmt); got != tc.want {
			t.Errorf("references(%q, %q) = %v, want %v", tc.db, tc.stmt, got, tc.want)
		}
	}
}

func TestIsDML(t *testing.T) {
	for stmt, want := range map[string]bool{
		"SELECT 1 FROM t":                true,
		"/* x */ insert into t values()": true,
		"(SELECT 1) UNION (SELECT 2)":    true,
		"ALTER TABLE t ADD c INT":        false,
		"LOCK TABLES t WRITE":            false,
		"RENAME TABLE t TO u":            false,
		"CREATE TRIGGER x BEFORE INSERT": false,
	} {
		if got := isDML(stmt); got != want {
			t.Errorf("isDML(%q) = %v, want %v", stmt, got, want)
		}
	}
}

func TestBlockerString(t *testing.T) {
	b := Blocker{ID: 42, User: "app", Host: "10.0.0.5:3306", DB: "shop", Command: "Query", State: "User sleep",
		Statement: "SELECT * FROM orders WHERE 1=1 AND SLEEP(100)", Time: 12 * time.Second, LockMode: "MDL_SHARED_READ",
		LockAge: 12 * time.Second, InTrx: true, TrxAge: 15 * time.Second, TrxRowsModified: 3, Certain: true}
	want := `thread 42 (app@10.0.0.5:3306, db shop) running 12s (User sleep): "SELECT * FROM orders WHERE 1=1 AND SLEEP(100)"; transaction open 15s, 3 row(s) modified; holds MDL_SHARED_READ for 12s`
	if got := b.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
	if b.Age() != 15*time.Second {
		t.Errorf("Age %s", b.Age())
	}
	if got := truncate(strings.Repeat("x", 300), 10); got != "xxxxxxxxxx…" {
		t.Errorf("truncate: %q", got)
	}
}

// session is one client connection of a test, holding whatever it holds
// until the test ends.
type session struct {
	t    *testing.T
	id   int64
	conn *sql.Conn
	done chan error
}

func newSession(t *testing.T, db *sql.DB) *session {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{t: t, conn: c}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", s.id))
		if s.done != nil {
			<-s.done
		}
		_ = c.Close()
	})
	return s
}

func (s *session) exec(stmts ...string) {
	s.t.Helper()
	for _, q := range stmts {
		if _, err := s.conn.ExecContext(context.Background(), q); err != nil {
			s.t.Fatalf("session %d: %s: %v", s.id, q, err)
		}
	}
}

// start runs stmt in the background.
func (s *session) start(stmt string) {
	s.done = make(chan error, 1)
	go func() {
		_, err := s.conn.ExecContext(context.Background(), stmt)
		s.done <- err
	}()
}

// waitState waits until session id is in the given processlist state.
func waitState(t *testing.T, db *sql.DB, id int64, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st sql.NullString
		_ = db.QueryRow("SELECT STATE FROM "+testutil.Server(t).Processlist()+" WHERE ID = ?", id).Scan(&st)
		if st.String == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d: state %q, want %q", id, st.String, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(t *testing.T, db *sql.DB, id int64) (bool, string) {
	t.Helper()
	var cmd, state string
	err := db.QueryRow("SELECT COMMAND, IFNULL(STATE, '') FROM "+testutil.Server(t).Processlist()+" WHERE ID = ?", id).Scan(&cmd, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, cmd + "/" + state
}

// scene is the seed scenario: on table t, a session running a long SELECT
// and one idle in a transaction that read t; around them, what must not be
// mistaken for blockers: a long query and an idle transaction on another
// table, a recast-tagged query on t, a registered recast session.
type scene struct {
	schema                    string
	db                        *sql.DB
	sleeper, idle             *session
	otherSleeper, otherIdle   *session
	tagged, registered, short *session
}

func newScene(t *testing.T) *scene {
	t.Helper()
	sc := &scene{schema: testutil.NewSchema(t)}
	sc.db = testutil.DB(t, sc.schema)
	testutil.Exec(t, sc.db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)",
		"CREATE TABLE other (id INT NOT NULL PRIMARY KEY)", "INSERT INTO other VALUES (1)")
	if err := LoadPlugin(context.Background(), sc.db); err != nil {
		t.Fatal(err)
	}
	sc.sleeper = newSession(t, sc.db)
	sc.sleeper.start("SELECT * FROM t WHERE 1=1 AND SLEEP(100)")
	sc.idle = newSession(t, sc.db)
	sc.idle.exec("BEGIN", "SELECT * FROM t")
	sc.otherSleeper = newSession(t, sc.db)
	sc.otherSleeper.start("SELECT * FROM other WHERE 1=1 AND SLEEP(100)")
	sc.otherIdle = newSession(t, sc.db)
	sc.otherIdle.exec("BEGIN", "SELECT * FROM other")
	sc.tagged = newSession(t, sc.db)
	sc.tagged.start(dbconn.Tag + "SELECT * FROM t WHERE 1=1 AND SLEEP(100)")
	sc.registered = newSession(t, sc.db)
	sc.registered.exec("BEGIN", "SELECT * FROM t")
	t.Cleanup(RegisterOwn(sc.registered.id))
	for _, s := range []*session{sc.sleeper, sc.otherSleeper, sc.tagged} {
		waitState(t, sc.db, s.id, "User sleep")
	}
	time.Sleep(1200 * time.Millisecond) // older than the tests' MinAge, even at the 1 s resolution of INNODB_TRX.trx_started
	sc.short = newSession(t, sc.db)     // young: not a blocker yet
	sc.short.start("SELECT * FROM t WHERE 1=1 AND SLEEP(100)")
	waitState(t, sc.db, sc.short.id, "User sleep")
	return sc
}

func ids(bs []Blocker) map[int64]Blocker {
	m := map[int64]Blocker{}
	for _, b := range bs {
		m[b.ID] = b
	}
	return m
}

// TestFinderPlugin: with metadata_lock_info, exactly the SLEEP query and the
// idle transaction that read t are blockers.
func TestFinderPlugin(t *testing.T) {
	t.Parallel()
	sc := newScene(t)
	ctx := context.Background()
	f, err := NewFinder(ctx, sc.db, Config{Schema: sc.schema, Table: "t", MinAge: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Plugin() {
		t.Fatal("the plugin is loaded, but the finder does not use it")
	}
	bs, err := f.Find(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ids(bs)
	if len(got) != 2 {
		t.Fatalf("want 2 blockers (threads %d, %d), got %v", sc.sleeper.id, sc.idle.id, bs)
	}
	s, ok := got[sc.sleeper.id]
	if !ok || !s.Certain || s.Idle() || s.Statement != "SELECT * FROM t WHERE 1=1 AND SLEEP(100)" || s.LockMode != "MDL_SHARED_READ" || s.InTrx {
		t.Errorf("sleeper: %+v", s)
	}
	i, ok := got[sc.idle.id]
	if !ok || !i.Certain || !i.Idle() || !i.InTrx || i.LockMode != "MDL_SHARED_READ" || i.TrxRowsModified != 0 {
		t.Errorf("idle transaction: %+v", i)
	}
	for _, b := range bs {
		t.Logf("blocker: %s", b)
	}
}

// TestFinderFallback: without the plugin, the SLEEP query (it names t) is a
// certain blocker; open transactions are only possible ones, whatever they
// read; other queries, recast's and young ones are not reported.
func TestFinderFallback(t *testing.T) {
	t.Parallel()
	sc := newScene(t)
	ctx := context.Background()
	f, err := NewFinder(ctx, sc.db, Config{Schema: sc.schema, Table: "t", MinAge: 300 * time.Millisecond, NoPlugin: true})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := f.Find(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ids(bs)
	if s, ok := got[sc.sleeper.id]; !ok || !s.Certain || s.LockMode != "" {
		t.Errorf("sleeper: %+v (ok %v)", s, ok)
	}
	for _, s := range []*session{sc.idle, sc.otherIdle} {
		if b, ok := got[s.id]; !ok || b.Certain || !b.InTrx {
			t.Errorf("idle transaction %d: want a possible blocker, got %+v (ok %v)", s.id, b, ok)
		}
	}
	for _, s := range []*session{sc.otherSleeper, sc.tagged, sc.registered, sc.short} {
		if b, ok := got[s.id]; ok {
			t.Errorf("thread %d reported: %s", s.id, b)
		}
	}
}

// TestFinderWaitingDDL: someone else's ALTER waiting for t is reported (as
// waiting); the DML queued behind it is not.
func TestFinderWaitingDDL(t *testing.T) {
	// Not parallel: its fallback case reads INNODB_TRX, which InnoDB
	// refreshes only after 100 ms without readers, and the parallel tests'
	// finders poll it (on MySQL the holder's read-only transaction was then
	// missing from it).
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	// The plugin case needs the plugin (other tests load it too, but maybe
	// only after this one looked).
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	holder := newSession(t, db)
	holder.exec("BEGIN", "SELECT * FROM t")
	alter := newSession(t, db)
	alter.exec("SET SESSION lock_wait_timeout = 30")
	alter.start("ALTER TABLE t ADD COLUMN c INT")
	waitState(t, db, alter.id, waitingMDL)
	victim := newSession(t, db)
	victim.exec("SET SESSION lock_wait_timeout = 30")
	victim.start("SELECT * FROM t")
	waitState(t, db, victim.id, waitingMDL)
	time.Sleep(300 * time.Millisecond)
	for _, noPlugin := range []bool{false, true} {
		f, err := NewFinder(context.Background(), db, Config{Schema: schema, Table: "t", MinAge: 200 * time.Millisecond, NoPlugin: noPlugin})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := f.Find(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := ids(bs)
		if b, ok := got[alter.id]; !ok || !b.Waiting || !b.Certain {
			t.Errorf("plugin %v: the waiting ALTER: %+v (ok %v)", !noPlugin, b, ok)
		}
		if b, ok := got[victim.id]; ok {
			t.Errorf("plugin %v: the queued SELECT is reported: %s", !noPlugin, b)
		}
		if b, ok := got[holder.id]; !ok || (!noPlugin && !b.Certain) {
			t.Errorf("plugin %v: the holder: %+v (ok %v)", !noPlugin, b, ok)
		}
	}
}

// lockAttempt is what recast's cut-over does: LOCK TABLES t WRITE with a
// short lock wait, then UNLOCK.
func lockAttempt(db *sql.DB, schema string, timeout int, attempts *int, mu *sync.Mutex, at *[]time.Time) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		mu.Lock()
		*attempts++
		*at = append(*at, time.Now())
		mu.Unlock()
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", timeout)); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, dbconn.Tag+"LOCK TABLES "+testutil.QuoteIdent(schema)+".t WRITE"); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, "UNLOCK TABLES")
		return err
	}
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
	t  *testing.T
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{t: t}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

// TestRunWaitsThenLocks: with a blocker that ends after ~2 s, Run does not
// request the lock while it exists, and succeeds with its first attempt.
func TestRunWaitsThenLocks(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	blocker := newSession(t, db)
	blocker.start("SELECT * FROM t WHERE SLEEP(2) = 0")
	waitState(t, db, blocker.id, "User sleep")
	f, err := NewFinder(context.Background(), db, Config{Schema: schema, Table: "t", MinAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	log, lb := testLogger(t)
	var mu sync.Mutex
	var n int
	var at []time.Time
	start := time.Now()
	rep, err := Run(context.Background(), Policy{Finder: f, LockWaitTimeout: time.Second, Attempts: 3, Budget: 30 * time.Second, Logger: log},
		"test", lockAttempt(db, schema, 1, &n, &mu, &at), dbconn.IsLockTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 1 || n != 1 {
		t.Errorf("attempts %d (%d), want 1", rep.Attempts, n)
	}
	if d := at[0].Sub(start); d < 1500*time.Millisecond {
		t.Errorf("locked after %s: before the blocker ended", d)
	}
	if rep.Waited < 1500*time.Millisecond || len(rep.Blockers) != 1 || rep.Blockers[0].ID != blocker.id {
		t.Errorf("report: waited %s, blockers %v", rep.Waited, rep.Blockers)
	}
	if !strings.Contains(lb.String(), fmt.Sprintf("blocker.thread=%d", blocker.id)) {
		t.Error("the blocker was not logged")
	}
}

// TestRunKills: --kill-blockers-after kills the SLEEP query (KILL QUERY) and
// the idle transaction (KILL CONNECTION), and only them.
func TestRunKills(t *testing.T) {
	t.Parallel()
	sc := newScene(t)
	// recast's own sessions never hold a lock on the table while recast
	// wants one; the scene's stand-ins for them would block for good.
	for _, s := range []*session{sc.tagged, sc.registered} {
		testutil.Exec(t, sc.db, fmt.Sprintf("KILL CONNECTION %d", s.id))
	}
	f, err := NewFinder(context.Background(), sc.db, Config{Schema: sc.schema, Table: "t", MinAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	log, lb := testLogger(t)
	var mu sync.Mutex
	var n int
	var at []time.Time
	start := time.Now()
	rep, err := Run(context.Background(), Policy{Finder: f, LockWaitTimeout: time.Second, Attempts: 3, Budget: 30 * time.Second,
		KillAfter: 500 * time.Millisecond, KillMaxRows: 100, Logger: log},
		"test", lockAttempt(sc.db, sc.schema, 1, &n, &mu, &at), dbconn.IsLockTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("locked after %s, %d attempt(s), kills %+v", time.Since(start), rep.Attempts, rep.Kills)
	killed := map[int64]string{}
	for _, k := range rep.Kills {
		if k.Err != "" {
			t.Errorf("kill failed: %+v", k)
		}
		killed[k.Blocker.ID] = k.Statement
	}
	// MariaDB kills the statement by its query id; MySQL has none, and kills
	// the session's current statement after checking it is the one seen.
	wantKill := "KILL QUERY ID "
	if testutil.Server(t).MySQL() {
		wantKill = fmt.Sprintf("KILL QUERY %d", sc.sleeper.id)
	}
	if s := killed[sc.sleeper.id]; !strings.HasPrefix(s, wantKill) {
		t.Errorf("sleeper: %q", s)
	}
	if s := killed[sc.idle.id]; s != fmt.Sprintf("KILL CONNECTION %d", sc.idle.id) {
		t.Errorf("idle transaction: %q", s)
	}
	// short became old enough to block meanwhile: killed too (it is on t).
	for id := range killed {
		if id != sc.sleeper.id && id != sc.idle.id && id != sc.short.id {
			t.Errorf("killed thread %d", id)
		}
	}
	for _, s := range []*session{sc.otherSleeper, sc.otherIdle} {
		if ok, st := alive(t, sc.db, s.id); !ok {
			t.Errorf("thread %d was killed", s.id)
		} else if s == sc.otherSleeper && st != "Query/User sleep" {
			t.Errorf("the unrelated query: %s", st)
		}
	}
	if err := <-sc.sleeper.done; dbconn.Number(err) != dbconn.ErQueryInterrupted {
		t.Errorf("the sleeper ended with %v", err)
	}
	sc.sleeper.done = nil
	if ok, _ := alive(t, sc.db, sc.idle.id); ok {
		t.Error("the idle transaction's connection is alive")
	}
	if !strings.Contains(lb.String(), "killed a blocker") {
		t.Error("no kill was logged")
	}
}

// TestRunKillMaxRows: a blocking transaction that modified more rows than
// KillMaxRows is never killed; Run gives up naming it, within its budget.
func TestRunKillMaxRows(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT)", "INSERT INTO t SELECT seq, 0 FROM seq_1_to_10")
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	writer := newSession(t, db)
	writer.exec("BEGIN", "UPDATE t SET v = v + 1")
	f, err := NewFinder(context.Background(), db, Config{Schema: schema, Table: "t", MinAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	log, lb := testLogger(t)
	var mu sync.Mutex
	var n int
	var at []time.Time
	start := time.Now()
	rep, err := Run(context.Background(), Policy{Finder: f, LockWaitTimeout: time.Second, Attempts: 2, Budget: 3 * time.Second,
		KillAfter: 200 * time.Millisecond, KillMaxRows: 5, Logger: log},
		"test", lockAttempt(db, schema, 1, &n, &mu, &at), dbconn.IsLockTimeout)
	took := time.Since(start)
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("want ErrGaveUp, got %v", err)
	}
	t.Logf("gave up after %s: %v", took, err)
	if !strings.Contains(err.Error(), fmt.Sprintf("thread %d", writer.id)) || !strings.Contains(err.Error(), "10 row(s) modified") {
		t.Errorf("the error does not name the blocker: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("took %s for a 3s budget", took)
	}
	if len(rep.Kills) != 0 {
		t.Errorf("kills: %+v", rep.Kills)
	}
	if ok, _ := alive(t, db, writer.id); !ok {
		t.Error("the writer was killed")
	}
	if !strings.Contains(lb.String(), "kill-max-rows") {
		t.Error("not logged why the blocker was not killed")
	}
}

// TestFinderStaleInnoDBTrx: InnoDB refreshes INNODB_TRX only after 100 ms in
// which nobody read it, so a tight poller (monitoring, parallel tools) freezes
// it and a transaction opened meanwhile stays invisible there. A session idle
// holding t's metadata lock is still reported as in a transaction, and one
// whose transaction INNODB_TRX does not list is never killed (its rollback
// cost is unknown).
func TestFinderStaleInnoDBTrx(t *testing.T) {
	// Not parallel: its pollers freeze INNODB_TRX for the whole server, and
	// the other tests need it fresh.
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 { // keep INNODB_TRX frozen: reads well under 100 ms apart
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var n int
				_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&n)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	time.Sleep(200 * time.Millisecond)
	idle := newSession(t, db)
	idle.exec("BEGIN", "INSERT INTO t VALUES (2)", "SELECT * FROM t")
	time.Sleep(400 * time.Millisecond)

	f, err := NewFinder(ctx, db, Config{Schema: schema, Table: "t", MinAge: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := f.Find(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := ids(bs)[idle.id]
	if !ok || !b.Certain || !b.InTrx || !b.Idle() {
		t.Fatalf("idle transaction %d: got %+v (found %v) among %v", idle.id, b, ok, bs)
	}
	t.Logf("blocker: %s (TrxUnknown %v: whether the pollers kept INNODB_TRX frozen)", b, b.TrxUnknown)

	// The kill decision for a blocker whose transaction INNODB_TRX does not
	// list: never, however long it has blocked.
	b.TrxUnknown = true
	logger, logs := testLogger(t)
	tr := &tracker{p: Policy{Finder: f, KillAfter: time.Millisecond, KillMaxRows: 1000, Logger: logger}, what: "test", seen: map[string]*seen{}}
	tr.note([]Blocker{b}, time.Now().Add(-time.Minute))
	if tr.killDue(ctx, []Blocker{b}, time.Now()) {
		t.Error("killDue killed a blocker of unknown transaction size")
	}
	if ok, state := alive(t, db, idle.id); !ok {
		t.Errorf("session %d was killed (%s)", idle.id, state)
	}
	if !strings.Contains(logs.String(), "INNODB_TRX does not list its transaction") {
		t.Errorf("no log line explains why it was not killed:\n%s", logs)
	}
	// Control: the same idle session, not flagged, is killed. (As a plain
	// idle holder: the kill's last check would compare its transaction with
	// INNODB_TRX, which the pollers keep frozen.)
	b.TrxUnknown, b.InTrx = false, false
	tr = &tracker{p: Policy{Finder: f, KillAfter: time.Millisecond, KillMaxRows: 1000, Logger: logger}, what: "test", seen: map[string]*seen{}}
	tr.note([]Blocker{b}, time.Now().Add(-time.Minute))
	if !tr.killDue(ctx, []Blocker{b}, time.Now()) {
		t.Error("control: killDue did not kill an idle blocker with a small transaction")
	}
}

// TestRunPossibleBlockerSurvivesAttempt: without the plugin an idle
// transaction that read t is only a possible blocker, so the first attempt
// is made and times out behind it. From then on it is a blocker: Run does
// not request the lock again while it is open (no more stalls for the
// application), and locks once it ends.
func TestRunPossibleBlockerSurvivesAttempt(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	idle := newSession(t, db)
	idle.exec("BEGIN", "SELECT * FROM t")
	f, err := NewFinder(context.Background(), db, Config{Schema: schema, Table: "t", MinAge: 100 * time.Millisecond, NoPlugin: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // INNODB_TRX.trx_started has a 1 s resolution
	log, lb := testLogger(t)
	var mu sync.Mutex
	var n int
	var at []time.Time
	var ended time.Time
	go func() {
		// End the transaction 4 s after the first attempt.
		for {
			mu.Lock()
			k := len(at)
			mu.Unlock()
			if k > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(4 * time.Second)
		mu.Lock()
		ended = time.Now()
		mu.Unlock()
		idle.exec("COMMIT")
	}()
	_, err = Run(context.Background(), Policy{Finder: f, LockWaitTimeout: time.Second, Attempts: 10, Budget: 30 * time.Second, Logger: log},
		"test", lockAttempt(db, schema, 1, &n, &mu, &at), dbconn.IsLockTimeout)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("attempts %d at %v; the transaction ended at %v", n, at, ended)
	if n != 2 {
		t.Errorf("%d lock attempts, want 2: one behind the possible blocker, one after it ended", n)
	}
	for _, a := range at[1:] {
		if a.Before(ended) {
			t.Errorf("the lock was requested at %v, while the blocker (named after the failed attempt) still ran", a)
		}
	}
	if !strings.Contains(lb.String(), "treating it as a blocker") {
		t.Error("the promotion was not logged")
	}
}

// TestRunNeverRequestsBehindNamedBlocker: a certain blocker that outlasts
// the budget: no lock is ever requested (each request would make the
// application wait the lock timeout for nothing); Run gives up naming it.
func TestRunNeverRequestsBehindNamedBlocker(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	blocker := newSession(t, db)
	blocker.start("SELECT * FROM t WHERE SLEEP(20) = 0")
	waitState(t, db, blocker.id, "User sleep")
	f, err := NewFinder(context.Background(), db, Config{Schema: schema, Table: "t", MinAge: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	log, _ := testLogger(t)
	var mu sync.Mutex
	var n int
	var at []time.Time
	_, err = Run(context.Background(), Policy{Finder: f, LockWaitTimeout: time.Second, Attempts: 3, Budget: 3 * time.Second, Logger: log},
		"test", lockAttempt(db, schema, 1, &n, &mu, &at), dbconn.IsLockTimeout)
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), fmt.Sprintf("thread %d", blocker.id)) {
		t.Fatalf("want ErrGaveUp naming thread %d, got %v", blocker.id, err)
	}
	if n != 0 {
		t.Errorf("%d lock request(s) behind a named blocker", n)
	}
}

// TestCanLoadPlugin: the test user may install plugins; a user with
// SELECT only may not.
func TestCanLoadPlugin(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	ctx := context.Background()
	if ok, err := CanLoadPlugin(ctx, db); err != nil || !ok {
		t.Errorf("admin: CanLoadPlugin = %v, %v", ok, err)
	}
	user := "ro_" + schema[len(schema)-4:]
	testutil.Exec(t, db, "CREATE USER '"+user+"'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO '"+user+"'@'%'")
	t.Cleanup(func() { _, _ = db.Exec("DROP USER '" + user + "'@'%'") })
	sb := testutil.Sandbox(t)
	ro, err := sql.Open("mysql", fmt.Sprintf("%s:pw@tcp(%s:%d)/", user, sb.Primary.Host, sb.Primary.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ok, err := CanLoadPlugin(ctx, ro); err != nil || ok {
		t.Errorf("SELECT-only user: CanLoadPlugin = %v, %v", ok, err)
	}
}

// TestFinderBinaryStatement: sessions whose statements carry binary bytes
// and 4-byte characters (MySQL then fails to fill INNODB_TRX and
// information_schema.PROCESSLIST, error 3854) do not stop the Finder: an
// idle transaction that wrote such a row into t and a running query are
// named; on MySQL the transaction's size is unknown, so it is never killed.
// Not parallel: while its transaction is open, MySQL cannot fill INNODB_TRX
// for anybody, and the other tests need the sizes of their transactions.
func TestFinderBinaryStatement(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, b VARBINARY(16), s VARCHAR(16) CHARACTER SET utf8mb4)", "INSERT INTO t VALUES (2, NULL, 'x')")
	if err := LoadPlugin(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	idle := newSession(t, db)
	idle.exec("BEGIN")
	if _, err := idle.conn.ExecContext(context.Background(), "INSERT INTO t VALUES (1, ?, ?)", []byte{0x89, 0xf6, 0x53, 0xe3, 0x18}, "🚀 ok"); err != nil {
		t.Fatal(err)
	}
	sleeper := newSession(t, db)
	sleeper.start("SELECT * FROM t WHERE s <> '😀' AND SLEEP(100)")
	waitState(t, db, sleeper.id, "User sleep")
	time.Sleep(1200 * time.Millisecond)
	ctx := context.Background()
	f, err := NewFinder(ctx, db, Config{Schema: schema, Table: "t", MinAge: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := f.Find(ctx)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	got := ids(bs)
	i, ok := got[idle.id]
	if !ok || !i.InTrx || !i.Idle() || i.TrxAge < time.Second {
		t.Errorf("idle transaction %d: %+v (found %v)", idle.id, i, bs)
	}
	if s, ok := got[sleeper.id]; !ok || s.Idle() || !strings.Contains(s.Statement, "SLEEP(100)") {
		t.Errorf("sleeper %d: %+v (found %v)", sleeper.id, s, bs)
	}
	if testutil.Server(t).MySQL() && !i.TrxUnknown {
		t.Errorf("MySQL: the transaction's size was reported known (%d rows) though INNODB_TRX cannot be read", i.TrxRowsModified)
	}
	for _, b := range bs {
		t.Logf("blocker: %s", b)
	}
}
