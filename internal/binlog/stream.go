package binlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/recast-osc/recast/internal/flavor"

	"github.com/recast-osc/recast/internal/table"
)

const (
	// heartbeatPeriod makes an idle server send a heartbeat, which Next turns
	// into a progress event.
	heartbeatPeriod = time.Second
	// readTimeout: no packet (not even a heartbeat) for this long means the
	// connection is dead; go-mysql then reconnects. It also bounds reading
	// one event, so it must allow for the largest event on a slow link.
	readTimeout = 30 * time.Second
	// maxReconnectAttempts bounds go-mysql's reconnection loop: an attempt
	// about every second (each with a 10 s connect timeout), so a server
	// that is down for more than ~20 s ends the stream with an error.
	maxReconnectAttempts = 20
	// closeTimeout bounds Close.
	closeTimeout = 5 * time.Second
	// eventCacheCount is the number of events go-mysql reads ahead.
	eventCacheCount = 2048
)

// Errors Next and Open return (wrapped, with details).
var (
	// ErrClosed: the stream was closed.
	ErrClosed = errors.New("binlog stream closed")
	// ErrRowImage: a rows event of the watched table lacks columns.
	ErrRowImage = errors.New("rows event without a full row image: the server must run with binlog_row_image=FULL")
	// ErrCompressed: MariaDB wrote a compressed event.
	ErrCompressed = errors.New("compressed binlog event: the server must run with log_bin_compress=OFF (MariaDB) and binlog_transaction_compression=OFF (MySQL)")
	// ErrPartialJSON: a MySQL rows event with partial JSON updates (diffs,
	// not values) for the watched table.
	ErrPartialJSON = errors.New("partial JSON update event: the server must run with binlog_row_value_options='' (not PARTIAL_JSON)")
	// ErrSchemaChanged: the binlog's table map does not match Config.Table.
	ErrSchemaChanged = errors.New("the watched table's definition changed")
	// ErrStatementDML: a change to the watched table was logged as a statement.
	ErrStatementDML = errors.New("statement-based change to the watched table: the server must run with binlog_format=ROW")
	// ErrChecksum: an event failed its CRC32 check.
	ErrChecksum = errors.New("binlog event checksum mismatch")
	// ErrIncident: the server logged an incident (a gap in the binlog).
	ErrIncident = errors.New("incident event in the binlog: changes may be missing")
	// ErrXA: an XA transaction's outcome contradicts what was streamed: a
	// prepared transaction whose changes to the watched table were returned
	// was rolled back, or one prepared before the start position committed.
	ErrXA = errors.New("XA transaction outcome cannot be streamed")
)

// Config says what to stream and how to connect.
type Config struct {
	Host     string
	Port     uint16
	User     string
	Password string
	ServerID uint32       // our replica server id; must differ from every server and replica
	Table    *table.Table // the watched table (schema, name, column definitions for value normalisation)
	// MySQL: the server is MySQL (go-mysql's MySQL flavor), not MariaDB.
	MySQL bool
	// Marks, if set, names a table in Table's schema whose rows hold
	// watermarks: (slot INT, mark BIGINT) written by the lock-free copy.
	// Each rows event on it becomes an Event with Marks (the mark column of
	// every after image; deletes are ignored).
	Marks  string
	Logger *slog.Logger
	// Socket, when set, is the unix socket to connect to instead of Host:Port.
	Socket string
	// TLSConfig, when set, encrypts the connection (dbconn.Config.BinlogTLS).
	TLSConfig *tls.Config
	// AppRows, when set, counts the rows events of tables other than Marks
	// and Own (tables in Table's schema that are the tool's own) from the
	// start position on: the application's writes, for the copy's pacer.
	AppRows *atomic.Uint64
	Own     []string
	// AtStart, when set, is set once the stream reads from its start
	// position on: at Open, unless it reads its file's history first
	// (prefix mode, MySQL), then when it reaches the start. Until then
	// AppRows knows nothing of the application now: the history is not
	// it, and its rows since the start are not read yet.
	AtStart *atomic.Bool
	// Resumed: the start position is a killed run's checkpoint. An XA
	// transaction prepared before it may have had its rows applied to the
	// new table by that run; its XA ROLLBACK, met now, cannot be told
	// apart from one whose rows the stream never saw, and is refused
	// (ErrXA) instead of passing unseen with its rows left in the table.
	Resumed bool
}

