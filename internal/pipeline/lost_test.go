package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/testutil"
)

// cutProxy forwards TCP connections to a server; cut closes the client side
// of every connection so far and leaves the server side open: the client
// has lost its connection, and the server, busy with a statement, has not
// noticed.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	clients []net.Conn
	servers []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.clients, p.servers = append(p.clients, c), append(p.servers, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c) }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, s); c.Close() }()
	}
}

// cut closes the client side of every connection made so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.Close()
	}
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range append(p.clients, p.servers...) {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestLostConnectionOnServer: the applier's REPLACE waits on a row lock; its
// connection is lost while the server goes on waiting (a proxy cuts the
// client side). Before the statement is tried again, the session still
// running it is ended: no retry runs next to it, so the older statement
// cannot commit after the retry or a later window's write to the same row.
func TestLostConnectionOnServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema := testutil.NewSchema(t)
	direct := testutil.DB(t, schema)
	sb := testutil.Sandbox(t)
	if _, err := direct.ExecContext(ctx, "CREATE TABLE g (id BIGINT PRIMARY KEY, a VARBINARY(16), b INT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.ExecContext(ctx, "INSERT INTO g VALUES (1, 'old', NULL)"); err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, sb.Primary.Addr())
	pool, err := dbconn.Open(ctx, dbconn.Config{Host: "127.0.0.1", Port: proxy.port(), User: sb.User, Password: sb.Password,
		Schema: schema, InnodbLockWaitTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	processlist, err := flavor.ProcesslistOf(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}

	locker, err := direct.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	if _, err := locker.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := locker.ExecContext(ctx, "SELECT * FROM g WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig()
	cfg.Ghost = testutil.QuoteIdent(schema) + ".`g`"
	a := newApplier(t, pool, cfg)
	a.Add(ev(1, upd(row(1, "old"), row(1, "new"))))
	flushed := make(chan error, 1)
	go func() { flushed <- a.Flush(ctx) }()

	// writers: the sessions running the applier's REPLACE on g.
	writers := func() map[int64]bool {
		t.Helper()
		rs, err := direct.QueryContext(ctx, "SELECT ID FROM "+processlist+" WHERE DB = ? AND ID <> CONNECTION_ID() AND INFO LIKE '%REPLACE INTO%'", schema)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		ids := map[int64]bool{}
		for rs.Next() {
			var id int64
			if err := rs.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids[id] = true
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	waitFor := func(what string, ok func(map[int64]bool) bool) map[int64]bool {
		t.Helper()
		for {
			if w := writers(); ok(w) {
				return w
			}
			select {
			case err := <-flushed:
				t.Fatalf("waiting for %s: Flush returned %v", what, err)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	var first int64
	for id := range waitFor("the REPLACE to wait on the lock", func(w map[int64]bool) bool { return len(w) == 1 }) {
		first = id
	}
	proxy.cut()
	// The retry shows up in another session; by then the first must be gone.
	w := waitFor("the retry", func(w map[int64]bool) bool {
		for id := range w {
			if id != first {
				return true
			}
		}
		return false
	})
	if w[first] {
		t.Fatalf("session %d still runs the lost REPLACE next to its retry (sessions %v)", first, w)
	}
	if _, err := locker.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatalf("Flush: %v", err)
	}
	var got string
	if err := direct.QueryRowContext(ctx, "SELECT a FROM g WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "new" {
		t.Errorf("ghost row 1 holds %q, want %q", got, "new")
	}
	if s := a.Stats(); s.Retries < 1 {
		t.Errorf("Stats.Retries = %d: the lost statement was not counted", s.Retries)
	}
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+processlist+" WHERE ID = ?", first).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("session %d is still there", first)
	}
}
