package binlog

// GTID positions.
//
// A Position carries, besides the file+offset of a transaction boundary, the
// GTIDs the server had logged up to that boundary when the server has GTIDs:
// a MySQL GTID set ("uuid:1-100,uuid2:1-7", gtid_mode=ON) or a MariaDB GTID
// list (one domain-server-sequence per domain, "0-1-100,1-2-7", the form
// MariaDB's slave_connect_state takes). A stream can start from either:
// file+offset on the server that wrote that file (exact there, nowhere
// else), the GTIDs on any server that logged the same transactions (the same
// server after its older binlog files were purged, or a replica promoted in
// its place).
//
// Where the GTIDs come from, exactly: the stream itself computes them from
// the binlog. A stream started at file+offset reads its file from the
// beginning: the file's head event (MySQL Previous_gtids, MariaDB
// Gtid_list) is the state at the file's start, and every group's GTID up to
// the start position is added, nothing being delivered before it. A stream
// started from GTIDs starts from that state. From then on every group's GTID
// is added at the group's end (its commit), so the GTIDs of a boundary are
// exactly the groups before it. Where exactness cannot be kept the GTIDs are
// dropped (empty) and only file+offset is used from there on: MySQL
// anonymous transactions (gtid_mode not ON) or tagged GTIDs (go-mysql's set
// cannot hold tags), a MariaDB sequence number that goes backwards in a
// domain (gtid_strict_mode=OFF with several writers: the list's "last GTID
// per domain" is then ambiguous).
//
// Comparisons (Compare, Event.After) stay on file+offset: positions that
// are compared (the applied position, the drain point under the cut-over
// lock, the checksum's snapshot) are all read from one server's binlog.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/google/uuid"
)

// ParseGTID validates a position's GTIDs for the flavor (mysqlServer: a
// MySQL GTID set; else a MariaDB GTID list) and returns them in go-mysql's
// form, ready for BinlogSyncer.StartSyncGTID.
func ParseGTID(mysqlServer bool, s string) (mysql.GTIDSet, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("binlog: empty GTID position")
	}
	if mysqlServer {
		set, err := mysql.ParseMysqlGTIDSet(s)
		if err != nil {
			return nil, fmt.Errorf("binlog: MySQL GTID set %q: %w", s, err)
		}
		return set, nil
	}
	domains := map[uint32]bool{}
	for _, part := range strings.Split(s, ",") {
		g, err := mysql.ParseMariadbGTID(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("binlog: MariaDB GTID list %q: %w", s, err)
		}
		if domains[g.DomainID] {
			return nil, fmt.Errorf("binlog: MariaDB GTID list %q names domain %d twice", s, g.DomainID)
		}
		domains[g.DomainID] = true
	}
	set, err := mysql.ParseMariadbGTIDSet(s)
	if err != nil {
		return nil, fmt.Errorf("binlog: MariaDB GTID list %q: %w", s, err)
	}
	return set, nil
}

// gtidTracker follows the GTIDs logged up to the stream's boundary.
type gtidTracker struct {
	mysql bool
	known bool // the base state was read (or given): str is exact
	str   string

	mysqlSet *mysql.MysqlGTIDSet
	maria    map[uint32]mysql.MariadbGTID // domain -> last GTID

	// the current group's GTID, added at its end
	pendingMySQL *struct {
		sid uuid.UUID
		gno int64
	}
	pendingMaria *mysql.MariadbGTID

	// dropped, when set, is told why tracking ended.
	dropped func(why string)
}

func newGTIDTracker(mysqlServer bool) *gtidTracker { return &gtidTracker{mysql: mysqlServer} }

// start sets the state from a GTID position (a stream started from GTIDs).
func (t *gtidTracker) start(s string) error {
	if t.mysql {
		set, err := mysql.ParseMysqlGTIDSet(s)
		if err != nil {
			return err
		}
		t.mysqlSet = set.(*mysql.MysqlGTIDSet)
	} else {
		if _, err := ParseGTID(false, s); err != nil {
			return err
		}
		t.maria = map[uint32]mysql.MariadbGTID{}
		for _, part := range strings.Split(s, ",") {
			g, _ := mysql.ParseMariadbGTID(strings.TrimSpace(part))
			t.maria[g.DomainID] = *g
		}
	}
	t.known = true
	t.render()
	return nil
}

