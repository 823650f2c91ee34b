package pipeline

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/binlog"
)

// The source table of these tests: (id, a, b) with key id; the ghost is
// `s`.`g` (id, a, b).
func testConfig() Config {
	return Config{
		Ghost:         "`s`.`g`",
		SourceColumns: []int{0, 1, 2},
		GhostColumns:  []string{"id", "a", "b"},
		KeySource:     []int{0},
		KeyGhost:      []string{"id"},
	}
}

func newApplier(t *testing.T, db *sql.DB, cfg Config) *Applier {
	t.Helper()
	a, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func row(id int64, a string) []any { return []any{id, []byte(a), nil} }

func ins(r []any) binlog.RowChange { return binlog.RowChange{Kind: binlog.Insert, After: r} }
func del(r []any) binlog.RowChange { return binlog.RowChange{Kind: binlog.Delete, Before: r} }
func upd(b, r []any) binlog.RowChange {
	return binlog.RowChange{Kind: binlog.Update, Before: b, After: r}
}

func ev(off uint32, rcs ...binlog.RowChange) binlog.Event {
	return binlog.Event{Rows: rcs, Pos: binlog.Position{File: "bin.000001", Offset: off}}
}

// opView is an op without its cached size, for comparisons.
type opView struct {
	Delete bool
	Image  []any
}

func ops(a *Applier) []opView {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []opView
	for _, o := range a.window.ops {
		out = append(out, opView{o.delete, o.image})
	}
	return out
}

func TestNewValidates(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Ghost = "" },
		func(c *Config) { c.SourceColumns = nil; c.GhostColumns = nil },
		func(c *Config) { c.GhostColumns = c.GhostColumns[:2] },
		func(c *Config) { c.KeySource = nil; c.KeyGhost = nil },
		func(c *Config) { c.KeyGhost = []string{"id", "a"} },
	}
	for i, f := range bad {
		cfg := testConfig()
		f(&cfg)
		if _, err := New(nil, cfg); err == nil {
			t.Errorf("case %d: New accepted %+v", i, cfg)
		}
	}
	a := newApplier(t, nil, testConfig())
	if a.cfg.Workers != 1 || a.cfg.BatchRows != 500 || a.cfg.BatchBytes != 4<<20 || a.cfg.WindowRows != 20000 || a.cfg.Logger == nil {
		t.Errorf("defaults: %+v", a.cfg)
	}
	cfg := testConfig()
	cfg.Workers, cfg.Ordered = 8, true
	if a := newApplier(t, nil, cfg); a.cfg.Workers != 1 {
		t.Errorf("Ordered: %d workers, want 1", a.cfg.Workers)
	}
}

// TestCoalesce: a window keeps the last operation of each key, in the order
// keys were first seen; an update that changes the key deletes the old one.
func TestCoalesce(t *testing.T) {
	a := newApplier(t, nil, testConfig())
	a.Add(ev(100, ins(row(1, "a")), ins(row(2, "b"))))
	a.Add(ev(200, upd(row(1, "a"), row(1, "a2")), upd(row(1, "a2"), row(1, "a3"))))
	a.Add(ev(300, del(row(2, "b"))))
	a.Add(ev(400, ins(row(3, "c")), upd(row(3, "c"), row(4, "c")))) // key 3 -> 4
	a.Add(ev(500, del(row(5, "gone"))))                             // never inserted in this window
	a.Add(ev(600, ins(row(2, "b again"))))                          // re-inserted after its delete

	want := []opView{
		{false, row(1, "a3")},
		{false, row(2, "b again")},
		{true, row(3, "c")},
		{false, row(4, "c")},
		{true, row(5, "gone")},
	}
	if got := ops(a); !reflect.DeepEqual(got, want) {
		t.Errorf("window:\n got %v\nwant %v", got, want)
	}
	if got := a.Pending(); got != len(want) {
		t.Errorf("Pending = %d, want %d", got, len(want))
	}
	if got := a.Stats().Changes; got != 9 {
		t.Errorf("Stats.Changes = %d, want 9 (every row change received)", got)
	}
}

