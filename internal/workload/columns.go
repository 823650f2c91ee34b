package workload

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Canonical text forms.
//
// Verify selects every column with an expression that yields text, and the
// shadow stores, for each row, the text that expression gives for the value
// the writers stored:
//
//   - integers, DECIMAL, FLOAT, DOUBLE, DATE, DATETIME, TIMESTAMP, ENUM, SET:
//     CAST(col AS CHAR) (DECIMAL(20,6) always has 6 decimals; DATETIME(6) and
//     TIMESTAMP(6) always have 6 fractional digits; TIMESTAMP read with
//     time_zone '+00:00'; SET members in definition order);
//   - character columns (CHAR, VARCHAR, TEXT, JSON, the latin1 column):
//     CONVERT(col USING utf8mb4), the stored characters in UTF-8;
//   - binary columns (BLOB, VARBINARY): the bytes as they are;
//   - BIT(8): col+0, the number in decimal.
//
// The generators only produce values whose canonical text is exact:
// FLOAT values have at most 6 significant digits and are exact in float32
// (MariaDB prints FLOAT with 6 significant digits), DOUBLE values print the
// same in Go and MariaDB, CHAR values have no trailing spaces (CHAR strips
// them), and so on.

// colKind says how a column is read back as canonical text.
type colKind int

const (
	kindCast   colKind = iota // CAST(col AS CHAR)
	kindText                  // CONVERT(col USING utf8mb4)
	kindBinary                // the bytes
	kindBit                   // col+0
)

// column is one column of the workload table.
type column struct {
	name string
	ddl  string // type and options, after the name
	kind colKind
	// gen returns a random value: the parameter sent to the server and its
	// canonical text; null reports SQL NULL. nil for id and u, which the
	// writers choose.
	gen func(r *rand.Rand) (param any, canon string, null bool)
}

// expr returns the canonical-text expression for table column name.
func (c column) expr(name string) string {
	q := quoteIdent(name)
	switch c.kind {
	case kindText:
		return "CONVERT(" + q + " USING utf8mb4)"
	case kindBinary:
		return q
	case kindBit:
		return q + "+0"
	default:
		return "CAST(" + q + " AS CHAR)"
	}
}

const (
	colID = 0 // index of id in columns
	colU  = 1 // index of u in columns
)

// nullRate is the probability of NULL in a nullable column.
const nullRate = 0.2

// columns is the workload table, in table order.
var columns = []column{
	{name: "id", ddl: "BIGINT NOT NULL", kind: kindCast},
	{name: "u", ddl: "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL", kind: kindText},
	{name: "i", ddl: "INT NULL", kind: kindCast, gen: nullable(genInt32)},
	{name: "ui", ddl: "INT UNSIGNED NULL", kind: kindCast, gen: nullable(genUint32)},
	{name: "bi", ddl: "BIGINT NULL", kind: kindCast, gen: nullable(genInt64)},
	{name: "ubi", ddl: "BIGINT UNSIGNED NULL", kind: kindCast, gen: nullable(genUint64)},
	{name: "de", ddl: "DECIMAL(20,6) NULL", kind: kindCast, gen: nullable(genDecimal)},
	{name: "f", ddl: "FLOAT NULL", kind: kindCast, gen: nullable(genFloat)},
	{name: "d", ddl: "DOUBLE NULL", kind: kindCast, gen: nullable(genDouble)},
	{name: "c", ddl: "CHAR(10) CHARACTER SET utf8mb4 NULL", kind: kindText, gen: nullable(genChar)},
	{name: "vc", ddl: "VARCHAR(200) CHARACTER SET utf8mb4 NULL", kind: kindText, gen: nullable(genVarchar)},
	{name: "txt", ddl: "TEXT CHARACTER SET utf8mb4 NULL", kind: kindText, gen: nullable(genText)},
	{name: "bl", ddl: "BLOB NULL", kind: kindBinary, gen: nullable(genBlob)},
	{name: "vb", ddl: "VARBINARY(32) NULL", kind: kindBinary, gen: nullable(genVarbinary)},
	{name: "dt", ddl: "DATE NULL", kind: kindCast, gen: nullable(genDate)},
	{name: "dtm", ddl: "DATETIME(6) NULL", kind: kindCast, gen: nullable(genDatetime)},
	{name: "ts", ddl: "TIMESTAMP(6) NULL DEFAULT NULL", kind: kindCast, gen: nullable(genTimestamp)},
	{name: "e", ddl: "ENUM('red','green','blue') NULL", kind: kindCast, gen: nullable(genEnum)},
	{name: "s", ddl: "SET('a','b','c','d') NULL", kind: kindCast, gen: nullable(genSet)},
	{name: "b", ddl: "BIT(8) NULL", kind: kindBit, gen: nullable(genBit)},
	{name: "j", ddl: "JSON NULL", kind: kindText, gen: nullable(genJSON)},
	{name: "lat", ddl: "VARCHAR(20) CHARACTER SET latin1 NULL", kind: kindText, gen: nullable(genLatin1)},
}

