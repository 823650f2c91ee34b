package binlog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/table"
	"github.com/recast-osc/recast/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.NoLeaks(testutil.Main(m, 0))) }

var serverIDs atomic.Uint32

func nextServerID() uint32 { return 7000 + serverIDs.Add(1) }

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func loadTable(t *testing.T, db *sql.DB, schema, name string) *table.Table {
	t.Helper()
	tb, err := table.Load(context.Background(), db, schema, name)
	if err != nil {
		t.Fatalf("load %s.%s: %v", schema, name, err)
	}
	return tb
}

func currentPos(t *testing.T, db *sql.DB) Position {
	t.Helper()
	p, err := CurrentPosition(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testConfig connects to the sandbox primary, or to addr (a proxy) if set.
func testConfig(t *testing.T, tb *table.Table, addr string) Config {
	t.Helper()
	sb := testutil.Sandbox(t)
	host, port := sb.Primary.Host, sb.Primary.Port
	if addr != "" {
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		host = h
		port, _ = strconv.Atoi(p)
	}
	return Config{Host: host, Port: uint16(port), User: sb.User, Password: sb.Password,
		ServerID: nextServerID(), Table: tb, MySQL: testutil.Server(t).MySQL(), Logger: testLogger()}
}

func openStream(t *testing.T, cfg Config, from Position) *Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg, from)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// collected is what a stream returned up to a position.
type collected struct {
	rows      []RowChange
	ddl       []string
	positions []Position
	last      Position
	rowEvents []Event // the events with rows, in order
}

// collect reads until a boundary event with Pos >= until, failing the test on an
// error or after 30 s.
func collect(t *testing.T, s *Stream, until Position) collected {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c collected
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next (last pos %s, waiting for %s): %v", c.last, until, err)
		}
		c.positions = append(c.positions, ev.Pos)
		c.last = ev.Pos
		c.rows = append(c.rows, ev.Rows...)
		if len(ev.Rows) > 0 {
			c.rowEvents = append(c.rowEvents, ev)
		}
		if ev.DDL != "" {
			c.ddl = append(c.ddl, ev.DDL)
		}
		if ev.Boundary && ev.Pos.Compare(until) >= 0 {
			return c
		}
	}
}

// nextErr reads until Next fails (within 30 s) and returns the error.
func nextErr(t *testing.T, s *Stream) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		if os.Getenv("DEBUG_EVENTS") != "" {
			t.Logf("event %+v err %v", ev, err)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next: no error within 30 s")
			}
			t.Logf("Next error: %v", err)
			return err
		}
	}
}

// proxy forwards TCP connections to a server and can hang them, break them,
// or rewrite bytes the server sends.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   []net.Conn
	hung    bool
	closed  bool      // the test is over: hung pipes stop waiting
	replace [2][]byte // server-to-client: old -> new (same length)
	cutAt   []byte    // server-to-client: forward up to the end of this, then break every connection (once)
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.breakAll()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		hung := p.hung
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if hung {
			continue // accepted, never answered
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, s)
		p.mu.Unlock()
		go p.pipe(c, s, true) // server to client
		go p.pipe(s, c, false)
	}
}

func (p *proxy) pipe(dst, src net.Conn, fromServer bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hung && !p.closed {
				p.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				p.mu.Lock()
			}
			if p.closed {
				p.mu.Unlock()
				return
			}
			old, repl := p.replace[0], p.replace[1]
			cut := p.cutAt
			p.mu.Unlock()
			data := buf[:n]
			if i := bytes.Index(data, cut); fromServer && cut != nil && i >= 0 {
				p.mu.Lock()
				p.cutAt = nil
				p.mu.Unlock()
				dst.Write(data[:i+len(cut)])
				p.t.Logf("proxy: cutting the connection after %q", cut)
				p.breakAll()
				return
			}
			if fromServer && old != nil {
				if bytes.Contains(data, old) {
					p.t.Logf("proxy: rewriting %q", old)
				}
				data = bytes.ReplaceAll(data, old, repl)
			}
			if _, werr := dst.Write(data); werr != nil {
				return
			}
		}
		if err != nil { // EOF or broken: pass it on
			dst.Close()
			return
		}
	}
}

func (p *proxy) hang() {
	p.mu.Lock()
	p.hung = true
	p.mu.Unlock()
}

func (p *proxy) setReplace(old, repl string) {
	p.mu.Lock()
	p.replace = [2][]byte{[]byte(old), []byte(repl)}
	p.mu.Unlock()
}

func (p *proxy) cutAfter(marker string) {
	p.mu.Lock()
	p.cutAt = []byte(marker)
	p.mu.Unlock()
}

func (p *proxy) breakAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// dumpTable returns every row of name (SELECT * ORDER BY id) as text, nil
// for NULL.
func dumpTable(t *testing.T, db *sql.DB, name string) [][]*string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM " + table.QuoteIdent(name) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]*string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]*string, len(cols))
		for i, v := range vals {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
