package ddl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/recast-osc/recast/internal/table"
)

// ColumnPair names a column of the source table and the ghost column its
// values are copied to.
type ColumnPair struct{ Source, Ghost string }

// Map pairs the columns the old (source) and the new (ghost) table share:
// same name (case-insensitive) unless renamed, or renamed per a.Renames.
// Dropped columns are absent, even when the ALTER adds a column of the same
// name again (MariaDB gives that one its default, not the old values).
// Generated columns on either side are excluded: they are computed, never
// written; a generated column that becomes a plain one is refused (the
// server keeps its values, recast would not). Pairs come in the ghost
// table's column order; names are spelled as each table spells them.
//
// Map refuses a ghost that does not match the analysis: a source column the
// ALTER neither drops nor renames but that the ghost lacks, a rename whose
// target the ghost lacks, two source columns landing on one ghost column.
// a may be nil: no renames, no drops.
func Map(source, ghost *table.Table, a *Analysis) ([]ColumnPair, error) {
	dropped := map[string]bool{}
	renames := map[string]string{}
	if a != nil {
		for _, d := range a.Dropped {
			dropped[strings.ToLower(d)] = true
		}
		for old, nw := range a.Renames {
			renames[strings.ToLower(old)] = nw
		}
	}
	type pair struct {
		gi int
		p  ColumnPair
	}
	var pairs []pair
	taken := map[int]string{} // ghost ordinal -> source column
	for _, sc := range source.Columns {
		key := strings.ToLower(sc.Name)
		if dropped[key] {
			continue
		}
		target, renamed := renames[key]
		if !renamed {
			target = sc.Name
		}
		gi := ghost.ColumnIndex(target)
		if gi < 0 {
			if renamed {
				return nil, newErr(fmt.Sprintf("the ALTER renames column %s to %s, but the new table has no column %s",
					quote(sc.Name), quote(target), quote(target)), "check the CHANGE / RENAME COLUMN clause")
			}
			return nil, newErr(fmt.Sprintf("column %s of the old table is missing from the new table, but the ALTER does not drop it",
				quote(sc.Name)), "drop the column explicitly (DROP COLUMN) so that losing its values is intended")
		}
		if prev, dup := taken[gi]; dup {
			return nil, newErr(fmt.Sprintf("columns %s and %s of the old table would both be copied to column %s of the new table",
				quote(prev), quote(sc.Name), quote(ghost.Columns[gi].Name)), "check the renames in the ALTER")
		}
		taken[gi] = sc.Name
		if sc.Generated && !ghost.Columns[gi].Generated {
			// The server keeps a STORED column's values when it becomes a
			// plain one; neither the copy nor the applier would write them.
			return nil, newErr(fmt.Sprintf("column %s is generated in the old table and a plain column in the new one: recast cannot carry its values over",
				quote(sc.Name)), "run this ALTER natively, or add a new plain column, fill it from the generated one, then drop the generated one")
		}
		if sc.Generated || ghost.Columns[gi].Generated {
			continue
		}
		pairs = append(pairs, pair{gi, ColumnPair{Source: sc.Name, Ghost: ghost.Columns[gi].Name}})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].gi < pairs[j].gi })
	out := make([]ColumnPair, len(pairs))
	for i, p := range pairs {
		out[i] = p.p
	}
	return out, nil
}

// errNoSharedKeyCause is the cause SharedKey reports when no key qualifies.
const errNoSharedKeyCause = "no usable key: recast needs a PRIMARY KEY or a UNIQUE key on NOT NULL columns present in both the old and the new table (an ENUM, SET, BIT, FLOAT or DOUBLE column of the key must keep its type, and a string column must keep its collation: another one can make distinct values equal or sort them otherwise, as _bin to _ci and _ci to _bin do; nor may it become a number)"