// Stream reads the binlog from a position and returns the watched table's
// row changes, DDL on it and progress marks. Next must be called from one
// goroutine at a time; Close may be called from any goroutine.
type Stream struct {
	cfg      Config
	cols     []column
	log      *slog.Logger
	syncer   *replication.BinlogSyncer
	streamer *replication.BinlogStreamer

	pos      Position // end of the last event read that had a position (owned by Next)
	boundary Position // end of the last complete event group: where a reader can start
	inGroup  bool     // between an event group's start (GTID/BEGIN) and its end (XID/COMMIT)
	began    bool     // the current group opened with BEGIN (or XA START)
	err      error    // sticky error (owned by Next)

	// XA: MariaDB logs a prepared XA transaction's rows at XA PREPARE, its
	// outcome (XA COMMIT/ROLLBACK) in a later event group.
	groupRows bool // the current event group had watched rows
	// sinceResume counts the watched rows events delivered since the last
	// event with a log position, where go-mysql resumes after a reconnect;
	// skipRows is how many of the rows events sent again after a reconnect
	// were delivered already (MariaDB 11.4+: events inside a group have no
	// position, so go-mysql resumes before the group's first rows event).
	sinceResume, skipRows int
	preparedXA            map[string]bool // xid -> its rows touched the watched table

	// GTIDs (gtid.go): gt follows the GTIDs logged up to the boundary.
	// prefixTo, while set, is the start position of a stream that reads
	// its file from the beginning to learn them: events before it are
	// tracked, never delivered. byGTID: the stream started from GTIDs (and
	// go-mysql reconnects by GTID, resending the current or last group);
	// groupDelivered and lastDelivered count the watched rows events
	// delivered in the current and in the last complete group.
	gt         *gtidTracker
	prefixTo   *Position
	byGTID     bool
	fileSwitch bool // a real rotate was the last event (MariaDB's artificial one follows)
	// srvFile is the file the server sends from (the last rotate's or
	// heartbeat's), which events' LogPos are offsets in: not always
	// pos.File, which a stream started by GTID on MySQL may be ahead of
	// while it is sent the few groups before its start (StartPosition),
	// from an older file when one rotated in between.
	srvFile                       string
	groupDelivered, lastDelivered int

	closed    context.Context // done once Close was called
	markClose context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// Open connects as a replica (go-mysql BinlogSyncer, flavor "mariadb" or
// "mysql") and starts streaming at from, which must be a transaction
// boundary: the Pos of an Event with Boundary set, or a server's current
// binlog position. With from.GTID set it starts from those GTIDs (from.File
// may then be empty: another server, or a purged file); otherwise at
// file+offset, reading the file from its start to learn the GTIDs (gtid.go).
func Open(ctx context.Context, cfg Config, from Position) (*Stream, error) {
	switch {
	case cfg.ServerID == 0:
		return nil, errors.New("binlog: Config.ServerID must not be 0")
	case cfg.Table == nil:
		return nil, errors.New("binlog: Config.Table is nil")
	case cfg.Host == "":
		return nil, errors.New("binlog: Config.Host is empty")
	case from.File == "" && from.GTID == "":
		return nil, errors.New("binlog: start position has no file and no GTIDs")
	}
	cols, err := prepareColumns(cfg.Table)
	if err != nil {
		return nil, err
	}
	if from.File != "" && from.Offset < 4 {
		from.Offset = 4 // the first event of a binlog file
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Stream{cfg: cfg, cols: cols, log: log, pos: from, boundary: from, gt: newGTIDTracker(cfg.MySQL)}
	s.gt.dropped = func(why string) {
		log.Warn("binlog: positions carry no GTIDs from here on (resume by file+offset only)", slog.String("why", why), slog.String("after", s.boundary.String()))
	}
	start, err := s.startPoint(from)
	if err != nil {
		return nil, err
	}
	if cfg.AtStart != nil {
		cfg.AtStart.Store(s.prefixTo == nil)
	}
	s.closed, s.markClose = context.WithCancel(context.Background())

	host, port := cfg.Host, cfg.Port
	if cfg.Socket != "" {
		host, port = cfg.Socket, 0 // go-mysql dials a path (with a /) as a unix socket
	}
	s.syncer = replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:                cfg.ServerID,
		Flavor:                  binlogFlavor(cfg.MySQL),
		Host:                    host,
		Port:                    port,
		TLSConfig:               cfg.TLSConfig,
		User:                    cfg.User,
		Password:                cfg.Password,
		Localhost:               "recast",
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         heartbeatPeriod,
		ReadTimeout:             readTimeout,
		MaxReconnectAttempts:    maxReconnectAttempts,
		VerifyChecksum:          true,
		// go-mysql logs its whole config and every rotate at INFO: keep its warnings only.
		Logger:              slog.New(minLevel{log.Handler(), slog.LevelWarn}).With(slog.String("component", "go-mysql")),
		RowsEventDecodeFunc: s.decodeRows,
		DiscardGTIDSet:      true,
		EventCacheCount:     eventCacheCount,
	})

	type started struct {
		st  *replication.BinlogStreamer
		err error
	}
	ch := make(chan started, 1)
	go func() {
		st, err := start(s.syncer)
		ch <- started{st, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("start binlog stream from %s on %s:%d: %w", from, cfg.Host, cfg.Port, r.err)
		}
		s.streamer = r.st
	case <-ctx.Done():
		go func() { <-ch; _ = s.Close() }()
		return nil, fmt.Errorf("start binlog stream from %s: %w", from, ctx.Err())
	}
	log.Info("binlog stream started", slog.String("from", from.String()),
		slog.String("table", cfg.Table.QuotedName()), slog.Uint64("server_id", uint64(cfg.ServerID)))
	return s, nil
}

