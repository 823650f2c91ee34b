package binlog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/recast-osc/recast/internal/table"
)

// valueKind is how a column's binlog value is normalised.
type valueKind uint8

const (
	kindSigned valueKind = iota + 1
	kindUnsigned
	kindDecimal
	kindFloat
	kindDouble
	kindBit
	kindYear
	kindTemporal // DATE, TIME, DATETIME, TIMESTAMP: go-mysql's string
	kindEnum
	kindSet
	kindBytes  // character, binary, BLOB/TEXT, JSON, geometry
	kindBinary // BINARY(n): the binlog drops trailing 0x00 bytes; padded back
	kindJSON   // JSON: text on MariaDB (as kindBytes), binary on MySQL (JSONExpr)
)

// column is a column of the watched table prepared for decoding.
type column struct {
	def    table.Column
	kind   valueKind
	binTyp []byte // binlog column types (table map) it may have
	padTo  int    // kindBinary: declared length in bytes
}

// ErrUnsupportedType means the table has a column whose binlog value this
// package cannot turn back into a value that writes the same data.
var ErrUnsupportedType = errors.New("unsupported column type")

// CheckTable reports whether every column of t can be streamed: it returns
// an error wrapping ErrUnsupportedType naming the columns that cannot (for
// example MariaDB's UUID, INET4 and INET6, whose binlog form is their storage
// form, not a value that can be written back).
func CheckTable(t *table.Table) error {
	_, err := prepareColumns(t)
	return err
}

func prepareColumns(t *table.Table) ([]column, error) {
	if t == nil || len(t.Columns) == 0 {
		return nil, errors.New("binlog: no table definition (Config.Table has no columns)")
	}
	cols := make([]column, len(t.Columns))
	var bad []string
	for i, c := range t.Columns {
		col := column{def: c}
		switch c.DataType {
		case "tinyint", "bool", "boolean":
			col.kind, col.binTyp = intKind(c), []byte{mysql.MYSQL_TYPE_TINY}
		case "smallint":
			col.kind, col.binTyp = intKind(c), []byte{mysql.MYSQL_TYPE_SHORT}
		case "mediumint":
			col.kind, col.binTyp = intKind(c), []byte{mysql.MYSQL_TYPE_INT24}
		case "int", "integer":
			col.kind, col.binTyp = intKind(c), []byte{mysql.MYSQL_TYPE_LONG}
		case "bigint":
			col.kind, col.binTyp = intKind(c), []byte{mysql.MYSQL_TYPE_LONGLONG}
		case "decimal", "numeric", "dec", "fixed":
			col.kind, col.binTyp = kindDecimal, []byte{mysql.MYSQL_TYPE_NEWDECIMAL}
		case "float":
			col.kind, col.binTyp = kindFloat, []byte{mysql.MYSQL_TYPE_FLOAT}
		case "double", "real", "double precision":
			col.kind, col.binTyp = kindDouble, []byte{mysql.MYSQL_TYPE_DOUBLE}
		case "bit":
			col.kind, col.binTyp = kindBit, []byte{mysql.MYSQL_TYPE_BIT}
		case "year":
			col.kind, col.binTyp = kindYear, []byte{mysql.MYSQL_TYPE_YEAR}
		case "date":
			col.kind, col.binTyp = kindTemporal, []byte{mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_NEWDATE}
		case "time":
			col.kind, col.binTyp = kindTemporal, []byte{mysql.MYSQL_TYPE_TIME2, mysql.MYSQL_TYPE_TIME}
		case "datetime":
			col.kind, col.binTyp = kindTemporal, []byte{mysql.MYSQL_TYPE_DATETIME2, mysql.MYSQL_TYPE_DATETIME}
		case "timestamp":
			col.kind, col.binTyp = kindTemporal, []byte{mysql.MYSQL_TYPE_TIMESTAMP2, mysql.MYSQL_TYPE_TIMESTAMP}
		case "enum":
			col.kind, col.binTyp = kindEnum, []byte{mysql.MYSQL_TYPE_ENUM}
		case "set":
			col.kind, col.binTyp = kindSet, []byte{mysql.MYSQL_TYPE_SET}
		case "char":
			col.kind, col.binTyp = kindBytes, []byte{mysql.MYSQL_TYPE_STRING}
		case "binary":
			col.kind, col.binTyp = kindBinary, []byte{mysql.MYSQL_TYPE_STRING}
			n, ok := typeLength(c.ColumnType)
			if !ok {
				n = 1 // BINARY means BINARY(1)
			}
			col.padTo = n
		case "varchar", "varbinary":
			col.kind, col.binTyp = kindBytes, []byte{mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING}
		case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
			col.kind, col.binTyp = kindBytes, []byte{mysql.MYSQL_TYPE_BLOB}
		case "json":
			col.kind, col.binTyp = kindJSON, []byte{mysql.MYSQL_TYPE_BLOB, mysql.MYSQL_TYPE_JSON}
		case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
			"multipolygon", "geometrycollection":
			col.kind, col.binTyp = kindBytes, []byte{mysql.MYSQL_TYPE_GEOMETRY}
		default:
			bad = append(bad, fmt.Sprintf("%s (%s)", c.Name, c.ColumnType))
			continue
		}
		if (col.kind == kindEnum || col.kind == kindSet) && len(c.Elements) == 0 {
			bad = append(bad, fmt.Sprintf("%s (%s: no members)", c.Name, c.ColumnType))
			continue
		}
		cols[i] = col
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w in %s: %s", ErrUnsupportedType, t.QuotedName(), strings.Join(bad, ", "))
	}
	return cols, nil
}

