package pipeline

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/table"
)

// deferRig feeds events through a Deferrer and records what it hands on.
type deferRig struct {
	d   *Deferrer
	out []binlog.Event
}

func newDeferRig(t *testing.T, cols []table.Column, key ...string) *deferRig {
	t.Helper()
	d, err := NewDeferrer(&table.Table{Schema: "s", Name: "t", Columns: cols}, key)
	if err != nil {
		t.Fatal(err)
	}
	r := &deferRig{d: d}
	d.add = func(ev binlog.Event) { r.out = append(r.out, ev) }
	return r
}

var intKey = []table.Column{{Name: "id", DataType: "int"}, {Name: "v", DataType: "varchar", Charset: "utf8mb4"}}

func dins(id int64, v string) binlog.Event {
	return binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{id, []byte(v)}}}}
}

func dupd(from, to int64, v string) binlog.Event {
	return binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Update, Before: []any{from, []byte("old")}, After: []any{to, []byte(v)}}}}
}

func dcommit(off uint32) binlog.Event {
	return binlog.Event{Pos: binlog.Position{File: "b.000001", Offset: off}, Boundary: true}
}

func dmark(id int64) binlog.Event { return binlog.Event{Marks: []int64{id}} }

// names renders the events handed on, for comparisons.
func (r *deferRig) names() []string {
	var out []string
	for _, ev := range r.out {
		switch {
		case len(ev.Rows) > 0:
			rc := ev.Rows[0]
			img := rc.After
			if img == nil {
				img = rc.Before
			}
			out = append(out, fmt.Sprintf("%s:%v", rc.Kind, img[0]))
		case ev.Boundary:
			out = append(out, fmt.Sprintf("commit:%d", ev.Pos.Offset))
		default:
			out = append(out, "marks")
		}
	}
	return out
}

func dsame(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handed on %v, want %v", got, want)
	}
}

func TestDeferHoldsChangesInAnOpenRange(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	id := r.d.Open([]any{"10"}, []any{"20"})
	r.d.Take(dins(15, "a")) // read before the mark: the snapshot sees it
	r.d.Take(dcommit(100))
	r.d.Take(dmark(id))
	r.d.Take(dcommit(200))
	r.d.Take(dins(25, "b")) // outside, nothing held: passes
	r.d.Take(dcommit(300))
	r.d.Take(dins(20, "c")) // inside (hi is inclusive): held
	r.d.Take(dins(30, "d")) // behind a held change: held
	r.d.Take(dcommit(400))
	r.d.Take(dins(10, "e")) // lo is exclusive, but behind held: held
	dsame(t, r.names(), []string{"insert:15", "commit:100", "commit:200", "insert:25", "commit:300"})
	if r.d.Held() != 4 {
		t.Fatalf("held %d, want 4", r.d.Held())
	}
	r.d.Close(id)
	dsame(t, r.names(), []string{"insert:15", "commit:100", "commit:200", "insert:25", "commit:300", "insert:20", "insert:30", "commit:400", "insert:10"})
	if r.d.Held() != 0 {
		t.Fatalf("held %d after close", r.d.Held())
	}
	r.d.Take(dins(15, "f")) // the range is closed: passes
	if n := len(r.out); n != 10 {
		t.Fatalf("%d events handed on, want 10", n)
	}
}

func TestDeferKeyMoveOutOfTheRangeIsHeld(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	id := r.d.Open([]any{"10"}, []any{"20"})
	r.d.Take(dmark(id))
	r.d.Take(dupd(15, 99, "moved")) // before image in range
	r.d.Take(dupd(99, 98, "again")) // its new key, outside: behind it
	dsame(t, r.names(), nil)
	r.d.Close(id)
	dsame(t, r.names(), []string{"update:99", "update:98"})
	// Into the range from outside: the after image counts too.
	id = r.d.Open([]any{"10"}, []any{"20"})
	r.d.Take(dmark(id))
	r.d.Take(dupd(50, 12, "in"))
	if r.d.Held() != 1 {
		t.Fatal("a key moved into the range was not held")
	}
	r.d.Close(id)
}