// Next blocks for the next event: row changes of the watched table, a DDL
// statement on it, or a progress mark (see Event). An error other than the
// context's is final: every later call returns it.
func (s *Stream) Next(ctx context.Context) (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	if s.closed.Err() != nil {
		return Event{}, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closed, cancel)
	defer stop()
	for {
		be, err := s.streamer.GetEvent(ctx)
		if err != nil {
			if s.closed.Err() != nil || errors.Is(err, replication.ErrSyncClosed) {
				return Event{}, ErrClosed
			}
			if ctx.Err() != nil {
				return Event{}, fmt.Errorf("binlog stream at %s: %w", s.pos, ctx.Err())
			}
			s.err = fmt.Errorf("binlog stream broken after %s: %w", s.pos, describe(err))
			return Event{}, s.err
		}
		ev, ok, err := s.step(be)
		if err != nil {
			s.err = err
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
	}
}

// Close stops the stream. It returns within about 5 s even if the server
// does not answer (go-mysql's own shutdown then finishes in the background).
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.markClose()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { _ = recover() }()
			s.syncer.Close()
		}()
		select {
		case <-done:
		case <-time.After(closeTimeout):
			s.closeErr = fmt.Errorf("close binlog stream: go-mysql did not stop within %s; left to finish in the background", closeTimeout)
		}
	})
	return s.closeErr
}

