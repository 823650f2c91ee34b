package verify

import (
	"testing"

	"github.com/recast-osc/recast/internal/pipeline"
)

// TestEncodeDistinct: keys that differ in value or Go type encode apart
// (a collision would drop a written key from verification).
func TestEncodeDistinct(t *testing.T) {
	keys := [][]any{
		{int64(1)}, {uint64(1)}, {[]byte("1")}, {"1"}, {float64(1)}, {nil},
		{int64(1), int64(2)}, {int64(12)}, {[]byte("a"), []byte("bc")}, {[]byte("ab"), []byte("c")},
		{[]byte{}}, {""}, {[]byte("a\x00")}, {[]byte("a")},
	}
	seen := map[string]int{}
	for i, k := range keys {
		e := encode(k)
		if j, dup := seen[e]; dup {
			t.Errorf("keys %v and %v encode alike", keys[j], k)
		}
		seen[e] = i
		if encode(k) != e {
			t.Errorf("encode(%v) is not stable", k)
		}
	}
}

// TestWrittenDedupAndTake: a key written twice is verified once; taking the
// set empties it; Displaced rows are counted until restored.
func TestWrittenDedupAndTake(t *testing.T) {
	v := New(Config{})
	v.Written([][]any{{int64(1)}, {int64(2)}})
	v.Written([][]any{{int64(1)}, {[]byte("x")}})
	if st := v.Stats(); st.Written != 3 {
		t.Fatalf("pending %d, want 3", st.Written)
	}
	got := v.takeWritten()
	if len(got) != 3 || v.Stats().Written != 0 {
		t.Fatalf("took %d, left %d", len(got), v.Stats().Written)
	}
	v.Displaced(pipeline.Displacement{Key: "uk", GhostKey: []any{[]byte("7")}})
	if st := v.Stats(); st.Displaced != 1 {
		t.Fatalf("displaced %d, want 1", st.Displaced)
	}
}