func TestDeferClosedBeforeItsMarkIsRead(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	id := r.d.Open(nil, []any{"20"})
	r.d.Close(id) // the pump lags: the chunk ended before it read the mark
	r.d.Take(dmark(id))
	r.d.Take(dins(5, "a"))
	dsame(t, r.names(), []string{"insert:5"})
	if st := r.d.Stats(); st.Ranges != 0 || st.Held != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDeferUnknownMarksAreIgnored(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	r.d.Take(dmark(12345)) // an earlier run's mark, streamed again after --resume
	r.d.Take(dins(5, "a"))
	dsame(t, r.names(), []string{"insert:5"})
}

func TestDeferWaitsForEveryRangeOpenWhenRead(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	a := r.d.Open(nil, []any{"10"})
	b := r.d.Open([]any{"10"}, []any{"20"})
	r.d.Take(dmark(a))
	r.d.Take(dmark(b))
	r.d.Take(dins(5, "a"))  // waits for a
	r.d.Take(dins(15, "b")) // waits for b
	r.d.Close(b)
	dsame(t, r.names(), nil) // b's change is behind a's
	c := r.d.Open([]any{"20"}, []any{"30"})
	r.d.Take(dmark(c))
	r.d.Close(a)
	dsame(t, r.names(), []string{"insert:5", "insert:15"}) // read before c's mark: not c's
	r.d.Take(dins(25, "c"))
	r.d.Close(c)
	dsame(t, r.names(), []string{"insert:5", "insert:15", "insert:25"})
}

func TestDeferUncomparableKeyHoldsEverything(t *testing.T) {
	cols := []table.Column{{Name: "k", DataType: "varchar", Charset: "utf8mb4", Collation: "utf8mb4_general_ci"}, {Name: "v", DataType: "int"}}
	r := newDeferRig(t, cols, "k")
	if r.d.Exact() {
		t.Fatal("a case-insensitive key counted as exact")
	}
	id := r.d.Open([]any{"a"}, []any{"b"})
	r.d.Take(dmark(id))
	// Under a collation the Deferrer must not decide the order itself.
	r.d.Take(binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{[]byte("ZZZ"), int64(1)}}}})
	if r.d.Held() != 1 {
		t.Fatal("a change to a key compared under a collation was not held")
	}
	r.d.Close(id)
	if r.d.Held() != 0 || len(r.out) != 1 {
		t.Fatal("not released")
	}
}

func TestDeferCompositeAndUnsignedAndBinaryKeys(t *testing.T) {
	cols := []table.Column{{Name: "a", DataType: "bigint", Unsigned: true}, {Name: "b", DataType: "varbinary"}}
	r := newDeferRig(t, cols, "a", "b")
	if !r.d.Exact() {
		t.Fatal("unsigned + varbinary should be exact")
	}
	id := r.d.Open([]any{"18446744073709551615", []byte("m")}, nil) // (a, b) > (max, 'm')
	r.d.Take(dmark(id))
	r.d.Take(binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{uint64(1<<64 - 1), []byte("a")}}}})
	if r.d.Held() != 0 {
		t.Fatal("(max, 'a') is below the range")
	}
	r.d.Take(binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{uint64(1<<64 - 1), []byte("n")}}}})
	if r.d.Held() != 1 {
		t.Fatal("(max, 'n') is in the range")
	}
	r.d.Close(id)
}

