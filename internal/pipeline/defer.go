package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/table"
)

// Deferrer lets the copy read chunks without locking them (docs/copy.md).
//
// The copier registers a chunk's key range (Open), commits a low watermark
// holding the returned mark to the marks table, runs the chunk's
// INSERT ... SELECT as a plain consistent read, and calls Close once the
// statement is over. The pump passes every event through the Deferrer: from
// the moment it reads the range's mark, a row change whose key may lie in
// the range is held, and so is every event after the first held one (row
// changes and transaction boundaries alike), until the ranges each held
// change waits for are closed. Held events are then handed to the applier
// in binlog order.
//
// Why this is enough: commits become visible in binlog order (checked per
// server, docs/copy.md), so a change the chunk's snapshot does not see lies
// after the low watermark in the binlog; if its key is in the chunk's range
// it is held until the chunk's statement has ended, and applied after the
// chunk's write. A change the snapshot does see is at worst applied before
// the chunk (INSERT IGNORE keeps its image) or rewritten by a later event.
//
// Holding everything behind a held change keeps the applier's guarantees:
// windows stay in binlog order, Applied() never passes a held change, and
// keys that compare equal without being byte-equal need no special care.
// Deciding that a key may lie in a range is conservative: a key kind that
// cannot be compared exactly here (character columns under a collation,
// DECIMAL, temporal, fixed BINARY) counts as inside, which only holds more.
type Deferrer struct {
	keys  []int     // key ordinals in a row image
	kinds []cmpKind // per key column
	base  int64     // this run's first mark
	next  atomic.Int64
	add   func(binlog.Event) // where events go on: the applier (Pump.Defer)

	mu     sync.Mutex
	spans  map[int64]*span // opened, mark not read yet
	active []*span         // mark read, not closed
	held   []heldEvent
	stats  DeferStats

	// SkipUncopied: changes to keys above every range whose mark the pump
	// has read, and at or below end, are dropped (nil end: none are).
	end      []any
	frontier []any           // the highest bound of a range whose mark was read; nil: none yet
	early    map[int64][]any // ranges closed before their mark was read: their upper bounds
}

// DeferStats counts what the Deferrer did.
type DeferStats struct {
	Held     int64 // events held so far
	Released int64 // held events handed on
	MaxHeld  int   // most events held at once
	Ranges   int64 // ranges whose mark the pump read while the range was open
	HeldNow  int   // events held now
	Open     int   // ranges open now (registered, not closed)
	Skipped  int64 // row changes dropped: no chunk had read their key yet (SkipUncopied)
}

type span struct {
	id     int64
	lo, hi []any // converted per kind; unknownBound where not comparable
	closed bool
}

type heldEvent struct {
	ev    binlog.Event
	waits []*span
}

type cmpKind uint8

const (
	cmpUnknown cmpKind = iota
	cmpInt
	cmpUint
	cmpBytes
)

type unknownBound struct{}

// NewDeferrer returns a Deferrer for src's key columns keyCols (key order).
func NewDeferrer(src *table.Table, keyCols []string) (*Deferrer, error) {
	d := &Deferrer{spans: map[int64]*span{}}
	for _, name := range keyCols {
		i := src.ColumnIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("defer: no key column %q in %s", name, src.QuotedName())
		}
		d.keys = append(d.keys, i)
		d.kinds = append(d.kinds, kindOf(src.Columns[i]))
	}
	// Marks of an earlier run (a resumed migration streams them again) must
	// not match this run's: start at a random point.
	d.base = rand.Int64N(1<<40) << 20
	return d, nil
}

// Exact reports whether every key column is compared exactly (otherwise
// changes are held whenever any range is open, which stays correct).
func (d *Deferrer) Exact() bool {
	for _, k := range d.kinds {
		if k == cmpUnknown {
			return false
		}
	}
	return true
}

