package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
)

// Policy says how to run a step that needs an exclusive metadata lock on the
// table (the cut-over, an INSTANT ALTER).
type Policy struct {
	// Finder finds blockers before each attempt; nil: no detection, the
	// step is only retried.
	Finder *Finder
	// LockWaitTimeout is the longest one attempt may wait for the lock: the
	// longest the application is made to queue behind recast per attempt.
	LockWaitTimeout time.Duration
	// Attempts caps the lock attempts (default 10).
	Attempts int
	// Budget bounds the whole step, waiting for blockers included (default
	// 10 minutes). Before each attempt recast waits while blockers exist
	// (certain ones, and possible ones that survived a failed attempt); it
	// never requests the lock while one runs, and gives up at the end of
	// the budget if one still does.
	Budget time.Duration
	// KillAfter, if positive, kills a certain blocker once it has stood in
	// recast's way that long: KILL QUERY ID for a running statement, KILL
	// CONNECTION for an idle session holding the lock (an open transaction).
	KillAfter time.Duration
	// KillMaxRows: a blocker whose transaction modified more rows than this
	// is never killed (its rollback could take longer than waiting).
	KillMaxRows int64
	// Poll is the re-check interval while waiting (default 200 ms).
	Poll time.Duration
	// Observe, if set, is called with the current blockers whenever the set
	// changes (for a status display).
	Observe func([]Blocker)
	Logger  *slog.Logger
}

// Kill records one KILL recast issued.
type Kill struct {
	Blocker    Blocker
	Statement  string // KILL QUERY ID n / KILL CONNECTION n
	BlockedFor time.Duration
	Err        string // empty when it succeeded
}

// Report is what the step cost.
type Report struct {
	Attempts int
	// Waited is the time spent waiting for blockers without requesting the
	// lock (the application was not affected meanwhile).
	Waited time.Duration
	// Blockers are the distinct blockers seen, as last seen.
	Blockers []Blocker
	Kills    []Kill
	Duration time.Duration
}

// ErrGaveUp is returned (wrapped) when no attempt succeeded.
var ErrGaveUp = errors.New("gave up")