func pos(off uint32) binlog.Position { return binlog.Position{File: "bin.000001", Offset: off} }

// boundary is a transaction boundary (a commit) at off.
func boundary(off uint32) binlog.Event { return binlog.Event{Pos: pos(off), Boundary: true} }

// TestAppliedAtBoundaries: Applied() advances only when a flushed window
// ends at a transaction boundary, to that boundary, never backwards, and
// WaitApplied returns once it has reached the position asked for.
func TestAppliedAtBoundaries(t *testing.T) {
	ctx := context.Background()
	db, rec := fakeDB(t)
	a := newApplier(t, db, testConfig())
	a.SetApplied(pos(4))

	// Rows of a transaction whose commit has not been seen: written, but the
	// applied position stays.
	a.Add(ev(100, ins(row(1, "a")))) // Boundary false: lies after 100
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rec.all()) != 1 {
		t.Fatalf("the rows were not written: %v", rec.all())
	}
	if got := a.Applied(); got != pos(4) {
		t.Fatalf("Applied = %v after rows without their commit, want %v", got, pos(4))
	}

	// The commit alone (no rows) moves it.
	a.Add(boundary(150))
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Applied(); got != pos(150) {
		t.Fatalf("Applied = %v after the commit, want %v", got, pos(150))
	}

	// A window with rows then a commit ends at the commit.
	waited := make(chan error, 1)
	go func() { waited <- a.WaitApplied(ctx, pos(300)) }()
	a.Add(ev(150, ins(row(2, "b"))))
	a.Add(boundary(300))
	a.Add(ev(300, ins(row(3, "c")))) // the next transaction's rows: after 300
	select {
	case err := <-waited:
		t.Fatalf("WaitApplied(300) returned %v before the flush", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Applied(); got != pos(300) {
		t.Fatalf("Applied = %v, want the last boundary %v", got, pos(300))
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitApplied(300) still waiting after Applied reached 300")
	}
	if err := a.WaitApplied(ctx, pos(250)); err != nil {
		t.Fatalf("WaitApplied of a passed position: %v", err)
	}

	// Never backwards.
	a.SetApplied(pos(1000))
	a.Add(boundary(600))
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.Applied(); got != pos(1000) {
		t.Errorf("Applied moved back to %v", got)
	}

	// WaitApplied ends with its context.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := a.WaitApplied(cctx, pos(5000)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitApplied past the end: %v, want the context's error", err)
	}
}

// TestUpdateSameKey: an update that keeps the key is one replace, no delete.
func TestUpdateSameKey(t *testing.T) {
	a := newApplier(t, nil, testConfig())
	a.Add(ev(10, upd([]any{int64(7), []byte("x"), int64(1)}, []any{int64(7), []byte("y"), int64(2)})))
	want := []opView{{false, []any{int64(7), []byte("y"), int64(2)}}}
	if got := ops(a); !reflect.DeepEqual(got, want) {
		t.Errorf("window %v, want %v", got, want)
	}
}

// TestAddReportsFull: Add returns true once the window holds WindowRows
// distinct keys; repeated writes of one key do not fill it.
func TestAddReportsFull(t *testing.T) {
	cfg := testConfig()
	cfg.WindowRows = 3
	a := newApplier(t, nil, cfg)
	for i := range 10 {
		if a.Add(ev(uint32(i+1), upd(row(1, "x"), row(1, fmt.Sprint(i))))) {
			t.Fatalf("full after %d writes of one key", i+1)
		}
	}
	if a.Add(ev(20, ins(row(2, "")))) {
		t.Fatal("full at 2 keys")
	}
	if !a.Add(ev(21, ins(row(3, "")))) {
		t.Fatal("not full at 3 keys")
	}
	if !a.Add(ev(22, ins(row(3, "")))) {
		t.Fatal("no longer full after rewriting a key")
	}
}

