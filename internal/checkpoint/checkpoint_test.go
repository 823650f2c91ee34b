package checkpoint

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/table"
)

// keyTable has one key column of each kind DecodeKey tells apart.
var keyTable = &table.Table{Schema: "s", Name: "t", Columns: []table.Column{
	{Name: "id", DataType: "bigint"},
	{Name: "b", DataType: "varbinary"},
	{Name: "c", DataType: "varchar", Charset: "utf8mb4"},
	{Name: "bl", DataType: "blob"},
	{Name: "d", DataType: "decimal"},
	{Name: "txt", DataType: "text", Charset: "latin1"}, // a text column is not binary
	{Name: "e", DataType: "enum", Elements: []string{"sms", "email"}},
	{Name: "f", DataType: "float"},
	{Name: "bt", DataType: "bit"},
}}

func TestEncodeKey(t *testing.T) {
	if got := EncodeKey(nil); got != nil {
		t.Errorf("EncodeKey(nil) = %#v, want nil (no watermark)", got)
	}
	if got := EncodeKey([]any{}); got == nil || len(got) != 0 {
		t.Errorf("EncodeKey(empty) = %#v, want empty non-nil", got)
	}
	got := EncodeKey([]any{"42", []byte{0, 0xff, 'x'}, "", []byte{}, int64(-7), uint64(18446744073709551615), "é"})
	want := [][]byte{[]byte("42"), {0, 0xff, 'x'}, {}, {}, []byte("-7"), []byte("18446744073709551615"), []byte("é")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EncodeKey = %q, want %q", got, want)
	}
}

func TestDecodeKey(t *testing.T) {
	if got, err := DecodeKey(keyTable, []string{"id"}, nil); got != nil || err != nil {
		t.Errorf("DecodeKey(nil) = %#v, %v; want nil", got, err)
	}
	cols := []string{"ID", "b", "c", "bl", "d", "txt", "e", "f", "bt"} // column names match case-insensitively
	got, err := DecodeKey(keyTable, cols, [][]byte{[]byte("1"), {0, 1}, []byte("x"), {0xff}, []byte("-1.50"), []byte("t"),
		[]byte("2"), []byte("0.10000000149011612"), []byte("4095")})
	want := []any{"1", []byte{0, 1}, "x", []byte{0xff}, "-1.50", "t", uint64(2), float64(float32(0.1)), uint64(4095)}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeKey = %#v, %v; want %#v", got, err, want)
	}
	// A format-2 watermark of an ENUM key held the member's name: not a number.
	if got, err := DecodeKey(keyTable, []string{"e"}, [][]byte{[]byte("email")}); err == nil {
		t.Errorf("DecodeKey(ENUM 'email') = %#v; want an error", got)
	}
	if got, err := DecodeKey(keyTable, []string{"id", "c"}, [][]byte{[]byte("1")}); err == nil {
		t.Errorf("DecodeKey(1 value, 2 columns) = %#v; want an error", got)
	}
}

// TestKeyRoundTrip: values as the copier binds them survive the checkpoint's
// JSON, byte for byte, including bytes that are not valid UTF-8.
func TestKeyRoundTrip(t *testing.T) {
	cols := []string{"id", "b", "c", "bl", "e", "f", "bt"}
	cases := [][]any{
		{"0", []byte{}, "", []byte{}, uint64(0), float64(0), uint64(0)},
		{"-9223372036854775808", []byte{0, 0, 0}, "a\x00b", []byte{0x80, 0xfe, 0xff}, uint64(1), float64(float32(-1.17549435e-38)), uint64(1)},
		{"18446744073709551615", bytes.Repeat([]byte{0xc3}, 300), strings.Repeat("ü", 100), []byte("\"quoted\" \\ and \n"), uint64(2), float64(float32(3.4e38)), uint64(1 << 63)},
	}
	for i, vals := range cases {
		s := State{Key: cols, Watermark: EncodeKey(vals)}
		raw := writeRead(t, s)
		got, err := DecodeKey(keyTable, cols, raw.Watermark)
		if err != nil || !reflect.DeepEqual(got, vals) {
			t.Errorf("case %d: round trip = %#v, %v; want %#v", i, got, err, vals)
		}
	}
}

func TestStateAndNames(t *testing.T) {
	s := State{File: "bin.000012", Offset: 4}
	if got, want := s.Pos(), (binlog.Position{File: "bin.000012", Offset: 4}); got != want {
		t.Errorf("Pos = %v, want %v", got, want)
	}
	p := binlog.Position{File: "bin.000013", Offset: 77, GTID: "0-1-12,1-2-3"}
	s.SetPos(p)
	if s.File != p.File || s.Offset != p.Offset || s.GTID != p.GTID || s.Pos() != p {
		t.Errorf("SetPos(%v): state %+v, Pos %v", p, s, s.Pos())
	}
	if got := TableName("orders"); got != "_orders_chk" {
		t.Errorf("TableName = %q", got)
	}
	if got := name("s`x", "t"); got != "`s``x`.`_t_chk`" {
		t.Errorf("name = %q", got)
	}
}

