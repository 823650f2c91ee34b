package copier

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// The lock-free copy's correctness rests on one property of the server
// (docs/copy.md): a transaction that lies before the low watermark in the
// binlog is visible to a consistent read opened after the watermark's
// commit returned. TestCommitVisibilityOrder checks it empirically: 16
// sessions commit single-row updates (each bumps its own counter) as fast
// as they can, while a watermark session repeatedly commits a watermark
// and then reads every counter with a READ COMMITTED consistent read
// (alternately a SELECT and the copier's own form, INSERT ... SELECT into a
// scratch table). The binlog is then read with the stream: for every
// watermark, each counter's last value logged before it must be visible
// to (not above) the read that followed it.
//
// The negative control reads before committing the watermark: transactions
// that commit between the read and the watermark lie before the watermark
// in the binlog but are missing from the read, and under load the test
// requires it to see some, so it proves the check can fail.
//
// On MySQL the test also runs with binlog_order_commits=OFF, checks that
// LockFreeSupport then refuses the lock-free copy, and reports (does not
// require) violations: OFF allows them, it does not force them.
//
// RECAST_ORDERING_ITERATIONS sets the iterations per run (default 2000).
func TestCommitVisibilityOrder(t *testing.T) {
	iters := 2000
	if s := os.Getenv("RECAST_ORDERING_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RECAST_ORDERING_ITERATIONS=%q", s)
		}
		iters = n
	}
	t.Run("watermark-then-read", func(t *testing.T) {
		r := runOrdering(t, iters, false)
		t.Logf("%s: %s", testutil.Flavor(), r)
		if r.violations > 0 {
			t.Fatalf("commits are not visible in binlog order: %s (first: %s)", r, r.first)
		}
		if r.before == 0 {
			t.Fatalf("no committer transaction lay before any watermark: the check checked nothing")
		}
	})
	t.Run("negative-control-read-then-watermark", func(t *testing.T) {
		r := runOrdering(t, iters, true)
		t.Logf("%s: %s (first: %s)", testutil.Flavor(), r, r.first)
		if r.violations == 0 {
			t.Fatalf("reading before the watermark never missed a transaction logged before it: the check cannot fail here (%s)", r)
		}
	})
	if !testutil.Server(t).MySQL() {
		return
	}
	t.Run("mysql-binlog_order_commits=OFF", func(t *testing.T) {
		db := rcDB(t, testutil.NewSchema(t))
		ctx := context.Background()
		testutil.Exec(t, db, "SET GLOBAL binlog_order_commits = OFF")
		t.Cleanup(func() { testutil.Exec(t, db, "SET GLOBAL binlog_order_commits = ON") })
		ok, why, err := LockFreeSupport(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Fatalf("LockFreeSupport accepts binlog_order_commits=OFF")
		}
		t.Logf("LockFreeSupport refuses: %s", why)
		// Turned off while a lock-free copy runs: each chunk reads the
		// setting after its mark and locks its rows.
		if locked, chunks := copyOrderedCommits(t, db); locked != chunks || chunks < 3 {
			t.Fatalf("with binlog_order_commits=OFF %d of %d lock-free chunks locked; want all", locked, chunks)
		}
		testutil.Exec(t, db, "SET GLOBAL binlog_order_commits = ON")
		if locked, chunks := copyOrderedCommits(t, db); locked != 0 || chunks < 3 {
			t.Fatalf("with binlog_order_commits=ON %d of %d lock-free chunks locked; want none", locked, chunks)
		}
		testutil.Exec(t, db, "SET GLOBAL binlog_order_commits = OFF")
		r := runOrdering(t, iters, false)
		t.Logf("%s binlog_order_commits=OFF, watermark then read: %s (first: %s)", testutil.Flavor(), r, r.first)
	})
}

type orderingResult struct {
	iters      int
	commits    int64 // committer transactions
	before     int64 // (watermark, counter) pairs where the counter had been logged before the watermark
	violations int   // pairs where the read missed a change logged before its watermark
	badMarks   int   // watermarks with at least one violation
	ahead      int64 // pairs where the read saw changes logged after its watermark (commits raced the read)
	first      string
}

