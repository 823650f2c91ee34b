package binlog

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// MySQL logs a JSON column in its binary JSON format, which keeps scalar
// types that JSON text cannot carry: INTEGER and UNSIGNED INTEGER of any
// value (parsing text yields UNSIGNED only above 2^32-1), DECIMAL with its
// scale ("1.50"), DATE, TIME and DATETIME. Written back as text (what
// go-mysql decodes it to), a row would differ from what the server's own
// ALTER keeps. So the binary value is read raw (readRawJSON) and rebuilt as
// an SQL expression of the same value and types (JSONExpr): JSON_OBJECT and
// JSON_ARRAY of typed scalars. MariaDB's JSON is LONGTEXT: its values are
// text and stay []byte.

// SQLExpr is a value that is an SQL expression producing the column's value;
// it is written into the statement in place of a placeholder, not as a
// quoted literal. The binlog package builds it only from decoded data with
// hex string literals and formatted numbers: it never contains user text
// verbatim.
type SQLExpr string

// ErrJSONValue means a MySQL binary JSON value holds a scalar recast cannot
// rebuild with its exact type.
var ErrJSONValue = errors.New("JSON value recast cannot rebuild exactly")

// binaryJSON marks a JSON column's raw binary value (readRawJSON) until
// normalise turns it into an SQLExpr.
type binaryJSON []byte

// readRawJSON decodes the rows of re with every MYSQL_TYPE_JSON column read
// as its raw binary form (go-mysql's decoding to text loses the scalar
// types), each value marked binaryJSON.
func readRawJSON(re *replication.RowsEvent, pos int, data []byte) error {
	tm := re.Table
	if tm == nil {
		return re.DecodeData(pos, data)
	}
	var js []int
	for i, t := range tm.ColumnType {
		if t == mysql.MYSQL_TYPE_JSON {
			js = append(js, i)
		}
	}
	if len(js) == 0 {
		return re.DecodeData(pos, data)
	}
	// A BLOB has the same wire form (length of meta bytes, then the data).
	raw := *tm
	raw.ColumnType = slices.Clone(tm.ColumnType)
	for _, i := range js {
		raw.ColumnType[i] = mysql.MYSQL_TYPE_BLOB
	}
	re.Table = &raw
	err := re.DecodeData(pos, data)
	re.Table = tm
	if err != nil {
		return err
	}
	for _, row := range re.Rows {
		for _, i := range js {
			if i < len(row) {
				if b, ok := row[i].([]byte); ok {
					row[i] = binaryJSON(b)
				}
			}
		}
	}
	return nil
}

// Binary JSON value types (MySQL sql-common/json_binary.h).
const (
	jsonSmallObject = 0x00
	jsonLargeObject = 0x01
	jsonSmallArray  = 0x02
	jsonLargeArray  = 0x03
	jsonLiteral     = 0x04
	jsonInt16       = 0x05
	jsonUint16      = 0x06
	jsonInt32       = 0x07
	jsonUint32      = 0x08
	jsonInt64       = 0x09
	jsonUint64      = 0x0a
	jsonDouble      = 0x0b
	jsonString      = 0x0c
	jsonOpaque      = 0x0f

	jsonNull  = 0x00
	jsonTrue  = 0x01
	jsonFalse = 0x02
)

// JSONExpr rebuilds a MySQL binary JSON document as an SQL expression of
// type JSON with the same value and scalar types. An empty document is the
// JSON null literal (MySQL's own reading of it).
func JSONExpr(doc []byte) (SQLExpr, error) {
	if len(doc) == 0 {
		return "CAST('null' AS JSON)", nil
	}
	var b strings.Builder
	d := jsonDecoder{out: &b}
	typ, body := doc[0], doc[1:]
	switch typ {
	case jsonSmallObject, jsonLargeObject, jsonSmallArray, jsonLargeArray:
		d.value(typ, body, 0)
	case jsonLiteral:
		if len(body) < 1 {
			return "", fmt.Errorf("%w: truncated literal", ErrJSONValue)
		}
		d.literal(body[0])
	default:
		// A scalar document: JSON_EXTRACT of a one-element array gives it
		// the JSON type (a bare string would be parsed as JSON text).
		b.WriteString("JSON_EXTRACT(JSON_ARRAY(")
		d.value(typ, body, 0)
		b.WriteString("), '$[0]')")
	}
	if d.err != nil {
		return "", d.err
	}
	return SQLExpr(b.String()), nil
}

type jsonDecoder struct {
	out *strings.Builder
	err error
}

func (d *jsonDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrJSONValue}, args...)...)
	}
}