// TestDeferRandomizedOrder checks, over random interleavings, the two
// properties the applier relies on: events are handed on in the order they
// were taken, and none is handed on while a range it touches (open when it
// was read) is still open.
func TestDeferRandomizedOrder(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		r := newDeferRig(t, intKey, "id")
		type rangeState struct {
			id     int64
			lo, hi int64
			marked bool
		}
		var open []*rangeState
		var seq int64
		var order []int64
		blockers := map[int64][]*rangeState{}
		closedAt := map[*rangeState]bool{} // set just before Close
		for step := 0; step < 400; step++ {
			switch x := rng.IntN(10); {
			case x < 2 && len(open) < 4:
				lo := int64(rng.IntN(90))
				rs := &rangeState{lo: lo, hi: lo + int64(rng.IntN(20)+1)}
				rs.id = r.d.Open([]any{fmt.Sprint(rs.lo)}, []any{fmt.Sprint(rs.hi)})
				open = append(open, rs)
			case x < 3 && len(open) > 0:
				i := rng.IntN(len(open))
				if !open[i].marked {
					open[i].marked = true
					r.d.Take(dmark(open[i].id))
				}
			case x < 4 && len(open) > 0:
				i := rng.IntN(len(open))
				rs := open[i]
				open = append(open[:i], open[i+1:]...)
				closedAt[rs] = true
				r.d.Close(rs.id)
			default:
				seq++
				k := int64(rng.IntN(110))
				ev := dins(k, "x")
				ev.Pos = binlog.Position{File: "b", Offset: uint32(seq)}
				for _, rs := range open {
					if rs.marked && k > rs.lo && k <= rs.hi {
						blockers[seq] = append(blockers[seq], rs)
					}
				}
				order = append(order, seq)
				r.d.Take(ev)
			}
			// Every event handed on so far: in order, and none whose range is open.
			for i, ev := range r.out {
				if int64(ev.Pos.Offset) != order[i] {
					t.Fatalf("seed %d: event %d handed on at %d", seed, ev.Pos.Offset, i)
				}
				for _, rs := range blockers[int64(ev.Pos.Offset)] {
					if _, closed := closedAt[rs]; !closed {
						t.Fatalf("seed %d: event %d handed on while its range (%d,%d] is open", seed, ev.Pos.Offset, rs.lo, rs.hi)
					}
				}
			}
		}
		for _, rs := range open {
			r.d.Close(rs.id)
		}
		if len(r.out) != len(order) || r.d.Held() != 0 {
			t.Fatalf("seed %d: %d of %d handed on, %d held", seed, len(r.out), len(order), r.d.Held())
		}
	}
}

func TestDeferStatsNow(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	a := r.d.Open(nil, []any{"20"})
	b := r.d.Open([]any{"20"}, []any{"40"})
	if st := r.d.Stats(); st.Open != 2 || st.HeldNow != 0 {
		t.Fatalf("two ranges opened: stats %+v", st)
	}
	r.d.Take(dmark(a))
	r.d.Take(dins(5, "a"))
	r.d.Take(dcommit(100))
	if st := r.d.Stats(); st.Open != 2 || st.HeldNow != 2 || st.MaxHeld != 2 || st.Ranges != 1 {
		t.Fatalf("one range active, an insert and its commit held: stats %+v", st)
	}
	r.d.Close(a)
	if st := r.d.Stats(); st.Open != 1 || st.HeldNow != 0 || st.MaxHeld != 2 || st.Released != 2 {
		t.Fatalf("range closed: stats %+v", st)
	}
	r.d.Close(b)
	if st := r.d.Stats(); st.Open != 0 {
		t.Fatalf("all closed: stats %+v", st)
	}
}

// TestExactKey: only integer and VARBINARY key columns are compared exactly
// (the migration copies other keys with the locking copy).
func TestExactKey(t *testing.T) {
	src := &table.Table{Schema: "s", Name: "t", Columns: []table.Column{
		{Name: "id", DataType: "bigint", Unsigned: true}, {Name: "b", DataType: "varbinary"},
		{Name: "u", DataType: "varchar", Charset: "utf8mb4"}, {Name: "d", DataType: "decimal"},
	}}
	for _, c := range []struct {
		key  []string
		want bool
	}{{[]string{"id"}, true}, {[]string{"id", "b"}, true}, {[]string{"u"}, false}, {[]string{"id", "d"}, false}, {[]string{"nope"}, false}} {
		if got := ExactKey(src, c.key); got != c.want {
			t.Errorf("ExactKey(%v) = %v, want %v", c.key, got, c.want)
		}
	}
}

