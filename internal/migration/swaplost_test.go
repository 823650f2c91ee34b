package migration

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/cutover"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// swapProxy forwards TCP connections to the server and can cut the one
// that sent the cut-over's swap RENAME: first by swallowing what the
// server answers it, then by closing it (the client sees a lost connection
// whatever the server did).
type swapProxy struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	swap     net.Conn // client side of the swap session
	mute     bool     // swallow the server's answers to the swap session once it sent the marker
	sawSwap  chan struct{}
	sawOnce  sync.Once
	wg       sync.WaitGroup
	marker   []byte
	conns    []net.Conn
	isClosed bool
}

func newSwapProxy(t *testing.T, target, marker string) *swapProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &swapProxy{ln: ln, target: target, sawSwap: make(chan struct{}), marker: []byte(marker)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); p.pipe(c, s, c, true) }()
			go func() { defer p.wg.Done(); p.pipe(s, c, c, false) }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *swapProxy) pipe(from, to, client net.Conn, upstream bool) {
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if upstream && bytes.Contains(buf[:n], p.marker) {
				p.mu.Lock()
				p.swap = client
				p.mu.Unlock()
				p.sawOnce.Do(func() { close(p.sawSwap) })
			}
			p.mu.Lock()
			drop := !upstream && p.mute && p.swap == client
			p.mu.Unlock()
			if !drop {
				if _, werr := to.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *swapProxy) muteSwap() {
	p.mu.Lock()
	p.mute = true
	p.mu.Unlock()
}

func (p *swapProxy) cutSwap() {
	p.mu.Lock()
	c := p.swap
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (p *swapProxy) close() {
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		return
	}
	p.isClosed = true
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// swapFixture: t (id, v) and its ghost _t_new with a new column, equal rows.
func swapFixture(t *testing.T) (string, *sql.DB) {
	schema := testutil.NewSchema(t)
	adm := testutil.DB(t, schema)
	testutil.Exec(t, adm, "CREATE TABLE t (id INT PRIMARY KEY, v INT) COMMENT='app table'",
		"INSERT INTO t SELECT seq, seq FROM seq_1_to_100",
		"CREATE TABLE _t_new LIKE t", "ALTER TABLE _t_new ADD COLUMN note INT NULL",
		"INSERT INTO _t_new (id, v) SELECT id, v FROM t")
	return schema, adm
}

func hasColumn(t *testing.T, db *sql.DB, schema, tbl, col string) bool {
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?", schema, tbl, col).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestCutOverSwapConnectionLostAfterRename: the swap session's connection
// breaks after the server committed its RENAME (the server's OK never
// reaches recast). The cut-over asks the server, finds the tables swapped
// and reports the swap, instead of "the table is unchanged".
func TestCutOverSwapConnectionLostAfterRename(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	schema, adm := swapFixture(t)
	sb := testutil.Sandbox(t)
	px := newSwapProxy(t, net.JoinHostPort(sb.Primary.Host, strconv.Itoa(sb.Primary.Port)), "_rcsentry`, `"+schema+"`.`t_rcnew` TO")
	o := testOptions(t, schema, "t", "")
	c := o.Conn
	host, port, _ := net.SplitHostPort(px.ln.Addr().String())
	c.Host, c.Schema = host, schema
	c.Port, _ = strconv.Atoi(port)
	c.TLS.Mode = dbconn.SSLDisabled // the proxy reads plain statements (MariaDB 11.4+ offers TLS by default)
	db, err := dbconn.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var armed, disarmed int
	res, err := cutover.Run(ctx, db, cutover.Config{
		Schema: schema, Table: "t", Ghost: "_t_new", Old: "_t_old", LockWaitTimeout: 2 * time.Second, Attempts: 1,
		WaitApplied: func(context.Context, binlog.Position) error { return nil },
		Armed:       func() { armed++ }, Disarmed: func() { disarmed++ },
		Logger: o.Logger,
		Pause: func(ctx context.Context, point string) {
			if point != "sentry-dropped" {
				return
			}
			// A still holds T. From now on B gets no answer to its RENAME
			// (sent already on MariaDB, where it waits on T; on MySQL once
			// B's LOCK TABLES is granted after A's UNLOCK); once the server
			// shows the swap, B's connection breaks.
			px.muteSwap()
			go func() {
				select {
				case <-px.sawSwap:
				case <-ctx.Done():
					return // the cut-over's result says what happened
				}
				for ctx.Err() == nil {
					ok, comment, err := tableExists(adm, schema, "t_rcsentry")
					if err == nil && ok && comment == "app table" {
						px.cutSwap()
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		},
	})
	if err != nil {
		t.Fatalf("the server shows the swap done, yet the cut-over reports: %v", err)
	}
	if !res.Recovered {
		t.Errorf("the swap session's lost connection went unnoticed: %+v", res)
	}
	if !hasColumn(t, adm, schema, "t", "note") || !hasColumn(t, adm, schema, "_t_old", "v") || hasColumn(t, adm, schema, "_t_old", "note") {
		t.Errorf("tables after the cut-over: %v", tableNames(t, adm, schema))
	}
	if armed != 1 || disarmed != 0 {
		t.Errorf("armed %d, disarmed %d: want armed once, never disarmed", armed, disarmed)
	}
	t.Logf("cut-over: %+v; tables %v", res, tableNames(t, adm, schema))
}

// TestCutOverSwapSessionKilledWhileQueued: the swap session is killed
// while its RENAME waits on T. Usually the RENAME never happens: the server
// shows T unchanged, the ghost gets its name back, and the next attempt
// swaps; when the RENAME got T before it noticed the kill, the server shows
// the swap done and that is what is reported.
func TestCutOverSwapSessionKilledWhileQueued(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	schema, adm := swapFixture(t)
	o := testOptions(t, schema, "t", "")
	c := o.Conn
	c.Schema = schema
	db, err := dbconn.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	killed := false
	var disarmed int
	res, err := cutover.Run(ctx, db, cutover.Config{
		Schema: schema, Table: "t", Ghost: "_t_new", Old: "_t_old", LockWaitTimeout: 2 * time.Second, Attempts: 3,
		WaitApplied: func(context.Context, binlog.Position) error { return nil },
		Armed:       func() {}, Disarmed: func() { disarmed++ },
		Logger: o.Logger,
		Pause: func(ctx context.Context, point string) {
			if point != "sentry-dropped" || killed {
				return
			}
			killed = true
			var id int64
			if err := adm.QueryRow("SELECT ID FROM " + testutil.Server(t).Processlist() + " WHERE (INFO LIKE '%RENAME TABLE%t_rcsentry%' OR INFO LIKE '%LOCK TABLES%t_rcnew%') AND STATE = 'Waiting for table metadata lock'").Scan(&id); err != nil {
				t.Errorf("find the swap session: %v", err)
				return
			}
			testutil.Exec(t, adm, "KILL CONNECTION "+strconv.FormatInt(id, 10))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cut-over: %+v", res)
	// KILL reaches a session waiting for a metadata lock asynchronously: when
	// A's UNLOCK hands it T first, its RENAME still completes. Either way
	// the report must say what the server did.
	switch {
	case res.Recovered:
		if res.Attempts != 1 || disarmed != 0 {
			t.Errorf("recovered a completed RENAME, yet attempts %d, disarmed %d", res.Attempts, disarmed)
		}
	case res.Attempts != 2 || disarmed != 1:
		t.Errorf("attempts %d, disarmed %d: want the killed attempt reported unchanged and retried", res.Attempts, disarmed)
	}
	if !hasColumn(t, adm, schema, "t", "note") || strings.Join(tableNames(t, adm, schema), ",") != "_t_old,t" {
		t.Errorf("tables after the cut-over: %v", tableNames(t, adm, schema))
	}
}

func tableExists(db *sql.DB, schema, name string) (bool, string, error) {
	var comment string
	err := db.QueryRow("SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&comment)
	if err == sql.ErrNoRows {
		return false, "", nil
	}
	return err == nil, comment, err
}