func (r orderingResult) String() string {
	return fmt.Sprintf("%d watermarks, %d committer transactions, %d (watermark, session) pairs checked, %d violations in %d watermarks, %d pairs where the read saw changes logged after its watermark",
		r.iters, r.commits, r.before, r.violations, r.badMarks, r.ahead)
}

const orderingSessions = 16

func runOrdering(t *testing.T, iters int, readFirst bool) orderingResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	db := rcDB(t, schema)
	db.SetMaxOpenConns(orderingSessions + 4)
	testutil.Exec(t, db,
		"CREATE TABLE c (sess INT NOT NULL PRIMARY KEY, seq BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE snap (iter INT NOT NULL, sess INT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (iter, sess)) ENGINE=InnoDB")
	for s := range orderingSessions {
		testutil.Exec(t, db, fmt.Sprintf("INSERT INTO c VALUES (%d, 0)", s))
	}
	q := func(n string) string { return table.QuoteIdent(schema) + "." + table.QuoteIdent(n) }
	if err := CreateMarks(ctx, db, q(MarksName("c"))); err != nil {
		t.Fatal(err)
	}
	src, err := table.Load(ctx, db, schema, "c")
	if err != nil {
		t.Fatal(err)
	}
	start, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}

	// snaps[i][s]: counter s as read after (or, negative control, before)
	// watermark i+1.
	snaps := make([][orderingSessions]int64, iters)
	var commits atomic.Int64
	lctx, stopLoad := context.WithCancel(ctx)
	load, loadCtx := errgroup.WithContext(lctx)
	for s := range orderingSessions {
		load.Go(func() error {
			conn, err := db.Conn(loadCtx)
			if err != nil {
				return err
			}
			defer conn.Close()
			for loadCtx.Err() == nil {
				if _, err := conn.ExecContext(loadCtx, "UPDATE c SET seq = seq + 1 WHERE sess = ?", s); err != nil {
					if loadCtx.Err() != nil {
						return nil
					}
					return err
				}
				commits.Add(1)
			}
			return nil
		})
	}
	var viaInsert []bool
	wmErr := func() error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		// Let the committers get going.
		for commits.Load() < 200 {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		mark := func(i int) error {
			_, err := conn.ExecContext(ctx, "REPLACE INTO "+q(MarksName("c"))+" (slot, mark) VALUES (1, ?)", i+1)
			return err
		}
		read := func(i int) error {
			if i%2 == 1 {
				// The copier's form: INSERT ... SELECT, a consistent read of c.
				_, err := conn.ExecContext(ctx, "INSERT INTO snap (iter, sess, seq) SELECT ?, sess, seq FROM c", i)
				return err
			}
			rows, err := conn.QueryContext(ctx, "SELECT sess, seq FROM c")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var s int
				var v int64
				if err := rows.Scan(&s, &v); err != nil {
					return err
				}
				snaps[i][s] = v
			}
			return rows.Err()
		}
		for i := range iters {
			viaInsert = append(viaInsert, i%2 == 1)
			steps := []func(int) error{mark, read}
			if readFirst {
				steps = []func(int) error{read, mark}
			}
			for _, f := range steps {
				if err := f(i); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	stopLoad()
	if err := load.Wait(); err != nil {
		t.Fatal(err)
	}
	if wmErr != nil {
		t.Fatal(wmErr)
	}
	n, err := readSnap(ctx, db, snaps)
	if err != nil {
		t.Fatal(err)
	}
	if want := iters / 2 * orderingSessions; n != want {
		t.Fatalf("scratch table holds %d rows, want %d", n, want)
	}

	// Read the binlog: per counter, the last value logged so far.
	sb := testutil.Sandbox(t)
	host, port, _ := net.SplitHostPort(sb.Primary.Addr())
	p, _ := strconv.Atoi(port)
	stream, err := binlog.Open(ctx, binlog.Config{Host: host, Port: uint16(p), User: sb.User, Password: sb.Password,
		ServerID: 8000 + uint32(time.Now().UnixNano()%900), Table: src, MySQL: testutil.Server(t).MySQL(), Marks: MarksName("c")}, start)
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	defer closeOnce.Do(func() { _ = stream.Close() })
	r := orderingResult{iters: iters, commits: commits.Load()}
	var logged [orderingSessions]int64
	next := 1 // the mark expected next
	for next <= iters {
		ev, err := stream.Next(ctx)
		if err != nil {
			t.Fatalf("stream: %v (at watermark %d of %d)", err, next, iters)
		}
		for _, rc := range ev.Rows {
			if rc.Kind != binlog.Update || len(rc.After) != 2 {
				t.Fatalf("unexpected change on c: %+v", rc)
			}
			s, v := rc.After[0].(int64), rc.After[1].(int64)
			if v != logged[s]+1 {
				t.Fatalf("counter %d: logged %d after %d", s, v, logged[s])
			}
			logged[s] = v
		}
		for _, m := range ev.Marks {
			if m != int64(next) {
				t.Fatalf("watermark %d read, want %d", m, next)
			}
			i := next - 1
			bad := false
			for s := range orderingSessions {
				if logged[s] > 0 {
					r.before++
				}
				if snaps[i][s] > logged[s] {
					r.ahead++
				}
				if snaps[i][s] < logged[s] {
					r.violations++
					bad = true
					if r.first == "" {
						form := "SELECT"
						if viaInsert[i] {
							form = "INSERT ... SELECT"
						}
						r.first = fmt.Sprintf("watermark %d (%s): session %d logged %d before it, read saw %d",
							next, form, s, logged[s], snaps[i][s])
					}
				}
			}
			if bad {
				r.badMarks++
			}
			next++
		}
	}
	closeOnce.Do(func() { _ = stream.Close() })
	return r
}

// readSnap fills snaps from the scratch table the INSERT ... SELECT reads
// wrote, and returns how many rows it held.
func readSnap(ctx context.Context, db *sql.DB, snaps [][orderingSessions]int64) (int, error) {
	rows, err := db.QueryContext(ctx, "SELECT iter, sess, seq FROM snap")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var i, s int
		var v int64
		if err := rows.Scan(&i, &s, &v); err != nil {
			return 0, err
		}
		snaps[i][s] = v
		n++
	}
	return n, rows.Err()
}

