// Package binlog is the only importer of go-mysql's replication package. It
// streams one table's row changes from a server's binlog, from a position, as
// typed values ready to be written back with database/sql.
package binlog

import "fmt"

// Position is a point in the binlog: the end of an event (the position the
// next event starts at). GTID, when set, is the server's GTIDs logged up to
// that point (a MySQL GTID set or a MariaDB GTID list, see gtid.go): a
// stream can start there on any server that has them.
type Position struct {
	File   string
	Offset uint32
	GTID   string
}

func (p Position) String() string {
	if p.GTID != "" {
		return fmt.Sprintf("%s:%d (gtid %s)", p.File, p.Offset, p.GTID)
	}
	return fmt.Sprintf("%s:%d", p.File, p.Offset)
}

// IsZero reports whether p has no file+offset (it may still carry GTIDs).
func (p Position) IsZero() bool { return p.File == "" }

// Compare returns -1, 0 or 1, on file+offset only (GTIDs are not
// compared: positions compared are read from one server's binlog, where
// file+offset is exact). Binlog file names of one server sort by their
// numeric suffix, which has a fixed width, so string order is file order.
func (p Position) Compare(o Position) int {
	switch {
	case p.File < o.File:
		return -1
	case p.File > o.File:
		return 1
	case p.Offset < o.Offset:
		return -1
	case p.Offset > o.Offset:
		return 1
	}
	return 0
}

// Kind is the kind of a row change.
type Kind uint8

const (
	Insert Kind = iota + 1
	Update
	Delete
)

func (k Kind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// RowChange is one row of a rows event on the watched table. Before is set
// for Update and Delete, After for Insert and Update. Both hold one value per
// column of the source table in ordinal order, normalised for database/sql:
//   - nil for NULL;
//   - int64 for signed integers, uint64 for unsigned ones (the binlog does not
//     carry signedness on MariaDB; the table definition is used);
//   - []byte for character, binary, BLOB/TEXT columns (raw bytes in the
//     column's charset) and MariaDB's JSON (text);
//   - SQLExpr for MySQL's JSON: an expression rebuilding the binary value
//     with its scalar types (see JSONExpr), written in place of a placeholder;
//   - string for DECIMAL ("-12.340"), DATE, TIME, DATETIME and TIMESTAMP
//     (TIMESTAMP rendered in UTC: write it through a session with
//     time_zone='+00:00');
//   - the member name as string for ENUM, comma-joined member names for SET;
//   - uint64 for BIT; float32/float64 for FLOAT/DOUBLE; int64 for YEAR.
type RowChange struct {
	Kind   Kind
	Before []any
	After  []any
}

// Event is what Stream.Next returns. Exactly one of its shapes holds:
//   - Rows non-empty: row changes of the watched table, in binlog order, all
//     from one rows event;
//   - DDL non-empty: a statement that changes the watched table's definition
//     (ALTER/RENAME/DROP/TRUNCATE/CREATE TRIGGER ... on it): the caller aborts;
//   - Marks non-empty: watermarks written to Config.Marks (Boundary false,
//     Pos the boundary before its group, like a rows event);
//   - none of these: a progress mark (commit, rotate, heartbeat, other tables' events).
//
// Positions are transaction boundaries only. An event with Boundary set
// ends an event group (or lies between groups) and Pos is the position just
// after it: a stream can start there, and a caller that has handled every
// event up to it has seen every change written before Pos. A rows event has
// Boundary false and Pos the boundary before its group: it belongs to the
// group that ends at the next boundary, so it lies strictly after Pos.
type Event struct {
	Rows     []RowChange
	DDL      string
	Marks    []int64
	Pos      Position
	Boundary bool
}

// After reports whether e lies strictly after the boundary p: a boundary
// event beyond p, or a rows event of a group that starts at or after p.
func (e Event) After(p Position) bool {
	c := e.Pos.Compare(p)
	return c > 0 || (c == 0 && !e.Boundary)
}
