package check

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "numeric-range", Order: 117, CopyOnly: true, Run: checkNumericRange})
}

// checkNumericRange refuses an ALTER that narrows an integer or DECIMAL
// column (a smaller integer type, signed to UNSIGNED or back, fewer DECIMAL
// digits, DECIMAL to integer) below the values the table holds, naming the
// value and a row holding it. Under a strict sql_mode the copy would fail on
// the first such row (after copying everything before it); under a lax one
// the server would clamp the value.
//
// Only columns whose new range does not contain the old type's whole range
// are read: MIN and MAX of the column, which is two index look-ups when an
// index starts with the column and a full scan of the table otherwise (the
// dry run logs which).
func checkNumericRange(ctx context.Context, in *Input) error {
	if in.Ghost == nil {
		return nil
	}
	for _, p := range in.Pairs {
		sc := in.Source.Columns[in.Source.ColumnIndex(p.Source)]
		gc := in.Ghost.Columns[in.Ghost.ColumnIndex(p.Ghost)]
		sr, ok1 := numericRange(sc)
		gr, ok2 := numericRange(gc)
		if in.Flavor == "mysql" && gr.scale == 0 && gc.DataType != "decimal" {
			// MySQL rounds a DECIMAL into an integer column before the
			// UNSIGNED check: -0.4 becomes 0 (MariaDB refuses it).
			gr.unsigned = false
		}
		if !ok1 || !ok2 || gr.holds(sr.min) && gr.holds(sr.max) {
			continue
		}
		col := table.QuoteIdent(sc.Name)
		indexed := false
		for _, ix := range in.Source.Indexes {
			if len(ix.Columns) > 0 && strings.EqualFold(ix.Columns[0], sc.Name) {
				indexed = true
			}
		}
		how := "an index look-up"
		if !indexed {
			how = fmt.Sprintf("a full scan of ~%d rows (no index starts with the column)", in.Source.RowEstimate)
		}
		in.logger().Info("checking the values of a narrowed numeric column", "column", sc.Name, "from", sc.ColumnType, "to", gc.ColumnType, "cost", how)
		var lo, hi sql.NullString
		if err := in.DB.QueryRowContext(ctx, dbconn.Tag+"SELECT MIN("+col+"), MAX("+col+") FROM "+in.quotedTable()).Scan(&lo, &hi); err != nil {
			return fmt.Errorf("read the range of %s: %w", col, err)
		}
		for _, v := range []sql.NullString{lo, hi} {
			if !v.Valid {
				continue // no rows, or only NULLs
			}
			r, ok := new(big.Rat).SetString(v.String)
			if !ok {
				return fmt.Errorf("read the range of %s: not a number: %q", col, v.String)
			}
			if gr.holds(r) {
				continue
			}
			// The value inline, as a number literal, compared exactly.
			if !plainNumber.MatchString(v.String) {
				return fmt.Errorf("read the range of %s: not a plain number: %q", col, v.String)
			}
			ex, found, err := exampleKey(ctx, in, col+" = "+v.String)
			if err != nil {
				return err
			}
			if !found {
				ex = "(none found: rows changed meanwhile)"
			}
			op := ">"
			bound := gr.maxText()
			if r.Sign() < 0 && (gr.unsigned || gr.round(r).Cmp(gr.min) < 0) {
				op, bound = "<", gr.minText()
			}
			return refusef(fmt.Sprintf("change those rows first (look at WHERE %s %s %s), or choose a type that holds them", col, op, bound),
				"the ALTER would fail or change data: column %s becomes %s (%s..%s), but rows hold %s, e.g. the row %s",
				col, gc.ColumnType, gr.minText(), gr.maxText(), v.String, ex)
		}
	}
	return nil
}

var plainNumber = regexp.MustCompile(`^-?\d+(\.\d+)?$`)

// numRange is the values a numeric column holds, and the scale values are
// rounded to when stored in it.
type numRange struct {
	min, max *big.Rat
	scale    int
	unsigned bool // no negative value at all, even one that rounds to 0 (MariaDB; MySQL only for DECIMAL)
}

// numericRange returns the range of an integer or DECIMAL column.
func numericRange(c table.Column) (numRange, bool) {
	if n, ok := intBits[c.DataType]; ok {
		b := uint(n)
		if c.Unsigned {
			hi := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), b), big.NewInt(1))
			return numRange{min: new(big.Rat), max: new(big.Rat).SetInt(hi), unsigned: true}, true
		}
		half := new(big.Int).Lsh(big.NewInt(1), b-1)
		return numRange{min: new(big.Rat).SetInt(new(big.Int).Neg(half)), max: new(big.Rat).SetInt(half.Sub(half, big.NewInt(1)))}, true
	}
	if c.DataType != "decimal" {
		return numRange{}, false
	}
	p, s, ok := precisionScale(c.ColumnType)
	if !ok {
		return numRange{}, false
	}
	// 10^(p-s) - 10^-s
	unit := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil))
	hi := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p-s)), nil))
	hi.Sub(hi, unit)
	lo := new(big.Rat).Neg(hi)
	if c.Unsigned {
		lo = new(big.Rat)
	}
	return numRange{min: lo, max: hi, scale: s, unsigned: c.Unsigned}, true
}

// precisionScale reads p and s of "decimal(p,s)" (s is 0 when absent).
func precisionScale(columnType string) (p, s int, ok bool) {
	open := strings.IndexByte(columnType, '(')
	end := strings.IndexByte(columnType, ')')
	if open < 0 || end < open {
		return 0, 0, false
	}
	ps, ss, hasScale := strings.Cut(columnType[open+1:end], ",")
	p, err := strconv.Atoi(strings.TrimSpace(ps))
	if err != nil {
		return 0, 0, false
	}
	if hasScale {
		if s, err = strconv.Atoi(strings.TrimSpace(ss)); err != nil {
			return 0, 0, false
		}
	}
	return p, s, p > 0 && s >= 0 && s <= p
}

// round rounds v to the range's scale, half away from zero, as the server
// rounds a number stored into a column with fewer decimals.
func (r numRange) round(v *big.Rat) *big.Rat {
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(r.scale)), nil)
	x := new(big.Rat).Mul(v, new(big.Rat).SetInt(pow))
	num, den := new(big.Int).Abs(x.Num()), x.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if m.Lsh(m, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if x.Sign() < 0 {
		q.Neg(q)
	}
	return new(big.Rat).SetFrac(q, pow)
}

// holds reports whether v, rounded to the range's scale, is in the range.
// An UNSIGNED column takes no negative value (MariaDB refuses -0.4 for
// INT UNSIGNED under a strict sql_mode rather than round it to 0; MySQL
// rounds first for integer columns, checkNumericRange clears unsigned).
func (r numRange) holds(v *big.Rat) bool {
	if r.unsigned && v.Sign() < 0 {
		return false
	}
	x := r.round(v)
	return x.Cmp(r.min) >= 0 && x.Cmp(r.max) <= 0
}

func (r numRange) minText() string { return r.min.FloatString(r.scale) }
func (r numRange) maxText() string { return r.max.FloatString(r.scale) }
