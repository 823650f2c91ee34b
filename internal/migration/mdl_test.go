package migration

// Metadata-lock acceptance tests (issue 5): the seed scenario is a session
// running SELECT * FROM t WHERE 1=1 AND SLEEP(100) and one idle in a
// transaction that read t. A probe session runs SELECT 1 FROM t LIMIT 1 every
// 50 ms throughout and records its longest wait: it must never exceed the
// cut-over lock timeout + 0.5 s.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/testutil"
)

const mdlLockTimeout = time.Second

// mdlOptions are testOptions with a 1 s lock timeout, the plugin loaded and
// the log (Info and up) captured.
func mdlOptions(t *testing.T, schema, alter string) (testOpts, *mdlLog) {
	o := testOptions(t, schema, "t", alter)
	o.CutOverLockTimeout = mdlLockTimeout
	o.LoadMDLPlugin = true
	o.Checksum = false
	lg := &mdlLog{t: t}
	o.Logger = slog.New(slog.NewTextHandler(lg, nil))
	return o, lg
}

type mdlLog struct {
	mu sync.Mutex
	b  strings.Builder
	t  *testing.T
}

func (l *mdlLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return l.b.Write(p)
}

func (l *mdlLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

// waitLog waits until the log holds every string of want.
func (l *mdlLog) waitLog(t *testing.T, d time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok := true
		for _, w := range want {
			ok = ok && l.has(w)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log lacks %q after %s", want, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is one application connection of a test.
type client struct {
	id   int64
	conn *sql.Conn
	done chan error
}

func newClient(t *testing.T, db *sql.DB) *client {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cl := &client{conn: c}
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&cl.id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec(fmt.Sprintf("KILL CONNECTION %d", cl.id))
		if cl.done != nil {
			<-cl.done
		}
		_ = c.Close()
	})
	return cl
}

func (c *client) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.conn.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("client %d: %s: %v", c.id, s, err)
		}
	}
}

func (c *client) start(stmt string) {
	c.done = make(chan error, 1)
	go func() {
		_, err := c.conn.ExecContext(context.Background(), stmt)
		c.done <- err
	}()
}

func (c *client) state(t *testing.T, db *sql.DB) string {
	t.Helper()
	var cmd, st string
	err := db.QueryRow("SELECT COMMAND, IFNULL(STATE, '') FROM "+testutil.Server(t).Processlist()+" WHERE ID = ?", c.id).Scan(&cmd, &st)
	if errors.Is(err, sql.ErrNoRows) {
		return "gone"
	}
	if err != nil {
		t.Fatal(err)
	}
	return cmd + "/" + st
}

func (c *client) waitState(t *testing.T, db *sql.DB, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.state(t, db) != want {
		if time.Now().After(deadline) {
			t.Fatalf("client %d: %s, want %s", c.id, c.state(t, db), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockers starts the seed scenario's two blockers on t.
func blockers(t *testing.T, db *sql.DB) (sleeper, idle *client) {
	t.Helper()
	sleeper = newClient(t, db)
	sleeper.start("SELECT * FROM t WHERE 1=1 AND SLEEP(100)")
	idle = newClient(t, db)
	idle.exec(t, "BEGIN", "SELECT * FROM t")
	sleeper.waitState(t, db, "Query/User sleep")
	return sleeper, idle
}

// probe runs SELECT 1 FROM t LIMIT 1 every 50 ms on its own connection, the
// way an application would (default lock wait, prepared statements).
type probe struct {
	maxWait  atomic.Int64
	n, fails atomic.Int64
	lastErr  atomic.Value
	stop     chan struct{}
	done     chan struct{}
}

func startProbe(t *testing.T, schema string) *probe {
	t.Helper()
	sb := testutil.Sandbox(t)
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net = sb.User, sb.Password, "tcp"
	cfg.Addr = net.JoinHostPort(sb.Primary.Host, strconv.Itoa(sb.Primary.Port))
	cfg.DBName = schema
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	p := &probe{stop: make(chan struct{}), done: make(chan struct{})}
	stmt, err := db.Prepare("SELECT 1 FROM t LIMIT 1")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		defer db.Close()
		defer stmt.Close()
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			rows, err := stmt.Query()
			if err == nil {
				err = drain(rows)
			}
			if d := int64(time.Since(start)); d > p.maxWait.Load() {
				p.maxWait.Store(d)
			}
			p.n.Add(1)
			if err != nil {
				p.fails.Add(1)
				p.lastErr.Store(err.Error())
			}
		}
	}()
	t.Cleanup(p.halt)
	return p
}

func (p *probe) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// check stops the probe and checks its longest wait.
func (p *probe) check(t *testing.T) {
	t.Helper()
	p.halt()
	maxWait := time.Duration(p.maxWait.Load())
	t.Logf("probe: %d queries, longest wait %s, %d failed", p.n.Load(), maxWait.Round(time.Millisecond), p.fails.Load())
	if p.n.Load() < 10 {
		t.Errorf("the probe ran %d queries only", p.n.Load())
	}
	if limit := mdlLockTimeout + 500*time.Millisecond; maxWait > limit {
		t.Errorf("an application query waited %s, more than the lock timeout + 0.5 s (%s)", maxWait, limit)
	}
	if n := p.fails.Load(); n > 0 {
		t.Errorf("%d probe queries failed; last: %v", n, p.lastErr.Load())
	}
}

func mdlTable(t *testing.T) (string, *sql.DB) {
	t.Helper()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, c INT NULL)",
		"INSERT INTO t SELECT seq, seq, seq FROM seq_1_to_2000")
	return schema, db
}