// TestKeyOf: keys are equal exactly when their values are equal byte for
// byte and of the same type; only the key columns count.
func TestKeyOf(t *testing.T) {
	cfg := testConfig()
	cfg.KeySource, cfg.KeyGhost = []int{2, 0}, []string{"b", "id"}
	a := newApplier(t, nil, cfg)
	k := func(v0, v2 any) string { return a.keyOf([]any{v0, "not a key column", v2}) }
	if k(int64(1), "x") != a.keyOf([]any{int64(1), "other", "x"}) {
		t.Error("a non-key column changed the key")
	}
	utc := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	same := [][2]string{
		{k(int64(1), []byte("x")), k(int64(1), []byte("x"))},
		{k(nil, nil), k(nil, nil)},
		{k(utc, 1.5), k(utc.In(time.FixedZone("x", 3600)), 1.5)}, // one instant
	}
	for i, p := range same {
		if p[0] != p[1] {
			t.Errorf("same %d: keys differ", i)
		}
	}
	distinct := []string{
		k(int64(1), nil),
		k(uint64(1), nil),
		k("1", nil),
		k([]byte("1"), nil),
		k(float64(1), nil),
		k(float32(1), nil),
		k(nil, nil),
		k([]byte{}, nil),
		k("", nil),
		k(int64(-1), nil),
		k(uint64(18446744073709551615), nil),
		k([]byte("a"), []byte("bc")), // no ambiguity between composite splits
		k([]byte("ab"), []byte("c")),
		k([]byte("c"), []byte("a\x03b")), // a value holding a type tag byte
		k([]byte("b\x03c"), []byte("a")),
		k([]byte("a\x00"), nil),
		k([]byte("a"), []byte{}),
		k([]byte("A"), nil), // byte-exact: collation-equal spellings differ
		k([]byte("a"), nil),
		k([]byte("a "), nil),
		k(utc, nil),
		k(utc.Add(time.Nanosecond), nil),
		k(int32(1), nil), // unusual types are kept apart by their Go type
		k(int16(1), nil),
	}
	seen := map[string]int{}
	for i, s := range distinct {
		if j, ok := seen[s]; ok {
			t.Errorf("keys %d and %d collide: %q", j, i, s)
		}
		seen[s] = i
	}
}

