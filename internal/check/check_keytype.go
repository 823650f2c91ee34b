package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/recast-osc/recast/internal/ddl"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "key-type", Order: 118, CopyOnly: true, Run: checkKeyType})
}

// checkKeyType refuses an ALTER that gives a column of the key the new
// table's rows are found by (the applier's key, ddl.ApplyKey: the chunk
// key, or the new table's smallest unique key that contains it) a type
// into which the old values do not convert one to one: a DATETIME(6) made
// DATETIME, a DECIMAL given fewer decimals, a BIGINT made DOUBLE, text made
// a number, a TIMESTAMP made DATETIME in a zone with daylight saving. Two
// rows can then become one: the server's own ALTER stops on the duplicate, but the copy's
// INSERT IGNORE keeps one of them and the applier's REPLACE overwrites one
// with the other. And the applier finds a row of the new table by the old
// value from the binlog: '10:00:00.4' no longer equals the stored
// '10:00:00', so a DELETE misses its row, which stays. The checks "unique"
// and "numeric-range" see the rows the table holds now, not the ones the
// application writes during the copy.
//
// The new table's other unique keys are watched while rows are written
// (migration's ghostUniques: a key the old table does not enforce
// unchanged). A narrower range is not refused: a value out of it fails the
// copy (a warning it does not pass) and the applier (strict), never
// clamped. String to string conversions are the concern of "unique"
// (collations), "narrowing" and the chunk key's rules (ddl.SharedKey); a
// number made text is matched as text (the applier's key template).
func checkKeyType(_ context.Context, in *Input) error {
	if in.Ghost == nil || len(in.Key) == 0 {
		return nil
	}
	ks, kg, err := ddl.SharedKey(in.Source, in.Ghost, in.Pairs)
	if err != nil {
		return nil // "chunk-key" refused it
	}
	as, ag := ddl.ApplyKey(in.Source, in.Ghost, in.Pairs, ks, kg)
	for i := range ag {
		sc := in.Source.Columns[in.Source.ColumnIndex(as[i])]
		gc := in.Ghost.Columns[in.Ghost.ColumnIndex(ag[i])]
		why := KeyConversion(sc, gc, in.DST)
		if why == "" {
			continue
		}
		desc := fmt.Sprintf("key (%s)", names(ag))
		for _, uk := range in.GhostUnique {
			if !ddl.SameSet(uk.Columns, ag) {
				continue
			}
			desc = fmt.Sprintf("unique key %s (%s)", table.QuoteIdent(uk.Name), names(uk.Columns))
			if uk.Name == "PRIMARY" {
				desc = fmt.Sprintf("PRIMARY KEY (%s)", names(uk.Columns))
			}
		}
		return refusef("keep the key column's type (precision, scale, time zone), change it in a separate native ALTER, or key the table by another unique key first",
			"the ALTER makes column %s of the new table's %s %s (was %s), %s: two rows could become one, and a change found by the old value would miss its row",
			table.QuoteIdent(gc.Name), desc, gc.ColumnType, sc.ColumnType, why)
	}
	return nil
}

// KeyConversion returns why a value of column sc does not convert one to
// one into column gc ("" when it does): distinct values stay distinct, and
// each equals what it became, so it finds its row in the new table. dst:
// the migration's time zone has daylight-saving changes (a DATETIME of the
// hour skipped in spring is the TIMESTAMP of the next; the two instants of
// the hour repeated in autumn are one DATETIME).
func KeyConversion(sc, gc table.Column, dst bool) string {
	st, gt := sc.DataType, gc.DataType
	if st == "real" {
		st = "double"
	}
	if gt == "real" {
		gt = "double"
	}
	if gt == "binary" && !isIntType(st) && !strings.EqualFold(sc.ColumnType, gc.ColumnType) {
		// The image no longer finds its row: the applier's DELETE of 'ab'
		// (a DECIMAL's '1.50', a YEAR's '2024') missed 'ab\0…\0', and
		// 'a' and 'a\0' become one value. An integer is matched through
		// its padded text (the applier's key template).
		return "which pads values with 0x00 to its length (BINARY compares the padding)"
	}
	switch {
	case table.IsStringType(st):
		switch {
		case isNumberType(gt) || isTemporalType(gt):
			return "which reads text as a number or a date ('01' and '1' become 1)"
		case gt == "enum" || gt == "set":
			return "which reads text as a member ('A' and 'a', or 'a,b' and 'b,a', become one)"
		}
		return ""
	case st == "enum" || st == "set" || st == "json":
		return "" // a member's index, a set's bits, its name: one to one
	case isIntType(st) || st == "decimal":
		switch {
		case isIntType(gt) || gt == "decimal":
			sr, ok1 := numericRange(sc)
			gr, ok2 := numericRange(gc)
			if !ok1 || !ok2 {
				return "whose range cannot be compared"
			}
			if gr.scale < sr.scale {
				return fmt.Sprintf("which rounds its values to %d decimals", gr.scale)
			}
			return "" // a narrower range: "numeric-range", and errors
		case table.IsStringType(gt):
			return "" // the number's text
		case gt == "float" || gt == "double":
			if bits, ok := intBits[st]; ok && bits <= exactBits(gt) {
				return ""
			}
			return fmt.Sprintf("which rounds values beyond %s's %d-bit precision", strings.ToUpper(gt), exactBits(gt))
		}
		return "which converts numbers otherwise than one to one"
	case st == "year":
		if isIntType(gt) || gt == "decimal" || table.IsStringType(gt) || gt == st {
			return ""
		}
		return "which converts years otherwise than one to one"
	case isTemporalType(st):
		fs, _ := typeLength(sc.ColumnType) // fractional-second digits: datetime(6); none: 0
		fg, _ := typeLength(gc.ColumnType)
		sameKind := st == gt || (st == "datetime" && gt == "timestamp") || (st == "timestamp" && gt == "datetime")
		switch {
		case sameKind && fg < fs:
			return fmt.Sprintf("which rounds fractional seconds to %d digits", fg)
		case st != gt && sameKind && dst:
			return "which converts in a time zone with daylight-saving changes"
		case sameKind, st == "date" && (gt == "datetime" || gt == "timestamp" && !dst):
			return ""
		}
		return "which converts dates and times otherwise than one to one"
	}
	// FLOAT, DOUBLE, BIT: only their own type (ddl.SharedKey too).
	if st == gt && strings.EqualFold(sc.ColumnType, gc.ColumnType) {
		return ""
	}
	return "which converts its values otherwise than one to one"
}

// intBits: the bits an integer type's values need, sign included.
var intBits = map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}

func isIntType(t string) bool { _, ok := intBits[t]; return ok }

func isNumberType(t string) bool {
	return isIntType(t) || t == "decimal" || t == "float" || t == "double" || t == "real" || t == "bit" || t == "year"
}

func isTemporalType(t string) bool {
	return t == "date" || t == "datetime" || t == "timestamp" || t == "time"
}

// exactBits: the integers a FLOAT (24-bit significand) or a DOUBLE (53)
// holds exactly: an integer type fits if its bits, sign included, do
// (MEDIUMINT UNSIGNED's 24 bits fit a FLOAT).
func exactBits(t string) int {
	if t == "float" {
		return 24
	}
	return 53
}
