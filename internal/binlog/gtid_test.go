package binlog

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/recast-osc/recast/internal/table"
)

// These tests need no server.

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "c1a1b5a0-0000-11ef-8000-000000000001"
)

func TestParseGTID(t *testing.T) {
	for _, c := range []struct {
		mysql bool
		in    string
		ok    bool
	}{
		{true, uuidA + ":1-56", true},
		{true, uuidA + ":1-56:60-70," + uuidB + ":7", true},
		{true, "not-a-uuid:1-5", false},
		{true, "", false},
		{false, "0-1-100", true},
		{false, "0-1-100,1-2-7", true},
		{false, "0-1-100,0-2-7", false}, // one GTID per domain
		{false, "0-1", false},
		{false, "", false},
	} {
		set, err := ParseGTID(c.mysql, c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseGTID(%v, %q) = %v, %v; want ok=%v", c.mysql, c.in, set, err, c.ok)
		}
	}
}

func TestPositionGTIDCompare(t *testing.T) {
	a := Position{File: "bin.000002", Offset: 100, GTID: "0-1-5"}
	b := Position{File: "bin.000002", Offset: 100, GTID: "0-1-9"}
	c := Position{File: "bin.000002", Offset: 101}
	if a.Compare(b) != 0 || a.Compare(c) != -1 || c.Compare(b) != 1 {
		t.Errorf("Compare must use file+offset only: %d %d %d", a.Compare(b), a.Compare(c), c.Compare(b))
	}
	if got := a.String(); got != "bin.000002:100 (gtid 0-1-5)" {
		t.Errorf("String = %q", got)
	}
	gtidOnly := Position{GTID: "0-1-5"}
	if !gtidOnly.IsZero() || gtidOnly.Compare(Position{File: "bin.000001", Offset: 4}) != -1 {
		t.Error("a GTID-only position has no file+offset and sorts before every file position")
	}
	ev := Event{Pos: b}
	if !ev.After(a) || (Event{Pos: b, Boundary: true}).After(a) {
		t.Error("Event.After must use file+offset only")
	}
}

func sid(t *testing.T, s string) []byte {
	t.Helper()
	u, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u[:]
}

func TestGTIDTrackerMySQL(t *testing.T) {
	g := newGTIDTracker(true)
	g.beginMySQL(sid(t, uuidA), 3, "")
	g.commit()
	if g.current() != "" {
		t.Fatalf("before the file's head event the GTIDs are unknown, got %q", g.current())
	}
	g.fileHeadMySQL(uuidA + ":1-5\n")
	g.beginMySQL(sid(t, uuidA), 6, "")
	if g.current() != uuidA+":1-5" {
		t.Errorf("a group counts at its end, not its start: %q", g.current())
	}
	g.commit()
	g.beginMySQL(sid(t, uuidB), 1, "")
	g.commit()
	if want := uuidA + ":1-6," + uuidB + ":1"; g.current() != want {
		t.Errorf("current %q, want %q", g.current(), want)
	}
	g.fileHeadMySQL(uuidA + ":1-2") // a later file's head repeats what was tracked: ignored
	if want := uuidA + ":1-6," + uuidB + ":1"; g.current() != want {
		t.Errorf("after another head event: %q, want %q", g.current(), want)
	}
	// An anonymous transaction (gtid_mode not ON) cannot be named by GTID:
	// from here on positions have no GTIDs.
	g.beginMySQL(make([]byte, 16), 0, "")
	g.commit()
	g.beginMySQL(sid(t, uuidA), 7, "")
	g.commit()
	if g.current() != "" {
		t.Errorf("after an anonymous transaction: %q, want none", g.current())
	}
	// A group whose end was never seen would leave a gap: no GTIDs.
	gap := newGTIDTracker(true)
	if err := gap.start(uuidA + ":1-9"); err != nil {
		t.Fatal(err)
	}
	gap.beginMySQL(sid(t, uuidA), 10, "")
	gap.beginMySQL(sid(t, uuidA), 10, "") // the same group sent again: fine
	gap.beginMySQL(sid(t, uuidA), 11, "")
	gap.commit()
	if gap.current() != "" {
		t.Errorf("after a group without an end: %q, want none", gap.current())
	}
	// Tagged GTIDs cannot be held either.
	h := newGTIDTracker(true)
	if err := h.start(uuidA + ":1-9"); err != nil {
		t.Fatal(err)
	}
	h.beginMySQL(sid(t, uuidA), 10, "mytag")
	h.commit()
	if h.current() != "" {
		t.Errorf("after a tagged GTID: %q, want none", h.current())
	}
}