// ExactKey reports whether the Deferrer compares every column of src's key
// keyCols exactly (integers, VARBINARY); a missing column counts as not.
func ExactKey(src *table.Table, keyCols []string) bool {
	for _, name := range keyCols {
		i := src.ColumnIndex(name)
		if i < 0 || kindOf(src.Columns[i]) == cmpUnknown {
			return false
		}
	}
	return true
}

func kindOf(c table.Column) cmpKind {
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		if c.Unsigned {
			return cmpUint
		}
		return cmpInt
	case "varbinary":
		// Binary collation, NO PAD: byte order. (BINARY(n) is padded with
		// 0x00 on storage while images may carry it stripped: not compared.)
		return cmpBytes
	}
	return cmpUnknown
}

// Open registers the key range (lo, hi] (nil: unbounded; values as the
// copier binds them) and returns the mark to write as its low watermark.
func (d *Deferrer) Open(lo, hi []any) int64 {
	id := d.base + d.next.Add(1)
	s := &span{id: id, lo: d.bound(lo), hi: d.bound(hi)}
	d.mu.Lock()
	d.spans[id] = s
	d.mu.Unlock()
	return id
}

// SkipUncopied makes the Deferrer drop the changes to keys that no chunk
// has read yet: a change whose key is above the upper bound of every range
// whose mark the pump has read, and at or below end, the copy's upper
// bound (inclusive; the copy walks the key up to it, and every key above
// it is the applier's alone). It must be called before the pump hands the
// Deferrer its first event, on a fresh copy only (not a resumed one: the
// new table may hold rows above the saved watermark that an earlier run's
// applier wrote, and a dropped change could leave one of them stale), and
// only with Exact keys (it does nothing otherwise), and only when the new
// table has no unique key but the identifying one: a write under another
// unique key may remove a row the copy wrote ahead of the applier, which
// only that row's own later change puts back, and that change could be one
// dropped here.
//
// Why it is correct (docs/copy.md): the chunk that will cover such a key
// writes its low watermark after the change in the binlog, so its snapshot
// sees the change. For any key, the changes dropped are a prefix of its
// changes, all before that chunk's mark: the same as a stream that started
// later, which the copy's argument already covers; from the moment a
// change to the key is applied, every later one is (the bound only grows,
// and skipping, once off, stays off). The new table therefore never holds
// a row the applier wrote above the bound. What it saves: the applier's
// writes for the part of the table not yet copied (on average half of the
// application's changes during a copy), and the replicas' replay of them.
func (d *Deferrer) SkipUncopied(end []any) {
	if end == nil || !d.Exact() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.end = d.bound(end)
	d.early = map[int64][]any{}
}

// advance raises the skip's bound to hi, the upper bound of a range whose
// mark was read (nil: unbounded, which ends the skipping). d.mu is held.
func (d *Deferrer) advance(hi []any) {
	if d.end == nil {
		return
	}
	if hi == nil {
		d.end = nil
		return
	}
	if d.frontier == nil {
		d.frontier = hi
		return
	}
	c, ok := d.compareBounds(hi, d.frontier)
	if !ok {
		d.end = nil // not comparable here: stop skipping (applying is always safe)
		return
	}
	if c > 0 {
		d.frontier = hi
	}
}

// uncopied reports whether image's key is certainly above the skip's
// bound and at or below end. A key it cannot compare ends the skipping.
func (d *Deferrer) uncopied(image []any) bool {
	if d.end == nil || image == nil {
		return false
	}
	c, ok := d.compare(image, d.end)
	if ok && c > 0 {
		return false // above the copy's range: only the applier writes it
	}
	if ok && d.frontier != nil {
		c, ok = d.compare(image, d.frontier)
		if ok && c <= 0 {
			return false
		}
	}
	if !ok {
		d.end = nil
		return false
	}
	return true
}

