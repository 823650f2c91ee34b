package workload

// Config.KeyOnU: the primary key is u, VARCHAR(64) utf8mb4_general_ci, a
// collation-sensitive key: two values can be equal under the collation while
// their bytes differ ('abc' = 'ABC' = 'abc ' = 'àbç'). An applier that
// coalesces or partitions changes by the key's bytes sees two different keys
// where the server sees one row; the ops below produce exactly those changes:
//
//   - variant: UPDATE u to a value equal under the collation, different in
//     bytes (case, trailing spaces, accents and other equal characters),
//     sometimes with other columns;
//   - re-insert: DELETE a row and INSERT one whose key equals the deleted key
//     under the collation (same id or a fresh one), in one transaction,
//     sometimes followed by another variant of the new row's key;
//   - chain: two or three variants of one row's key in one transaction,
//     sometimes back to the original bytes (A -> A' -> A), sometimes followed
//     by a DELETE of the row;
//
// alone, inside multi-op transactions, and next to the ordinary ops (which
// change keys too: an update may give u a fresh value, a swap exchanges two
// rows' keys through a temporary one).
//
// Uniqueness: every u starts with a prefix unique under the collation (the
// writer's "w<w>.<nonce>-" or Prepare's "p-", then a sequence number), and a
// variant is equal to its original under the collation, so it is equal to no
// other row's key: a variant UPDATE never meets a duplicate key.
//
// The shadow holds the bytes sent, which is what the server stores
// (VARCHAR keeps trailing spaces; strict mode refuses what does not fit), and
// Verify compares them byte for byte in Go, not under the collation.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Op weights in KeyOnU mode (out of 100).
const (
	kInsert   = 14
	kUpdate   = 22 // sometimes gives u a fresh value: a key change to another key
	kDelete   = 10
	kPK       = 5  // changes id (the unique key uk_id in this layout)
	kVariant  = 14 // autocommit
	kSwap     = 5  // in a transaction
	kReinsert = 8  // in a transaction
	kChain    = 6  // in a transaction
	// the rest: multi-op transactions of all of the above

	kAuto = kInsert + kUpdate + kDelete + kPK + kVariant // single autocommit statements below this
	kOne  = kAuto + kSwap + kReinsert + kChain           // one multi-statement op below this
)

// opKeyOnU is op for Config.KeyOnU.
func (wr *writer) opKeyOnU(ctx context.Context) error {
	t := &tx{touched: map[int64]bool{}}
	p := wr.r.IntN(100)
	switch {
	case p < kAuto:
		if err := wr.subOpKeyOnU(ctx, t, p); err != nil {
			return err
		}
		wr.apply(t)
		return nil
	case p < kOne:
		return wr.inTx(ctx, t, func() error { return wr.subOpKeyOnU(ctx, t, p) })
	}
	k := 2 + wr.r.IntN(4)
	return wr.inTx(ctx, t, func() error {
		for range k {
			if err := wr.subOpKeyOnU(ctx, t, wr.r.IntN(kOne)); err != nil {
				return err
			}
		}
		return nil
	})
}

// subOpKeyOnU runs the op chosen by p (< kOne); those at or above kAuto
// need a transaction.
func (wr *writer) subOpKeyOnU(ctx context.Context, t *tx, p int) error {
	switch {
	case p < kInsert:
		return wr.insert(ctx, t)
	case p < kInsert+kUpdate:
		return wr.update(ctx, t)
	case p < kInsert+kUpdate+kDelete:
		return wr.delete(ctx, t)
	case p < kInsert+kUpdate+kDelete+kPK:
		return wr.updatePK(ctx, t)
	case p < kAuto:
		return wr.variantU(ctx, t)
	case p < kAuto+kSwap:
		return wr.swapU(ctx, t)
	case p < kAuto+kSwap+kReinsert:
		return wr.reinsert(ctx, t)
	default:
		return wr.chain(ctx, t)
	}
}

// variantU sets a row's u to a variant of it, and 0-2 other columns, in one UPDATE.
func (wr *writer) variantU(ctx context.Context, t *tx) error {
	if wr.frozen[colU] {
		return wr.update(ctx, t)
	}
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	cur, ok := wr.sh.get(id)
	if !ok {
		return fmt.Errorf("workload: shadow lost id %d", id)
	}
	fs := unpack(cur)
	old := fs[colU].v
	u := keyVariant(wr.r, old)
	sets, args := []string{"`u`=?"}, []any{u}
	fs[colU] = field{v: u}
	chosen := map[int]bool{}
	for range wr.r.IntN(3) {
		i := colU + 1 + wr.r.IntN(len(columns)-colU-1)
		if chosen[i] || wr.frozen[i] {
			continue
		}
		chosen[i] = true
		v := randomValue(wr.r, i)
		sets = append(sets, quoteIdent(columns[i].name)+"=?")
		args = append(args, v.param)
		fs[i] = field{v: v.canon, null: v.null}
	}
	args = append(args, id)
	if err := wr.execOne(ctx, "UPDATE "+wr.table+" SET "+strings.Join(sets, ",")+" WHERE `id`=?", args...); err != nil {
		return fmt.Errorf("key variant of id %d (%q -> %q): %w", id, old, u, err)
	}
	t.touched[id] = true
	packed := pack(fs)
	t.effects = append(t.effects, func() {
		wr.sh.put(id, packed)
		wr.countVariant(old, u)
	})
	return nil
}