func TestGTIDTrackerMariaDB(t *testing.T) {
	g := newGTIDTracker(false)
	g.fileHeadMaria([]mysql.MariadbGTID{{DomainID: 0, ServerID: 1, SequenceNumber: 5}, {DomainID: 0, ServerID: 2, SequenceNumber: 3}, {DomainID: 1, ServerID: 1, SequenceNumber: 9}})
	if want := "0-1-5,1-1-9"; g.current() != want {
		t.Errorf("head: %q, want %q (the last GTID per domain)", g.current(), want)
	}
	g.beginMaria(mysql.MariadbGTID{DomainID: 0, ServerID: 2, SequenceNumber: 6})
	g.commit()
	g.beginMaria(mysql.MariadbGTID{DomainID: 2, ServerID: 3, SequenceNumber: 1})
	g.commit()
	if want := "0-2-6,1-1-9,2-3-1"; g.current() != want {
		t.Errorf("current %q, want %q", g.current(), want)
	}
	// The same group again (sent again after a reconnect) changes nothing.
	g.beginMaria(mysql.MariadbGTID{DomainID: 0, ServerID: 2, SequenceNumber: 6})
	g.commit()
	if want := "0-2-6,1-1-9,2-3-1"; g.current() != want {
		t.Errorf("after a repeated group: %q, want %q", g.current(), want)
	}
	if _, err := ParseGTID(false, g.current()); err != nil {
		t.Errorf("the tracked list does not parse: %v", err)
	}
	// A sequence number going back in a domain (gtid_strict_mode=OFF, two
	// writers): "the last GTID of the domain" is ambiguous; no GTIDs.
	g.beginMaria(mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: 4})
	g.commit()
	if g.current() != "" {
		t.Errorf("after a sequence number going back: %q, want none", g.current())
	}
	if err := newGTIDTracker(false).start("0-1-2,0-2-3"); err == nil {
		t.Error("start accepted two GTIDs of one domain")
	}
}

// synthetic builds a stream fed by hand (no server): step is what Next
// does with each event.
func synthetic(t *testing.T, mysqlServer bool, from Position) *Stream {
	t.Helper()
	tb := &table.Table{Schema: "s", Name: "t", Columns: []table.Column{{Name: "id", DataType: "bigint", ColumnType: "bigint(20)"}}}
	cols, err := prepareColumns(tb)
	if err != nil {
		t.Fatal(err)
	}
	s := &Stream{cfg: Config{Table: tb, MySQL: mysqlServer}, cols: cols, log: slog.New(slog.DiscardHandler), pos: from, boundary: from, gt: newGTIDTracker(mysqlServer)}
	if _, err := s.startPoint(from); err != nil {
		t.Fatal(err)
	}
	return s
}

func ev(typ replication.EventType, logPos uint32, flags uint16, e replication.Event) *replication.BinlogEvent {
	return &replication.BinlogEvent{Header: &replication.EventHeader{EventType: typ, LogPos: logPos, Flags: flags}, Event: e}
}

func rotate(file string, pos uint64, artificial bool) *replication.BinlogEvent {
	var f uint16
	if artificial {
		f = replication.LOG_EVENT_ARTIFICIAL_F
	}
	return ev(replication.ROTATE_EVENT, 0, f, &replication.RotateEvent{NextLogName: []byte(file), Position: pos})
}

func query(logPos uint32, q string) *replication.BinlogEvent {
	return ev(replication.QUERY_EVENT, logPos, 0, &replication.QueryEvent{Query: []byte(q), Schema: []byte("other")})
}

func xid(logPos uint32) *replication.BinlogEvent {
	return ev(replication.XID_EVENT, logPos, 0, &replication.XIDEvent{})
}

func mariaGTID(logPos uint32, seq uint64) *replication.BinlogEvent {
	return ev(replication.MARIADB_GTID_EVENT, logPos, 0, &replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}})
}

