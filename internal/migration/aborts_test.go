package migration

// Failures found during the run, before the cut-over: each must end the
// migration with a clear error, the original table as it was and no helper
// table left. Faults are injected at Options.Pause points.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
)

// abortFixture is a table of 3000 rows and what it looked like before.
type abortFixture struct {
	schema string
	db     *sql.DB
	before string
}

func newAbortFixture(t *testing.T) *abortFixture {
	t.Helper()
	f := &abortFixture{schema: testutil.NewSchema(t)}
	f.db = testutil.DB(t, f.schema)
	testutil.Exec(t, f.db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(20) NOT NULL, b INT NULL)",
		"INSERT INTO t SELECT seq, CONCAT('v', seq), seq % 7 FROM seq_1_to_3000")
	f.before = testutil.TableChecksum(t, f.db, f.schema, "t", "id")
	return f
}

// intact checks that t holds what it held before and that t is the only table.
func (f *abortFixture) intact(t *testing.T) {
	t.Helper()
	if got := testutil.TableChecksum(t, f.db, f.schema, "t", "id"); got != f.before {
		t.Errorf("the original table changed: %s, was %s", got, f.before)
	}
	var names sql.NullString
	if err := f.db.QueryRow("SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE <> 'VIEW'", f.schema).Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names.String != "t" {
		t.Errorf("tables left: %s", names.String)
	}
}

func wantErr(t *testing.T, err error, keywords ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the migration succeeded; want it to abort")
	}
	msg := err.Error()
	t.Logf("error: %s", msg)
	for _, k := range keywords {
		if !strings.Contains(msg, k) {
			t.Errorf("error lacks %q: %s", k, msg)
		}
	}
}

// TestAbortOnDDL: a DDL on the table while recast copies it (seen in the
// binlog) ends the migration; the copy would no longer match the table.
func TestAbortOnDDL(t *testing.T) {
	t.Parallel()
	f := newAbortFixture(t)
	o := testOptions(t, f.schema, "t", "ADD COLUMN note VARCHAR(10) NULL")
	o.Pause = func(ctx context.Context, point string) {
		if point == "copy-done" {
			testutil.Exec(t, f.db, "ALTER TABLE t ADD INDEX ix_b (b)") // changes no row
		}
	}
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	wantErr(t, err, "the table's definition changed during the migration", "ADD INDEX ix_b", "the original table is untouched")
	f.intact(t)
}

// TestConcurrentMigrationRefused: a second recast on the same table stops
// at its preflight (the per-table lock), names the first run's connection
// and leaves the first run's ghost alone; the first run completes.
func TestConcurrentMigrationRefused(t *testing.T) {
	t.Parallel()
	f := newAbortFixture(t)
	o := testOptions(t, f.schema, "t", "ADD COLUMN note VARCHAR(10) NULL")
	o.DropOldTable = true
	var second error
	o.Pause = func(ctx context.Context, point string) {
		if point == "copy-done" {
			_, second = runT(ctx, testOptions(t, f.schema, "t", "ADD COLUMN other INT"))
		}
	}
	if _, err := runT(ctxFor(t, 2*time.Minute), o); err != nil {
		t.Fatalf("the first migration: %v", err)
	}
	wantErr(t, second, "another recast is already migrating", "connection ", `holds the lock "recast:`)
	var n int
	if err := f.db.QueryRow("SELECT COUNT(*) FROM t WHERE note IS NULL").Scan(&n); err != nil || n != 3000 {
		t.Errorf("after the first migration: %d rows, %v", n, err)
	}
	// --drop-old-table: t is the only table left (the old one, kept under
	// the sentry's name until the lost-write check, is gone too).
	if names := tableNames(t, f.db, f.schema); strings.Join(names, ",") != "t" {
		t.Errorf("tables after the first migration: %v; want only t", names)
	}
	// The lock is gone with the first run.
	dry := testOptions(t, f.schema, "t", "DROP COLUMN note")
	dry.Execute = false
	if _, err := runT(ctxFor(t, time.Minute), dry); err != nil {
		t.Errorf("a run after the first one: %v", err)
	}
}