func TestImageBytesAndPlaceholders(t *testing.T) {
	if got := imageBytes([]any{int64(1), nil, []byte("abc"), "de", 1.5}); got != 8+8+7+6+8 {
		t.Errorf("imageBytes = %d", got)
	}
	if got := placeholders(3, nil, nil); got != "?,?,?" {
		t.Errorf("placeholders = %q", got)
	}
	if got := placeholders(3, []string{"", "latin1"}, nil); got != "?,CONVERT(? USING latin1),?" {
		t.Errorf("placeholders with charsets = %q", got)
	}
	if got := placeholders(0, nil, nil); got != "" {
		t.Errorf("placeholders(0) = %q", got)
	}
	// A template wins over a charset; each of its "?" takes the value.
	if got := placeholders(3, []string{"", "latin1"}, []string{"", "IF(? IS NULL, NULL, FIELD(?, 'a'))"}); got != "?,IF(? IS NULL, NULL, FIELD(?, 'a')),?" {
		t.Errorf("placeholders with templates = %q", got)
	}
	exprs := []string{"", "IF(? IS NULL, NULL, FIELD(?, 'a'))"}
	var args []any
	for j, v := range []any{int64(1), "a", int64(3)} {
		args = appendArg(args, v, exprs, j)
	}
	if fmt.Sprint(args) != "[1 a a 3]" {
		t.Errorf("appendArg = %v", args)
	}
	// A '?' inside quoted text or a quoted identifier is no placeholder:
	// one more argument would be written into the text by the driver's
	// interpolation.
	args = appendArg(nil, "v", []string{"CONCAT(?, 'a?', `b?`, \"c\\\"?\", 'd\\'?')"}, 0)
	if len(args) != 1 {
		t.Errorf("appendArg with quoted '?' = %v; want one argument", args)
	}
	for tmpl, want := range map[string]int{"?": 1, "'?'": 0, "IF(? IS NULL, NULL, ?)": 2, "'it''s ?' ?": 1, "`?` ? '\\\\' ?": 2} {
		if got := placeholderCount(tmpl); got != want {
			t.Errorf("placeholderCount(%q) = %d, want %d", tmpl, got, want)
		}
	}
	if got := substitute("CONCAT(?, 'a?', `b?`) + ?", "(x)"); got != "CONCAT((x), 'a?', `b?`) + (x)" {
		t.Errorf("substitute = %q", got)
	}
	// A float's -0 is written inline as a double (bound, the driver writes
	// "-0", an integer); +0 and other values stay arguments.
	var b strings.Builder
	batch := []op{{image: []any{int64(1), math.Copysign(0, -1), float32(math.Copysign(0, -1))}}, {image: []any{int64(2), 0.0, float32(-1.5)}}}
	args = writeTuples(&b, batch, []int{0, 1, 2}, nil, []string{"", "", "CAST(? AS DOUBLE)"})
	if got, want := b.String(), "(?,(-0e0),CAST((-0e0) AS DOUBLE)),(?,?,CAST(? AS DOUBLE))"; got != want {
		t.Errorf("writeTuples with -0 = %q, want %q", got, want)
	}
	if fmt.Sprint(args) != "[1 2 0 -1.5]" {
		t.Errorf("writeTuples with -0: args %v", args)
	}
}

// TestFlushStatements: one window becomes its deletes, then its replaces, in
// statements capped by BatchRows, with the written columns only.
func TestFlushStatements(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.SourceColumns, cfg.GhostColumns = []int{0, 2}, []string{"id", "b2"} // column a dropped, b renamed
	cfg.Charsets = []string{"", "latin1"}
	cfg.BatchRows = 2
	a := newApplier(t, db, cfg)
	a.Add(ev(10, ins([]any{int64(1), "a", int64(10)}), ins([]any{int64(2), "a", int64(20)}), ins([]any{int64(3), "a", int64(30)})))
	a.Add(ev(20, del([]any{int64(4), "a", int64(40)}), del([]any{int64(5), "a", nil}), del([]any{int64(6), "a", nil})))
	a.Add(ev(30, del([]any{int64(2), "a", int64(20)})))
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []stmt{
		{"DELETE FROM `s`.`g` WHERE (`id`) IN ((?),(?))", []any{int64(2), int64(4)}},
		{"DELETE FROM `s`.`g` WHERE (`id`) IN ((?),(?))", []any{int64(5), int64(6)}},
		{"REPLACE INTO `s`.`g` (`id`, `b2`) VALUES (?,CONVERT(? USING latin1)),(?,CONVERT(? USING latin1))", []any{int64(1), int64(10), int64(3), int64(30)}},
	}
	if got := rec.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("statements:\n got %v\nwant %v", got, want)
	}
	if a.Pending() != 0 {
		t.Errorf("Pending %d after Flush", a.Pending())
	}
	if s := a.Stats(); s.Changes != 7 || s.Rows != 6 || s.Statements != 3 {
		t.Errorf("Stats = %+v", s)
	}
	// An empty window writes nothing.
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.all()); n != 3 {
		t.Errorf("empty Flush wrote: %d statements in all", n)
	}
}

