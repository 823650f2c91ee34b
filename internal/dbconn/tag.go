package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// openTagged opens a pool on dsn whose every statement starts with Tag:
// the processlist then shows each of recast's statements as recast's,
// whether or not its text was written with the tag (the pacer's view of
// the application, the metadata-lock blocker search). The driver's own
// session set-up at connect (SET of the DSN's variables) is not tagged.
func openTagged(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(tagConnector{c}), nil
}

// tagged is query with Tag in front, once.
func tagged(query string) string {
	if strings.HasPrefix(query, Tag) {
		return query
	}
	return Tag + query
}

type tagConnector struct{ driver.Connector }

func (t tagConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := t.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tagConn{c: c}, nil
}

// tagConn forwards every interface database/sql looks for to the driver's
// connection, with the statement text tagged. session is the server's id
// of the connection's session, once SessionID has asked for it.
type tagConn struct {
	c       driver.Conn
	session int64
}

func (t *tagConn) Prepare(query string) (driver.Stmt, error) { return t.c.Prepare(tagged(query)) }
func (t *tagConn) Close() error                              { return t.c.Close() }

// Begin is driver.Conn's; database/sql calls BeginTx.
func (t *tagConn) Begin() (driver.Tx, error) {
	//lint:ignore SA1019 driver.Conn requires Begin; forwarding it is all it does
	return t.c.Begin() //nolint:staticcheck // as above
}

func (t *tagConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := t.c.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return t.Begin()
}

func (t *tagConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := t.c.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, tagged(query))
	}
	return t.Prepare(query)
}

func (t *tagConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if q, ok := t.c.(driver.QueryerContext); ok {
		return q.QueryContext(ctx, tagged(query), args)
	}
	return nil, driver.ErrSkip
}

func (t *tagConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if e, ok := t.c.(driver.ExecerContext); ok {
		return e.ExecContext(ctx, tagged(query), args)
	}
	return nil, driver.ErrSkip
}

func (t *tagConn) Ping(ctx context.Context) error {
	if p, ok := t.c.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (t *tagConn) ResetSession(ctx context.Context) error {
	if r, ok := t.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (t *tagConn) IsValid() bool {
	if v, ok := t.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (t *tagConn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := t.c.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
