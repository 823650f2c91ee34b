// Package checkpoint keeps a migration's progress in a one-row helper table
// (_T_chk), so that a migration killed at any point resumes instead of
// starting over.
//
// What must hold for a saved state to be resumable:
//   - every row whose key is at or below Watermark was copied into the ghost
//     after the binlog stream started (so every later change to it has an
//     event in the binlog);
//   - every change before Position has been applied to the ghost.
//
// Resuming copies rows above Watermark and streams from Position. Events
// after Position that were already applied before the crash are applied
// again: each carries a full row image and they are replayed in binlog order,
// so the ghost converges to the same state. The state is written with
// REPLACE on id = 1, so there is never zero or two checkpoints.
package checkpoint

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Version is the checkpoint format this recast writes. Version 1 (before
// GTID positions) is still read: it resumes by file+offset. Version 2's
// watermark is read but for keys with ENUM, SET, BIT, FLOAT or DOUBLE
// columns (NumberedSince).
const Version = 3

// minVersion is the oldest format Read accepts.
const minVersion = 1

// State is one checkpoint.
type State struct {
	Version int `json:"version"`
	// Alter and Key must be the same on resume.
	Alter string   `json:"alter"`
	Key   []string `json:"key"`
	// Watermark is the highest key copied with everything below it (nil:
	// nothing yet); CopyDone says the copy finished.
	Watermark [][]byte `json:"watermark,omitempty"`
	CopyDone  bool     `json:"copy_done"`
	// Position: every change before it is applied. File and Offset are
	// exact on the server that wrote that file only (Server); GTID, when
	// the server has GTIDs, is the MySQL GTID set or MariaDB GTID list
	// logged up to the same point, valid on any server that has them.
	File   string `json:"file"`
	Offset uint32 `json:"offset"`
	GTID   string `json:"gtid,omitempty"`
	// Server identifies the server File belongs to (flavor.Identity:
	// server_uuid on MySQL, server_id on MariaDB); empty in version 1.
	Server string `json:"server,omitempty"`
	// CopiedRows is for progress reporting after a resume.
	CopiedRows int64 `json:"copied_rows"`
	// DeferredIndexes are the indexes left out of the new table for the
	// copy (--defer-indexes), as SHOW CREATE TABLE prints them: built
	// after the copy, by a resumed run too.
	DeferredIndexes []string `json:"deferred_indexes,omitempty"`
	// DeferredFrom is the new table's SHOW CREATE TABLE before the
	// deferred indexes were left out: what it must be again after their
	// build (but for AUTO_INCREMENT).
	DeferredFrom string `json:"deferred_from,omitempty"`
	// SQLMode and TimeZone are the semantics the run converts values
	// under (the server's globals or --set-vars'): a resumed run must
	// convert the rest alike. Empty in checkpoints before session 27.
	SQLMode  string `json:"sql_mode,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// Pos returns the applied position.
func (s State) Pos() binlog.Position {
	return binlog.Position{File: s.File, Offset: s.Offset, GTID: s.GTID}
}

// SetPos records p as the applied position.
func (s *State) SetPos(p binlog.Position) { s.File, s.Offset, s.GTID = p.File, p.Offset, p.GTID }

// TableName is the checkpoint table of table t.
func TableName(t string) string { return "_" + t + "_chk" }

// ErrNone is returned by Read when there is no checkpoint.
var ErrNone = errors.New("no checkpoint")

func name(schema, t string) string {
	return table.QuoteIdent(schema) + "." + table.QuoteIdent(TableName(t))
}

// Create creates the (empty) checkpoint table.
func Create(ctx context.Context, db *sql.DB, schema, t string) error {
	_, err := db.ExecContext(ctx, dbconn.Tag+"CREATE TABLE "+name(schema, t)+
		" (id INT NOT NULL PRIMARY KEY, state LONGTEXT NOT NULL, updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB COMMENT='recast checkpoint'")
	if err != nil {
		return fmt.Errorf("create the checkpoint table: %w", err)
	}
	return nil
}

// Write saves s.
func Write(ctx context.Context, db *sql.DB, schema, t string, s State) error {
	s.Version = Version
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, dbconn.Tag+"REPLACE INTO "+name(schema, t)+" (id, state, updated_at) VALUES (1, ?, NOW(6))", string(b)); err != nil {
		return fmt.Errorf("write the checkpoint: %w", err)
	}
	return nil
}

// Read loads the checkpoint.
func Read(ctx context.Context, db *sql.DB, schema, t string) (State, error) {
	var raw string
	err := db.QueryRowContext(ctx, "SELECT state FROM "+name(schema, t)+" WHERE id = 1").Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) || dbconn.Number(err) == dbconn.ErNoSuchTable {
		return State{}, ErrNone
	}
	if err != nil {
		return State{}, fmt.Errorf("read the checkpoint: %w", err)
	}
	var s State
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return State{}, fmt.Errorf("the checkpoint in %s is unreadable: %w", name(schema, t), err)
	}
	if s.Version < minVersion || s.Version > Version {
		return State{}, fmt.Errorf("the checkpoint in %s has format %d, this recast reads formats %d to %d: resume with the recast that wrote it, or run recast cleanup and start over", name(schema, t), s.Version, minVersion, Version)
	}
	return s, nil
}

// EncodeKey turns key values (as the copier binds them, table.KeyArg:
// strings, bytes, numbers) into the checkpoint's form.
func EncodeKey(vals []any) [][]byte {
	if vals == nil {
		return nil
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case []byte:
			out[i] = x
		case string:
			out[i] = []byte(x)
		default:
			out[i] = fmt.Appendf(nil, "%v", x)
		}
	}
	return out
}

// DecodeKey turns the checkpoint's form back into values to bind, typed by
// the key columns of t (table.ParseKeyArg).
func DecodeKey(t *table.Table, cols []string, raw [][]byte) ([]any, error) {
	if raw == nil {
		return nil, nil
	}
	if len(raw) != len(cols) {
		return nil, fmt.Errorf("the checkpoint's watermark has %d values for a key of %d columns", len(raw), len(cols))
	}
	out := make([]any, len(raw))
	for i, b := range raw {
		v, err := table.ParseKeyArg(t.Columns[t.ColumnIndex(cols[i])], b)
		if err != nil {
			return nil, fmt.Errorf("the checkpoint's watermark: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// NumberedSince is the first format whose watermark holds the numbers
// table.KeyArg binds for ENUM, SET, BIT, FLOAT and DOUBLE key columns;
// earlier ones held what the server prints, from which a copy's bounds
// were not exact (table.KeyArg).
const NumberedSince = 3