// TestBatchBytes: a statement stops before BatchBytes, but always holds at
// least one row.
func TestBatchBytes(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.BatchBytes = 100
	a := newApplier(t, db, cfg)
	big := strings.Repeat("x", 150)
	a.Add(ev(1, ins(row(1, big)), ins(row(2, "s")), ins(row(3, "s")), ins(row(4, big)), ins(row(5, "s"))))
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, s := range rec.all() {
		sizes = append(sizes, len(s.args)/3)
	}
	if want := []int{1, 2, 1, 1}; !slices.Equal(sizes, want) {
		t.Errorf("rows per statement %v, want %v", sizes, want)
	}
}

// TestCaseVariantsDeleteFirst: with one worker (collation-sensitive key),
// deletes of a window run before its replaces, so a row whose key changed
// spelling ('A' -> 'a') ends present in its final spelling.
func TestCaseVariantsDeleteFirst(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.Ordered = true
	a := newApplier(t, db, cfg)
	A := []any{[]byte("A"), int64(1), nil}
	lower := []any{[]byte("a"), int64(1), nil}
	a.Add(ev(1, ins(lower)))
	a.Add(ev(2, upd(lower, A))) // 'a' -> 'A'
	a.Add(ev(3, upd(A, lower))) // 'A' -> 'a'
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := rec.all()
	if len(got) != 2 || !strings.HasPrefix(got[0].query, "DELETE") || !strings.HasPrefix(got[1].query, "REPLACE") {
		t.Fatalf("statements %v: want the delete of 'A' then the replace of 'a'", got)
	}
	if !reflect.DeepEqual(got[0].args, []any{[]byte("A")}) || !reflect.DeepEqual(got[1].args, lower) {
		t.Errorf("statements %v", got)
	}
	if rec.maxInFlight() != 1 {
		t.Errorf("Ordered applier ran %d statements at once", rec.maxInFlight())
	}
}

