package workload

import (
	"encoding/binary"
	"slices"
	"strconv"
	"sync"
)

// Shadow is the exact expected content of the workload table: for every id,
// the canonical text of every column (see columns.go). Writers update it
// only after their transaction committed. It is safe for concurrent use.
//
// A row is stored packed into one string (per column: uvarint length+1, or
// 0 for NULL, then the bytes), about 400 bytes a row on average.
type Shadow struct {
	mu   sync.Mutex
	rows map[int64]string
}

func newShadow(n int) *Shadow { return &Shadow{rows: make(map[int64]string, n)} }

// Len returns the number of rows the table should have.
func (s *Shadow) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// IDs returns the ids of the rows, sorted.
func (s *Shadow) IDs() []int64 {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.rows))
	for id := range s.rows {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Value returns the canonical text of column col of row id; ok is false if
// there is no such row or column, null reports NULL.
func (s *Shadow) Value(id int64, col string) (v string, null, ok bool) {
	ci, found := columnIndex[col]
	if !found {
		return "", false, false
	}
	p, found := s.get(id)
	if !found {
		return "", false, false
	}
	f := unpack(p)
	return f[ci].v, f[ci].null, true
}

func (s *Shadow) get(id int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.rows[id]
	return p, ok
}

func (s *Shadow) put(id int64, packed string) {
	s.mu.Lock()
	s.rows[id] = packed
	s.mu.Unlock()
}

func (s *Shadow) del(id int64) {
	s.mu.Lock()
	delete(s.rows, id)
	s.mu.Unlock()
}

// field is one column value in canonical text form.
type field struct {
	v    string
	null bool
}

// pack encodes a row.
func pack(fs []field) string {
	n := 0
	for _, f := range fs {
		n += len(f.v) + 2
	}
	b := make([]byte, 0, n)
	for _, f := range fs {
		if f.null {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(f.v))+1)
		b = append(b, f.v...)
	}
	return string(b)
}

// unpack decodes a packed row; the values share the packed string's memory.
func unpack(p string) []field {
	fs := make([]field, 0, len(columns))
	for len(p) > 0 {
		n, k := uvarint(p)
		p = p[k:]
		if n == 0 {
			fs = append(fs, field{null: true})
			continue
		}
		fs = append(fs, field{v: p[:n-1]})
		p = p[n-1:]
	}
	return fs
}

func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	panic("workload: corrupt packed row")
}

// withID returns packed row p with its id column set to id.
func withID(p string, id int64) string {
	fs := unpack(p)
	fs[colID] = field{v: strconv.FormatInt(id, 10)}
	return pack(fs)
}
