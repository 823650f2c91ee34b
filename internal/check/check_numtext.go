package check

import (
	"context"
	"regexp"
	"strings"

	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "number-text", Order: 116, CopyOnly: true, Run: checkNumberText})
}

// formattedNumber matches the column types whose text the server's ALTER
// formats from the column's definition: ZEROFILL pads to the display width
// (INT(5) ZEROFILL 2134 is '02134'), FLOAT(M,D) and DOUBLE(M,D) print D
// decimals (DOUBLE(10,2) 1.5 is '1.50').
var formattedNumber = regexp.MustCompile(`(?i)\bzerofill\b|^(float|double|real)\s*\(\s*\d+\s*,\s*\d+\s*\)`)

// checkNumberText refuses an ALTER that makes such a number a string
// (CHAR, VARCHAR, BINARY, VARBINARY, TEXT, BLOB): the server's ALTER writes
// the formatted text, while the copy's INSERT … SELECT and the applier's
// bound value give the plain number's ('2134', '1.5'), and with a binary
// target the checksum does not compare the column. It refuses any number
// made an ENUM or SET too: MariaDB's ALTER reads 2 as the second member,
// MySQL's as the member '2', and the applier bound a DECIMAL as its text
// and an integer as a number (the checksum leaves such columns out).
func checkNumberText(_ context.Context, in *Input) error {
	if in.Ghost == nil {
		return nil
	}
	for _, p := range in.Pairs {
		si, gi := in.Source.ColumnIndex(p.Source), in.Ghost.ColumnIndex(p.Ghost)
		if si < 0 || gi < 0 {
			continue
		}
		sc, gc := in.Source.Columns[si], in.Ghost.Columns[gi]
		if isNumberType(sc.DataType) && (gc.DataType == "enum" || gc.DataType == "set") {
			return refusef("change this column with the server's own ALTER TABLE, or make it a string first and then the ENUM or SET",
				"column %s %s becomes %s: the server's ALTER reads a number as a member's index or set bits (MariaDB) or as a member's name (MySQL), which recast's copy and applier do not reproduce",
				table.QuoteIdent(sc.Name), sc.ColumnType, gc.ColumnType)
		}
		if !formattedNumber.MatchString(strings.TrimSpace(sc.ColumnType)) || !table.IsStringType(gc.DataType) {
			continue
		}
		return refusef("change this column with the server's own ALTER TABLE; or, if the plain number's text is what you want, first drop the formatting (ZEROFILL, the (M,D)) with recast, then make it a string",
			"column %s %s becomes %s: the server's ALTER writes its formatted text (zero-padded, or with the declared decimals), which recast's copy and applier do not reproduce",
			table.QuoteIdent(sc.Name), sc.ColumnType, gc.ColumnType)
	}
	return nil
}