// handle turns one go-mysql event into an Event (ok) or nothing, keeping
// s.pos at the end of the last event that carried a position and s.boundary
// at the end of the last complete event group.
//
// Positions are taken only where a reader can start again: after an event
// group's last event (XID, COMMIT, a standalone statement, XA PREPARE), or
// between groups (rotate, heartbeat, binlog checkpoint). A rows event's Pos
// is the boundary before its group, with Boundary false: a stream started
// at a rows event's own end would miss its group's table map ("invalid table
// id"), and MariaDB 11.4+ gives events inside a group no position at all.
func (s *Stream) handle(be *replication.BinlogEvent) (Event, bool, error) {
	h := be.Header
	if isCompressed(h.EventType) && s.prefixTo == nil {
		return Event{}, false, fmt.Errorf("%w (%s ending at %s:%d)", ErrCompressed, h.EventType, s.pos.File, h.LogPos)
	}
	next, positioned := s.pos, false
	if h.LogPos > 0 && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 {
		s.sinceResume = 0 // go-mysql would resume after this event
	}
	if _, ok := be.Event.(*replication.RotateEvent); ok {
		if h.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 {
			s.reconnected()
		} else {
			s.fileSwitch = true
		}
	} else if h.EventType != replication.FORMAT_DESCRIPTION_EVENT {
		s.fileSwitch = false
	}
	if ev, ok := be.Event.(*replication.RotateEvent); ok {
		next, positioned = Position{File: string(ev.NextLogName), Offset: uint32(ev.Position)}, true
		s.srvFile = next.File
	} else if h.LogPos > 0 && h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 {
		if s.srvFile != "" {
			next.File = s.srvFile
		}
		next.Offset, positioned = h.LogPos, true
		if ge, ok := be.Event.(*replication.GenericEvent); ok && h.EventType == replication.HEARTBEAT_EVENT && len(ge.Data) > 0 {
			next.File = string(ge.Data) // a heartbeat names the master's current file
			s.srvFile = next.File
		}
	}
	if positioned {
		switch c := next.Compare(s.pos); {
		case c > 0:
			s.pos = next
		case c < 0:
			level := slog.LevelWarn
			if s.byGTID { // the server starts a GTID stream at its file's head events
				level = slog.LevelDebug
			}
			s.log.Log(context.Background(), level, "binlog position would move backwards; kept", slog.String("event", h.EventType.String()),
				slog.String("pos", s.pos.String()), slog.String("event_pos", next.String()))
			positioned = false
		}
	}
	// endGroup marks the end of an event group at this event: its position
	// becomes the boundary (when the event has one; otherwise the group's
	// end is taken at the next positioned boundary).
	endGroup := func() Event {
		wasInGroup := s.inGroup
		s.inGroup, s.began = false, false
		if positioned {
			s.boundary = s.pos
		}
		s.endGroupGTID(wasInGroup)
		return Event{Pos: s.boundary, Boundary: true}
	}
	// between: an event outside any group (rotate, heartbeat, checkpoint).
	between := func() (Event, bool, error) {
		if s.inGroup {
			return Event{}, false, nil
		}
		return endGroup(), true, nil
	}

	if s.prefixTo != nil && h.EventType == replication.TRANSACTION_PAYLOAD_EVENT {
		return endGroup(), true, nil // a MySQL compressed transaction: a whole group after its GTID
	}

	switch ev := be.Event.(type) {
	case *replication.RowsEvent:
		if s.cfg.AppRows != nil && s.prefixTo == nil && !s.isOwn(ev.Table) {
			// Not before the start position: on MySQL the stream reads its
			// file from the start (prefix mode), and the history there is
			// not the application now (every idle copy of the MySQL bench
			// was paced for its first 3 s: 7,600 rows events of a bulk
			// insert made before the run, read in its first 100 ms).
			s.cfg.AppRows.Add(1)
		}
		if s.isMarks(ev.Table) {
			if s.prefixTo != nil {
				return Event{}, false, nil
			}
			if marks := markValues(ev); len(marks) > 0 {
				return Event{Marks: marks, Pos: s.boundary}, true, nil
			}
			return Event{}, false, nil
		}
		if !s.watched(ev.Table) || s.prefixTo != nil {
			return Event{}, false, nil
		}
		if s.skipResent() { // delivered before a reconnect by GTID
			s.groupRows = true
			return Event{}, false, nil
		}
		if h.EventType == replication.PARTIAL_UPDATE_ROWS_EVENT {
			return Event{}, false, fmt.Errorf("%s of %s after %s: %w", h.EventType, s.cfg.Table.QuotedName(), s.boundary, ErrPartialJSON)
		}
		if h.LogPos == 0 {
			if s.skipRows > 0 { // delivered before the reconnect
				s.skipRows--
				s.groupRows = true
				return Event{}, false, nil
			}
			s.sinceResume++
		}
		rows, err := s.rowChanges(ev)
		if err != nil {
			return Event{}, false, fmt.Errorf("%s of %s after %s: %w", h.EventType, s.cfg.Table.QuotedName(), s.boundary, err)
		}
		if len(rows) == 0 {
			return Event{}, false, nil
		}
		s.groupRows = true
		s.groupDelivered++
		return Event{Rows: rows, Pos: s.boundary}, true, nil
	case *replication.XIDEvent:
		return endGroup(), true, nil
	case *replication.MariadbGTIDEvent, *replication.GTIDEvent, *replication.GtidTaggedLogEvent:
		s.groupRows = false // a new event group starts
		s.inGroup, s.began = true, false
		s.beginGroupGTID(be.Event)
		return Event{}, false, nil
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(ev.Query))
		if strings.EqualFold(q, "BEGIN") || hasPrefixFold(q, "XA START") || hasPrefixFold(q, "XA BEGIN") {
			s.inGroup, s.began = true, true
			return Event{}, false, nil
		}
		if s.prefixTo != nil { // before the start: only where the group ends matters
			if s.began && !strings.EqualFold(q, "COMMIT") && !strings.EqualFold(q, "ROLLBACK") {
				return Event{}, false, nil
			}
			return endGroup(), true, nil
		}
		if err := s.trackXA(q); err != nil {
			return Event{}, false, fmt.Errorf("%w: %s after %s", err, q, s.boundary)
		}
		switch classifyQuery(q, string(ev.Schema), s.cfg.Table.Schema, s.cfg.Table.Name) {
		case queryDDL:
			e := endGroup()
			e.DDL = q
			return e, true, nil
		case queryDML:
			return Event{}, false, fmt.Errorf("%w: %q (default schema %q) after %s", ErrStatementDML, q, ev.Schema, s.boundary)
		case queryOther: // below: it may end the group
		}
		// Inside BEGIN ... COMMIT only COMMIT or ROLLBACK ends the group
		// (XA END, SAVEPOINT do not); a statement without BEGIN is a group
		// of its own.
		if s.began && !strings.EqualFold(q, "COMMIT") && !strings.EqualFold(q, "ROLLBACK") {
			return Event{}, false, nil
		}
		return endGroup(), true, nil
	case *replication.MariadbGTIDListEvent:
		if h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 && !s.inGroup {
			s.gt.fileHeadMaria(ev.GTIDs)
		}
		return between()
	case *replication.PreviousGTIDsEvent:
		if h.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 && !s.inGroup {
			s.gt.fileHeadMySQL(ev.GTIDSets)
		}
		return between()
	case *replication.RotateEvent, *replication.MariadbBinlogCheckPointEvent,
		*replication.FormatDescriptionEvent:
		return between()
	case *replication.GenericEvent:
		switch h.EventType {
		case replication.HEARTBEAT_EVENT, replication.HEARTBEAT_LOG_EVENT_V2:
			return between()
		case replication.XA_PREPARE_LOG_EVENT:
			return endGroup(), true, nil
		case replication.INCIDENT_EVENT:
			if s.prefixTo != nil {
				return Event{}, false, nil
			}
			return Event{}, false, fmt.Errorf("%w (after %s)", ErrIncident, s.boundary)
		}
	}
	return Event{}, false, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// trackXA follows XA statements (MariaDB logs "XA END xid" before the XA