func tablesOf(t *testing.T, db *sql.DB, schema string) string {
	t.Helper()
	return strings.Join(tableNames(t, db, schema), ",")
}

// timeOf records when a Pause point is first reached.
type timeOf struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (p *timeOf) pause(_ context.Context, point string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[string]time.Time{}
	}
	if _, ok := p.at[point]; !ok {
		p.at[point] = time.Now()
	}
}

func (p *timeOf) get(point string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[point]
	return at, ok
}

func hasBlocker(bs []mdl.Blocker, id int64) bool {
	for _, b := range bs {
		if b.ID == id {
			return true
		}
	}
	return false
}

// TestMDLWaitsForBlockers (acceptance 1): recast names both blockers before
// requesting any lock, requests none while they exist, and cuts over as soon
// as the last one ends; the probe never waits longer than the lock timeout.
func TestMDLWaitsForBlockers(t *testing.T) {
	t.Parallel()
	schema, db := mdlTable(t)
	sleeper, idle := blockers(t, db)
	pr := startProbe(t, schema)
	o, lg := mdlOptions(t, schema, "MODIFY c BIGINT")
	var pts timeOf
	o.Pause = pts.pause
	type result struct {
		res *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := runT(ctxFor(t, 2*time.Minute), o)
		done <- result{res, err}
	}()
	lg.waitLog(t, time.Minute, fmt.Sprintf("blocker.thread=%d", sleeper.id), fmt.Sprintf("blocker.thread=%d", idle.id),
		`blocker.statement="SELECT * FROM t WHERE 1=1 AND SLEEP(100)"`)
	reported := time.Now()
	time.Sleep(1500 * time.Millisecond)
	testutil.Exec(t, db, fmt.Sprintf("KILL QUERY %d", sleeper.id)) // the query ends
	<-sleeper.done
	sleeper.done = nil
	time.Sleep(1500 * time.Millisecond)
	if at, ok := pts.get("cutover:before-lock"); ok {
		t.Fatalf("recast requested the lock %s after naming the blockers, while the idle transaction still held t", at.Sub(reported))
	}
	idle.exec(t, "COMMIT") // the last blocker ends
	ended := time.Now()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	locked, _ := pts.get("cutover:before-lock")
	co := r.res.CutOver
	t.Logf("cut-over requested the lock %s after the last blocker ended; %d attempt(s), waited %s for blockers, lock & rename %s",
		locked.Sub(ended).Round(time.Millisecond), co.Attempts, co.Waited.Round(time.Millisecond), co.LockedFor.Round(time.Millisecond))
	if d := locked.Sub(ended); d < 0 || d > time.Second {
		t.Errorf("the lock was requested %s after the last blocker ended; want at once", d)
	}
	if co.Attempts != 1 || !hasBlocker(co.Blockers, sleeper.id) || !hasBlocker(co.Blockers, idle.id) || len(co.Kills) != 0 {
		t.Errorf("cut-over report: %+v", co)
	}
	if !lg.has("lock_and_rename=") {
		t.Error("the lock & rename duration was not logged")
	}
	pr.check(t)
}

