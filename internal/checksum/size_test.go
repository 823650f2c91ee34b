package checksum

import (
	"testing"
	"time"
)

func TestSizeFor(t *testing.T) {
	const target = 10 * time.Millisecond
	for _, c := range []struct {
		name    string
		last    int64
		rows    int64
		slowest time.Duration
		gentle  bool
		want    int64
	}{
		{"ungentle: ChunkRows whatever the time", 500, 500, time.Second, false, 10000},
		{"gentle: the rows of target at the rate seen", 1000, 1000, 20 * time.Millisecond, true, 500},
		{"gentle: grows at most twice the last", 1000, 1000, time.Millisecond, true, 2000},
		{"gentle: never above ChunkRows", 8000, 8000, time.Millisecond, true, 10000},
		{"gentle: never below minGentleRows", 1000, 1000, time.Second, true, minGentleRows},
		{"gentle: from minGentleRows, twice it", 100, 100, time.Microsecond, true, 200},
		{"gentle: an empty chunk keeps the size", 700, 0, time.Millisecond, true, 700},
		{"gentle: no time measured keeps the size", 700, 700, 0, true, 700},
	} {
		if got := sizeFor(c.last, c.rows, c.slowest, c.gentle, target, 10000); got != c.want {
			t.Errorf("%s: sizeFor(%d, %d, %s, %v) = %d, want %d", c.name, c.last, c.rows, c.slowest, c.gentle, got, c.want)
		}
	}
}
