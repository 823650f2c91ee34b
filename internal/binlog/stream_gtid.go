package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/recast-osc/recast/internal/flavor"
)

// startPoint prepares the stream for from and returns how go-mysql starts:
// from GTIDs when from has them; else at file+offset, reading the file from
// its start (prefix mode) to learn the GTIDs up to from.
func (s *Stream) startPoint(from Position) (func(*replication.BinlogSyncer) (*replication.BinlogStreamer, error), error) {
	if from.GTID != "" {
		set, err := ParseGTID(s.cfg.MySQL, from.GTID)
		if err != nil {
			return nil, err
		}
		if err := s.gt.start(from.GTID); err != nil {
			return nil, fmt.Errorf("binlog: GTID start position %q: %w", from.GTID, err)
		}
		s.byGTID = true
		return func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) { return b.StartSyncGTID(set) }, nil
	}
	at := from.Offset
	if from.Offset > 4 {
		to := from
		s.prefixTo = &to
		s.pos = Position{File: from.File, Offset: 4}
		s.boundary = s.pos
		at = 4
	}
	return func(b *replication.BinlogSyncer) (*replication.BinlogStreamer, error) {
		return b.StartSync(mysql.Position{Name: from.File, Pos: at})
	}, nil
}

// step is Next's handling of one event: handle, then, before the start
// position, nothing is delivered.
func (s *Stream) step(be *replication.BinlogEvent) (Event, bool, error) {
	ev, ok, err := s.handle(be)
	if err == nil && s.prefixTo != nil {
		ok, err = false, s.prefixDone(be)
	}
	return ev, ok, err
}

// prefixDone runs after each event read before the start position (prefix
// mode): once the stream reaches the start position exactly, at a group's
// end, delivery begins; passing it, or the file ending before it, is an
// error (it was not a transaction boundary of that file).
func (s *Stream) prefixDone(be *replication.BinlogEvent) error {
	to := *s.prefixTo
	h := be.Header
	if rot, ok := be.Event.(*replication.RotateEvent); ok && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 && string(rot.NextLogName) != to.File {
		return fmt.Errorf("binlog: start position %s lies past the end of its file (the server rotated to %s)", to, rot.NextLogName)
	}
	if ge, ok := be.Event.(*replication.GenericEvent); ok && h.EventType == replication.HEARTBEAT_EVENT && h.LogPos > 0 &&
		string(ge.Data) == to.File && h.LogPos < to.Offset {
		return fmt.Errorf("binlog: start position %s lies past the end of the binlog (the server is at %s:%d)", to, ge.Data, h.LogPos)
	}
	c := s.pos.Compare(to)
	if c < 0 {
		return nil
	}
	if c > 0 || s.inGroup {
		return fmt.Errorf("binlog: start position %s is not a transaction boundary (an event ends at %s)", to, s.pos)
	}
	s.prefixTo = nil
	if s.cfg.AtStart != nil {
		s.cfg.AtStart.Store(true)
	}
	s.pos = to
	s.boundary = to
	s.boundary.GTID = s.gt.current()
	s.log.Debug("binlog: reached the start position", slog.String("pos", s.boundary.String()))
	return nil
}

// beginGroupGTID records the GTID of the group that starts with ev.
func (s *Stream) beginGroupGTID(ev replication.Event) {
	s.groupDelivered = 0
	switch e := ev.(type) {
	case *replication.MariadbGTIDEvent:
		s.gt.beginMaria(e.GTID)
	case *replication.GTIDEvent:
		s.gt.beginMySQL(e.SID, e.GNO, e.Tag)
	case *replication.GtidTaggedLogEvent:
		s.gt.beginMySQL(e.SID, e.GNO, e.Tag)
	}
}

// endGroupGTID adds the ended group's GTID and puts the GTIDs on the
// boundary.
func (s *Stream) endGroupGTID(wasInGroup bool) {
	if wasInGroup {
		s.gt.commit()
		s.lastDelivered, s.groupDelivered = s.groupDelivered, 0
	}
	s.boundary.GTID = s.gt.current()
}