// PREPARE event of a prepared transaction, "XA COMMIT xid" or "XA ROLLBACK
// xid" in a later group) and refuses outcomes that contradict the stream.
func (s *Stream) trackXA(q string) error {
	f := strings.Fields(q)
	if len(f) < 3 || !strings.EqualFold(f[0], "XA") {
		return nil
	}
	verb := strings.ToUpper(f[1])
	rest := f[2:]
	onePhase := len(rest) >= 2 && strings.EqualFold(rest[len(rest)-2], "ONE") && strings.EqualFold(rest[len(rest)-1], "PHASE")
	if onePhase {
		rest = rest[:len(rest)-2]
	}
	xid := strings.Join(rest, " ")
	switch verb {
	case "END":
		if s.preparedXA == nil {
			s.preparedXA = map[string]bool{}
		}
		s.preparedXA[xid] = s.groupRows
	case "COMMIT":
		if onePhase {
			return nil // logged as an ordinary transaction
		}
		if _, ok := s.preparedXA[xid]; !ok {
			return fmt.Errorf("%w: XA COMMIT of a transaction prepared before the stream started; its changes were not streamed", ErrXA)
		}
		delete(s.preparedXA, xid)
	case "ROLLBACK":
		touched, ok := s.preparedXA[xid]
		delete(s.preparedXA, xid)
		if ok && touched {
			return fmt.Errorf("%w: XA ROLLBACK of a prepared transaction whose changes to the watched table were already streamed", ErrXA)
		}
		if !ok && s.cfg.Resumed {
			return fmt.Errorf("%w: XA ROLLBACK of a transaction prepared before the resumed run's start; the killed run may have applied its changes", ErrXA)
		}
	}
	return nil
}