// rowsOf renders the row changes handed on (commits and marks left out).
func (r *deferRig) rowsOf() []string {
	var out []string
	for _, ev := range r.out {
		for _, rc := range ev.Rows {
			img := rc.After
			if img == nil {
				img = rc.Before
			}
			out = append(out, fmt.Sprintf("%s:%v", rc.Kind, img[0]))
		}
	}
	return out
}

func ddel(id int64) binlog.Event {
	return binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Delete, Before: []any{id, []byte("old")}}}}
}

func TestDeferSkipUncopied(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	r.d.SkipUncopied([]any{"100"})
	r.d.Take(dins(50, "a"))  // no chunk read yet: dropped
	r.d.Take(dcommit(100))   // the boundary still goes on
	r.d.Take(dins(150, "b")) // above the copy's end: the applier's alone
	r.d.Take(dins(100, "c")) // the end itself is copied: dropped
	a := r.d.Open(nil, []any{"20"})
	r.d.Take(dins(15, "d")) // before the mark: the chunk sees it, dropped
	r.d.Take(dmark(a))
	r.d.Take(dins(21, "e")) // above the bound: dropped, nothing held yet
	r.d.Take(dins(15, "f")) // in the open range: held
	r.d.Take(ddel(60))      // uncopied: dropped as it comes in (its event is held behind the one before)
	r.d.Close(a)
	r.d.Take(dupd(10, 50, "g")) // the new key is not copied: only the delete of 10 goes
	r.d.Take(dupd(70, 5, "h"))  // the old key was never written: only the insert of 5 goes
	r.d.Take(dupd(80, 90, "i")) // both above: dropped
	r.d.Take(dupd(3, 4, "j"))   // both below: as it is
	dsame(t, r.rowsOf(), []string{"insert:150", "insert:15", "delete:10", "insert:5", "update:4"})
	if len(r.out) != 12 {
		t.Fatalf("%d events handed on, want all 12 but the mark (rows dropped, events kept)", len(r.out))
	}
	if r.out[1].Pos.Offset != 100 || !r.out[1].Boundary {
		t.Fatalf("the commit after a dropped change: %+v", r.out[1])
	}
	if st := r.d.Stats(); st.Skipped != 6 {
		t.Fatalf("skipped %d row changes, want 6 (50, 100, 15 before the mark, 21, 60, the update 80→90; a dropped half does not count)", st.Skipped)
	}
	b := r.d.Open([]any{"20"}, nil) // the last range, unbounded: the skipping ends at its mark
	r.d.Take(dmark(b))
	r.d.Close(b)
	r.out = nil
	r.d.Take(dins(99, "k"))
	dsame(t, r.rowsOf(), []string{"insert:99"})
}

// TestDeferSkipBoundMovesAtAnEarlyClosedMark: a chunk that ended before the
// pump read its mark still raises the bound when the mark is read (a change
// after the mark is not in its snapshot and must be applied).
func TestDeferSkipBoundMovesAtAnEarlyClosedMark(t *testing.T) {
	r := newDeferRig(t, intKey, "id")
	r.d.SkipUncopied([]any{"100"})
	a := r.d.Open(nil, []any{"20"})
	r.d.Close(a)
	r.d.Take(dins(15, "a")) // before the mark: in the chunk's snapshot
	r.d.Take(dmark(a))
	r.d.Take(dins(15, "b")) // after it: applied
	r.d.Take(dins(25, "c")) // above: dropped
	dsame(t, r.rowsOf(), []string{"insert:15"})
	if len(r.out[0].Rows) != 0 || r.out[1].Rows[0].After[1].([]byte)[0] != 'b' {
		t.Fatalf("the change before the mark was applied instead of the one after it: %v", r.out)
	}
}