// skipUncopied drops from ev the row changes (or the halves of key-changing
// updates) to keys no chunk has read yet; the event itself, with its
// position and transaction boundary, goes on. d.mu is held.
func (d *Deferrer) skipUncopied(ev binlog.Event) binlog.Event {
	if d.end == nil || len(ev.Rows) == 0 {
		return ev
	}
	var rows []binlog.RowChange
	for i, rc := range ev.Rows {
		keep := rc
		switch rc.Kind {
		case binlog.Insert:
			if d.uncopied(rc.After) {
				keep.Kind = 0
			}
		case binlog.Delete:
			if d.uncopied(rc.Before) {
				keep.Kind = 0
			}
		case binlog.Update:
			b, a := d.uncopied(rc.Before), d.uncopied(rc.After)
			switch {
			case b && a:
				keep.Kind = 0
			case b: // the old key was never written: only the new one is
				keep = binlog.RowChange{Kind: binlog.Insert, After: rc.After}
			case a: // the new key is not copied yet: only the old one goes
				keep = binlog.RowChange{Kind: binlog.Delete, Before: rc.Before}
			}
		}
		if keep.Kind == rc.Kind && rows == nil {
			continue // unchanged so far: share ev.Rows until something differs
		}
		if rows == nil {
			rows = append(make([]binlog.RowChange, 0, len(ev.Rows)), ev.Rows[:i]...)
		}
		if keep.Kind == 0 {
			d.stats.Skipped++
			continue
		}
		rows = append(rows, keep)
	}
	if rows != nil {
		ev.Rows = rows
	}
	return ev
}

// Close ends the range of mark id: the chunk's statement is over (committed
// or rolled back, and no longer running on the server). Changes held for it
// alone are handed on to the applier.
func (d *Deferrer) Close(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.spans[id]; ok {
		// The mark was not read yet: changes after it are applied after now.
		delete(d.spans, id)
		s.closed = true
		if d.early != nil {
			d.early[id] = s.hi // the skip's bound still moves at the mark
		}
		return
	}
	for i, s := range d.active {
		if s.id == id {
			s.closed = true
			d.active = append(d.active[:i], d.active[i+1:]...)
			break
		}
	}
	d.release()
}

// Take passes ev on to the applier, or holds it.
func (d *Deferrer) Take(ev binlog.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(ev.Marks) > 0 {
		for _, m := range ev.Marks {
			if s, ok := d.spans[m]; ok {
				delete(d.spans, m)
				d.active = append(d.active, s)
				d.stats.Ranges++
				d.advance(s.hi)
			} else if hi, ok := d.early[m]; ok {
				delete(d.early, m)
				d.advance(hi)
			}
		}
		return
	}
	ev = d.skipUncopied(ev)
	var waits []*span
	if len(ev.Rows) > 0 {
		waits = d.touching(ev.Rows)
	}
	if len(d.held) == 0 && len(waits) == 0 {
		d.add(ev)
		return
	}
	d.held = append(d.held, heldEvent{ev: ev, waits: waits})
	d.stats.Held++
	d.stats.MaxHeld = max(d.stats.MaxHeld, len(d.held))
}

// Held is the number of events held now.
func (d *Deferrer) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}

// Stats returns the counters.
func (d *Deferrer) Stats() DeferStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stats
	st.HeldNow, st.Open = len(d.held), len(d.spans)+len(d.active)
	return st
}

// release hands on held events from the oldest while the ranges they wait
// for are all closed.
func (d *Deferrer) release() {
	n := 0
	for ; n < len(d.held); n++ {
		if !allClosed(d.held[n].waits) {
			break
		}
		d.add(d.held[n].ev)
	}
	if n == 0 {
		return
	}
	d.stats.Released += int64(n)
	d.held = append([]heldEvent(nil), d.held[n:]...)
}

func allClosed(ss []*span) bool {
	for _, s := range ss {
		if !s.closed {
			return false
		}
	}
	return true
}

