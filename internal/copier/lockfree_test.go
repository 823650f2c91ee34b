package copier

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/errgroup"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/pipeline"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// noDefer is the negative control: a lock-free copy whose ranges the
// pipeline does not hold (deferral disabled).
type noDefer struct{ n int64 }

func (d *noDefer) Open(lo, hi []any) int64 { d.n++; return d.n }
func (d *noDefer) Close(int64)             {}

// TestLockFreeChunkStaleWrite builds the hazard the lock-free copy must
// prevent, deterministically: the chunk's INSERT ... SELECT opens its
// snapshot, sleeps on its first row, and meanwhile the application deletes
// a row of the chunk, and moves another's key out of it;
// the applier applies those changes before the chunk writes. With the
// pipeline's deferral the ghost ends equal to the source; with deferral
// disabled (the negative control) the chunk writes the deleted and moved
// rows back, stale, and the test sees the difference.
func TestLockFreeChunkStaleWrite(t *testing.T) {
	for _, deferral := range []bool{true, false} {
		t.Run(fmt.Sprintf("deferral=%v", deferral), func(t *testing.T) {
			diff := runStaleChunk(t, deferral)
			switch {
			case deferral && diff != "":
				t.Fatalf("lock-free copy with deferral: ghost differs from source: %s", diff)
			case !deferral && diff == "":
				t.Fatalf("negative control: without deferral the stale write did not show; the test does not exercise the hazard")
			case !deferral:
				t.Logf("negative control caught the stale write: %s", diff)
			}
		})
	}
}

func rcDB(t *testing.T, schema string, params ...string) *sql.DB {
	t.Helper()
	sb := testutil.Sandbox(t)
	cfg, err := mysql.ParseDSN(sb.DSN(sb.Primary, schema))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[testutil.Server(t).IsolationVar()] = "'READ-COMMITTED'"
	cfg.Params["time_zone"] = "'+00:00'"
	for i := 0; i+1 < len(params); i += 2 { // name, value pairs
		cfg.Params[params[i]] = params[i+1]
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

func runStaleChunk(t *testing.T, deferral bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	db := rcDB(t, schema)
	var vals []string
	for i := 1; i <= 200; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 'v%d')", i, i))
	}
	testutil.Exec(t, db,
		"CREATE TABLE src (id INT NOT NULL PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
		"INSERT INTO src VALUES "+strings.Join(vals, ","),
		"CREATE TABLE g LIKE src")
	q := func(n string) string { return table.QuoteIdent(schema) + "." + table.QuoteIdent(n) }
	if err := CreateMarks(ctx, db, q(MarksName("src"))); err != nil {
		t.Fatal(err)
	}
	if ok, why, err := LockFreeSupport(ctx, db); err != nil || !ok {
		t.Fatalf("lock-free copy not supported here: %s %v", why, err)
	}
	src, err := table.Load(ctx, db, schema, "src")
	if err != nil {
		t.Fatal(err)
	}
	pos, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	sb := testutil.Sandbox(t)
	host, port, _ := net.SplitHostPort(sb.Primary.Addr())
	p, _ := strconv.Atoi(port)
	stream, err := binlog.Open(ctx, binlog.Config{Host: host, Port: uint16(p), User: sb.User, Password: sb.Password,
		ServerID: 7900 + uint32(time.Now().UnixNano()%90), Table: src, MySQL: testutil.Server(t).MySQL(), Marks: MarksName("src")}, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	ap, err := pipeline.New(db, pipeline.Config{Ghost: q("g"), SourceColumns: []int{0, 1}, GhostColumns: []string{"id", "v"},
		KeySource: []int{0}, KeyGhost: []string{"id"}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ap.SetApplied(pos)
	pump := pipeline.NewPump(stream, ap, nil)
	var def Deferrer = &noDefer{}
	if deferral {
		d, err := pipeline.NewDeferrer(src, []string{"id"})
		if err != nil {
			t.Fatal(err)
		}
		pump.Defer(d)
		def = d
	}
	pctx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(pctx)
	g.Go(func() error { return pump.Read(gctx) })
	g.Go(func() error { return pump.Flush(gctx) })
	defer func() { stop(); _ = g.Wait() }()

	cp, err := New(db, Config{Source: src, Ghost: q("g"), SourceColumns: []string{"id", "v"}, GhostColumns: []string{"id", "v"},
		// The first row read sleeps: the snapshot is open, the write not done.
		SourceExprs: []string{"", "IF(id = 1 AND SLEEP(2) = 0, v, v)"},
		KeyColumns:  []string{"id"}, KeyIndex: "PRIMARY", MinChunk: 1000, MaxChunk: 1000, Defer: def, Marks: q(MarksName("src"))})
	if err != nil {
		t.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { copied <- cp.Run(ctx) }()
	// Wait until the chunk's statement sleeps.
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%INSERT IGNORE%SLEEP(2)%' AND ID <> CONNECTION_ID() AND DB = ?", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	testutil.Exec(t, db,
		"DELETE FROM src WHERE id = 50",
		"UPDATE src SET id = 1000 WHERE id = 70",
		"DELETE FROM src WHERE id IN (120, 121, 122)")
	after, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !deferral {
		// Without deferral the applier writes the changes while the chunk sleeps.
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		err := ap.WaitApplied(wctx, after)
		wcancel()
		if err != nil {
			t.Fatalf("the applier did not apply the changes during the chunk: %v", err)
		}
	}
	if err := <-copied; err != nil {
		if !deferral && strings.Contains(err.Error(), "1020") {
			// MariaDB 11.6+ (innodb_snapshot_isolation) refuses the stale
			// write outright; the lock-free copy retries it, so here the
			// hazard shows as the chunk's failure to write.
			return "chunk refused: " + err.Error()
		}
		t.Fatal(err)
	}
	end, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := ap.WaitApplied(wctx, end); err != nil {
		stop()
		t.Fatalf("applier at %s, not %s: %v (pipeline: %v)", ap.Applied(), end, err, g.Wait())
	}
	var diff []string
	rows, err := db.QueryContext(ctx, "SELECT COALESCE(s.id, g.id), s.v, g.v FROM src s LEFT JOIN g USING (id) WHERE NOT (s.v <=> g.v) "+
		"UNION SELECT g.id, NULL, g.v FROM g LEFT JOIN src s USING (id) WHERE s.id IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var sv, gv sql.NullString
		if err := rows.Scan(&id, &sv, &gv); err != nil {
			t.Fatal(err)
		}
		diff = append(diff, fmt.Sprintf("id %d: source %v ghost %v", id, sv, gv))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(diff, "; ")
}