// SharedKey picks the key that chunks the source and identifies rows in both
// tables: the first identifying key of the source (unique, every column NOT
// NULL and not generated; PRIMARY first) whose columns all map through pairs
// to ghost columns that form, as a set, an identifying key of the ghost. It
// returns the source key's columns in key order and, position by position,
// the ghost columns they map to.
func SharedKey(source, ghost *table.Table, pairs []ColumnPair) (src, gh []string, err error) {
	toGhost := make(map[string]string, len(pairs))
	for _, p := range pairs {
		toGhost[strings.ToLower(p.Source)] = p.Ghost
	}
	ghostKeys := ghost.IdentifyingKeys()
	for _, k := range source.IdentifyingKeys() {
		ks, kg, ok := mapKey(source, toGhost, k.Columns)
		if !ok || !boundsCarry(source, ghost, ks, kg) {
			continue
		}
		for _, gk := range ghostKeys {
			if SameSet(gk.Columns, kg) {
				return ks, kg, nil
			}
		}
	}
	// Widening (gh-ost's shared-uk): an old unique key whose columns are
	// part of a new unique key, e.g. PRIMARY KEY (id) -> (id, i). The old
	// key chunks the copy; the applier identifies rows by the new key
	// (ApplyKey), which is unique in the old table too (it contains a
	// unique key).
	for _, k := range source.IdentifyingKeys() {
		ks, kg, ok := mapKey(source, toGhost, k.Columns)
		if !ok || !boundsCarry(source, ghost, ks, kg) {
			continue
		}
		if as, _ := ApplyKey(source, ghost, pairs, ks, kg); as != nil {
			return ks, kg, nil
		}
	}
	return nil, nil, newErr(errNoSharedKeyCause,
		"add one first (with a plain ALTER TABLE), or change the ALTER so that the new table keeps a unique key of the old one")
}

// boundsCarry reports whether the key's values, bound as the copy binds
// them (table.KeyArg), select the same rows in the new table as in the
// old: a column bound as a number of its type's making (ENUM's index,
// SET's mask, BIT, FLOAT and DOUBLE as read from the old type) keeps its
// type exactly. The checksum compares the two tables range by range with
// the old table's values.
func boundsCarry(source, ghost *table.Table, src, gh []string) bool {
	for i := range src {
		sc := source.Columns[source.ColumnIndex(src[i])]
		gi := ghost.ColumnIndex(gh[i])
		if gi < 0 {
			return false
		}
		if Coarsens(sc, ghost.Columns[gi]) || reorders(sc, ghost.Columns[gi]) {
			return false
		}
		if table.KeyNumbered(sc) && !strings.EqualFold(sc.ColumnType, ghost.Columns[gi].ColumnType) {
			return false
		}
	}
	return true
}

// reorders reports whether a character key column's values sort otherwise
// in the new table: another collation (made _bin from _ci, 'B1' sorts
// before 'a2'), or bytes made characters. The checksum compares the tables
// range by range with the old table's bounds, and with more rows than one
// of its chunks a row fell in another range on each side: the run failed
// after its copy ("missing from the new table") where it can be refused at
// the start. (utf8mb3 and utf8mb4 names of one collation sort alike.)
func reorders(sc, gc table.Column) bool {
	switch {
	case !table.IsStringType(sc.DataType):
		return false // numbers and temporals are bound as such: they compare so in either table
	case !table.IsStringType(gc.DataType):
		return true // text made a number: '10' sorts before '9' as text
	case sc.Charset == "" && gc.Charset == "":
		return false // bytes to bytes
	case sc.Charset == "" || gc.Charset == "":
		return true // bytes to characters, or the reverse
	}
	return normCollation(sc.Collation) != normCollation(gc.Collation)
}

// normCollation names utf8mb3's (utf8's) collations as utf8mb4's.
func normCollation(c string) string {
	for _, p := range []string{"utf8mb3_", "utf8_"} {
		if strings.HasPrefix(c, p) {
			return "utf8mb4_" + strings.TrimPrefix(c, p)
		}
	}
	return c
}