// columnIndex maps a column name to its index in columns.
var columnIndex = func() map[string]int {
	m := make(map[string]int, len(columns))
	for i, c := range columns {
		m[c.name] = i
	}
	return m
}()

// Columns returns the names of the workload table's columns, in table order.
func Columns() []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return out
}

type genFunc func(r *rand.Rand) (any, string)

func nullable(g genFunc) func(r *rand.Rand) (any, string, bool) {
	return func(r *rand.Rand) (any, string, bool) {
		if r.Float64() < nullRate {
			return nil, "", true
		}
		p, c := g(r)
		return p, c, false
	}
}

// extreme reports whether a generator should pick an edge value (1 in 10).
func extreme(r *rand.Rand) bool { return r.IntN(10) == 0 }

func genInt32(r *rand.Rand) (any, string) {
	var v int64
	if extreme(r) {
		v = []int64{math.MinInt32, math.MaxInt32, 0, -1, 1}[r.IntN(5)]
	} else if r.IntN(2) == 0 {
		v = int64(r.IntN(2000)) - 1000
	} else {
		v = int64(int32(r.Uint32()))
	}
	return v, strconv.FormatInt(v, 10)
}

func genUint32(r *rand.Rand) (any, string) {
	var v int64
	if extreme(r) {
		v = []int64{0, math.MaxUint32, 1}[r.IntN(3)]
	} else {
		v = int64(r.Uint32())
	}
	return v, strconv.FormatInt(v, 10)
}

func genInt64(r *rand.Rand) (any, string) {
	var v int64
	if extreme(r) {
		v = []int64{math.MinInt64, math.MaxInt64, 0, -1}[r.IntN(4)]
	} else {
		v = int64(r.Uint64())
	}
	return v, strconv.FormatInt(v, 10)
}

func genUint64(r *rand.Rand) (any, string) {
	var v uint64
	if extreme(r) {
		v = []uint64{0, math.MaxUint64, math.MaxInt64 + 1}[r.IntN(3)]
	} else {
		v = r.Uint64()
	}
	return v, strconv.FormatUint(v, 10)
}

// genDecimal returns a DECIMAL(20,6): up to 14 integer digits, 6 decimals.
// The parameter is the decimal text, which the server converts exactly.
func genDecimal(r *rand.Rand) (any, string) {
	var ip, frac int64
	neg := r.IntN(2) == 0
	switch {
	case extreme(r):
		ip, frac = 99999999999999, 999999
	case r.IntN(2) == 0:
		ip, frac = r.Int64N(1000), r.Int64N(1000000)
	default:
		ip, frac = r.Int64N(100000000000000), r.Int64N(1000000)
	}
	s := fmt.Sprintf("%d.%06d", ip, frac)
	if neg && (ip != 0 || frac != 0) {
		s = "-" + s
	}
	return s, s
}

// genFloat returns k/4 with |k/4| < 10000: exact in float32, at most 6
// significant digits, so that CAST(f AS CHAR) prints it exactly.
func genFloat(r *rand.Rand) (any, string) {
	k := r.IntN(79999) - 39999
	if extreme(r) {
		k = []int{39999, -39999, 0, 1, -1}[r.IntN(5)]
	}
	v := float32(k) / 4
	return float64(v), strconv.FormatFloat(float64(v), 'f', -1, 32)
}