// feed steps every event and returns the events delivered.
func feed(t *testing.T, s *Stream, evs ...*replication.BinlogEvent) ([]Event, error) {
	t.Helper()
	var out []Event
	for _, be := range evs {
		e, ok, err := s.step(be)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestPrefixMariaDB: a stream started at file+offset reads its file from
// the start, learns the GTIDs up to the start position and delivers
// nothing before it; its boundaries carry the GTIDs from then on.
func TestPrefixMariaDB(t *testing.T) {
	from := Position{File: "bin.000001", Offset: 500}
	head := []*replication.BinlogEvent{
		rotate("bin.000001", 4, true),
		ev(replication.FORMAT_DESCRIPTION_EVENT, 256, 0, &replication.FormatDescriptionEvent{}),
		ev(replication.MARIADB_GTID_LIST_EVENT, 300, 0, &replication.MariadbGTIDListEvent{GTIDs: []mysql.MariadbGTID{{DomainID: 0, ServerID: 1, SequenceNumber: 5}}}),
		mariaGTID(340, 6), query(380, "BEGIN"), xid(420),
		mariaGTID(450, 7), query(500, "CREATE TABLE other.x (id INT)"), // standalone DDL ending at the start position
	}
	s := synthetic(t, false, from)
	got, err := feed(t, s, head...)
	if err != nil || len(got) != 0 {
		t.Fatalf("prefix delivered %v, %v; want nothing", got, err)
	}
	if s.prefixTo != nil || s.boundary != (Position{File: "bin.000001", Offset: 500, GTID: "0-1-7"}) {
		t.Fatalf("after the prefix: boundary %v (prefix %v)", s.boundary, s.prefixTo)
	}
	got, err = feed(t, s, mariaGTID(540, 8), query(580, "BEGIN"), xid(620), rotate("bin.000002", 4, false))
	if err != nil {
		t.Fatal(err)
	}
	want := []Position{{File: "bin.000001", Offset: 620, GTID: "0-1-8"}, {File: "bin.000002", Offset: 4, GTID: "0-1-8"}}
	if len(got) != len(want) {
		t.Fatalf("delivered %v, want boundaries %v", got, want)
	}
	for i := range want {
		if !got[i].Boundary || got[i].Pos != want[i] {
			t.Errorf("event %d: %+v, want a boundary at %v", i, got[i], want[i])
		}
	}

	// A start position inside a group, past the file's end, or after a
	// rotation is refused, never silently started elsewhere.
	for name, tail := range map[string][]*replication.BinlogEvent{
		"inside a group":   {mariaGTID(450, 7), query(480, "BEGIN"), query(500, "INSERT INTO other.x VALUES (1)"), xid(540)},
		"not an event end": {mariaGTID(450, 7), query(480, "BEGIN"), xid(520)},
		"past the file":    {rotate("bin.000002", 4, false)},
		"past the binlog":  {ev(replication.HEARTBEAT_EVENT, 420, 0, &replication.GenericEvent{Data: []byte("bin.000001")})},
	} {
		s := synthetic(t, false, from)
		_, err := feed(t, s, append(head[:6:6], tail...)...)
		if err == nil || !strings.Contains(err.Error(), "start position bin.000001:500") {
			t.Errorf("%s: %v, want the start position refused", name, err)
		}
	}
}

// TestPrefixMySQL: the same with MySQL's Previous_gtids and GTID events;
// an anonymous transaction (gtid_mode OFF) leaves file+offset only.
func TestPrefixMySQL(t *testing.T) {
	gtid := func(logPos uint32, u string, gno int64) *replication.BinlogEvent {
		return ev(replication.GTID_EVENT, logPos, 0, &replication.GTIDEvent{SID: sid(t, u), GNO: gno})
	}
	from := Position{File: "binlog.000003", Offset: 400}
	s := synthetic(t, true, from)
	_, err := feed(t, s,
		rotate("binlog.000003", 4, true),
		ev(replication.FORMAT_DESCRIPTION_EVENT, 126, 0, &replication.FormatDescriptionEvent{}),
		ev(replication.PREVIOUS_GTIDS_EVENT, 197, 0, &replication.PreviousGTIDsEvent{GTIDSets: uuidA + ":1-10"}),
		gtid(230, uuidA, 11), ev(replication.TRANSACTION_PAYLOAD_EVENT, 300, 0, &replication.GenericEvent{}), // compressed: a whole group
		gtid(330, uuidA, 12), query(350, "BEGIN"), xid(400))
	if err != nil || s.prefixTo != nil {
		t.Fatalf("prefix: %v (still in prefix: %v)", err, s.prefixTo != nil)
	}
	got, err := feed(t, s, gtid(480, uuidB, 1), query(550, "BEGIN"), xid(600))
	if err != nil || len(got) != 1 {
		t.Fatalf("delivered %v, %v", got, err)
	}
	if want := (Position{File: "binlog.000003", Offset: 600, GTID: uuidA + ":1-12," + uuidB + ":1"}); got[0].Pos != want {
		t.Errorf("boundary %v, want %v", got[0].Pos, want)
	}
	got, err = feed(t, s, ev(replication.ANONYMOUS_GTID_EVENT, 680, 0, &replication.GTIDEvent{SID: make([]byte, 16)}), query(750, "BEGIN"), xid(800))
	if err != nil || len(got) != 1 || got[0].Pos != (Position{File: "binlog.000003", Offset: 800}) {
		t.Errorf("after an anonymous transaction: %v, %v; want a boundary without GTIDs", got, err)
	}
}

// TestStartByGTIDEarly: a MySQL stream started by GTID a few groups before
// its start position (StartPosition reads gtid_executed before the
// position), here from an older file (a rotation in between): those
// groups' events are delivered, and no position moves past the start
// until the server sends from the start's file beyond it (an offset of the
// older file is not taken for one of the start's).
func TestStartByGTIDEarly(t *testing.T) {
	gtid := func(logPos uint32, gno int64) *replication.BinlogEvent {
		return ev(replication.GTID_EVENT, logPos, 0, &replication.GTIDEvent{SID: sid(t, uuidA), GNO: gno})
	}
	from := Position{File: "binlog.000005", Offset: 1000, GTID: uuidA + ":1-10"}
	s := synthetic(t, true, from)
	got, err := feed(t, s, rotate("binlog.000004", 4, true), ev(replication.FORMAT_DESCRIPTION_EVENT, 126, 0, &replication.FormatDescriptionEvent{}),
		gtid(5000, 11), query(5100, "BEGIN"), xid(5200), rotate("binlog.000005", 4, false))
	if err != nil || len(got) == 0 || got[len(got)-1].Pos.GTID != uuidA+":1-11" {
		t.Fatalf("delivered %v, %v; want up to the end of group 11", got, err)
	}
	for _, e := range got {
		if e.Pos.Compare(from) > 0 {
			t.Errorf("an event of binlog.000004 at %s: past the start %s", e.Pos, from)
		}
	}
	if s.pos != from || s.boundary.File != from.File || s.boundary.Offset != from.Offset {
		t.Fatalf("after the older file: pos %v, boundary %v; want the start %v", s.pos, s.boundary, from)
	}
	got, err = feed(t, s, ev(replication.FORMAT_DESCRIPTION_EVENT, 126, 0, &replication.FormatDescriptionEvent{}),
		gtid(700, 12), query(800, "BEGIN"), xid(900), gtid(1100, 13), query(1200, "BEGIN"), xid(1300))
	if err != nil || len(got) == 0 {
		t.Fatalf("delivered %v, %v", got, err)
	}
	if want := (Position{File: "binlog.000005", Offset: 1300, GTID: uuidA + ":1-13"}); got[len(got)-1].Pos != want {
		t.Errorf("the last boundary %v, want %v", got[len(got)-1].Pos, want)
	}
	for _, e := range got {
		if e.Pos.GTID == uuidA+":1-12" && e.Pos.Compare(from) > 0 {
			t.Errorf("group 12, before the start, ends at %v", e.Pos)
		}
	}
}

// TestStartByGTID: a stream started from GTIDs knows them from the start;
// the server's positions (here another server's file) are taken as they
// come.
func TestStartByGTID(t *testing.T) {
	s := synthetic(t, false, Position{GTID: "0-1-7"})
	if !s.byGTID || s.prefixTo != nil {
		t.Fatal("a position with GTIDs must start by GTID")
	}
	got, err := feed(t, s, rotate("other-bin.000009", 4, true), mariaGTID(900, 8), query(950, "BEGIN"), xid(1000))
	if err != nil || len(got) != 2 {
		t.Fatalf("delivered %v, %v", got, err)
	}
	if want := (Position{File: "other-bin.000009", Offset: 1000, GTID: "0-1-8"}); got[1].Pos != want {
		t.Errorf("boundary %v, want %v", got[1].Pos, want)
	}
	if got[0].Pos.GTID != "0-1-7" {
		t.Errorf("first boundary %v, want the start GTIDs", got[0].Pos)
	}
	if _, err := (&Stream{cfg: Config{MySQL: true}, gt: newGTIDTracker(true)}).startPoint(Position{GTID: "0-1-7"}); err == nil {
		t.Error("a MariaDB GTID list accepted as a MySQL GTID set")
	}
}
