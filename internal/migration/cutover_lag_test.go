package migration

import (
	"database/sql"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// latencyProbe reads rows of schema.tbl from its own sessions, the way an
// application would, and remembers the slowest statement (a statement
// on the table waits while recast's lock is requested or held).
type latencyProbe struct {
	max    atomic.Int64 // ns
	n      atomic.Int64
	errs   atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
	maxRow int
}

func startLatencyProbe(db *sql.DB, tbl string, sessions, maxRow int) *latencyProbe {
	p := &latencyProbe{stop: make(chan struct{}), maxRow: maxRow}
	for w := range sessions {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				select {
				case <-p.stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				start := time.Now()
				var id sql.NullInt64
				err := db.QueryRow("SELECT id FROM "+tbl+" WHERE id = ?", r.IntN(p.maxRow)+1).Scan(&id)
				d := time.Since(start)
				if err != nil && err != sql.ErrNoRows {
					p.errs.Add(1)
				}
				p.n.Add(1)
				for {
					cur := p.max.Load()
					if int64(d) <= cur || p.max.CompareAndSwap(cur, int64(d)) {
						break
					}
				}
			}
		}()
	}
	return p
}

func (p *latencyProbe) halt() time.Duration {
	close(p.stop)
	p.wg.Wait()
	return time.Duration(p.max.Load())
}