// genDouble returns k/8 with |k/8| < 1e11 (at most 14 significant digits,
// which MariaDB prints without an exponent), or one of a few extremes whose
// MariaDB text is known.
func genDouble(r *rand.Rand) (any, string) {
	if extreme(r) {
		ext := []struct {
			v float64
			s string
		}{
			{math.MaxFloat64, "1.7976931348623157e308"},
			{-1e300, "-1e300"},
			{-2.5e-300, "-2.5e-300"},
			{0, "0"},
		}[r.IntN(4)]
		return ext.v, ext.s
	}
	k := r.Int64N(1600000000000) - 800000000000
	if r.IntN(2) == 0 {
		k = r.Int64N(20000) - 10000
	}
	v := float64(k) / 8
	return v, strconv.FormatFloat(v, 'f', -1, 64)
}

const (
	asciiAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// textRunes are the characters of random text: ASCII (weighted by
// repetition), SQL-special characters, 2-, 3- and 4-byte UTF-8.
var textRunes = []rune(asciiAlnum + asciiAlnum + asciiAlnum + "     " +
	"'\"\\%_`;,.-\n\t\x00" +
	"éèüßñçøå€" +
	"漢字かな한글" +
	"😀🚀🎉𝄞🦀👍🏽")

// textRuneBytes holds the UTF-8 encoding of each of textRunes.
var textRuneBytes = func() []string {
	out := make([]string, len(textRunes))
	for i, c := range textRunes {
		out[i] = string(c)
	}
	return out
}()

func randText(r *rand.Rand, n int) string {
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, n*2)
	for range n {
		b = append(b, textRuneBytes[r.IntN(len(textRuneBytes))]...)
	}
	return string(b)
}

// genChar returns 1..10 characters without trailing spaces (CHAR drops them).
func genChar(r *rand.Rand) (any, string) {
	s := strings.TrimRight(randText(r, 1+r.IntN(10)), " ")
	if s == "" {
		s = "x"
	}
	return s, s
}

func genVarchar(r *rand.Rand) (any, string) {
	n := r.IntN(40)
	switch {
	case extreme(r):
		n = 200
	case r.IntN(5) == 0:
		n = r.IntN(201)
	}
	s := randText(r, n)
	return s, s
}

func genText(r *rand.Rand) (any, string) {
	n := r.IntN(120)
	if r.IntN(20) == 0 { // now and then long enough to be stored off-page
		n = 500 + r.IntN(1500)
	}
	s := randText(r, n)
	return s, s
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func genBlob(r *rand.Rand) (any, string) {
	n := r.IntN(80)
	if extreme(r) {
		n = r.IntN(1000)
	}
	b := randBytes(r, n)
	return b, string(b)
}

func genVarbinary(r *rand.Rand) (any, string) {
	var b []byte
	switch r.IntN(8) {
	case 0:
		b = []byte(strings.Repeat("\x00", 1+r.IntN(32)))
	case 1:
		b = []byte(strings.Repeat("\xff", 1+r.IntN(32)))
	case 2:
		b = append(randBytes(r, r.IntN(16)), 0, 0) // trailing zero bytes
	default:
		b = randBytes(r, r.IntN(33))
	}
	return b, string(b)
}

var (
	minDate = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDate = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	// TIMESTAMP's range, in UTC.
	minTS = time.Unix(1, 0).UTC()
	maxTS = time.Unix(math.MaxInt32, 999999000).UTC()
)

func randDay(r *rand.Rand) time.Time {
	if extreme(r) {
		if r.IntN(2) == 0 {
			return minDate
		}
		return maxDate
	}
	days := int(maxDate.Sub(minDate).Hours() / 24)
	if r.IntN(2) == 0 { // mostly recent dates
		return time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(20000))
	}
	return minDate.AddDate(0, 0, r.IntN(days+1))
}

func genDate(r *rand.Rand) (any, string) {
	s := randDay(r).Format("2006-01-02")
	return s, s
}

const dtmLayout = "2006-01-02 15:04:05.000000"

