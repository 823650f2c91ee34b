// Package table reads a table's definition (columns, keys, estimates) from
// information_schema and answers questions about it: which key can chunk and
// identify rows, which columns are generated, how a column's binlog value must
// be interpreted.
package table

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Querier is what Load needs: *sql.DB, *sql.Conn and *sql.Tx all satisfy it.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Column is one column of a table, in ordinal order.
type Column struct {
	Name          string
	DataType      string // lower case: int, varchar, enum, ...
	ColumnType    string // full type: "int(10) unsigned", "enum('a','b')"
	Nullable      bool
	Unsigned      bool
	Charset       string // empty for non-character columns
	Collation     string
	Generated     bool     // VIRTUAL or STORED generated column: never written
	Virtual       bool     // VIRTUAL generated column: MariaDB 11.x leaves it out of FULL row images
	AutoIncrement bool     // the table's AUTO_INCREMENT column
	Elements      []string // ENUM / SET members in declaration order
}

// Index is one index; Columns are in key order.
type Index struct {
	Name string
	// Unique: a unique index over whole columns (one that can identify rows).
	Unique bool
	// Enforced: the server enforces uniqueness (Unique, or a unique index
	// over column prefixes: it rejects duplicates without identifying rows).
	Enforced bool
	Columns  []string
	// Shape is what SHOW INDEX says of each part besides its column: the
	// prefix length, the order (A/D), the index type and a functional
	// part's expression ("16/A/BTREE/;" per part). Two indexes over the
	// same columns with different shapes are different indexes.
	Shape string
}

// Table is a table's definition as the server reports it.
type Table struct {
	Schema      string
	Name        string
	Engine      string
	TableType   string // BASE TABLE, VIEW, SYSTEM VERSIONED
	Columns     []Column
	Indexes     []Index // PRIMARY first, then by name
	RowEstimate int64
}

// ErrNotFound means the table does not exist.
var ErrNotFound = errors.New("table not found")

// Load reads schema.name's definition.
func Load(ctx context.Context, q Querier, schema, name string) (*Table, error) {
	t := &Table{Schema: schema, Name: name}
	if err := t.loadSummary(ctx, q); err != nil {
		return nil, err
	}
	if err := t.loadColumns(ctx, q); err != nil {
		return nil, err
	}
	if err := t.loadIndexes(ctx, q); err != nil {
		return nil, err
	}
	return t, nil
}

// LoadTemporary reads a temporary table of the session q (information_schema
// does not list temporary tables on MariaDB 10.11).
func LoadTemporary(ctx context.Context, q Querier, schema, name string) (*Table, error) {
	t := &Table{Schema: schema, Name: name, Engine: "InnoDB", TableType: "TEMPORARY"}
	if err := t.loadColumns(ctx, q); err != nil {
		return nil, err
	}
	if err := t.loadIndexes(ctx, q); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) loadSummary(ctx context.Context, q Querier) error {
	schema, name := t.Schema, t.Name
	var engine sql.NullString
	var rows sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT ENGINE, TABLE_TYPE, TABLE_ROWS FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, name).Scan(&engine, &t.TableType, &rows)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s.%s", ErrNotFound, schema, name)
	}
	if err != nil {
		return fmt.Errorf("read %s.%s from information_schema.TABLES: %w", schema, name, err)
	}
	t.Engine, t.RowEstimate = engine.String, rows.Int64
	return nil
}

func (t *Table) loadColumns(ctx context.Context, q Querier) error {
	// SHOW FULL COLUMNS (not information_schema) so that temporary tables,
	// used by the dry run, can be read too.
	rs, err := q.QueryContext(ctx, "SHOW FULL COLUMNS FROM "+t.QuotedName())
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", t.QuotedName(), err)
	}
	defer rs.Close()
	for rs.Next() {
		var c Column
		var collation, def, key, privileges, comment sql.NullString
		var nullable, extra string
		if err := rs.Scan(&c.Name, &c.ColumnType, &collation, &nullable, &key, &def, &extra, &privileges, &comment); err != nil {
			return fmt.Errorf("read columns of %s: %w", t.QuotedName(), err)
		}
		c.DataType = strings.ToLower(c.ColumnType)
		if i := strings.IndexAny(c.DataType, "( "); i >= 0 {
			c.DataType = c.DataType[:i]
		}
		c.Nullable = nullable == "YES"
		c.Unsigned = strings.Contains(strings.ToLower(c.ColumnType), "unsigned")
		if collation.Valid && collation.String != "binary" {
			c.Collation = collation.String
			c.Charset, _, _ = strings.Cut(collation.String, "_")
		}
		c.Generated = GeneratedExtra(extra)
		extra = strings.ToUpper(extra)
		c.Virtual = c.Generated && strings.Contains(extra, "VIRTUAL")
		c.AutoIncrement = strings.Contains(extra, "AUTO_INCREMENT")
		if c.DataType == "enum" || c.DataType == "set" {
			c.Elements = parseElements(c.ColumnType)
		}
		t.Columns = append(t.Columns, c)
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("read columns of %s: %w", t.QuotedName(), err)
	}
	return nil
}

