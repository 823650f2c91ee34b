package throttle

import (
	"strings"
	"time"
	"unicode"
)

// stateLog decides which throttle transitions are logged, so that a
// throttle flapping around its limit does not flood the log: a period's
// start is logged when its reason differs in kind from the last one logged
// or the same kind was last logged at least every ago; its end is logged
// only when its start was. The periods not logged are summed up in the
// next line that is.
type stateLog struct {
	every      time.Duration
	lastAt     map[string]time.Time // reason kind → when last logged
	lastKind   string
	logged     bool          // the current period's start was logged
	quiet      int           // periods not logged since the last logged start
	quietFor   time.Duration // their total length
	lastChange time.Time     // the last "still throttled" line
}

func newStateLog(every time.Duration) *stateLog {
	if every <= 0 {
		every = 30 * time.Second
	}
	return &stateLog{every: every, lastAt: map[string]time.Time{}}
}

// kind is a reason without its numbers: "replica lag: r1 1.2s > 1s" and
// "replica lag: r1 1.5s > 1s" are the same kind.
func kind(reason string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) || r == '.' {
			return -1
		}
		return r
	}, reason)
}

// start reports whether a period throttled for reason, starting now, is
// logged; if so, quiet and quietFor sum up the periods not logged before.
func (l *stateLog) start(now time.Time, reason string) (log bool, quiet int, quietFor time.Duration) {
	k := kind(reason)
	last, seen := l.lastAt[k]
	l.logged = k != l.lastKind || !seen || now.Sub(last) >= l.every
	if !l.logged {
		return false, 0, 0
	}
	l.lastAt[k], l.lastKind = now, k
	quiet, quietFor = l.quiet, l.quietFor
	l.quiet, l.quietFor = 0, 0
	return true, quiet, quietFor
}

// end reports whether the end of a period that lasted is logged.
func (l *stateLog) end(lasted time.Duration) bool {
	if l.logged {
		return true
	}
	l.quiet++
	l.quietFor += lasted
	return false
}

// change reports whether a new reason while throttled is logged: when it
// differs in kind from the last logged, at most every 10 s.
func (l *stateLog) change(now time.Time, reason string) bool {
	k := kind(reason)
	if k == l.lastKind || now.Sub(l.lastChange) < 10*time.Second {
		return false
	}
	l.lastChange, l.lastKind, l.lastAt[k] = now, k, now
	return true
}