// TestMDLKillsBlockers (acceptance 2): --kill-blockers-after 2s kills the
// SLEEP query and the idle transaction, not an unrelated long query.
func TestMDLKillsBlockers(t *testing.T) {
	t.Parallel()
	schema, db := mdlTable(t)
	testutil.Exec(t, db, "CREATE TABLE other (id INT NOT NULL PRIMARY KEY)", "INSERT INTO other VALUES (1)")
	unrelated := newClient(t, db)
	unrelated.start("SELECT * FROM other WHERE 1=1 AND SLEEP(100)")
	sleeper, idle := blockers(t, db)
	unrelated.waitState(t, db, "Query/User sleep")
	pr := startProbe(t, schema)
	o, lg := mdlOptions(t, schema, "MODIFY c BIGINT")
	o.KillBlockersAfter = 2 * time.Second
	res, err := runT(ctxFor(t, 2*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	killed := map[int64]mdl.Kill{}
	for _, k := range res.CutOver.Kills {
		killed[k.Blocker.ID] = k
	}
	// MariaDB kills the statement by its query id (never a later statement
	// of the session); MySQL has only KILL QUERY <session>.
	wantKill := "KILL QUERY ID "
	if testutil.Server(t).MySQL() {
		wantKill = fmt.Sprintf("KILL QUERY %d", sleeper.id)
	}
	if k := killed[sleeper.id]; !strings.HasPrefix(k.Statement, wantKill) || k.Err != "" || k.BlockedFor < 2*time.Second {
		t.Errorf("the SLEEP query: %+v", k)
	}
	if k := killed[idle.id]; k.Statement != fmt.Sprintf("KILL CONNECTION %d", idle.id) || k.Err != "" {
		t.Errorf("the idle transaction: %+v", k)
	}
	if len(killed) != 2 {
		t.Errorf("killed %d sessions: %+v", len(killed), res.CutOver.Kills)
	}
	if st := unrelated.state(t, db); st != "Query/User sleep" {
		t.Errorf("the unrelated query on another table: %s", st)
	}
	if err := <-sleeper.done; dbconn.Number(err) != dbconn.ErQueryInterrupted {
		t.Errorf("the SLEEP query ended with %v", err)
	}
	sleeper.done = nil
	for _, want := range []string{"killed a blocker", fmt.Sprintf("kill=\"KILL CONNECTION %d\"", idle.id), "SLEEP(100)"} {
		if !lg.has(want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	t.Logf("cut-over: %d attempt(s), waited %s, lock & rename %s", res.CutOver.Attempts, res.CutOver.Waited, res.CutOver.LockedFor)
	pr.check(t)
}

// TestMDLMethodAuto (acceptance 3): ADD COLUMN runs INSTANT, without a ghost,
// under the same blocker handling; MODIFY to BIGINT falls back to the copy;
// the dry run says which and why.
func TestMDLMethodAuto(t *testing.T) {
	t.Parallel()
	t.Run("dry-run", func(t *testing.T) {
		t.Parallel()
		schema, db := mdlTable(t)
		wants := map[string][]string{
			"ADD COLUMN d INT": {"method:       instant", "why:          the server can apply it with ALGORITHM=INSTANT"},
			"MODIFY c BIGINT":  {"method:       copy", "why:          ALGORITHM=INSTANT is not supported. Reason: Cannot change column type"},
			"ADD INDEX (v)":    {"method:       copy", "ALGORITHM=NOCOPY would build index `v`"},
		}
		if testutil.Server(t).MySQL() { // the server's own reasons; no NOCOPY
			wants["MODIFY c BIGINT"] = []string{"method:       copy", "why:          ALGORITHM=INSTANT is not supported. Reason: Need to rebuild the table to change column type", "MySQL has no ALGORITHM=NOCOPY"}
			wants["ADD INDEX (v)"] = []string{"method:       copy", "why:          ALGORITHM=INSTANT is not supported for this operation", "MySQL has no ALGORITHM=NOCOPY"}
		}
		for alter, want := range wants {
			o, _ := mdlOptions(t, schema, alter)
			o.Method, o.Execute = "auto", false
			res, err := runT(ctxFor(t, time.Minute), o)
			if err != nil {
				t.Fatalf("%s: %v", alter, err)
			}
			desc := res.Plan.Describe()
			for _, w := range want {
				if !strings.Contains(desc, w) {
					t.Errorf("%s: the plan lacks %q:\n%s", alter, w, desc)
				}
			}
		}
		if got := tablesOf(t, db, schema); got != "t" {
			t.Errorf("the dry runs left tables: %s", got)
		}
		o, _ := mdlOptions(t, schema, "MODIFY c BIGINT")
		o.Method, o.Execute = "instant", false
		if _, err := runT(ctxFor(t, time.Minute), o); err == nil || !strings.Contains(err.Error(), "--method instant") {
			t.Errorf("--method instant with MODIFY: %v", err)
		}
	})
	t.Run("instant", func(t *testing.T) {
		t.Parallel()
		schema, db := mdlTable(t)
		sleeper, idle := blockers(t, db)
		before := testutil.TableChecksum(t, db, schema, "t", "id")
		pr := startProbe(t, schema)
		o, lg := mdlOptions(t, schema, "ADD COLUMN d INT")
		o.Method = "auto"
		var pts timeOf
		o.Pause = pts.pause
		done := make(chan error, 1)
		var res *Result
		go func() {
			var err error
			res, err = runT(ctxFor(t, 2*time.Minute), o)
			done <- err
		}()
		lg.waitLog(t, time.Minute, fmt.Sprintf("blocker.thread=%d", sleeper.id), fmt.Sprintf("blocker.thread=%d", idle.id))
		time.Sleep(time.Second)
		testutil.Exec(t, db, fmt.Sprintf("KILL QUERY %d", sleeper.id))
		<-sleeper.done
		sleeper.done = nil
		idle.exec(t, "COMMIT")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if res.Plan.Method != MethodInstant || res.CopiedRows != 0 || res.CutOver.Attempts != 1 || !hasBlocker(res.CutOver.Blockers, sleeper.id) {
			t.Errorf("method %s, copied %d, report %+v", res.Plan.Method, res.CopiedRows, res.CutOver)
		}
		if _, ok := pts.get("ghost-created"); ok {
			t.Error("a ghost table was created")
		}
		if got := tablesOf(t, db, schema); got != "t" {
			t.Errorf("tables: %s", got)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'd'", schema).Scan(&n); err != nil || n != 1 {
			t.Errorf("column d: %d, %v", n, err)
		}
		if after := testutil.TableChecksum(t, db, schema, "t", "id"); after == before {
			t.Error("the checksum did not change: no column added?")
		}
		t.Logf("instant ALTER: %d attempt(s), waited %s, lock & alter %s", res.CutOver.Attempts, res.CutOver.Waited, res.CutOver.LockedFor)
		pr.check(t)
	})
	t.Run("copy", func(t *testing.T) {
		t.Parallel()
		schema, db := mdlTable(t)
		o, _ := mdlOptions(t, schema, "MODIFY c BIGINT")
		o.Method = "auto"
		res, err := runT(ctxFor(t, 2*time.Minute), o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Method != MethodCopy || res.CopiedRows != 2000 || !strings.Contains(res.Plan.MethodReason, "change column type") {
			t.Errorf("method %s (%s), copied %d", res.Plan.Method, res.Plan.MethodReason, res.CopiedRows)
		}
		if got := tablesOf(t, db, schema); got != "_t_old,t" {
			t.Errorf("tables: %s", got)
		}
	})
}

// TestMDLGivesUp (acceptance 4): a blocker that never ends and no kill:
// recast gives up within its budget naming the blocker, the table is
// untouched, no helper table is left, and the probe never waited longer than
// the lock timeout.
func TestMDLGivesUp(t *testing.T) {
	t.Parallel()
	schema, db := mdlTable(t)
	before := testutil.TableChecksum(t, db, schema, "t", "id")
	sleeper, idle := blockers(t, db)
	pr := startProbe(t, schema)
	o, _ := mdlOptions(t, schema, "MODIFY c BIGINT")
	o.CutOverBudget, o.CutOverAttempts = 5*time.Second, 3
	var pts timeOf
	o.Pause = pts.pause
	start := time.Now()
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	if !errors.Is(err, cutover.ErrGaveUp) {
		t.Fatalf("want the cut-over to give up, got %v", err)
	}
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	for _, want := range []string{"cut-over gave up after", "the original table is unchanged", fmt.Sprintf("thread %d", sleeper.id), "SLEEP(100)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	if caught, _ := pts.get("caught-up"); time.Since(caught) > o.CutOverBudget+3*time.Second {
		t.Errorf("the cut-over took %s with a budget of %s", time.Since(caught), o.CutOverBudget)
	}
	if !strings.Contains(err.Error(), "--resume") {
		t.Errorf("the error does not say how to continue: %v", err)
	}
	// The verified copy is kept for --resume (with the lock-free copy's
	// watermark table), nothing else is left.
	if got := tablesOf(t, db, schema); got != "_t_chk,_t_new,_t_wm,t" {
		t.Errorf("tables left: %s", got)
	}
	if after := testutil.TableChecksum(t, db, schema, "t", "id"); after != before {
		t.Error("the original table changed")
	}
	if st := sleeper.state(t, db); st != "Query/User sleep" {
		t.Errorf("the blocker: %s (not to be killed)", st)
	}
	pr.check(t)

	// The blocker gone, --resume finishes without copying again.
	testutil.Exec(t, db, fmt.Sprintf("KILL QUERY %d", sleeper.id))
	idle.exec(t, "COMMIT")
	testutil.Exec(t, db, "UPDATE t SET c = c + 1 WHERE id <= 10") // changed since: applied on resume
	want := testutil.TableChecksum(t, db, schema, "t", "id")
	o.Resume, o.Pause = true, nil
	res, err := runT(ctxFor(t, 2*time.Minute), o)
	if err != nil {
		t.Fatalf("--resume after the cut-over gave up: %v", err)
	}
	if res.CopiedRows != 0 {
		t.Errorf("the resumed run copied %d rows again", res.CopiedRows)
	}
	if got := tablesOf(t, db, schema); got != "_t_old,t" {
		t.Errorf("tables after the resumed run: %s", got)
	}
	if got := testutil.TableChecksum(t, db, schema, "t", "id"); got != want {
		t.Error("the migrated table differs from the original")
	}
}

// TestMDLPostponeCutOver: with --postpone-cut-over-flag-file the copy is kept
// in sync until the file is removed, then the cut-over runs.
func TestMDLPostponeCutOver(t *testing.T) {
	t.Parallel()
	schema, db := mdlTable(t)
	flag := filepath.Join(t.TempDir(), "postpone")
	o, lg := mdlOptions(t, schema, "MODIFY c BIGINT")
	o.PostponeCutOverFlagFile = flag
	done := make(chan error, 1)
	go func() {
		_, err := runT(ctxFor(t, 2*time.Minute), o)
		done <- err
	}()
	lg.waitLog(t, time.Minute, "cut-over postponed")
	if _, err := os.Stat(flag); err != nil {
		t.Fatalf("recast did not create the flag file: %v", err)
	}
	testutil.Exec(t, db, "INSERT INTO t VALUES (5000, 5000, 5000)") // applied while postponed
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the migration ended while postponed: %v", err)
	default:
	}
	if got := tablesOf(t, db, schema); !strings.Contains(got, "_t_new") || strings.Contains(got, "_t_old") {
		t.Errorf("tables while postponed: %s", got)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("cut over %s after the flag file was removed", time.Since(removed).Round(time.Millisecond))
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id = 5000").Scan(&n); err != nil || n != 1 {
		t.Errorf("the row written while postponed: %d, %v", n, err)
	}
}

// TestNoCopyIndexShape: an index dropped and added again under its name
// with another prefix length or order is built by ALGORITHM=NOCOPY, so
// the plan copies (MariaDB; MySQL has no NOCOPY); a change that builds no
// index stays NOCOPY.
func TestNoCopyIndexShape(t *testing.T) {
	t.Parallel()
	if !testutil.Server(t).HasNoCopy() {
		t.Skip("the server has no ALGORITHM=NOCOPY")
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, v INT, KEY k (name(4)))",
		"INSERT INTO t VALUES (1, 'alpha', 1), (2, 'beta', 2)")
	for alter, want := range map[string]string{
		"DROP INDEX k, ADD INDEX k (name(8))":      "ALGORITHM=NOCOPY would build index `k`",
		"DROP INDEX k, ADD INDEX k (name(4) DESC)": "ALGORITHM=NOCOPY would build index `k`",
		"RENAME INDEX k TO k2":                     "method:       instant",
	} {
		o := testOptions(t, schema, "t", alter)
		o.Method, o.Execute = "auto", false
		res, err := runT(ctxFor(t, time.Minute), o)
		if err != nil {
			t.Fatalf("%s: %v", alter, err)
		}
		if desc := res.Plan.Describe(); !strings.Contains(desc, want) {
			t.Errorf("%s: the plan lacks %q:\n%s", alter, want, desc)
		}
	}
}