// GeneratedExtra reports whether a column whose SHOW COLUMNS Extra is
// extra is a generated column ("VIRTUAL GENERATED", "STORED GENERATED";
// MariaDB also "PERSISTENT GENERATED"). MySQL marks a column whose DEFAULT
// is an expression, CURRENT_TIMESTAMP included, "DEFAULT_GENERATED": that is
// a plain column, whose values must be copied.
func GeneratedExtra(extra string) bool {
	for _, w := range strings.Fields(strings.ToUpper(extra)) {
		if w == "GENERATED" {
			return true
		}
	}
	return false
}

func (t *Table) loadIndexes(ctx context.Context, q Querier) error {
	rs, err := q.QueryContext(ctx, "SHOW INDEX FROM "+t.QuotedName())
	if err != nil {
		return fmt.Errorf("read indexes of %s: %w", t.QuotedName(), err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return err
	}
	byName := map[string]int{}
	partial := map[string]bool{}
	for rs.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return fmt.Errorf("read indexes of %s: %w", t.QuotedName(), err)
		}
		get := func(name string) sql.NullString {
			for i, c := range cols {
				if strings.EqualFold(c, name) {
					return vals[i]
				}
			}
			return sql.NullString{}
		}
		name := get("Key_name").String
		i, ok := byName[name]
		if !ok {
			i = len(t.Indexes)
			byName[name] = i
			u := get("Non_unique").String == "0"
			t.Indexes = append(t.Indexes, Index{Name: name, Unique: u, Enforced: u})
		}
		if get("Sub_part").Valid {
			partial[name] = true // a prefix index cannot identify rows
		}
		t.Indexes[i].Columns = append(t.Indexes[i].Columns, get("Column_name").String)
		t.Indexes[i].Shape += get("Sub_part").String + "/" + get("Collation").String + "/" + get("Index_type").String + "/" + get("Expression").String + ";"
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("read indexes of %s: %w", t.QuotedName(), err)
	}
	for i := range t.Indexes {
		if partial[t.Indexes[i].Name] {
			t.Indexes[i].Unique = false
		}
	}
	// PRIMARY first (SHOW INDEX already lists it first; keep that explicit).
	sort.SliceStable(t.Indexes, func(a, b int) bool {
		return t.Indexes[a].Name == "PRIMARY" && t.Indexes[b].Name != "PRIMARY"
	})
	return nil
}

// parseElements returns the members of an ENUM or SET column type, unquoting
// doubled quotes and the server's backslash escapes: the server prints a
// member's NUL, newline, carriage return and Ctrl-Z as \0, \n, \r and \Z
// (a member 'a\nb' read as "anb" was another member, or none).
func parseElements(columnType string) []string {
	open := strings.IndexByte(columnType, '(')
	end := strings.LastIndexByte(columnType, ')')
	if open < 0 || end <= open {
		return nil
	}
	s := columnType[open+1 : end]
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case !in && ch == '\'':
			in = true
			cur.Reset()
		case in && ch == '\'' && i+1 < len(s) && s[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case in && ch == '\\' && i+1 < len(s):
			switch e := s[i+1]; e {
			case '0':
				cur.WriteByte(0)
			case 'n':
				cur.WriteByte('\n')
			case 'r':
				cur.WriteByte('\r')
			case 'Z':
				cur.WriteByte(0x1a)
			default:
				cur.WriteByte(e)
			}
			i++
		case in && ch == '\'':
			in = false
			out = append(out, cur.String())
		case in:
			cur.WriteByte(ch)
		}
	}
	return out
}

// QuotedName is `schema`.`name`.
func (t *Table) QuotedName() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

// ColumnIndex returns the ordinal (0-based) of the named column, matched
// case-insensitively as MariaDB does, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// PrimaryKey returns the PRIMARY index or nil.
func (t *Table) PrimaryKey() *Index {
	for i := range t.Indexes {
		if t.Indexes[i].Name == "PRIMARY" {
			return &t.Indexes[i]
		}
	}
	return nil
}

// IdentifyingKeys returns the unique keys whose columns are all NOT NULL and
// not generated, PRIMARY first: the keys that can chunk the table and identify
// a row by value.
func (t *Table) IdentifyingKeys() []Index {
	var out []Index
	for _, ix := range t.Indexes {
		if !ix.Unique {
			continue
		}
		ok := true
		for _, c := range ix.Columns {
			i := t.ColumnIndex(c)
			if i < 0 || t.Columns[i].Nullable || t.Columns[i].Generated {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, ix)
		}
	}
	return out
}

// QuoteIdent quotes an identifier with backticks.
func QuoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// QuoteIdents quotes and joins identifiers with ", ".
func QuoteIdents(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// CollationSensitive reports whether values of this column that differ in
// bytes can still be equal to the server: every character column except those
// with a *_nopad_bin collation ('A' = 'a' under *_ci; 'x' = 'x ' under PAD
// SPACE, which all other collations, *_bin included, use).
func (c Column) CollationSensitive() bool {
	return c.Charset != "" && !strings.HasSuffix(c.Collation, "_nopad_bin")
}

// Exists reports whether schema.name exists (any table type), and its comment.
func Exists(ctx context.Context, q Querier, schema, name string) (bool, string, error) {
	var comment string
	err := q.QueryRowContext(ctx, `SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		schema, name).Scan(&comment)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("look for %s.%s: %w", schema, name, err)
	}
	return true, comment, nil
}