// TestPartition: with several workers every surviving key is written exactly
// once, by one statement, and statements of one worker keep deletes before
// replaces.
func TestPartition(t *testing.T) {
	db, rec := fakeDB(t)
	cfg := testConfig()
	cfg.Workers, cfg.BatchRows = 4, 7
	rec.delay = 5 * time.Millisecond
	a := newApplier(t, db, cfg)
	want := map[int64]bool{} // id -> deleted
	for i := range int64(500) {
		a.Add(ev(uint32(i+1), ins(row(i, "v"))))
		want[i] = false
		if i%3 == 0 {
			a.Add(ev(uint32(i+1), del(row(i, "v"))))
			want[i] = true
		}
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, s := range rec.all() {
		isDel := strings.HasPrefix(s.query, "DELETE")
		n := 3
		if isDel {
			n = 1
		}
		for i := 0; i < len(s.args); i += n {
			id := s.args[i].(int64)
			if _, dup := got[id]; dup {
				t.Fatalf("key %d written twice", id)
			}
			got[id] = isDel
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("written keys differ from the window's last operations (%d written, %d expected)", len(got), len(want))
	}
	if rec.maxInFlight() < 2 {
		t.Errorf("4 workers wrote one statement at a time")
	}
	if s := a.Stats(); s.Rows != 500 {
		t.Errorf("Stats.Rows = %d, want 500", s.Rows)
	}
}

// TestLostConnectionEndsTheSession: a statement whose connection is lost
// may still run on the server; its session is ended (KILL, then waited for
// until the processlist no longer shows it) before the statement is tried
// again on another connection.
func TestLostConnectionEndsTheSession(t *testing.T) {
	db, rec := fakeDB(t)
	a := newApplier(t, db, testConfig())
	rec.mu.Lock()
	rec.lingers = 2 // the killed session shows in the processlist twice more
	rec.mu.Unlock()
	kinds := func(from int) []string {
		var got []string
		for _, s := range rec.all()[from:] {
			got = append(got, strings.Fields(s.query)[0])
		}
		return got
	}
	for i, lost := range []error{mysql.ErrInvalidConn, driver.ErrBadConn} {
		from := len(rec.all())
		rec.failNext(lost)
		a.Add(ev(uint32(10*i+1), ins(row(int64(i+1), "x"))))
		if err := a.Flush(context.Background()); err != nil {
			t.Fatalf("Flush after %v: %v", lost, err)
		}
		if got, want := kinds(from), []string{"REPLACE", "KILL", "REPLACE"}; !slices.Equal(got, want) {
			t.Fatalf("after %v: statements %v, want %v (the lost one, its session ended, then the retry)", lost, got, want)
		}
		rec.mu.Lock()
		kill, failedOn, on, polls := rec.stmts[from+1].query, rec.failedOn, slices.Clone(rec.on[from:]), rec.polls
		rec.mu.Unlock()
		if want := fmt.Sprintf("KILL %d", failedOn); kill != want {
			t.Errorf("after %v: %q, want %q (the session whose statement was lost)", lost, kill, want)
		}
		if on[0] != failedOn || on[2] == failedOn {
			t.Errorf("after %v: sessions %v: the retry ran on the lost session %d", lost, on, failedOn)
		}
		if polls < 3*(i+1) {
			t.Errorf("after %v: the processlist was read %d times in all: the retry did not wait for the killed session to go", lost, polls)
		}
	}
	if s := a.Stats(); s.Statements != 2 || s.Rows != 2 || s.Retries != 2 {
		t.Errorf("Stats = %+v, want 2 statements, 2 rows, 2 retries", s)
	}

	// A session that cannot be ended fails the flush: the statement is
	// not tried again while it may still be running.
	rec.mu.Lock()
	rec.killErr = &mysql.MySQLError{Number: 1095, Message: "You are not owner of thread"}
	rec.mu.Unlock()
	from := len(rec.all())
	rec.failNext(mysql.ErrInvalidConn)
	a.Add(ev(30, ins(row(3, "y"))))
	err := a.Flush(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ending the applier's session") {
		t.Fatalf("Flush: %v, want the lost connection and the failed KILL", err)
	}
	if got, want := kinds(from), []string{"REPLACE", "KILL"}; !slices.Equal(got, want) {
		t.Errorf("statements %v, want %v (no retry after the failed KILL)", got, want)
	}
}

// TestFlushRetriesAndFails: a deadlock is retried; another server error
// fails the flush and is returned wrapped.
func TestFlushRetriesAndFails(t *testing.T) {
	db, rec := fakeDB(t)
	a := newApplier(t, db, testConfig())
	rec.failNext(&mysql.MySQLError{Number: 1213, Message: "Deadlock found"})
	a.Add(ev(1, ins(row(1, "x"))))
	if err := a.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after one deadlock: %v", err)
	}
	if n := len(rec.all()); n != 2 {
		t.Errorf("%d executions, want 2 (the deadlock and the retry)", n)
	}
	if s := a.Stats(); s.Statements != 1 || s.Rows != 1 {
		t.Errorf("Stats = %+v: a retried statement counted twice", s)
	}

	rec.failNext(&mysql.MySQLError{Number: 1054, Message: "Unknown column"})
	a.Add(ev(2, ins(row(2, "x"))))
	err := a.Flush(context.Background())
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1054 {
		t.Fatalf("Flush: %v, want the server error 1054 wrapped", err)
	}
	if !strings.Contains(err.Error(), "`s`.`g`") {
		t.Errorf("error %q does not name the ghost", err)
	}
}

// --- a database/sql driver that records statements ---

type stmt struct {
	query string
	args  []any
}

func (s stmt) String() string { return fmt.Sprintf("%s %v", s.query, s.args) }

type recorder struct {
	delay time.Duration // each statement takes this long

	mu       sync.Mutex
	stmts    []stmt
	fail     []error
	inFlight int
	maxIn    int
	// sessions: connections opened (each its session id, from 1); on:
	// the session of each of stmts; failedOn: the session whose statement
	// an injected error failed last; lingers: how many processlist reads
	// a killed session still shows in (killed: those reads left, per id).
	sessions int64
	on       []int64
	failedOn int64
	lingers  int
	killed   map[int64]int
	polls    int   // processlist reads
	killErr  error // what KILL answers
}

func (r *recorder) maxInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxIn
}

