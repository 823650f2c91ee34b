package migration

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// Conversions the applier must spell out. The copy converts with INSERT ...
// SELECT under the server's semantics (sql_mode, time_zone), exactly as the
// server's own ALTER does. The applier writes binlog images as literals, in
// a UTC session (the binlog renders TIMESTAMPs in UTC), so a conversion that
// depends on the time zone (a TIMESTAMP read as local time, a local time
// stored as a TIMESTAMP) is written as an expression that converts in the
// migration's zone: the row then equals what INSERT ... SELECT writes.

// convExprs returns, per column pair (and per key column), the applier's
// write template, "" for a plain value, or refuses a conversion the applier
// cannot make the way the server's ALTER makes it.
func (m *migrator) convExprs(p *Plan) (exprs, keyExprs []string, err error) {
	expr := func(src, gh string) (string, error) {
		sc := m.source.Columns[m.source.ColumnIndex(src)]
		gi := p.Ghost.ColumnIndex(gh)
		if gi < 0 {
			return "", nil
		}
		return convExpr(sc, p.Ghost.Columns[gi], m.sem, m.opts.Conn.Server.TimestampMax())
	}
	used := false
	for _, pr := range p.Pairs {
		e, err := expr(pr.Source, pr.Ghost)
		if err != nil {
			return nil, nil, err
		}
		exprs = append(exprs, e)
		used = used || e != ""
	}
	for i, k := range p.ApplyKeySource {
		e, err := expr(k, p.ApplyKeyGhost[i])
		if err != nil {
			return nil, nil, err
		}
		keyExprs = append(keyExprs, e)
		used = used || e != ""
	}
	if !used {
		return nil, nil, nil
	}
	return exprs, keyExprs, nil
}

// Type families, for deciding how a value converts.
func isInt(t string) bool {
	switch t {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return true
	}
	return false
}

func isNumeric(t string) bool {
	return isInt(t) || t == "decimal" || t == "float" || t == "double" || t == "year" || t == "bit"
}

// isBlob: the BLOB and TEXT types.
func isBlob(t string) bool {
	switch t {
	case "tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext":
		return true
	}
	return false
}

// isText: the string types a value is written to as its text (not ENUM,
// SET or JSON).
func isText(t string) bool {
	return isChar(t) && t != "enum" && t != "set" && t != "json"
}

func isChar(t string) bool {
	switch t {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary",
		"tinyblob", "blob", "mediumblob", "longblob", "json", "enum", "set":
		return true
	}
	return false
}

// convExpr is one column's template (see convExprs). The binlog image's
// literal must reach the new column as the server's own field-to-field copy
// would convert the old column's value:
//   - FLOAT/DOUBLE: the image is a Go float, interpolated as a decimal
//     literal: it is made a DOUBLE again (the server rounds a double to an
//     integer half-to-even, a decimal half-up), and a FLOAT rendered as text
//     takes FLOAT's 6 significant digits;
//   - DECIMAL, DATE, TIME, DATETIME images are strings: made their type
//     again before a numeric or temporal conversion;
//   - ENUM/SET images are member names: a number is the member's index or
//     the set's bitmask;
//   - BIT images are integers: into a BLOB or TEXT they are the column's
//     bytes (into CHAR or VARBINARY, the number's decimal text);
//   - TIMESTAMP images are UTC: converted in the migration's time zone.
func convExpr(sc, gc table.Column, sem dbconn.Semantics, tsMax string) (string, error) {
	st, gt := sc.DataType, gc.DataType
	if strings.EqualFold(sc.ColumnType, gc.ColumnType) && st != "timestamp" {
		return "", nil // the same type: charsets aside (Charsets), the value is the value
	}
	if st == "timestamp" || gt == "timestamp" {
		if st == gt {
			return "", nil
		}
		if !sem.UTC {
			return zoneExpr(sc, gc, sem.TimeZone, tsMax)
		}
		switch {
		case st == "timestamp" && isNumeric(gt):
			return fmt.Sprintf("CAST(? AS DATETIME(%d))", fsp(sc)), nil
		case st == "time":
			// Today at that time, as the server's ALTER stores it. The
			// image as a plain literal read as a date: '10:11:12' stored
			// 2010-11-12 00:00:00 (MySQL's relaxed date parsing), and the
			// checksum leaves TIME to TIMESTAMP out.
			return fmt.Sprintf("CAST(? AS TIME(%d))", fsp(sc)), nil
		}
		return "", nil
	}
	if e, ok := stringExpr(sc, gc); ok {
		return e, nil
	}
	switch st {
	case "float":
		switch {
		case gt == "float":
			return "", nil
		case isChar(gt):
			return "CONCAT(CAST(? AS FLOAT))", nil
		}
		return "CAST(? AS DOUBLE)", nil
	case "double":
		if isChar(gt) {
			return "", nil
		}
		return "CAST(? AS DOUBLE)", nil
	case "decimal":
		if gt == "decimal" || isChar(gt) {
			return "", nil
		}
		return "CAST(? AS DECIMAL(" + typeArgs(sc.ColumnType) + "))", nil
	case "date", "time", "datetime":
		// Into numbers and into other temporal types (a TIME becomes a
		// DATETIME of today) the value converts from its own type.
		if gt == st || isChar(gt) {
			return "", nil
		}
		if st == "date" {
			return "CAST(? AS DATE)", nil
		}
		if st == "time" && (gt == "datetime" || gt == "date") && !sem.UTC {
			// A TIME becomes a time of today: today in the migration's zone.
			return fmt.Sprintf("TIMESTAMP(DATE(CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', %s)), CAST(? AS TIME(%d)))", dbconn.QuoteString(sem.TimeZone), fsp(sc)), nil
		}
		return fmt.Sprintf("CAST(? AS %s(%d))", strings.ToUpper(st), fsp(sc)), nil
	case "enum":
		if !isNumeric(gt) {
			return "", nil
		}
		// The member's index. Compared as bytes: under the connection's
		// collation FIELD('A', 'a', 'A') is 1 where the column's _bin
		// members make 'A' the second. Hex literals: a '?' in a member's
		// quoted text would count as a placeholder for the driver.
		return "IF(? IS NULL, NULL, FIELD(CAST(? AS BINARY), " + members(sc.Elements) + "))", nil
	case "set":
		if !isNumeric(gt) {
			return "", nil
		}
		var terms []string
		for i, e := range sc.Elements {
			terms = append(terms, fmt.Sprintf("(FIND_IN_SET(%s, CAST(? AS BINARY)) > 0) * %d", member(e), uint64(1)<<i))
		}
		return "(" + strings.Join(terms, " + ") + ")", nil
	}
	return "", nil
}