// value writes the SQL expression of the value of type typ whose data
// starts at data[0] (for containers: the container; for scalars: the value).
func (d *jsonDecoder) value(typ byte, data []byte, depth int) {
	if d.err != nil {
		return
	}
	if depth > 200 {
		d.fail("nested deeper than 200 levels")
		return
	}
	w := d.out
	switch typ {
	case jsonSmallObject, jsonLargeObject:
		d.container(data, typ == jsonLargeObject, true, depth)
	case jsonSmallArray, jsonLargeArray:
		d.container(data, typ == jsonLargeArray, false, depth)
	case jsonLiteral:
		if len(data) < 1 {
			d.fail("truncated literal")
			return
		}
		d.literal(data[0])
	case jsonInt16:
		if !d.need(data, 2) {
			return
		}
		w.WriteString(strconv.FormatInt(int64(int16(binary.LittleEndian.Uint16(data))), 10))
	case jsonUint16:
		if !d.need(data, 2) {
			return
		}
		fmt.Fprintf(w, "CAST(%d AS UNSIGNED)", binary.LittleEndian.Uint16(data))
	case jsonInt32:
		if !d.need(data, 4) {
			return
		}
		w.WriteString(strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(data))), 10))
	case jsonUint32:
		if !d.need(data, 4) {
			return
		}
		fmt.Fprintf(w, "CAST(%d AS UNSIGNED)", binary.LittleEndian.Uint32(data))
	case jsonInt64:
		if !d.need(data, 8) {
			return
		}
		v := int64(binary.LittleEndian.Uint64(data))
		if v == math.MinInt64 {
			// -9223372036854775808 as a literal is minus an unsigned value.
			w.WriteString("CAST(-9223372036854775807 - 1 AS SIGNED)")
			return
		}
		w.WriteString(strconv.FormatInt(v, 10))
	case jsonUint64:
		if !d.need(data, 8) {
			return
		}
		fmt.Fprintf(w, "CAST(%d AS UNSIGNED)", binary.LittleEndian.Uint64(data))
	case jsonDouble:
		if !d.need(data, 8) {
			return
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(data))
		if math.IsInf(f, 0) || math.IsNaN(f) {
			d.fail("double %v", f)
			return
		}
		// An exponent makes the literal a DOUBLE; 'e' with -1 digits
		// round-trips exactly.
		w.WriteString(strconv.FormatFloat(f, 'e', -1, 64))
	case jsonString:
		n, k := d.varLen(data)
		if d.err != nil || !d.need(data, k+n) {
			return
		}
		writeUTF8(w, data[k:k+n])
	case jsonOpaque:
		d.opaque(data)
	default:
		d.fail("unknown binary JSON type %#x", typ)
	}
}

func (d *jsonDecoder) literal(l byte) {
	switch l {
	case jsonNull:
		d.out.WriteString("CAST('null' AS JSON)")
	case jsonTrue:
		d.out.WriteString("CAST('true' AS JSON)")
	case jsonFalse:
		d.out.WriteString("CAST('false' AS JSON)")
	default:
		d.fail("unknown literal %#x", l)
	}
}

func writeUTF8(w *strings.Builder, s []byte) {
	if len(s) == 0 {
		w.WriteString("_utf8mb4''")
		return
	}
	w.WriteString("_utf8mb4 X'")
	w.WriteString(hex.EncodeToString(s))
	w.WriteString("'")
}

func (d *jsonDecoder) need(data []byte, n int) bool {
	if n < 0 || len(data) < n {
		d.fail("truncated value")
		return false
	}
	return true
}

// varLen reads a length of 7 bits per byte, low bits first.
func (d *jsonDecoder) varLen(data []byte) (n, k int) {
	for k = 0; k < 5; k++ {
		if k >= len(data) {
			d.fail("truncated length")
			return 0, 0
		}
		n |= int(data[k]&0x7f) << (7 * k)
		if data[k]&0x80 == 0 {
			return n, k + 1
		}
	}
	d.fail("length too long")
	return 0, 0
}

// container writes JSON_OBJECT(key, value, ...) or JSON_ARRAY(value, ...).
func (d *jsonDecoder) container(data []byte, large, object bool, depth int) {
	size := 2
	if large {
		size = 4
	}
	u := func(b []byte) int {
		if large {
			return int(binary.LittleEndian.Uint32(b))
		}
		return int(binary.LittleEndian.Uint16(b))
	}
	if !d.need(data, 2*size) {
		return
	}
	count, total := u(data), u(data[size:])
	if !d.need(data, total) {
		return
	}
	data = data[:total]
	keyEntry := 0
	if object {
		keyEntry = size + 2
	}
	valueEntry := 1 + size
	hdr := 2*size + count*(keyEntry+valueEntry)
	if count < 0 || !d.need(data, hdr) {
		return
	}
	if object {
		d.out.WriteString("JSON_OBJECT(")
	} else {
		d.out.WriteString("JSON_ARRAY(")
	}
	for i := 0; i < count && d.err == nil; i++ {
		if i > 0 {
			d.out.WriteString(", ")
		}
		if object {
			ke := data[2*size+i*keyEntry:]
			off, n := u(ke), int(binary.LittleEndian.Uint16(ke[size:]))
			if !d.need(data, off+n) {
				return
			}
			writeUTF8(d.out, data[off:off+n])
			d.out.WriteString(", ")
		}
		ve := data[2*size+count*keyEntry+i*valueEntry:]
		typ := ve[0]
		if inlined(typ, large) {
			d.value(typ, ve[1:1+size], depth+1)
			continue
		}
		off := u(ve[1:])
		if !d.need(data, off) {
			return
		}
		d.value(typ, data[off:], depth+1)
	}
	d.out.WriteString(")")
}