// Coarsens reports whether the new column's comparison can make distinct
// values of the old one equal: a case- or accent-sensitive (_bin, _cs) or
// binary string column given a collation that is not, a NO PAD one given a
// PAD SPACE one or made CHAR (trailing spaces). Such a column cannot
// identify rows in both tables: the applier's REPLACE and DELETE by key
// would meet the other row ('a' for 'A'). (Collations that differ only in
// the name of utf8mb3/utf8mb4 compare alike.) A change between two
// insensitive collations counts too: each has equalities the other has not
// ('ss' and 'ß' are equal under utf8mb4_unicode_ci, not under
// utf8mb4_general_ci; 'u' and 'ü' under utf8mb4_general_ci, not under
// latin1_swedish_ci), and the applier's DELETE of one by key would remove
// the other in the new table for good.
func Coarsens(sc, gc table.Column) bool {
	if gc.Charset == "" && sc.Charset == "" {
		return false // binary to binary: byte for byte
	}
	if gc.Charset == "" {
		return false // into bytes: no two values become equal
	}
	norm := normCollation
	noPad := func(c string) bool { return strings.Contains(c, "nopad") || strings.Contains(c, "_0900_") }
	if sc.Charset != "" && norm(sc.Collation) == norm(gc.Collation) {
		return noPad(sc.Collation) && gc.DataType == "char" && sc.DataType != "char"
	}
	if sc.Charset == "" {
		if !table.IsBinaryType(sc.DataType) {
			return false // a number or a date made text: distinct values stay distinct
		}
		// Bytes into characters: 'a' and 'a ' stay apart only under a NO
		// PAD binary collation.
		return !(noPad(gc.Collation) && strings.HasSuffix(gc.Collation, "_bin"))
	}
	switch {
	case noPad(sc.Collation) && !noPad(gc.Collation):
		return true
	case !strings.HasSuffix(gc.Collation, "_bin"):
		// Into an insensitive collation from another one, exact (_bin,
		// _cs) or not: some values distinct there are equal here. Into a
		// _cs one too: a UCA _as_cs collation still equates a precomposed
		// 'é' with 'e' and a combining accent, which _bin keeps apart.
		return true
	}
	return false // into code-point order (_bin): distinct values stay distinct
}

// mapKey maps a source key's columns to ghost columns; ok is false when a
// column is not carried over.
func mapKey(source *table.Table, toGhost map[string]string, cols []string) (src, gh []string, ok bool) {
	for _, c := range cols {
		g, mapped := toGhost[strings.ToLower(c)]
		if !mapped {
			return nil, nil, false
		}
		src = append(src, source.Columns[source.ColumnIndex(c)].Name)
		gh = append(gh, g)
	}
	return src, gh, true
}

// ApplyKey returns the key that identifies rows in the new table for the
// shared key (src, gh) that SharedKey picked: (src, gh) itself when the new
// table has it as a unique key, else the new table's smallest identifying
// key that contains gh and whose columns all come from old columns
// (widening), as old and new names. nil: none.
func ApplyKey(source, ghost *table.Table, pairs []ColumnPair, src, gh []string) (asrc, agh []string) {
	toSource := make(map[string]string, len(pairs))
	for _, p := range pairs {
		toSource[strings.ToLower(p.Ghost)] = p.Source
	}
	for _, gk := range ghost.IdentifyingKeys() {
		if SameSet(gk.Columns, gh) {
			return src, gh
		}
	}
	for _, gk := range ghost.IdentifyingKeys() {
		if !subset(gh, gk.Columns) || (agh != nil && len(gk.Columns) >= len(agh)) {
			continue
		}
		var s, g []string
		for _, c := range gk.Columns {
			sc, ok := toSource[strings.ToLower(c)]
			if !ok {
				s = nil
				break
			}
			s = append(s, source.Columns[source.ColumnIndex(sc)].Name)
			g = append(g, ghost.Columns[ghost.ColumnIndex(c)].Name)
		}
		if s != nil {
			asrc, agh = s, g
		}
	}
	return asrc, agh
}

// subset reports whether every name of a is in b, case-insensitively.
func subset(a, b []string) bool {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[strings.ToLower(s)] = true
	}
	for _, s := range a {
		if !in[strings.ToLower(s)] {
			return false
		}
	}
	return true
}

// SameSet reports whether a and b hold the same names, case-insensitively.
func SameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, s := range a {
		seen[strings.ToLower(s)]++
	}
	for _, s := range b {
		k := strings.ToLower(s)
		if seen[k] == 0 {
			return false
		}
		seen[k]--
	}
	return true
}