// copyOrderedCommits runs a lock-free copy (OrderedCommits, MySQL) of a
// 300-row table in 100-row chunks and returns how many chunks locked, and
// how many there were; the new table must hold every row.
func copyOrderedCommits(t *testing.T, db *sql.DB) (locked, chunks int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	q := func(n string) string { return table.QuoteIdent(schema) + "." + table.QuoteIdent(n) }
	var vals []string
	for i := 1; i <= 300; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	testutil.Exec(t, db, "CREATE TABLE "+q("src")+" (id INT NOT NULL PRIMARY KEY, v INT)", "INSERT INTO "+q("src")+" VALUES "+strings.Join(vals, ","),
		"CREATE TABLE "+q("g")+" LIKE "+q("src"))
	if err := CreateMarks(ctx, db, q(MarksName("src"))); err != nil {
		t.Fatal(err)
	}
	src, err := table.Load(ctx, db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(db, Config{Source: src, Ghost: q("g"), SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
		KeyColumns: []string{"id"}, KeyIndex: "PRIMARY", MinChunk: 100, MaxChunk: 100, ChunkTime: time.Hour, Threads: 1,
		Defer: &noDefer{}, Marks: q(MarksName("src")), OrderedCommits: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q("g")).Scan(&n); err != nil || n != 300 {
		t.Fatalf("the copy wrote %d rows (%v); want 300", n, err)
	}
	_, locked = c.LockFree()
	return locked, c.Progress().Chunks
}