// TestWriteRead: Write stores the version and every field; Read returns them.
func TestWriteRead(t *testing.T) {
	in := State{Version: 99, Alter: "ADD COLUMN x INT", Key: []string{"id"}, Watermark: [][]byte{[]byte("17")},
		CopyDone: true, File: "bin.000003", Offset: 1234567, CopiedRows: 1 << 40}
	got := writeRead(t, in)
	want := in
	want.Version = Version // Write stamps the current format
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read = %+v, want %+v", got, want)
	}
	// The GTID position and the server identity are kept.
	in.GTID, in.Server = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-56,c1a1b5a0-0000-11ef-8000-000000000001:7", "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	if got := writeRead(t, in); got.GTID != in.GTID || got.Server != in.Server || got.Pos().GTID != in.GTID {
		t.Errorf("Read = %+v, want GTID %q, Server %q", got, in.GTID, in.Server)
	}
	// A nil watermark (nothing copied yet) stays nil, not an empty key.
	got = writeRead(t, State{Key: []string{"id"}})
	if got.Watermark != nil {
		t.Errorf("nil watermark read back as %#v", got.Watermark)
	}
}

// TestReadVersion1: a checkpoint written before GTID positions (format 1)
// is read; it has no GTIDs, so it resumes by file+offset.
func TestReadVersion1(t *testing.T) {
	f := &fake{row: ptr(`{"version":1,"alter":"ADD COLUMN x INT","key":["id"],"copy_done":false,"file":"bin.000007","offset":9876,"copied_rows":5}`)}
	got, err := Read(context.Background(), f.open(t), "s", "t")
	if err != nil {
		t.Fatal(err)
	}
	if want := (binlog.Position{File: "bin.000007", Offset: 9876}); got.Pos() != want || got.Version != 1 || got.Server != "" {
		t.Errorf("Read = %+v (Pos %v), want version 1 at %v without GTIDs", got, got.Pos(), want)
	}
}

func TestReadErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		row   *string
		err   error
		check func(error) bool
	}{
		{"no row", nil, nil, func(err error) bool { return errors.Is(err, ErrNone) }},
		{"no table", nil, &mysql.MySQLError{Number: 1146, Message: "Table 's._t_chk' doesn't exist"},
			func(err error) bool { return errors.Is(err, ErrNone) }},
		{"other server error", nil, &mysql.MySQLError{Number: 1045, Message: "denied"},
			func(err error) bool {
				return err != nil && !errors.Is(err, ErrNone) && strings.Contains(err.Error(), "read the checkpoint")
			}},
		{"malformed JSON", ptr(`{"version":1,`), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "unreadable") }},
		{"wrong type", ptr(`{"version":1,"offset":"x"}`), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "unreadable") }},
		{"not base64", ptr(`{"version":1,"watermark":["%%%"]}`), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "unreadable") }},
		{"old format", ptr(`{"version":0}`), nil,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "has format 0") }},
		{"newer format", ptr(fmt.Sprintf(`{"version":%d,"alter":"x"}`, Version+1)), nil,
			func(err error) bool {
				return err != nil && strings.Contains(err.Error(), fmt.Sprintf("has format %d", Version+1))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{row: c.row, err: c.err}
			db := f.open(t)
			_, err := Read(ctx, db, "s", "t")
			if !c.check(err) {
				t.Errorf("Read: unexpected error %v", err)
			}
			if !strings.Contains(f.lastQuery(), "`s`.`_t_chk`") {
				t.Errorf("Read queried %q", f.lastQuery())
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	f := &fake{err: &mysql.MySQLError{Number: 1146, Message: "gone"}}
	err := Write(context.Background(), f.open(t), "s", "t", State{})
	if dbErr := (*mysql.MySQLError)(nil); !errors.As(err, &dbErr) || dbErr.Number != 1146 {
		t.Errorf("Write error %v does not wrap the server error", err)
	}
	if !strings.Contains(f.lastQuery(), "REPLACE INTO `s`.`_t_chk`") {
		t.Errorf("Write ran %q", f.lastQuery())
	}
}

func ptr(s string) *string { return &s }

// writeRead writes s through Write into a fake database and reads it back
// through Read.
func writeRead(t *testing.T, s State) State {
	t.Helper()
	ctx := context.Background()
	f := &fake{}
	db := f.open(t)
	if err := Write(ctx, db, "s", "t", s); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := Read(ctx, db, "s", "t")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return got
}

// fake is a database/sql driver holding one checkpoint row: Exec stores its
// first argument as the row, Query returns it. err, if set, is what every
// statement fails with.
type fake struct {
	mu      sync.Mutex
	row     *string
	err     error
	queries []string
}

func (f *fake) open(t *testing.T) *sql.DB {
	db := sql.OpenDB(fakeConnector{f})
	t.Cleanup(func() { db.Close() })
	return db
}

func (f *fake) lastQuery() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queries) == 0 {
		return ""
	}
	return f.queries[len(f.queries)-1]
}

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type fakeConnector struct{ f *fake }

func (c fakeConnector) Connect(context.Context) (driver.Conn, error) { return &fakeConn{c.f}, nil }
func (fakeConnector) Driver() driver.Driver                          { return fakeDriver{} }

type fakeConn struct{ f *fake }

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("not supported") }

func (c *fakeConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, f.err
	}
	if len(args) != 1 {
		return nil, errors.New("fake: want one argument")
	}
	s, ok := args[0].Value.(string)
	if !ok {
		return nil, errors.New("fake: want a string argument")
	}
	f.row = &s
	return driver.RowsAffected(1), nil
}

func (c *fakeConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, f.err
	}
	r := &fakeRows{}
	if f.row != nil {
		r.vals = []string{*f.row}
	}
	return r, nil
}

type fakeRows struct{ vals []string }

func (*fakeRows) Columns() []string { return []string{"state"} }
func (*fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.vals) == 0 {
		return io.EOF
	}
	dest[0] = r.vals[0]
	r.vals = r.vals[1:]
	return nil
}
