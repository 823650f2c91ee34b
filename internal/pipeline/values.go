package pipeline

import (
	"math"
	"strings"

	"github.com/recast-osc/recast/internal/binlog"
)

// Values that are SQL expressions (binlog.SQLExpr: MySQL's binary JSON
// rebuilt with its scalar types), and a float's negative zero, are written
// into the statement in place of their column's placeholders; every other
// value is a placeholder argument.

// template is column j's SQL with "?" for its value: its conversion
// template, else CONVERT(? USING charset), else "?".
func template(charsets, exprs []string, j int) string {
	switch {
	case j < len(exprs) && exprs[j] != "":
		return exprs[j]
	case j < len(charsets) && charsets[j] != "":
		return "CONVERT(? USING " + charsets[j] + ")"
	}
	return "?"
}

// hasExpr reports whether any of the columns cols of image is written
// inline.
func hasExpr(image []any, cols []int) bool {
	for _, c := range cols {
		if _, ok := inline(image[c]); ok {
			return true
		}
	}
	return false
}

// inline returns the SQL of a value written into the statement rather than
// bound: an SQLExpr, and -0 of a FLOAT or DOUBLE. Bound, the driver writes
// -0 as "-0", which the server reads as the integer 0 and stores as +0;
// MySQL stores -0 and its ALTER keeps it ("-0e0" is a double). (MariaDB
// stores every zero as +0.)
func inline(v any) (string, bool) {
	switch x := v.(type) {
	case binlog.SQLExpr:
		return string(x), true
	case float64:
		if x == 0 && math.Signbit(x) {
			return "-0e0", true
		}
	case float32:
		if x == 0 && math.Signbit(float64(x)) {
			return "-0e0", true
		}
	}
	return "", false
}

// writeValue writes column j's template for v to b and returns args with
// v's arguments appended.
func writeValue(b *strings.Builder, args []any, v any, charsets, exprs []string, j int) []any {
	t := template(charsets, exprs, j)
	if e, ok := inline(v); ok {
		b.WriteString(substitute(t, "("+e+")"))
		return args
	}
	b.WriteString(t)
	return appendArg(args, v, exprs, j)
}

// placeholderCount counts the placeholders "?" of t outside quoted strings
// and quoted identifiers: one argument each. (Counting a quoted '?' too
// would add an argument that the driver's interpolation, which does not
// read quotes, then writes into the quoted text.)
func placeholderCount(t string) int {
	n := 0
	scanPlaceholders(t, func(c byte, placeholder bool) {
		if placeholder {
			n++
		}
	})
	return n
}

// substitute replaces each placeholder "?" of t (outside quoted strings and
// quoted identifiers) with e.
func substitute(t, e string) string {
	var b strings.Builder
	scanPlaceholders(t, func(c byte, placeholder bool) {
		if placeholder {
			b.WriteString(e)
		} else {
			b.WriteByte(c)
		}
	})
	return b.String()
}

// scanPlaceholders calls f for each byte of t, saying whether it is a
// placeholder "?" (outside quoted strings and quoted identifiers).
func scanPlaceholders(t string, f func(c byte, placeholder bool)) {
	var quote byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case quote != 0:
			if c == '\\' && quote != '`' && i+1 < len(t) {
				f(c, false)
				i++
				c = t[i]
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '?':
			f(c, true)
			continue
		}
		f(c, false)
	}
}