func genDatetime(r *rand.Rand) (any, string) {
	t := randDay(r).Add(time.Duration(r.Int64N(86400)) * time.Second).Add(time.Duration(r.IntN(1000000)) * time.Microsecond)
	if extreme(r) {
		t = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	}
	s := t.Format(dtmLayout)
	return s, s
}

// genTimestamp returns a TIMESTAMP(6) in UTC (the writers' time_zone).
func genTimestamp(r *rand.Rand) (any, string) {
	var t time.Time
	switch {
	case extreme(r):
		t = []time.Time{minTS, maxTS}[r.IntN(2)]
	default:
		sec := 1 + r.Int64N(math.MaxInt32)
		t = time.Unix(sec, int64(r.IntN(1000000))*1000).UTC()
	}
	s := t.Format(dtmLayout)
	return s, s
}

var enumValues = []string{"red", "green", "blue"}

func genEnum(r *rand.Rand) (any, string) {
	v := enumValues[r.IntN(len(enumValues))]
	return v, v
}

var setMembers = []string{"a", "b", "c", "d"}

// genSet sends the members in random order; the canonical text has them in
// definition order. The empty set is the empty string, not NULL.
func genSet(r *rand.Rand) (any, string) {
	var canon, sent []string
	for _, m := range setMembers {
		if r.IntN(2) == 0 {
			canon = append(canon, m)
		}
	}
	sent = append(sent, canon...)
	r.Shuffle(len(sent), func(i, j int) { sent[i], sent[j] = sent[j], sent[i] })
	return strings.Join(sent, ","), strings.Join(canon, ",")
}

func genBit(r *rand.Rand) (any, string) {
	v := int64(r.IntN(256))
	if extreme(r) {
		v = []int64{0, 255}[r.IntN(2)]
	}
	return v, strconv.FormatInt(v, 10)
}

// genJSON returns a small JSON document (written by hand: encoding/json is
// slow enough to dominate Prepare). Its text is also the server's canonical
// rendering: MariaDB keeps JSON as the text written, MySQL stores it binary
// and renders it with keys ordered by length, then bytes, ", " and ": "
// separators; so the keys are written in that order.
func genJSON(r *rand.Rand) (any, string) {
	var b strings.Builder
	b.Grow(128)
	b.WriteString(`{"f": `)
	b.WriteString(strconv.FormatFloat(float64(r.IntN(1000))/8, 'f', -1, 64))
	b.WriteString(`, "n": `)
	b.WriteString(strconv.Itoa(r.IntN(1000000)))
	b.WriteString(`, "s": `)
	writeJSONString(&b, randText(r, r.IntN(20)))
	b.WriteString(`, "ok": `)
	b.WriteString(strconv.FormatBool(r.IntN(2) == 0))
	b.WriteString(`, "none": null, "tags": ["`)
	b.WriteString(enumValues[r.IntN(3)])
	b.WriteString(`", "😀", "é"]`)
	if r.IntN(3) == 0 {
		b.WriteString(`, "nested": {"a": [1, 2, `)
		b.WriteString(strconv.Itoa(r.IntN(100)))
		b.WriteString(`], "b": {}}`)
	}
	b.WriteByte('}')
	s := b.String()
	return s, s
}

func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
			// MySQL's rendering (and a valid JSON escape on MariaDB).
			b.WriteString(strconv.Quote(string(c))[1:3])
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

var latinRunes = []rune("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789éÉèàñüÜßçøå£")

func genLatin1(r *rand.Rand) (any, string) {
	var b strings.Builder
	n := r.IntN(21)
	for range n {
		b.WriteRune(latinRunes[r.IntN(len(latinRunes))])
	}
	if r.IntN(2) == 0 && n < 20 {
		b.WriteRune('é')
	}
	s := b.String()
	return s, s
}

// isBinaryColumn reports whether column i holds bytes (shown in hex).
func isBinaryColumn(i int) bool { return columns[i].kind == kindBinary }

// showValue renders a canonical value for a difference report.
func showValue(i int, v string, null bool) string {
	if null {
		return "NULL"
	}
	if isBinaryColumn(i) {
		s := "0x" + strings.ToUpper(hex.EncodeToString([]byte(v)))
		return truncate(s, 80)
	}
	return strconv.Quote(truncate(v, 80))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