// stringExpr is convExpr's template for the conversions into strings and
// JSON whose literal differs from the server's text; ok false: none here.
func stringExpr(sc, gc table.Column) (string, bool) {
	st, gt := sc.DataType, gc.DataType
	switch {
	case gt == "json" && (isInt(st) || st == "decimal" || st == "double" || st == "float"):
		// MySQL (MariaDB's JSON reads as LONGTEXT): the server's ALTER
		// parses the number's text as JSON (a DOUBLE 3 is the integer 3,
		// a DECIMAL 1.50 the double 1.5, a FLOAT its 6 digits), and a
		// number literal is refused (3140).
		if st == "float" {
			return "CONCAT(CAST(? AS FLOAT))", true
		}
		return "CONCAT(?)", true
	case st == "bit":
		if !isBlob(gt) {
			return "", true // a number, or its decimal text (as the server's copy gives a CHAR or VARBINARY)
		}
		// Into a BLOB or TEXT the server copies the column's bytes
		// (BIT(M): ceil(M/8) of them, big-endian), not the number's text.
		n, _ := strconv.Atoi(typeArgs(sc.ColumnType))
		raw := fmt.Sprintf("UNHEX(LPAD(HEX(?), %d, '0'))", 2*((max(n, 1)+7)/8))
		if gc.Charset != "" {
			return "CONVERT(" + raw + " USING " + gc.Charset + ")", true
		}
		return raw, true
	case isInt(st) && isText(gt):
		// The text is what the server stores too; the template is for
		// comparisons. A number bound against a string column is
		// compared with it as a DOUBLE: by key (the applier's DELETE,
		// a unique key's lookup, the verification) an id above 2^53
		// matched its neighbours, 1500000000000000001 the row
		// '1500000000000000002', and the DELETE removed both. As text in
		// the column's collation it matches its own row only (and the
		// index serves the lookup).
		if gt == "binary" {
			// BINARY(n) stores the text padded with 0x00 to n bytes, and
			// compares the padding.
			return "CAST(? AS BINARY(" + typeArgs(gc.ColumnType) + "))", true
		}
		if gc.Charset == "" {
			return "CAST(? AS BINARY)", true
		}
		return "CAST(? AS CHAR CHARACTER SET " + gc.Charset + ") COLLATE " + gc.Collation, true
	case (st == "enum" || st == "set") && gc.Charset == "" && isText(gt) && sc.Charset != "":
		// The image is the member's name in UTF-8; the server's ALTER
		// stores the member's bytes in the column's charset.
		return "CONVERT(? USING " + sc.Charset + ")", true
	case st == "year" && isText(gt):
		return "LPAD(?, 4, '0')", true // YEAR 0 reads '0000'
	case st == "time" && fsp(sc) > 0 && isText(gt):
		// The image of a TIME(n) with no fraction has none ("12:34:56");
		// as text the server writes its n digits.
		return fmt.Sprintf("CAST(? AS TIME(%d))", fsp(sc)), true
	}
	return "", false
}