func intKind(c table.Column) valueKind {
	if c.Unsigned {
		return kindUnsigned
	}
	return kindSigned
}

// typeLength returns n of "binary(n)".
func typeLength(columnType string) (int, bool) {
	open := strings.IndexByte(columnType, '(')
	end := strings.IndexByte(columnType, ')')
	if open < 0 || end <= open+1 {
		return 0, false
	}
	n, err := strconv.Atoi(columnType[open+1 : end])
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// realType is the column's type in the table map, with ENUM and SET (logged
// as MYSQL_TYPE_STRING with the real type in the metadata) told apart.
func realType(tm *replication.TableMapEvent, i int) byte {
	switch {
	case tm.IsEnumColumn(i):
		return mysql.MYSQL_TYPE_ENUM
	case tm.IsSetColumn(i):
		return mysql.MYSQL_TYPE_SET
	}
	return tm.ColumnType[i]
}

// checkTableMap verifies that the table map describes the table definition
// we decode with: same column count and a binlog type per column that fits
// the column's declared type.
func checkTableMap(tm *replication.TableMapEvent, cols []column) error {
	if int(tm.ColumnCount) != len(cols) || len(tm.ColumnType) != len(cols) {
		return fmt.Errorf("%w: the binlog has %d columns for %s.%s, its definition %d",
			ErrSchemaChanged, tm.ColumnCount, tm.Schema, tm.Table, len(cols))
	}
	for i, c := range cols {
		rt := realType(tm, i)
		ok := false
		for _, t := range c.binTyp {
			if rt == t {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("%w: column %d (%s %s) of %s.%s has binlog type %d",
				ErrSchemaChanged, i+1, c.def.Name, c.def.ColumnType, tm.Schema, tm.Table, rt)
		}
	}
	return nil
}

// fullImage reports whether bitmap has the bit of every column of cols set,
// VIRTUAL generated columns excepted.
func fullImage(bitmap []byte, cols []column) bool {
	n := len(cols)
	if len(bitmap) < (n+7)/8 {
		return false
	}
	for i := 0; i < n; i++ {
		if bitmap[i>>3]&(1<<(uint(i)&7)) == 0 && !cols[i].def.Virtual {
			return false
		}
	}
	return true
}

// normaliseRow turns go-mysql's decoded row into the values documented on
// RowChange.
func normaliseRow(row []any, cols []column) ([]any, error) {
	if len(row) != len(cols) {
		return nil, fmt.Errorf("%w: row has %d values, the table %d columns", ErrSchemaChanged, len(row), len(cols))
	}
	out := make([]any, len(row))
	for i, v := range row {
		if v == nil {
			continue
		}
		nv, err := normalise(v, &cols[i])
		if err != nil {
			return nil, fmt.Errorf("column %s (%s): %w", cols[i].def.Name, cols[i].def.ColumnType, err)
		}
		out[i] = nv
	}
	return out, nil
}

func normalise(v any, c *column) (any, error) {
	switch c.kind {
	case kindSigned:
		switch x := v.(type) {
		case int8:
			return int64(x), nil
		case int16:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		}
	case kindUnsigned:
		// go-mysql reads every integer as signed of the column's width.
		switch x := v.(type) {
		case int8:
			return uint64(uint8(x)), nil
		case int16:
			return uint64(uint16(x)), nil
		case int32:
			if c.def.DataType == "mediumint" {
				return uint64(uint32(x) & 0xFFFFFF), nil
			}
			return uint64(uint32(x)), nil
		case int64:
			return uint64(x), nil
		}
	case kindDecimal, kindTemporal:
		if x, ok := v.(string); ok {
			return x, nil
		}
	case kindFloat:
		if x, ok := v.(float32); ok {
			return x, nil
		}
	case kindDouble:
		if x, ok := v.(float64); ok {
			return x, nil
		}
	case kindBit:
		if x, ok := v.(int64); ok {
			return uint64(x), nil
		}
	case kindYear:
		if x, ok := v.(int); ok {
			return int64(x), nil
		}
	case kindEnum:
		if x, ok := v.(int64); ok {
			switch {
			case x == 0:
				return "", nil // the '' error value
			case x > 0 && x <= int64(len(c.def.Elements)):
				return c.def.Elements[x-1], nil
			}
			return nil, fmt.Errorf("ENUM index %d out of range (%d members)", x, len(c.def.Elements))
		}
	case kindSet:
		if x, ok := v.(int64); ok {
			bits := uint64(x)
			if n := len(c.def.Elements); n < 64 && bits>>uint(n) != 0 {
				return nil, fmt.Errorf("SET value %#x has bits beyond its %d members", bits, n)
			}
			var members []string
			for i, m := range c.def.Elements {
				if i < 64 && bits&(1<<uint(i)) != 0 {
					members = append(members, m)
				}
			}
			return strings.Join(members, ","), nil
		}
	case kindJSON:
		if x, ok := v.(binaryJSON); ok {
			return JSONExpr(x)
		}
		c2 := *c
		c2.kind = kindBytes
		return normalise(v, &c2)
	case kindBytes, kindBinary:
		var b []byte
		switch x := v.(type) {
		case string:
			b = []byte(x)
		case []byte:
			b = append([]byte{}, x...)
		default:
			return nil, fmt.Errorf("unexpected binlog value of type %T", v)
		}
		if b == nil {
			b = []byte{} // nil would be written as NULL
		}
		if c.kind == kindBinary && len(b) < c.padTo {
			b = append(b, make([]byte, c.padTo-len(b))...)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unexpected binlog value of type %T", v)
}