// fileHeadMySQL takes a file's Previous_gtids event as the base, if no
// base is known yet (later ones repeat what was tracked).
func (t *gtidTracker) fileHeadMySQL(sets string) {
	if t.known {
		return
	}
	set, err := mysql.ParseMysqlGTIDSet(strings.ReplaceAll(sets, "\n", ""))
	if err != nil {
		return // stays unknown: file+offset only
	}
	t.mysqlSet, t.known = set.(*mysql.MysqlGTIDSet), true
	t.render()
}

// fileHeadMaria takes a file's Gtid_list event (the binlog state: the last
// GTID of each domain and server) as the base: per domain, the highest
// sequence number is the last one logged (sequence numbers grow within a
// domain; tracking drops the GTIDs if they do not).
func (t *gtidTracker) fileHeadMaria(list []mysql.MariadbGTID) {
	if t.known {
		return
	}
	t.maria = map[uint32]mysql.MariadbGTID{}
	for _, g := range list {
		if cur, ok := t.maria[g.DomainID]; !ok || g.SequenceNumber > cur.SequenceNumber {
			t.maria[g.DomainID] = g
		}
	}
	t.known = true
	t.render()
}

// beginMySQL records a MySQL group's GTID (anonymous or tagged: tracking ends).
// A group whose end was not seen (another GTID before it) would leave a
// gap: tracking ends too. The same GTID again is a group sent again after
// a reconnect.
func (t *gtidTracker) beginMySQL(sid []byte, gno int64, tag string) {
	u, err := uuid.FromBytes(sid)
	if err != nil || gno <= 0 || u == uuid.Nil || tag != "" ||
		(t.pendingMySQL != nil && (t.pendingMySQL.sid != u || t.pendingMySQL.gno != gno)) {
		t.drop(fmt.Sprintf("GTID %s:%d (tag %q) cannot be tracked, or the group before it had no end", u, gno, tag))
		return
	}
	t.pendingMySQL = &struct {
		sid uuid.UUID
		gno int64
	}{u, gno}
}

// beginMaria records a MariaDB group's GTID.
func (t *gtidTracker) beginMaria(g mysql.MariadbGTID) {
	if t.pendingMaria != nil && *t.pendingMaria != g {
		t.drop(fmt.Sprintf("GTID %s began before the group of %s ended", g.String(), t.pendingMaria.String()))
		return
	}
	t.pendingMaria = &g
}

// commit adds the current group's GTID: the group ended.
func (t *gtidTracker) commit() {
	defer func() { t.pendingMySQL, t.pendingMaria = nil, nil }()
	if !t.known {
		return
	}
	switch {
	case t.mysql && t.pendingMySQL != nil:
		t.mysqlSet.AddGTID(t.pendingMySQL.sid, t.pendingMySQL.gno)
	case !t.mysql && t.pendingMaria != nil:
		g := *t.pendingMaria
		if cur, ok := t.maria[g.DomainID]; ok {
			if cur == g {
				return // the same group again (after a reconnect)
			}
			if g.SequenceNumber <= cur.SequenceNumber {
				t.drop(fmt.Sprintf("GTID %s after %s: the sequence went back in the domain", g.String(), cur.String()))
				return
			}
		}
		t.maria[g.DomainID] = g
	default:
		return
	}
	t.render()
}

// drop ends GTID tracking: positions carry file+offset only from here on.
func (t *gtidTracker) drop(why string) {
	if t.known && t.dropped != nil {
		t.dropped(why)
	}
	t.known, t.str, t.mysqlSet, t.maria = false, "", nil, nil
	t.pendingMySQL, t.pendingMaria = nil, nil
}

// current is the GTIDs up to the last group end ("" when unknown).
func (t *gtidTracker) current() string { return t.str }

func (t *gtidTracker) render() {
	switch {
	case !t.known:
		t.str = ""
	case t.mysql:
		t.str = t.mysqlSet.String()
	default:
		t.str = mariaString(t.maria)
	}
}

func mariaString(m map[uint32]mysql.MariadbGTID) string {
	domains := make([]uint32, 0, len(m))
	for d := range m {
		domains = append(domains, d)
	}
	slices.Sort(domains)
	var b strings.Builder
	for i, d := range domains {
		if i > 0 {
			b.WriteByte(',')
		}
		g := m[d]
		b.WriteString(strconv.FormatUint(uint64(g.DomainID), 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(uint64(g.ServerID), 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(g.SequenceNumber, 10))
	}
	return b.String()
}