// isCompressed reports MariaDB's compressed query and rows events (165-171;
// go-mysql only knows some of them).
func isCompressed(t replication.EventType) bool {
	return t >= replication.MARIADB_QUERY_COMPRESSED_EVENT && t <= replication.MARIADB_DELETE_ROWS_COMPRESSED_EVENT_V1+3 ||
		t == replication.TRANSACTION_PAYLOAD_EVENT // MySQL binlog_transaction_compression
}

func binlogFlavor(mysqlServer bool) string {
	if mysqlServer {
		return mysql.MySQLFlavor
	}
	return mysql.MariaDBFlavor
}

func (s *Stream) watched(tm *replication.TableMapEvent) bool {
	return tm != nil && string(tm.Schema) == s.cfg.Table.Schema && string(tm.Table) == s.cfg.Table.Name
}

func (s *Stream) isMarks(tm *replication.TableMapEvent) bool {
	return s.cfg.Marks != "" && tm != nil && string(tm.Schema) == s.cfg.Table.Schema && string(tm.Table) == s.cfg.Marks
}

// isOwn: the table is Marks or one of Own.
func (s *Stream) isOwn(tm *replication.TableMapEvent) bool {
	if tm == nil || string(tm.Schema) != s.cfg.Table.Schema {
		return false
	}
	return s.isMarks(tm) || slices.Contains(s.cfg.Own, string(tm.Table))
}

// markValues returns the mark column (the second) of each after image of a
// rows event on the marks table.
func markValues(re *replication.RowsEvent) []int64 {
	var out []int64
	step, first := 1, 0
	switch re.Type() {
	case replication.EnumRowsEventTypeDelete:
		return nil
	case replication.EnumRowsEventTypeUpdate:
		step, first = 2, 1
	}
	for i := first; i < len(re.Rows); i += step {
		if r := re.Rows[i]; len(r) > 1 {
			switch v := r[1].(type) {
			case int64:
				out = append(out, v)
			case uint64:
				out = append(out, int64(v))
			}
		}
	}
	return out
}

// checkRows verifies a watched table's rows event before its rows are used.
func (s *Stream) checkRows(re *replication.RowsEvent) error {
	if err := checkTableMap(re.Table, s.cols); err != nil {
		return err
	}
	n := len(s.cols)
	if int(re.ColumnCount) != n {
		return fmt.Errorf("%w: the rows event has %d columns, the definition %d", ErrSchemaChanged, re.ColumnCount, n)
	}
	// A VIRTUAL generated column may be missing from a FULL image (MariaDB
	// 11.x logs only stored columns); recast never writes or reads it.
	if !fullImage(re.ColumnBitmap1, s.cols) ||
		((re.ColumnBitmap2 != nil || re.Type() == replication.EnumRowsEventTypeUpdate) && !fullImage(re.ColumnBitmap2, s.cols)) {
		return ErrRowImage
	}
	return nil
}