// reinsert deletes a row and inserts a row (same id or a fresh one, new
// values) whose u equals the deleted u under the collation; half the time
// it then changes the new row's u to another variant.
func (wr *writer) reinsert(ctx context.Context, t *tx) error {
	if wr.frozen[colU] {
		return wr.update(ctx, t)
	}
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	cur, ok := wr.sh.get(id)
	if !ok {
		return fmt.Errorf("workload: shadow lost id %d", id)
	}
	old := unpack(cur)[colU].v
	if err := wr.execOne(ctx, "DELETE FROM "+wr.table+" WHERE `id`=?", id); err != nil {
		return fmt.Errorf("re-insert: delete of id %d: %w", id, err)
	}
	nid := id
	if wr.r.IntN(2) == 0 {
		nid = wr.freshID()
	}
	u := keyVariant(wr.r, old)
	vals := randomRow(wr.r, nid, "")
	vals[colU] = value{param: u, canon: u}
	fs, err := wr.insertRow(ctx, nid, vals)
	if err != nil {
		return fmt.Errorf("re-insert of %q as %q (id %d -> %d): %w", old, u, id, nid, err)
	}
	var flips [][2]string
	if wr.r.IntN(2) == 0 {
		u2 := keyVariant(wr.r, u)
		if err := wr.execOne(ctx, "UPDATE "+wr.table+" SET `u`=? WHERE `id`=?", u2, nid); err != nil {
			return fmt.Errorf("re-insert: key variant of id %d (%q -> %q): %w", nid, u, u2, err)
		}
		fs[colU] = field{v: u2}
		flips = append(flips, [2]string{u, u2})
	}
	t.touched[id], t.touched[nid] = true, true
	packed := pack(fs)
	t.effects = append(t.effects, func() {
		wr.sh.del(id)
		wr.owned.remove(id)
		wr.sh.put(nid, packed)
		wr.owned.add(nid)
		wr.l.c.reinserts.Add(1)
		for _, f := range flips {
			wr.countVariant(f[0], f[1])
		}
	})
	return nil
}

// chain changes one row's u two or three times (a third of the time ending
// back at the original bytes), then a third of the time deletes the row.
func (wr *writer) chain(ctx context.Context, t *tx) error {
	if wr.frozen[colU] {
		return wr.update(ctx, t)
	}
	id, ok := wr.pick(t)
	if !ok {
		return wr.insert(ctx, t)
	}
	cur, ok := wr.sh.get(id)
	if !ok {
		return fmt.Errorf("workload: shadow lost id %d", id)
	}
	fs := unpack(cur)
	orig := fs[colU].v
	steps := []string{orig}
	for range 2 + wr.r.IntN(2) {
		steps = append(steps, keyVariant(wr.r, steps[len(steps)-1]))
	}
	if wr.r.IntN(3) == 0 && steps[len(steps)-1] != orig {
		steps = append(steps, orig)
	}
	for i := 1; i < len(steps); i++ {
		if err := wr.execOne(ctx, "UPDATE "+wr.table+" SET `u`=? WHERE `id`=?", steps[i], id); err != nil {
			return fmt.Errorf("chain: key variant of id %d (%q -> %q): %w", id, steps[i-1], steps[i], err)
		}
	}
	del := wr.r.IntN(3) == 0
	if del {
		if err := wr.execOne(ctx, "DELETE FROM "+wr.table+" WHERE `id`=?", id); err != nil {
			return fmt.Errorf("chain: delete of id %d: %w", id, err)
		}
	}
	t.touched[id] = true
	fs[colU] = field{v: steps[len(steps)-1]}
	packed := pack(fs)
	t.effects = append(t.effects, func() {
		if del {
			wr.sh.del(id)
			wr.owned.remove(id)
		} else {
			wr.sh.put(id, packed)
		}
		for i := 1; i < len(steps); i++ {
			wr.countVariant(steps[i-1], steps[i])
		}
	})
	return nil
}

// execOne runs a statement that must affect exactly one row.
func (wr *writer) execOne(ctx context.Context, q string, args ...any) error {
	n, err := wr.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("affected %d rows, want 1", n)
	}
	return nil
}