// touching returns the open ranges that a key of rows may lie in.
func (d *Deferrer) touching(rows []binlog.RowChange) []*span {
	var out []*span
	for _, s := range d.active {
		for _, rc := range rows {
			if (rc.Before != nil && d.mayContain(s, rc.Before)) || (rc.After != nil && d.mayContain(s, rc.After)) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// mayContain is false only when the image's key is certainly outside (lo, hi].
func (d *Deferrer) mayContain(s *span, image []any) bool {
	if s.lo != nil {
		if c, ok := d.compare(image, s.lo); ok && c <= 0 {
			return false
		}
	}
	if s.hi != nil {
		if c, ok := d.compare(image, s.hi); ok && c > 0 {
			return false
		}
	}
	return true
}

// compare compares the image's key with a bound in key order; ok is false
// when the order is not known here.
func (d *Deferrer) compare(image []any, bound []any) (int, bool) {
	for j, ord := range d.keys {
		if ord >= len(image) {
			return 0, false
		}
		c, ok := compareValue(d.kinds[j], image[ord], bound[j])
		if !ok {
			return 0, false
		}
		if c != 0 {
			return c, true
		}
	}
	return 0, true
}

// compareBounds compares two converted bounds in key order.
func (d *Deferrer) compareBounds(a, b []any) (int, bool) {
	for j := range d.kinds {
		if j >= len(a) || j >= len(b) {
			return 0, false
		}
		if _, ok := a[j].(unknownBound); ok {
			return 0, false
		}
		c, ok := compareValue(d.kinds[j], a[j], b[j])
		if !ok {
			return 0, false
		}
		if c != 0 {
			return c, true
		}
	}
	return 0, true
}

func compareValue(k cmpKind, v, b any) (int, bool) {
	if _, ok := b.(unknownBound); ok {
		return 0, false
	}
	switch k {
	case cmpInt:
		x, ok1 := v.(int64)
		y, ok2 := b.(int64)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmp3(x < y, x > y), true
	case cmpUint:
		x, ok1 := v.(uint64)
		y, ok2 := b.(uint64)
		if !ok1 || !ok2 {
			return 0, false
		}
		return cmp3(x < y, x > y), true
	case cmpBytes:
		x, ok1 := v.([]byte)
		y, ok2 := b.([]byte)
		if !ok1 || !ok2 {
			return 0, false
		}
		return bytes.Compare(x, y), true
	case cmpUnknown:
	}
	return 0, false
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// bound converts a copier key (strings for numbers and text, bytes for
// binary columns) to the image's types, per key column.
func (d *Deferrer) bound(key []any) []any {
	if key == nil {
		return nil
	}
	out := make([]any, len(d.kinds))
	for j, k := range d.kinds {
		out[j] = unknownBound{}
		if j >= len(key) {
			continue
		}
		switch k {
		case cmpInt:
			switch v := key[j].(type) {
			case int64:
				out[j] = v
			case string:
				if x, err := strconv.ParseInt(v, 10, 64); err == nil {
					out[j] = x
				}
			}
		case cmpUint:
			switch v := key[j].(type) {
			case uint64:
				out[j] = v
			case string:
				if x, err := strconv.ParseUint(v, 10, 64); err == nil {
					out[j] = x
				}
			}
		case cmpBytes:
			switch v := key[j].(type) {
			case []byte:
				out[j] = append([]byte(nil), v...)
			case string:
				out[j] = []byte(v)
			}
		case cmpUnknown: // not comparable: unknownBound
		}
	}
	return out
}

// Defer makes every event the pump hands to the applier pass through d
// (set before Read runs).
func (p *Pump) Defer(d *Deferrer) {
	d.add = func(ev binlog.Event) { p.ap.Add(ev) }
	p.def = d
}

// add hands ev to the applier, through the Deferrer when there is one.
func (p *Pump) add(ev binlog.Event) {
	if p.def != nil {
		p.def.Take(ev)
		return
	}
	p.ap.Add(ev)
}