func TestDeferSkipOnlyWhenAsked(t *testing.T) {
	// Not asked (a resumed run, the locking copy): nothing is dropped.
	r := newDeferRig(t, intKey, "id")
	r.d.Take(dins(50, "a"))
	dsame(t, r.rowsOf(), []string{"insert:50"})
	// An inexact key: asking does nothing.
	str := []table.Column{{Name: "id", DataType: "varchar", Charset: "utf8mb4"}}
	r = newDeferRig(t, str, "id")
	r.d.SkipUncopied([]any{"zzz"})
	r.d.Take(binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{"abc"}}}})
	if len(r.rowsOf()) != 1 || r.d.Stats().Skipped != 0 {
		t.Fatalf("a collated key's change was dropped: %v", r.rowsOf())
	}
	// An image whose key is not of the expected type ends the skipping for good.
	r = newDeferRig(t, intKey, "id")
	r.d.SkipUncopied([]any{"100"})
	r.d.Take(binlog.Event{Rows: []binlog.RowChange{{Kind: binlog.Insert, After: []any{"50", []byte("x")}}}})
	r.d.Take(dins(60, "y"))
	dsame(t, r.rowsOf(), []string{"insert:50", "insert:60"})
}

// TestDeferSkipModel runs a model of the lock-free copy with the skipping on
// and off: an application changing a table (single- and multi-row
// statements, key moves, keys above the copy's end), chunks that open,
// write their mark, read a snapshot and write it with INSERT IGNORE at
// independent moments, a pump that lags the binlog, and an applier that
// lags the pump. At the end the new table must equal the source.
func TestDeferSkipModel(t *testing.T) {
	skipped := int64(0)
	for seed := range uint64(300) {
		for _, skip := range []bool{true, false} {
			skipped += runDeferModel(t, seed, skip)
		}
	}
	if skipped == 0 {
		t.Fatal("no change was ever dropped: the model does not exercise the skipping")
	}
}