// decodeRows is go-mysql's RowsEventDecodeFunc: it decodes the rows of the
// watched table only, and leaves them undecoded when checkRows fails (Next
// reports that).
func (s *Stream) decodeRows(re *replication.RowsEvent, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode rows event: %v", r)
		}
	}()
	pos, err := re.DecodeHeader(data)
	if err != nil {
		return err
	}
	if s.isMarks(re.Table) {
		return re.DecodeData(pos, data)
	}
	if !s.watched(re.Table) || s.checkRows(re) != nil {
		return nil
	}
	return readRawJSON(re, pos, data) // re.DecodeData, MySQL's binary JSON kept (values.go)
}

func (s *Stream) rowChanges(re *replication.RowsEvent) ([]RowChange, error) {
	if err := s.checkRows(re); err != nil {
		return nil, err
	}
	var out []RowChange
	switch re.Type() {
	case replication.EnumRowsEventTypeInsert, replication.EnumRowsEventTypeDelete:
		kind := Insert
		if re.Type() == replication.EnumRowsEventTypeDelete {
			kind = Delete
		}
		out = make([]RowChange, 0, len(re.Rows))
		for _, r := range re.Rows {
			v, err := s.normalise(r)
			if err != nil {
				return nil, err
			}
			if kind == Insert {
				out = append(out, RowChange{Kind: Insert, After: v})
			} else {
				out = append(out, RowChange{Kind: Delete, Before: v})
			}
		}
	case replication.EnumRowsEventTypeUpdate:
		if len(re.Rows)%2 != 0 {
			return nil, fmt.Errorf("update rows event with %d images (odd)", len(re.Rows))
		}
		out = make([]RowChange, 0, len(re.Rows)/2)
		for i := 0; i < len(re.Rows); i += 2 {
			before, err := s.normalise(re.Rows[i])
			if err != nil {
				return nil, err
			}
			after, err := s.normalise(re.Rows[i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, RowChange{Kind: Update, Before: before, After: after})
		}
	default:
		return nil, errors.New("rows event of unknown kind")
	}
	return out, nil
}

// normalise is normaliseRow, plus: on MySQL a JSON column's value (go-mysql
// turns MySQL's binary JSON into JSON text) is a string, not bytes, because
// MySQL refuses to make a JSON value of a binary string (error 3144). On
// MariaDB JSON is LONGTEXT and stays bytes like other text.
func (s *Stream) normalise(row []any) ([]any, error) {
	v, err := normaliseRow(row, s.cols)
	if err != nil || !s.cfg.MySQL {
		return v, err
	}
	for i, c := range s.cols {
		if b, ok := v[i].([]byte); ok && c.def.DataType == "json" {
			v[i] = string(b)
		}
	}
	return v, nil
}

// describe makes go-mysql's stream errors readable: an EventError prints the
// raw event, which can be large.
func describe(err error) error {
	if errors.Is(err, replication.ErrChecksumMismatch) {
		return fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	var ee *replication.EventError
	if !errors.As(err, &ee) {
		return err
	}
	typ, end := "event", uint32(0)
	if ee.Header != nil {
		typ, end = ee.Header.EventType.String(), ee.Header.LogPos
	}
	if ee.Err == replication.ErrChecksumMismatch.Error() {
		return fmt.Errorf("%w: %s ending at offset %d", ErrChecksum, typ, end)
	}
	return fmt.Errorf("decode %s ending at offset %d: %s", typ, end, ee.Err)
}

// CurrentPosition returns the end of the server's binlog, read with the
// flavor's status statement (flavor.ReadBinlogStatus: SHOW BINLOG STATUS on
// MariaDB, SHOW BINARY LOG STATUS on MySQL 8.2+). q may be a *sql.Conn, so
// that the position is read on a session that holds locks.
func CurrentPosition(ctx context.Context, q flavor.Queryer) (Position, error) {
	srv, err := flavor.Detect(ctx, q)
	if err != nil {
		return Position{}, err
	}
	st, err := flavor.ReadBinlogStatus(ctx, q, srv)
	if err != nil {
		return Position{}, err
	}
	return Position{File: st.File, Offset: st.Position}, nil
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(g string) slog.Handler { return minLevel{h.Handler.WithGroup(g), h.min} }
