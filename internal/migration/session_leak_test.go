package migration

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/checksum"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

// poolSessions reads a session variable on every connection of a pool of
// at most n (the idle ones handed back by earlier work, then new ones).
func poolSessions(t *testing.T, ctx context.Context, db *sql.DB, n int, expr string) []string {
	t.Helper()
	var out []string
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var v string
		if err := c.QueryRowContext(ctx, "SELECT "+expr).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func recastPool(t *testing.T, ctx context.Context, schema string, n int) *sql.DB {
	t.Helper()
	o := testOptions(t, schema, "t", "")
	c := o.Conn
	c.Schema, c.MaxOpen = schema, n
	db, err := dbconn.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxIdleConns(n)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestChecksumRestoresSessions: the checksum's snapshots run REPEATABLE
// READ; the pool's connections must come back READ COMMITTED (the repair
// and the copier's locking reads rely on it: no gap locks on the live
// table), and a repair writes at most MaxChunkRows rows per statement.
func TestChecksumRestoresSessions(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	schema := testutil.NewSchema(t)
	adm := testutil.DB(t, schema)
	testutil.Exec(t, adm, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE _t_new LIKE t")
	testutil.Exec(t, adm, "INSERT INTO t SELECT seq, seq FROM seq_1_to_3000")
	testutil.Exec(t, adm, "INSERT INTO _t_new SELECT id, v FROM t WHERE id > 2500") // 2500 rows to repair
	const n = 3
	db := recastPool(t, ctx, schema, n)
	isolation := "@@SESSION." + testutil.Server(t).IsolationVar()
	before := poolSessions(t, ctx, db, n, isolation)
	src, err := table.Load(ctx, db, schema, "t")
	if err != nil {
		t.Fatal(err)
	}
	gh, err := table.Load(ctx, db, schema, "_t_new")
	if err != nil {
		t.Fatal(err)
	}
	cols := []string{"id", "v"}
	res, err := checksum.Run(ctx, db, checksum.Config{
		Source: src, Ghost: gh, SourceColumns: cols, GhostColumns: cols,
		KeySource: []string{"id"}, KeyGhost: []string{"id"}, KeyIndex: "PRIMARY", MaxChunkRows: 100,
		Align: func(ctx context.Context, openSource func() (binlog.Position, error), openGhost func() error) error {
			if _, err := openSource(); err != nil {
				return err
			}
			return openGhost()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Repaired == 0 || res.RepairStatements < 2500/100 {
		t.Errorf("repair: %d chunk(s) in %d statement(s); want at most 100 rows per statement (≥ 25 statements)", res.Repaired, res.RepairStatements)
	}
	after := poolSessions(t, ctx, db, n, isolation)
	for i := range after {
		if after[i] != before[0] {
			t.Errorf("pool connection %d: isolation %s after the checksum, %s before", i, after[i], before[0])
		}
	}
}

// TestCutOverRestoresSessions: the cut-over's short lock_wait_timeout does
// not stay on the pool's connections.
func TestCutOverRestoresSessions(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	schema := testutil.NewSchema(t)
	adm := testutil.DB(t, schema)
	testutil.Exec(t, adm, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)",
		"CREATE TABLE _t_new LIKE t", "INSERT INTO _t_new SELECT * FROM t")
	const n = 4
	db := recastPool(t, ctx, schema, n)
	before := poolSessions(t, ctx, db, n, "@@SESSION.lock_wait_timeout")
	_, err := cutover.Run(ctx, db, cutover.Config{
		Schema: schema, Table: "t", Ghost: "_t_new", Old: "_t_old", LockWaitTimeout: 2 * time.Second,
		WaitApplied: func(context.Context, binlog.Position) error { return nil }, Armed: func() {}, Disarmed: func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	after := poolSessions(t, ctx, db, n, "@@SESSION.lock_wait_timeout")
	for i := range after {
		if after[i] != before[0] {
			t.Errorf("pool connection %d: lock_wait_timeout %s after the cut-over, %s before", i, after[i], before[0])
		}
	}
	_ = fmt.Sprint
}