// inlined reports whether a value of typ sits in its value entry.
func inlined(typ byte, large bool) bool {
	switch typ {
	case jsonLiteral, jsonInt16, jsonUint16:
		return true
	case jsonInt32, jsonUint32:
		return large
	}
	return false
}

// opaque writes a typed scalar: DECIMAL, DATE, TIME, DATETIME.
func (d *jsonDecoder) opaque(data []byte) {
	if !d.need(data, 1) {
		return
	}
	ft := data[0]
	n, k := d.varLen(data[1:])
	if d.err != nil || !d.need(data, 1+k+n) {
		return
	}
	v := data[1+k : 1+k+n]
	switch ft {
	case mysql.MYSQL_TYPE_NEWDECIMAL:
		if len(v) < 2 {
			d.fail("truncated DECIMAL")
			return
		}
		s, err := decodeDecimal(v[2:], int(v[0]), int(v[1]))
		if err != nil {
			d.fail("%v", err)
			return
		}
		// The binary form's precision follows the value (it can exceed
		// the declared one by a digit group's rounding: 66 for a full
		// DECIMAL(65,30)); the CAST only needs room for the digits.
		fmt.Fprintf(d.out, "CAST('%s' AS DECIMAL(%d,%d))", s, min(int(v[0]), 65), v[1])
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME:
		if !d.need(v, 8) {
			return
		}
		dt := packedDatetime(int64(binary.LittleEndian.Uint64(v)))
		if ft == mysql.MYSQL_TYPE_DATE {
			fmt.Fprintf(d.out, "CAST('%s' AS DATE)", dt[:10])
		} else {
			fmt.Fprintf(d.out, "CAST('%s' AS DATETIME(6))", dt)
		}
	case mysql.MYSQL_TYPE_TIME:
		if !d.need(v, 8) {
			return
		}
		fmt.Fprintf(d.out, "CAST('%s' AS TIME(6))", packedTime(int64(binary.LittleEndian.Uint64(v))))
	default:
		// TIMESTAMP, binary strings, BIT, GEOMETRY, YEAR...: no SQL
		// expression is known to give the same opaque type.
		d.fail("a JSON scalar of MySQL field type %d (opaque) inside a JSON document", ft)
	}
}

// packedDatetime renders MySQL's packed DATETIME (and DATE) as
// "YYYY-MM-DD hh:mm:ss.ffffff".
func packedDatetime(v int64) string {
	if v < 0 {
		v = -v
	}
	frac := v % (1 << 24)
	ip := v >> 24
	ymd, hms := ip>>17, ip%(1<<17)
	ym := ymd >> 5
	return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d", ym/13, ym%13, ymd%(1<<5), hms>>12, (hms>>6)%(1<<6), hms%(1<<6), frac)
}

// packedTime renders MySQL's packed TIME as "[-]hh:mm:ss.ffffff".
func packedTime(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	frac := v % (1 << 24)
	ip := v >> 24
	return fmt.Sprintf("%s%02d:%02d:%02d.%06d", sign, (ip>>12)%(1<<10), (ip>>6)%(1<<6), ip%(1<<6), frac)
}

var digBytes = [10]int{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}

// decodeDecimal renders MySQL's binary DECIMAL(precision, scale) exactly,
// e.g. "-12.340".
func decodeDecimal(b []byte, precision, scale int) (string, error) {
	if precision <= 0 || precision > 81 || scale < 0 || scale > precision {
		return "", fmt.Errorf("DECIMAL(%d,%d) out of range", precision, scale)
	}
	intg := precision - scale
	intg0, intgx := intg/9, intg%9
	frac0, fracx := scale/9, scale%9
	size := digBytes[intgx] + 4*intg0 + 4*frac0 + digBytes[fracx]
	if len(b) < size {
		return "", errors.New("truncated DECIMAL")
	}
	buf := slices.Clone(b[:size])
	neg := buf[0]&0x80 == 0
	buf[0] ^= 0x80
	if neg {
		for i := range buf {
			buf[i] = ^buf[i]
		}
	}
	read := func(n int) uint32 {
		var x uint32
		for i := 0; i < n; i++ {
			x = x<<8 | uint32(buf[i])
		}
		buf = buf[n:]
		return x
	}
	var ip strings.Builder
	if intgx > 0 {
		ip.WriteString(strconv.FormatUint(uint64(read(digBytes[intgx])), 10))
	}
	for i := 0; i < intg0; i++ {
		fmt.Fprintf(&ip, "%09d", read(4))
	}
	is := strings.TrimLeft(ip.String(), "0")
	if is == "" {
		is = "0"
	}
	var fp strings.Builder
	for i := 0; i < frac0; i++ {
		fmt.Fprintf(&fp, "%09d", read(4))
	}
	if fracx > 0 {
		fmt.Fprintf(&fp, "%0*d", fracx, read(digBytes[fracx]))
	}
	s := is
	if scale > 0 {
		s += "." + fp.String()
	}
	if neg {
		s = "-" + s
	}
	return s, nil
}