func runDeferModel(t *testing.T, seed uint64, skip bool) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	r := newDeferRig(t, intKey, "id")
	src := map[int64]string{}
	for k := int64(1); k <= 60; k++ {
		if rng.IntN(3) > 0 {
			src[k] = fmt.Sprint("i", k)
		}
	}
	var end int64
	for k := range src {
		end = max(end, k)
	}
	if skip {
		r.d.SkipUncopied([]any{fmt.Sprint(end)})
	}
	type entry struct {
		ev   binlog.Event
		mark int64
	}
	var log []entry // the binlog, in commit order
	seq := 0
	commit := func(rows []binlog.RowChange) {
		seq++
		log = append(log, entry{ev: binlog.Event{Rows: rows}}, entry{ev: binlog.Event{Pos: binlog.Position{File: "b", Offset: uint32(seq)}, Boundary: true}})
	}
	img := func(k int64) []any { return []any{k, []byte(src[k])} }
	// One application statement: 1-3 row changes, applied to src as it goes.
	appChange := func() {
		var rows []binlog.RowChange
		for range 1 + rng.IntN(3) {
			k := int64(1 + rng.IntN(75)) // up to 75: keys above the copy's end too
			v, ok := src[k]
			switch {
			case !ok:
				src[k] = fmt.Sprint("n", seq, rng.IntN(1000))
				rows = append(rows, binlog.RowChange{Kind: binlog.Insert, After: img(k)})
			case rng.IntN(4) == 0:
				rows = append(rows, binlog.RowChange{Kind: binlog.Delete, Before: img(k)})
				delete(src, k)
			case rng.IntN(3) == 0: // a key move
				to := int64(1 + rng.IntN(75))
				if _, taken := src[to]; taken {
					continue
				}
				before := img(k)
				delete(src, k)
				src[to] = v + "m"
				rows = append(rows, binlog.RowChange{Kind: binlog.Update, Before: before, After: img(to)})
			default:
				before := img(k)
				src[k] = fmt.Sprint("u", seq, rng.IntN(1000))
				rows = append(rows, binlog.RowChange{Kind: binlog.Update, Before: before, After: img(k)})
			}
		}
		if len(rows) > 0 {
			commit(rows)
		}
	}
	// Chunks of 8 keys up to end, at most 2 in flight.
	type chunk struct {
		lo, hi int64 // (lo, hi]; lo 0 is unbounded
		id     int64
		stage  int // 0 opened, 1 marked, 2 read, 3 written (then closed)
		snap   map[int64]string
	}
	var next int64
	var flight []*chunk
	ghost := map[int64]string{}
	read, applied := 0, 0 // how far the pump read the binlog, the applier applied r.out
	apply := func() {
		for ; applied < len(r.out); applied++ {
			for _, rc := range r.out[applied].Rows {
				switch rc.Kind {
				case binlog.Insert:
					ghost[rc.After[0].(int64)] = string(rc.After[1].([]byte))
				case binlog.Delete:
					delete(ghost, rc.Before[0].(int64))
				case binlog.Update:
					delete(ghost, rc.Before[0].(int64))
					ghost[rc.After[0].(int64)] = string(rc.After[1].([]byte))
				}
			}
			if rng.IntN(3) == 0 {
				applied++
				return
			}
		}
	}
	pump := func() {
		for n := rng.IntN(4); n > 0 && read < len(log); n-- {
			e := log[read]
			read++
			if e.mark != 0 {
				r.d.Take(dmark(e.mark))
			} else {
				r.d.Take(e.ev)
			}
		}
	}
	for step := 0; next < end || len(flight) > 0; step++ {
		switch x := rng.IntN(10); {
		case x < 4:
			appChange()
		case x < 5:
			pump()
		case x < 6:
			apply()
		case x < 7 && len(flight) < 2 && next < end:
			c := &chunk{lo: next, hi: min(next+8, end)}
			next = c.hi
			var lo []any
			if c.lo > 0 {
				lo = []any{fmt.Sprint(c.lo)}
			}
			c.id = r.d.Open(lo, []any{fmt.Sprint(c.hi)})
			flight = append(flight, c)
		case len(flight) > 0:
			i := rng.IntN(len(flight))
			c := flight[i]
			switch c.stage {
			case 0: // the low watermark, its own commit
				log = append(log, entry{mark: c.id})
			case 1: // the snapshot: after the mark is committed
				c.snap = map[int64]string{}
				for k, v := range src {
					if k > c.lo && k <= c.hi {
						c.snap[k] = v
					}
				}
			case 2: // INSERT IGNORE
				for k, v := range c.snap {
					if _, ok := ghost[k]; !ok {
						ghost[k] = v
					}
				}
			case 3:
				r.d.Close(c.id)
				flight = append(flight[:i], flight[i+1:]...)
			}
			c.stage++
		}
		if step > 100000 {
			t.Fatalf("seed %d: the model did not end", seed)
		}
	}
	for range 20 {
		appChange()
	}
	for read < len(log) {
		pump()
	}
	for applied < len(r.out) {
		apply()
	}
	if r.d.Held() != 0 {
		t.Fatalf("seed %d skip %v: %d events still held", seed, skip, r.d.Held())
	}
	if fmt.Sprint(ghost) != fmt.Sprint(src) {
		t.Fatalf("seed %d skip %v: the new table differs from the source\nsource %v\nghost  %v", seed, skip, src, ghost)
	}
	if !skip && r.d.Stats().Skipped != 0 {
		t.Fatalf("seed %d: dropped changes without SkipUncopied", seed)
	}
	return r.d.Stats().Skipped
}