// Run runs attempt, which must request the exclusive lock with p's
// LockWaitTimeout, until it succeeds, under the policy: before each attempt
// it waits while certain blockers exist (killing them if the policy says
// so), then attempts; an error for which retryable is true is retried after
// a backoff. what names the step in logs and errors ("cut-over").
func Run(ctx context.Context, p Policy, what string, attempt func(ctx context.Context) error, retryable func(error) bool) (rep Report, _ error) {
	if p.Attempts <= 0 {
		p.Attempts = 10
	}
	if p.Budget <= 0 {
		p.Budget = 10 * time.Minute
	}
	if p.LockWaitTimeout <= 0 {
		p.LockWaitTimeout = 3 * time.Second
	}
	if p.Poll <= 0 {
		p.Poll = 200 * time.Millisecond
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	start := time.Now()
	deadline := start.Add(p.Budget)
	tr := &tracker{p: p, what: what, seen: map[string]*seen{}}
	defer func() {
		rep.Duration = time.Since(start)
		rep.Blockers, rep.Kills = tr.blockers(), tr.kills
		if p.Observe != nil {
			p.Observe(nil) // the step is over: nothing blocks it any more
		}
	}()
	var last error
	var current []Blocker
	backoff := 500 * time.Millisecond
	for n := 1; n <= p.Attempts && time.Now().Before(deadline); n++ {
		if p.Finder != nil {
			// Never request the lock while a named blocker runs: the
			// attempt would make the application wait the lock timeout for
			// nothing. Wait (or kill, per the policy) up to the budget.
			w0 := time.Now()
			var err error
			current, err = tr.wait(ctx, deadline)
			rep.Waited += time.Since(w0)
			if err != nil {
				return rep, err
			}
			if len(current) > 0 {
				p.Logger.Warn(what+": blockers still run at the end of the budget; not requesting the lock", "waited", round(time.Since(w0)), "blockers", describe(current))
				break
			}
		}
		if !time.Now().Before(deadline) {
			break
		}
		rep.Attempts = n
		err := attempt(ctx)
		if err == nil {
			return rep, nil
		}
		last = err
		if ctx.Err() != nil {
			// Keep the attempt's error too: it may say what state the
			// attempt left (the cut-over's unknown RENAME outcome).
			return rep, fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		if !retryable(err) {
			return rep, err
		}
		p.Logger.Warn(what+" attempt failed; the table is unchanged, retrying", "attempt", n, "err", err)
		tr.promote()
		if n == p.Attempts {
			break
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(min(backoff, max(time.Until(deadline), 0))):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	msg := fmt.Sprintf("%s %s after %d attempt(s) in %s; the original table is unchanged", what, ErrGaveUp, rep.Attempts, round(time.Since(start)))
	if p.Finder != nil {
		// Who is in the way now (the last look may be an attempt old)?
		if bs, err := p.Finder.Find(context.WithoutCancel(ctx)); err == nil {
			current = tr.certain(bs)
		}
		if len(current) > 0 {
			msg += "; blocked by " + describe(current)
			if p.KillAfter > 0 {
				msg += "; they were not killed (see the log: --kill-max-rows, privileges): end them and rerun"
			} else {
				msg += "; end them (or pass --kill-blockers-after) and rerun"
			}
		}
	}
	return rep, &gaveUpError{msg: msg, last: last}
}

// gaveUpError is Run's final error: it names the blockers and wraps both
// ErrGaveUp and the last attempt's error.
type gaveUpError struct {
	msg  string
	last error
}

func (e *gaveUpError) Error() string {
	if e.last == nil {
		return e.msg
	}
	return e.msg + "; last attempt: " + e.last.Error()
}

func (e *gaveUpError) Unwrap() []error {
	if e.last == nil {
		return []error{ErrGaveUp}
	}
	return []error{ErrGaveUp, e.last}
}

func describe(bs []Blocker) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = b.String()
	}
	return strings.Join(s, "; ")
}

type seen struct {
	first, last time.Time
	b           Blocker
	noKill      bool // never kill it (and the reason is logged)
	// unknownLogged: the blocker's transaction was not in INNODB_TRX and
	// that was logged.
	unknownLogged bool
	killed        string // the last KILL statement sent to it...
	killedAt      time.Time
}

// tracker remembers blockers across the attempts of one Run.
type tracker struct {
	p     Policy
	what  string
	seen  map[string]*seen
	order []string
	kills []Kill
	prev  string // keys of the last observation, for Observe
	errs  int
	// suspects are the possible blockers (open transactions whose tables
	// are unknown) of the last look before an attempt; promoted are those
	// that were there when an attempt failed: from then on they are
	// waited for (or killed) like certain blockers.
	suspects map[string]Blocker
	promoted map[string]bool
}

// promote marks the possible blockers present at the failed attempt as
// blockers: without the metadata_lock_info plugin an open transaction that
// read the table cannot be told from one that did not, and one that
// outlives a failed attempt probably made it fail.
func (t *tracker) promote() {
	for k, b := range t.suspects {
		if t.promoted == nil {
			t.promoted = map[string]bool{}
		}
		if !t.promoted[k] {
			t.promoted[k] = true
			t.p.Logger.Warn(t.what+": a possible blocker (open transaction) was there when the attempt failed: treating it as a blocker (the metadata_lock_info plugin would tell for sure: --load-mdl-plugin)", "blocker", b)
			if t.seen[k] == nil { // reported with the others (Report.Blockers), even if it ends before the next look
				now := time.Now()
				t.seen[k] = &seen{first: now, last: now, b: b}
				t.order = append(t.order, k)
			}
		}
	}
}

// certain are the blockers of bs recast waits for: the certain ones, and
// the possible ones that survived a failed attempt.
func (t *tracker) certain(bs []Blocker) []Blocker {
	var out []Blocker
	for _, b := range bs {
		if b.Certain || t.promoted[b.Key()] {
			out = append(out, b)
		}
	}
	return out
}

func (t *tracker) blockers() []Blocker {
	out := make([]Blocker, 0, len(t.order))
	for _, k := range t.order {
		out = append(out, t.seen[k].b)
	}
	return out
}

// wait polls until no blocker worth waiting for is left, or until; it
// returns the long blockers left.
//
// While recast's exclusive request is pending, MariaDB grants no new lock on
// the table: only the current holders matter, and a lock attempt succeeds if
// each of them ends within the lock timeout L. So holders are classified by
// age:
//   - long (L or older, or a waiting DDL): it would likely make the attempt
//     time out and the application wait L for nothing. recast logs it and
//     waits for it (or kills it, if the policy says so);
//   - mid (MinAge to L): recast watches, at most L: it either ends or
//     becomes long. Holders that keep ending and being replaced (a busy
//     table with longish transactions) are churn: after L of watching,
//     recast tries;
//   - young (under MinAge): most end in milliseconds; recast gives them at
//     most MinAge, so that a query started just before it looked is not
//     asked to make the application wait.
func (t *tracker) wait(ctx context.Context, until time.Time) ([]Blocker, error) {
	start := time.Now()
	watchFrom := start // start of the current watch of mid-age holders
	lastSummary := start
	announced := false
	minAge := t.p.Finder.cfg.MinAge
	long := max(t.p.LockWaitTimeout, minAge)
	for {
		all, err := t.p.Finder.find(ctx, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Detection is an extra: without it the lock attempts are
			// still bounded by the lock timeout.
			t.errs++
			if t.errs == 1 {
				t.p.Logger.Warn(t.what+": cannot look for metadata-lock blockers; requesting the lock without looking", "err", err)
			}
			return nil, nil
		}
		var longs, noted []Blocker
		mid, young := 0, 0
		t.suspects = map[string]Blocker{}
		for _, b := range all {
			if !b.Certain && t.promoted[b.Key()] {
				b.Certain = true // survived a failed attempt
			}
			switch {
			case !b.Certain:
				t.suspects[b.Key()] = b
				if b.Age() >= long {
					noted = append(noted, b) // reported, never waited for
				}
			case b.Age() >= long || (b.Waiting && b.Time >= minAge):
				longs = append(longs, b)
				noted = append(noted, b)
			case b.Age() >= minAge:
				mid++
			default:
				young++
			}
		}
		now := time.Now()
		t.note(noted, now)
		var poll time.Duration
		switch {
		case len(longs) > 0:
			watchFrom = now
			poll = t.p.Poll
		case mid > 0 && now.Sub(watchFrom) < long:
			poll = min(t.p.Poll, 50*time.Millisecond)
		case mid == 0 && young > 0 && now.Sub(start) < minAge:
			poll = min(t.p.Poll, 50*time.Millisecond)
		default:
			if announced {
				t.p.Logger.Info(t.what+": no more blockers; requesting the lock", "waited", round(now.Sub(start)))
			}
			return nil, nil
		}
		if len(longs) > 0 && !announced {
			t.p.Logger.Info(t.what+": waiting for blockers to end before requesting the lock (the application is not affected meanwhile)",
				"table", t.p.Finder.cfg.Schema+"."+t.p.Finder.cfg.Table, "blockers", len(longs), "up_to", round(until.Sub(now)))
			announced = true
		} else if len(longs) > 0 && now.Sub(lastSummary) >= 10*time.Second {
			t.p.Logger.Info(t.what+": still waiting for blockers", "waited", round(now.Sub(start)), "blockers", describe(longs))
			lastSummary = now
		}
		if t.p.KillAfter > 0 && t.killDue(ctx, longs, now) {
			// Look again soon: a killed session notices its kill flag
			// within milliseconds.
			poll = min(t.p.Poll, 50*time.Millisecond)
		} else if !now.Before(until) {
			return longs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(poll, max(time.Until(until), 0)+time.Millisecond)):
		}
	}
}

// note records an observation: logs new blockers, updates the known ones.
func (t *tracker) note(bs []Blocker, now time.Time) {
	var keys []string
	for _, b := range bs {
		k := b.Key()
		keys = append(keys, k)
		s := t.seen[k]
		if s == nil {
			s = &seen{first: now}
			t.seen[k] = s
			t.order = append(t.order, k)
			switch {
			case b.Waiting:
				t.p.Logger.Warn(t.what+": a session waits for the table's metadata lock ahead of recast", "blocker", b)
			case b.Certain:
				t.p.Logger.Warn(t.what+": a session holds a metadata lock recast's lock request would queue behind", "blocker", b)
			default:
				t.p.Logger.Info(t.what+": possible blocker (an open transaction; without the metadata_lock_info plugin its tables are unknown)", "blocker", b)
			}
		}
		s.last, s.b = now, b
	}
	if k := strings.Join(keys, ","); k != t.prev {
		t.prev = k
		if t.p.Observe != nil {
			t.p.Observe(bs)
		}
	}
}

// killDue kills the certain blockers that have been in the way for
// KillAfter; it reports whether it killed any.
func (t *tracker) killDue(ctx context.Context, cur []Blocker, now time.Time) bool {
	killed := false
	for _, b := range cur {
		s := t.seen[b.Key()]
		blocked := now.Sub(s.first)
		if b.Waiting || blocked < t.p.KillAfter {
			continue
		}
		if b.TrxUnknown { // not now; perhaps once INNODB_TRX lists it
			if !s.unknownLogged {
				s.unknownLogged = true
				t.p.Logger.Warn(t.what+": not killing a blocker: INNODB_TRX does not list its transaction, so its size (and the cost of rolling it back) is unknown",
					"blocker", b)
			}
			continue
		}
		if b.TrxRowsModified > t.p.KillMaxRows {
			if !s.noKill {
				s.noKill = true
				t.p.Logger.Warn(t.what+": not killing a blocker: its transaction modified more rows than --kill-max-rows (the rollback could outlast it)",
					"blocker", b, "kill_max_rows", t.p.KillMaxRows)
			}
			continue
		}
		if s.noKill {
			continue
		}
		stmt := killStatement(b)
		if stmt == s.killed && now.Sub(s.killedAt) < 2*time.Second {
			continue // sent already: let it land
		}
		stmt, err := t.kill(ctx, b, stmt)
		s.killed, s.killedAt = stmt, now
		k := Kill{Blocker: b, Statement: stmt, BlockedFor: blocked}
		if err != nil {
			k.Err = err.Error()
			s.noKill = true // do not hammer: a privilege error stays one
			t.p.Logger.Warn(t.what+": could not kill a blocker", "kill", stmt, "blocker", b, "blocked_for", round(blocked), "err", err)
		} else if stmt != "" {
			killed = true
			t.p.Logger.Warn(t.what+": killed a blocker", "kill", stmt, "blocked_for", round(blocked), "blocker", b, "description", b.String())
		}
		if stmt != "" {
			t.kills = append(t.kills, k)
		}
	}
	return killed
}

// killStatement is how b is ended: its running statement by query id (KILL
// QUERY ID cannot hit a later statement of the session), or, when the
// session is idle holding the lock (an open transaction, LOCK TABLES), its
// connection.
func killStatement(b Blocker) string {
	if !b.Idle() && b.QueryID > 0 {
		return fmt.Sprintf("KILL QUERY ID %d", b.QueryID)
	}
	return fmt.Sprintf("KILL CONNECTION %d", b.ID)
}

// kill runs stmt (from killStatement) against exactly b; before killing a
// connection it checks the session is still idle in the same transaction. It
// returns the statement run, "" when b is gone already.
func (t *tracker) kill(ctx context.Context, b Blocker, stmt string) (string, error) {
	db := t.p.Finder.db
	if isOwn(b.ID) || (t.p.Finder.cfg.Exclude != nil && t.p.Finder.cfg.Exclude(b.ID)) {
		return "", nil
	}
	if strings.HasPrefix(stmt, "KILL CONNECTION") {
		still, err := t.stillIdle(ctx, db, b)
		if err != nil || !still {
			return "", err
		}
	}
	if t.p.Finder.mysql && strings.HasPrefix(stmt, "KILL QUERY ID") {
		// MySQL cannot kill a statement by id: check that the session still
		// runs the statement observed, then kill the session's current
		// statement (the window between the two is a few microseconds).
		var n int
		if err := db.QueryRowContext(ctx, dbconn.Tag+`SELECT COUNT(*) FROM performance_schema.threads t
			JOIN performance_schema.events_statements_current e ON e.THREAD_ID = t.THREAD_ID
			WHERE t.PROCESSLIST_ID = ? AND e.EVENT_ID = ? AND e.END_EVENT_ID IS NULL`, b.ID, b.QueryID).Scan(&n); err != nil || n == 0 {
			return "", err
		}
		stmt = fmt.Sprintf("KILL QUERY %d", b.ID)
	}
	_, err := db.ExecContext(ctx, dbconn.Tag+stmt)
	if dbconn.Number(err) == dbconn.ErNoSuchThread {
		return "", nil
	}
	return stmt, err
}

// stillIdle checks that session b.ID has stayed idle since b was observed,
// with the same transaction.
func (t *tracker) stillIdle(ctx context.Context, db *sql.DB, b Blocker) (bool, error) {
	var command string
	var ms float64
	q := dbconn.Tag + `SELECT COMMAND, IFNULL(TIME_MS, 0) FROM information_schema.PROCESSLIST WHERE ID = ?`
	if t.p.Finder.mysql {
		var p proc
		err := db.QueryRowContext(ctx, mysqlProcesslist+` AND t.PROCESSLIST_ID = ?`, b.ID).Scan(&p.id, &p.user, &p.host, &p.db, &command, &ms, &p.state, &p.info, &p.queryID)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	} else if err := db.QueryRowContext(ctx, q, b.ID).Scan(&command, &ms); errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if command != "Sleep" || time.Duration(ms*float64(time.Millisecond)) < b.Time {
		return false, nil
	}
	if !b.InTrx {
		return true, nil
	}
	var started string
	var err error
	if t.p.Finder.mysql && strings.Contains(b.trxStarted, "/") {
		// The identity transactions() reads on MySQL (THREAD_ID/EVENT_ID),
		// readable even when INNODB_TRX is not (error 3854).
		err = db.QueryRowContext(ctx, dbconn.Tag+`SELECT CONCAT(et.THREAD_ID, '/', et.EVENT_ID)
			FROM performance_schema.events_transactions_current et
			JOIN performance_schema.threads t ON t.THREAD_ID = et.THREAD_ID
			WHERE et.STATE = 'ACTIVE' AND t.PROCESSLIST_ID = ?`, b.ID).Scan(&started)
	} else {
		err = db.QueryRowContext(ctx, dbconn.Tag+`SELECT CAST(trx_started AS CHAR) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, b.ID).Scan(&started)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil && started == b.trxStarted, err
}