// reconnected runs at each artificial rotate, which starts every
// connection (go-mysql's reconnects included), and on MariaDB every new
// file after the real rotate. By position, go-mysql
// resumes after the last event that had a position: inside a group
// (MariaDB 11.4+) that is before the group's first rows event. By GTID it
// resumes at the start of the current group, or, between groups, of the
// last complete one: the server sends it again.
func (s *Stream) reconnected() {
	if s.fileSwitch {
		// MariaDB starts each new file with an artificial rotate after
		// the real one: not a new connection.
		s.fileSwitch = false
		return
	}
	switch {
	case s.byGTID && s.inGroup:
		s.skipRows = s.groupDelivered
	case s.byGTID:
		s.skipRows = s.lastDelivered
	case s.inGroup:
		s.skipRows = s.sinceResume
	}
}

// skipResent reports a watched rows event sent again after a reconnect by
// GTID (delivered before it).
func (s *Stream) skipResent() bool {
	if !s.byGTID || s.skipRows == 0 {
		return false
	}
	s.skipRows--
	s.groupDelivered++
	return true
}

// StartPosition is where a new stream starts: the server's current binlog
// position (CurrentPosition), with GTIDs, so that the stream starts by GTID
// without reading its file from the start.
//
// MariaDB computes the GTIDs of a file+offset exactly (BINLOG_GTID_POS).
// MySQL has no such function, and its Executed_Gtid_Set is not read
// atomically with the position (a group is in the binlog before it is in
// gtid_executed). With gtid_mode=ON, gtid_executed is read before the
// position: every GTID in it is of a group written before that position,
// though the position may hold a few groups more. The stream then starts
// at most those few groups early: it replays them, in binlog order, like
// any change made before the copy read its rows (the applier's images are
// the rows' states at those points; later changes follow them), and never
// starts late. Without GTIDs (gtid_mode not ON, none executed yet, or a set
// go-mysql cannot parse) the stream reads the position's file from its
// start and learns them on the way (prefix mode, gtid.go): up to a whole
// binlog file (max_binlog_size, 1 GiB by default) read before the first
// change is applied.
func StartPosition(ctx context.Context, q flavor.Queryer) (Position, error) {
	srv, err := flavor.Detect(ctx, q)
	if err != nil {
		return Position{}, err
	}
	var executed string
	if srv.MySQL() {
		if executed, err = mysqlExecuted(ctx, q, srv); err != nil {
			return Position{}, err
		}
	}
	p, err := CurrentPosition(ctx, q)
	if err != nil {
		return Position{}, err
	}
	if srv.MySQL() {
		p.GTID = executed
		return p, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", p.File, p.Offset)
	if err != nil {
		return Position{}, fmt.Errorf("BINLOG_GTID_POS(%s): %w", p, err)
	}
	defer rows.Close()
	var g sql.NullString
	if rows.Next() {
		if err := rows.Scan(&g); err != nil {
			return Position{}, fmt.Errorf("BINLOG_GTID_POS(%s): %w", p, err)
		}
	}
	if err := rows.Err(); err != nil {
		return Position{}, fmt.Errorf("BINLOG_GTID_POS(%s): %w", p, err)
	}
	if g.Valid && g.String != "" {
		if _, err := ParseGTID(false, g.String); err == nil {
			p.GTID = g.String
		}
	}
	return p, nil
}

// mysqlExecuted returns MySQL's gtid_executed, normalized, when gtid_mode
// is ON and the set is not empty and go-mysql reads it; else "".
func mysqlExecuted(ctx context.Context, q flavor.Queryer, srv flavor.Server) (string, error) {
	if on, err := flavor.GTIDEnabled(ctx, q, srv); err != nil || !on {
		return "", err
	}
	executed, err := flavor.GTIDExecuted(ctx, q, srv)
	if err != nil || executed == "" {
		return "", err
	}
	set, err := ParseGTID(true, executed)
	if err != nil {
		return "", nil // prefix mode learns them
	}
	return set.String(), nil
}