// countVariant counts a committed change of u from a to b.
func (wr *writer) countVariant(a, b string) {
	c := &wr.l.c
	switch variantKindOf(a, b) {
	case variantSpace:
		c.spaceFlips.Add(1)
	case variantCase:
		c.caseFlips.Add(1)
	default:
		c.accentFlips.Add(1)
	}
}

type variantKind int

const (
	variantCase   variantKind = iota // only letters' case differs
	variantSpace                     // only trailing spaces differ
	variantAccent                    // other characters differ (maybe case and spaces too)
)

// variantKindOf classifies the difference between two variants of a key.
func variantKindOf(a, b string) variantKind {
	ta, tb := strings.TrimRight(a, " "), strings.TrimRight(b, " ")
	switch {
	case ta == tb:
		return variantSpace
	case a == strings.TrimRight(a, " ") && b == strings.TrimRight(b, " ") && asciiFold(a) == asciiFold(b):
		return variantCase
	default:
		return variantAccent
	}
}

func asciiFold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// keySuffixes follow the unique part of a KeyOnU key; they hold characters
// that have equal-under-the-collation counterparts (see equalRunes), and
// none starts with a digit (the unique part ends with a sequence number).
var keySuffixes = []string{"", "", "-e", "-é", "-Été", "-😀", "-a🎉", "-ß", "-sun", "-x y", "-ça", "-ñu", "-ü"}

// keyValue returns a KeyOnU key: base (unique under the collation), a
// suffix, and now and then a case change or trailing spaces.
func keyValue(r *rand.Rand, base string) value {
	u := base + keySuffixes[r.IntN(len(keySuffixes))]
	if r.IntN(4) == 0 {
		u = caseVariant(r, u)
	}
	if r.IntN(8) == 0 {
		u += strings.Repeat(" ", 1+r.IntN(2))
	}
	return value{param: u, canon: u}
}

// keyVariant returns a value that utf8mb4_general_ci (PAD SPACE) holds
// equal to u but whose bytes differ from u's: u with letters' case flipped,
// trailing spaces added or removed, or characters swapped for equal ones.
func keyVariant(r *rand.Rand, u string) string {
	switch r.IntN(3) {
	case 1:
		return spaceVariant(r, u)
	case 2:
		if v, ok := accentVariant(r, u); ok {
			return v
		}
	}
	if v, ok := tryCaseVariant(r, u); ok {
		return v
	}
	return spaceVariant(r, u)
}

// caseVariant flips the case of some ASCII letters of u (at least one, if
// there is one).
func caseVariant(r *rand.Rand, u string) string {
	v, _ := tryCaseVariant(r, u)
	return v
}

func tryCaseVariant(r *rand.Rand, u string) (string, bool) {
	b := []byte(u)
	first, flipped := -1, false
	for i, c := range b {
		if !isASCIILetter(c) {
			continue
		}
		if first < 0 {
			first = i
		}
		if r.IntN(2) == 0 {
			b[i] ^= 0x20
			flipped = true
		}
	}
	if first < 0 {
		return u, false
	}
	if !flipped {
		b[first] ^= 0x20
	}
	return string(b), true
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// spaceVariant removes some trailing spaces of u, or adds one or two.
func spaceVariant(r *rand.Rand, u string) string {
	t := strings.TrimRight(u, " ")
	if n := len(u) - len(t); n > 0 {
		return u[:len(u)-1-r.IntN(n)]
	}
	return u + strings.Repeat(" ", 1+r.IntN(2))
}

// equalRunes are classes of characters utf8mb4_general_ci holds equal
// (checked against the server by TestKeyVariantsEqualUnderCollation). In
// that collation every character outside the BMP weighs the same.
var equalRunes = [][]rune{
	[]rune("eéèêÉ"),
	[]rune("aàåâ"),
	[]rune("cç"),
	[]rune("nñ"),
	[]rune("uüú"),
	[]rune("sß"),
	[]rune("😀🎉🚀🦀"),
}

var equalClass = func() map[rune]int {
	m := map[rune]int{}
	for i, cl := range equalRunes {
		for _, c := range cl {
			m[c] = i
		}
	}
	return m
}()

// accentVariant swaps one or more characters of u that have an equal
// counterpart for a different one of their class; ok is false if u has none.
func accentVariant(r *rand.Rand, u string) (string, bool) {
	rs := []rune(u)
	var at []int
	for i, c := range rs {
		if _, ok := equalClass[c]; ok {
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return u, false
	}
	r.Shuffle(len(at), func(i, j int) { at[i], at[j] = at[j], at[i] })
	for _, i := range at[:1+r.IntN(len(at))] {
		cl := equalRunes[equalClass[rs[i]]]
		c := cl[r.IntN(len(cl)-1)]
		if c == rs[i] {
			c = cl[len(cl)-1]
		}
		rs[i] = c
	}
	return string(rs), true
}
