package dbconn

import (
	"context"
	"database/sql"
	"strings"
)

// Warning is one row of SHOW WARNINGS.
type Warning struct {
	Level string
	Code  int
	Msg   string
}

// Benign reports whether w leaves the data as the server's own ALTER
// would: a duplicate key (INSERT IGNORE meeting a row already written) or
// a note (e.g. a DECIMAL rounded to a smaller scale).
func (w Warning) Benign() bool { return w.Code == ErDupEntry || strings.EqualFold(w.Level, "Note") }

// Querier is a session to read diagnostics on: a *sql.Conn or a *sql.Tx
// (the session of the statement that raised them).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CountWarnings is the number of warnings the session's last statement
// raised (SHOW COUNT(*) WARNINGS, not SELECT @@warning_count: on MySQL a
// SELECT clears the diagnostics area).
func CountWarnings(ctx context.Context, q Querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, "SHOW COUNT(*) WARNINGS").Scan(&n)
	return n, err
}

// ReadWarnings reads SHOW WARNINGS: at most max_error_count of them.
func ReadWarnings(ctx context.Context, q Querier) ([]Warning, error) {
	rs, err := q.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var ws []Warning
	for rs.Next() {
		var w Warning
		if err := rs.Scan(&w.Level, &w.Code, &w.Msg); err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, rs.Err()
}