// TestAbortOnPurgedBinlog: the binlog connection breaks, the application
// changes the table, and the file holding that change has been purged
// before the stream could read it: the migration ends, it cannot know what
// it missed. recast connects through a proxy that holds off the binlog
// reconnection until the purge is done. (A stream that had read everything
// and resumes by GTID, as on MySQL with gtid_mode=ON, misses nothing and
// may go on: hence the change.) Not parallel: it purges the shared
// server's binlogs.
func TestAbortOnPurgedBinlog(t *testing.T) {
	f := newAbortFixture(t)
	testutil.WaitReplicaCaughtUp(t, 0)
	sb := testutil.Sandbox(t)
	p := newTestProxy(t, sb.Primary.Addr(), nil, nil)
	o := testOptions(t, f.schema, "t", "ADD COLUMN note VARCHAR(10) NULL")
	host, port, _ := net.SplitHostPort(p.addr())
	o.Conn.Host = host
	o.Conn.Port, _ = strconv.Atoi(port)
	o.Conn.TLS.Mode = dbconn.SSLDisabled // the proxy reads plain packets (MariaDB 11.4+ offers TLS by default)
	purged := false
	o.Pause = func(ctx context.Context, point string) {
		if point != "copy-done" {
			return
		}
		old := currentBinlog(t, f.db)
		p.refuseBinlog(true) // go-mysql's reconnections fail until the purge is done
		defer p.refuseBinlog(false)
		ids, err := queryIDs(f.db, "SELECT ID FROM "+testutil.Server(t).Processlist()+" WHERE COMMAND IN ('Binlog Dump', 'Binlog Dump GTID') AND USER = ?", sb.User)
		if err != nil {
			t.Error(err)
			return
		}
		if len(ids) == 0 {
			t.Error("found no binlog connection of recast")
		}
		for _, id := range ids {
			f.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
		}
		// Gone before the rotation, or it would send the new file's name.
		for _, id := range ids {
			for range 1000 {
				var n int
				err := f.db.QueryRow("SELECT COUNT(*) FROM "+testutil.Server(t).Processlist()+" WHERE ID = ?", id).Scan(&n)
				if err == nil && n == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		// A change the stream has not read, in the file about to be purged.
		testutil.Exec(t, f.db, "UPDATE t SET b = b + 100 WHERE id = 1")
		f.before = testutil.TableChecksum(t, f.db, f.schema, "t", "id")
		testutil.Exec(t, f.db, "FLUSH BINARY LOGS")
		next := currentBinlog(t, f.db)
		var perr error
		for range 500 { // the replica may still read the old file for a moment
			_, perr = f.db.Exec("PURGE BINARY LOGS TO '" + next + "'")
			if !binlogExists(t, f.db, old) {
				purged = true
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("could not purge %s: %v", old, perr)
	}
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	if !purged {
		t.Fatalf("the binlog was not purged (err %v)", err)
	}
	// Error 1236: the server cannot send what the stream asks for (its
	// position's file, or, for a stream started by GTID, its GTID state,
	// is purged).
	wantErr(t, err, "binlog stream", "1236")
	f.intact(t)
}

func currentBinlog(t *testing.T, db *sql.DB) string {
	t.Helper()
	p, err := binlog.CurrentPosition(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return p.File
}

func binlogExists(t *testing.T, db *sql.DB, file string) bool {
	t.Helper()
	rows, err := db.Query("SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if string(vals[0]) == file {
			return true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}

// TestAbortOnChecksumMismatch: an event corrupted on its way (here by a
// proxy between recast and the server) fails its CRC32 check
// (binlog_checksum=CRC32): the migration ends, the event is never applied.
func TestAbortOnChecksumMismatch(t *testing.T) {
	t.Parallel()
	f := newAbortFixture(t)
	var checksum string
	if err := f.db.QueryRow("SELECT @@GLOBAL.binlog_checksum").Scan(&checksum); err != nil || checksum != "CRC32" {
		t.Skipf("binlog_checksum is %q (%v), not CRC32", checksum, err)
	}
	sb := testutil.Sandbox(t)
	p := newTestProxy(t, sb.Primary.Addr(), []byte("CORRUPTME"), []byte("CORRUPTMF"))
	o := testOptions(t, f.schema, "t", "ADD COLUMN note VARCHAR(10) NULL")
	host, port, _ := net.SplitHostPort(p.addr())
	o.Conn.Host = host
	o.Conn.Port, _ = strconv.Atoi(port)
	o.Conn.TLS.Mode = dbconn.SSLDisabled // the proxy reads plain packets (MariaDB 11.4+ offers TLS by default)
	o.Pause = func(ctx context.Context, point string) {
		if point == "copy-done" {
			// Through the direct connection: only the binlog's copy of it
			// crosses the proxy.
			testutil.Exec(t, f.db, "UPDATE t SET a = 'CORRUPTME' WHERE id = 42")
			f.before = testutil.TableChecksum(t, f.db, f.schema, "t", "id")
		}
	}
	_, err := runT(ctxFor(t, 2*time.Minute), o)
	wantErr(t, err, "binlog stream", "checksum")
	if !errors.Is(err, binlog.ErrChecksum) {
		t.Errorf("error does not wrap binlog.ErrChecksum: %v", err)
	}
	f.intact(t)
}

// testProxy forwards TCP connections to a server. It replaces bytes in
// what the server sends (old -> new), and can refuse binlog connections:
// it closes a connection whose client registers as a replica or asks for
// a binlog dump (COM_REGISTER_SLAVE, COM_BINLOG_DUMP).
type testProxy struct {
	ln       net.Listener
	old, new []byte
	refuse   atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

func newTestProxy(t *testing.T, target string, old, repl []byte) *testProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testProxy{ln: ln, old: old, new: repl}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
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
			go p.fromClient(c, s)
			go p.fromServer(s, c)
		}
	}()
	return p
}

func (p *testProxy) addr() string { return p.ln.Addr().String() }

func (p *testProxy) refuseBinlog(on bool) { p.refuse.Store(on) }

// fromClient forwards whole MySQL packets (3-byte length, sequence, payload).
func (p *testProxy) fromClient(c, s net.Conn) {
	defer func() { s.Close(); c.Close() }()
	var head [4]byte
	for {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
		payload := make([]byte, n)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		const comBinlogDump, comRegisterSlave = 0x12, 0x15
		if p.refuse.Load() && head[3] == 0 && n > 0 && (payload[0] == comBinlogDump || payload[0] == comRegisterSlave) {
			return
		}
		if _, err := s.Write(append(head[:], payload...)); err != nil {
			return
		}
	}
}

func (p *testProxy) fromServer(s, c net.Conn) {
	defer func() { s.Close(); c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			out := buf[:n]
			if p.old != nil {
				out = bytes.ReplaceAll(out, p.old, p.new)
			}
			if _, werr := c.Write(out); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