// copyExprs returns, per column pair, the copy's SELECT expression where
// INSERT ... SELECT of the plain column converts differently from the
// server's ALTER ("" elsewhere; nil when none): a FLOAT stored into a
// character column is rendered with FLOAT's 6 significant digits by ALTER
// (and by CONCAT), with a double's 17 by INSERT ... SELECT.
func (m *migrator) copyExprs(p *Plan) []string {
	var out []string
	used := false
	for _, pr := range p.Pairs {
		sc := m.source.Columns[m.source.ColumnIndex(pr.Source)]
		e := ""
		gi := p.Ghost.ColumnIndex(pr.Ghost)
		if gi >= 0 && p.Ghost.Columns[gi].DataType == "json" && (isInt(sc.DataType) || sc.DataType == "decimal" || sc.DataType == "double" || sc.DataType == "float") {
			// INSERT … SELECT of a number into a JSON column fails (3140);
			// the server's ALTER parses its text (FLOAT's 6 digits).
			e = "CONCAT(" + table.QuoteIdent(pr.Source) + ")"
			used = true
		} else if gi >= 0 && sc.DataType == "float" && isChar(p.Ghost.Columns[gi].DataType) {
			e = "CONCAT(" + table.QuoteIdent(pr.Source) + ")"
			used = true
		} else if gi >= 0 && sc.DataType == "year" && isText(p.Ghost.Columns[gi].DataType) {
			// YEAR 0 is '0000' as the ALTER writes it, the number 0 as
			// INSERT … SELECT stores it.
			e = "LPAD(" + table.QuoteIdent(pr.Source) + ", 4, '0')"
			used = true
		}
		out = append(out, e)
	}
	if !used {
		return nil
	}
	return out
}

func members(es []string) string {
	q := make([]string, len(es))
	for i, e := range es {
		q[i] = member(e)
	}
	return strings.Join(q, ", ")
}

// member renders an ENUM or SET member as a binary string literal of its
// UTF-8 bytes (the bytes the applier sends for it): compared byte for
// byte, and with no '?' or quote in the SQL.
func member(e string) string {
	return "X'" + hex.EncodeToString([]byte(e)) + "'"
}

// typeArgs returns what is between the parentheses of a column type
// ("10,4" of "decimal(10,4) unsigned").
func typeArgs(ct string) string {
	_, rest, ok := strings.Cut(ct, "(")
	if !ok {
		return "10,0"
	}
	args, _, _ := strings.Cut(rest, ")")
	return args
}

// zoneExpr is the template of a change to or from TIMESTAMP in a zone other
// than UTC: the server renders a TIMESTAMP in its zone, and reads a local
// time into a TIMESTAMP in it. tsMax is TIMESTAMP's last instant in UTC
// (flavor.Server.TimestampMax).
func zoneExpr(sc, gc table.Column, zone, tsMax string) (string, error) {
	srcTS := sc.DataType == "timestamp"
	z := dbconn.QuoteString(zone)
	if srcTS {
		// The outer CAST: MySQL stores a COALESCE of DATETIMEs into a
		// number column as its text (error 1265), a DATETIME as its
		// number (YYYYMMDDhhmmss, as the ALTER does).
		d := fmt.Sprintf("CAST(? AS DATETIME(%d))", fsp(sc))
		return fmt.Sprintf("CAST(COALESCE(CONVERT_TZ(%s, '+00:00', %s), %s) AS DATETIME(%d))", d, z, d, fsp(sc)), nil
	}
	switch sc.DataType {
	case "datetime", "date":
		// A local time outside TIMESTAMP's range in the zone: the server's
		// ALTER (strict) refuses it, and CONVERT_TZ returns it unconverted,
		// which the applier's UTC session would store as another instant
		// (03:00 on 1970-01-01 under +05:00 is 22:00 the day before in UTC;
		// unconverted it is 03:00 UTC). Such a value (not the zero date,
		// which converts to itself) is written as the first second below
		// the range, which the applier's strict session refuses too.
		d := fmt.Sprintf("CAST(? AS DATETIME(%d))", fsp(sc))
		lo := "CONVERT_TZ('1970-01-01 00:00:01', '+00:00', " + z + ")"
		hi := "CONVERT_TZ('" + tsMax + "', '+00:00', " + z + ")"
		return "IF(" + d + " + 0 <> 0 AND (" + d + " < " + lo + " OR " + d + " > " + hi + "), '1969-12-31 23:59:59', COALESCE(CONVERT_TZ(" + d + ", " + z + ", '+00:00'), " + d + "))", nil
	}
	return "", fmt.Errorf("refused: column %s changes from %s to %s, which the server converts in its time zone (%s) and recast's applier cannot reproduce for a %s; fix: convert it in two steps (to DATETIME first), or run with --set-vars time_zone='+00:00' if UTC is what you want",
		table.QuoteIdent(sc.Name), sc.ColumnType, gc.ColumnType, zone, sc.DataType)
}

// fsp is a temporal column's fractional-seconds precision.
func fsp(c table.Column) int {
	_, rest, ok := strings.Cut(c.ColumnType, "(")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(rest)[0], ")"))
	if err != nil {
		return 0
	}
	return n
}