func (r *recorder) all() []stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stmts)
}

func (r *recorder) failNext(err error) {
	r.mu.Lock()
	r.fail = append(r.fail, err)
	r.mu.Unlock()
}

func fakeDB(t *testing.T) (*sql.DB, *recorder) {
	r := &recorder{}
	db := sql.OpenDB(connector{r})
	t.Cleanup(func() { db.Close() })
	return db, r
}

type connector struct{ r *recorder }

func (c connector) Connect(context.Context) (driver.Conn, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.sessions++
	return conn{r: c.r, id: c.r.sessions}, nil
}
func (connector) Driver() driver.Driver { return drv{} }

type drv struct{}

func (drv) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type conn struct {
	r  *recorder
	id int64 // its session id
}

func (conn) Prepare(string) (driver.Stmt, error)      { return nil, errors.New("not supported") }
func (conn) Close() error                             { return nil }
func (conn) Begin() (driver.Tx, error)                { return nil, errors.New("not supported") }
func (conn) CheckNamedValue(*driver.NamedValue) error { return nil } // any value, as recorded
func (c conn) ExecContext(_ context.Context, q string, nv []driver.NamedValue) (driver.Result, error) {
	args := make([]any, len(nv))
	for i, v := range nv {
		args[i] = v.Value
	}
	r := c.r
	r.mu.Lock()
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	r.mu.Unlock()
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.stmts = append(r.stmts, stmt{strings.TrimPrefix(q, "/* recast */ "), args})
	r.on = append(r.on, c.id)
	if strings.HasPrefix(q, "KILL ") {
		var id int64
		if _, err := fmt.Sscanf(q, "KILL %d", &id); err != nil {
			return nil, err
		}
		if r.killErr != nil {
			return nil, r.killErr
		}
		if r.killed == nil {
			r.killed = map[int64]int{}
		}
		r.killed[id] = r.lingers
		return driver.RowsAffected(0), nil
	}
	if len(r.fail) > 0 {
		err := r.fail[0]
		r.fail = r.fail[1:]
		r.failedOn = c.id
		return nil, err
	}
	return driver.RowsAffected(len(args)), nil
}

// QueryContext answers what the applier asks besides its writes: its
// session's id, the server's version and whether a session is still in the
// processlist (r.running).
func (c conn) QueryContext(_ context.Context, q string, nv []driver.NamedValue) (driver.Rows, error) {
	q = strings.TrimPrefix(q, "/* recast */ ")
	switch {
	case q == "SELECT CONNECTION_ID()":
		return &fakeRows{vals: []driver.Value{c.id}}, nil
	case q == "SELECT VERSION()":
		return &fakeRows{vals: []driver.Value{"10.11.9-MariaDB"}}, nil
	case strings.HasPrefix(q, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ") && len(nv) == 1:
		c.r.mu.Lock()
		defer c.r.mu.Unlock()
		c.r.polls++
		id, n := nv[0].Value.(int64), int64(0)
		if left, ok := c.r.killed[id]; ok && left > 0 {
			c.r.killed[id] = left - 1
			n = 1
		}
		return &fakeRows{vals: []driver.Value{n}}, nil
	}
	return nil, fmt.Errorf("fake: query %q not supported", q)
}

// fakeRows is one row of one column per value.
type fakeRows struct {
	vals []driver.Value
	next int
}

func (r *fakeRows) Columns() []string { return []string{"c"} }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.next >= len(r.vals) {
		return io.EOF
	}
	dest[0] = r.vals[r.next]
	r.next++
	return nil
}
