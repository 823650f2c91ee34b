// Package cutover swaps the ghost table in for the original one, atomically
// and without losing a write. The protocol is chosen by flavor
// (flavor.Server.RenameUnderLockTables): MariaDB refuses RENAME TABLE under
// LOCK TABLES (ERROR 1192, checked on 10.11 and 11.8), so it gets the
// sentry protocol below; MySQL 8.0.13+ renames tables its locking session
// holds WRITE, so it gets the swap under lock (MySQL, below, and mysql.go).
// docs/cutover-flavors.md has both arguments and the stress figures.
//
// Why recast's MySQL swap is not the textbook one-session swap (LOCK TABLES
// T WRITE, G WRITE; drain; RENAME; UNLOCK on one session): the drain and the
// checks under the lock write and read the ghost from other sessions
// (the applier's workers, its transactions for unique keys, the verifier,
// the auto-increment carry-over), and a WRITE lock on G would make them
// wait for the locking session forever; a transaction on the locking
// session would release its locks. So the session that drains holds T
// only, and the RENAME runs in the session that takes both locks next.
//
// MySQL (two sessions, A and B; T the table, G the ghost, S = T_rcsentry,
// the old table's name until it is renamed to _T_old):
//
//  1. A: LOCK TABLES T WRITE (short lock wait, retried). No write reaches T.
//  2. A: read the binlog position P; wait until the applier applied
//     everything before P; UnderLock (verify, auto-increment) with G open
//     to other sessions.
//  3. B: RENAME TABLE G TO G' (G' = T_rcnew, killed at the attempt's
//     deadline if a session holding G keeps it waiting), then LOCK TABLES
//     T WRITE, G' WRITE. MySQL requests LOCK TABLES' locks in name order:
//     with G's own name ("_t_new" sorts before "t") B would wait on a
//     holder of G without having requested T, and A's UNLOCK would hand T
//     to the application's queued writes, landing in the old table (gh-ost
//     #653; TestCutOverGhostHolder). G' sorts after T: B queues on T, held
//     by A. A confirms B waits for the metadata lock.
//  4. A: UNLOCK TABLES. B is granted T before every statement that queued
//     on T before or after it: in MySQL's MDL a pending LOCK TABLES WRITE
//     (SNRW) blocks new DML requests (SR/SW) from being granted, and it is
//     compatible with waiting ones (observed on 9.7: an INSERT queued
//     before B lands in the new table).
//  5. B: RENAME TABLE T TO S, G' TO T (one statement: T is never missing),
//     then UNLOCK TABLES; the queued statements open T by name and find the
//     new table. S is renamed to _T_old (or dropped) afterwards.
//
// Why no write reaches the old table after P: T is locked by A from step 1
// to step 4 and by B from step 4 to B's UNLOCK, with no statement on T
// granted in between. The binlog stream checks it (Armed is called once
// the drain is done: from then on T's events are held, and counted as lost
// if the swap happens).
// Why a crash is safe: before step 4, A holds T, so B cannot have been
// granted; a failed attempt kills B before A unlocks (no sentry stops B
// here). If A's session dies after A has seen B queued and A has answered
// a ping after that, B (granted first) swaps a drained ghost, which is
// what step 4 does anyway. If it dies earlier (a long-lock killer, a lost
// connection), the application's writes reach T after the drain and B's
// LOCK TABLES is granted at once: B then unlocks without renaming, and the
// attempt fails (TestCutOverLockHolderKilled). If B dies, its LOCK
// TABLES is released and its RENAME happened entirely or not at all; the
// outcome is read back from the server (resolveSwap). max_write_lock_count
// set low would let queued DML jump B; the stream's check then fails the
// run loudly ("writes lost") instead of passing silently.
//
// MariaDB:
//
// The protocol (two sessions, A and B; T the table, G the ghost, S a sentry
// table whose name sorts after T's):
//
//  1. A: CREATE TABLE S; LOCK TABLES T WRITE, S WRITE (short lock wait, retried).
//     From now on no write reaches T.
//  2. A: read the binlog position P (the binlog status statement) and wait until the
//     applier has applied everything before P: G now equals T.
//  3. B: RENAME TABLE T TO S, G TO T. It blocks: MariaDB (and MySQL, whose
//     acquire_locks sorts the requests too) takes the metadata locks of a
//     statement in name order, G first (free), then T, held by A.
//  4. A: confirm B is waiting for its metadata lock; DROP TABLE S; UNLOCK TABLES.
//  5. B's RENAME completes; then S (the old table) is renamed to _T_old.
//
// Why no write can reach the old table after step 2: every application
// statement on T queued behind A's lock waits for T's metadata lock, and so
// does B, which queued on T itself (not on S) before A released anything.
// When A releases T, the waiting exclusive request (B) is granted before the
// waiting shared ones (DML): MariaDB's MDL scheduler never grants a shared
// lock while an incompatible exclusive request waits (MySQL's neither: a
// pending exclusive request blocks new shared requests there too). The queued DML then
// opens T by name and finds the new table. gh-ost's sentry is named _T_del,
// which sorts before T: its RENAME waits on the sentry, not on T, so when the
// sentry is dropped there is a moment where the RENAME has not yet queued on
// T and A's UNLOCK hands T to a waiting INSERT, which commits into the old
// table after the drain point (gh-ost #653, seen on MariaDB 10.11).
//
// Why no query sees "table doesn't exist": T is renamed to S and G to T in
// one atomic RENAME, and nobody can look at T between A's lock and B's end.
// (Renaming twice inside A's LOCK TABLES, with ALTER TABLE ... RENAME, does
// release T's name in between: a waiting INSERT then fails with 1146.)
//
// Metadata locks: LOCK TABLES T WRITE waits behind every open query or
// transaction on T, and while it waits every new statement on T queues behind
// it. So before each attempt Run asks package mdl for the sessions in the way
// and waits (without requesting anything) while they exist, within Budget;
// it never requests the lock while a named blocker runs. Blockers that
// outlast KillAfter are killed if the policy says so. Then BeforeLock lets
// the caller catch up, and the attempt runs under one deadline: from the
// LOCK TABLES request to UNLOCK, LockWaitTimeout in all (the lock wait, the
// drain, UnderLock, the ghost's rename, the wait for B to queue). The
// application therefore never waits for recast's lock longer than
// LockWaitTimeout per attempt (plus the sentry's DROP and the UNLOCK).
//
// Why a crash is safe: if A dies before step 4 its locks go away but S stays,
// so B's RENAME fails (S exists) and T is untouched. If B dies, its RENAME
// either happened entirely or not at all.
package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/recast-osc/recast/internal/binlog"
	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/mdl"
	"github.com/recast-osc/recast/internal/table"
)

// Config describes one cut-over.
type Config struct {
	Schema string
	Table  string
	Ghost  string
	Old    string // final name of the old table
	// LockWaitTimeout bounds each lock attempt (how long the application can
	// be made to wait per attempt).
	LockWaitTimeout time.Duration
	// Attempts is the number of lock attempts before giving up.
	Attempts int
	// Budget bounds the whole cut-over, waiting for blockers included
	// (default 10 minutes).
	Budget time.Duration
	// Blockers is the metadata-lock policy: its Finder (nil: no detection),
	// KillAfter, KillMaxRows, Poll, Observe. Its LockWaitTimeout, Attempts,
	// Budget and Logger are taken from this Config.
	Blockers *mdl.Policy
	// WaitApplied blocks until every change before p has been applied to the ghost.
	WaitApplied func(ctx context.Context, p binlog.Position) error
	// Armed is called once the drain under the lock is done: from then on
	// the RENAME of T may complete (the binlog stream will show it), and
	// every row change read is held, not applied: none may reach the ghost
	// while it is renamed for the swap. With the lock held there are none;
	// if the locking session ends early (killed), the application's writes
	// come in, and the attempt fails.
	Armed func()
	// Disarmed is called when an armed attempt did not rename, once the
	// ghost has its name back: the changes held are applied.
	Disarmed func()
	// UnderLock, if set, runs after the drain while T is still locked and
	// nothing reaches the ghost: locked is A's session (the only one that
	// can read T now; other sessions of db can read the ghost). Its time
	// counts as lock time: its ctx ends at the attempt's deadline. An error
	// aborts the cut-over (no retry) unless it wraps ErrRetry.
	UnderLock func(ctx context.Context, locked *sql.Conn) error
	// BeforeAttempt, if set, runs before each attempt requests the lock.
	// An error aborts the cut-over unless it wraps ErrRetry.
	BeforeAttempt func(ctx context.Context) error
	// BeforeLock, if set, runs last before each attempt requests the lock
	// (after the wait for blockers and BeforeAttempt): the caller catches
	// up there, so that the drain under lock is short. An error wrapping
	// ErrRetry counts as a failed attempt; another error ends the cut-over.
	BeforeLock func(ctx context.Context) error
	// DropOld leaves the old table under the sentry's name (SentryName)
	// instead of renaming it to Old: the caller drops it once it knows no
	// write was lost (the binlog's proof comes after the swap), and until
	// then the rows such a write left there can still be recovered.
	DropOld bool
	// Pause, if set, is called at named points (tests inject faults there).
	Pause  func(ctx context.Context, point string)
	Logger *slog.Logger
}

// SentryName returns the sentry's name for table t: t plus a suffix, so that
// it sorts after t in MariaDB's metadata-lock order.
func SentryName(t string) string { return t + "_rcsentry" }

// SwapName is the ghost's name during a cut-over attempt: t plus a suffix,
// so that, like the sentry, it sorts after t, and T is the first table lock
// the RENAME requests.
func SwapName(t string) string { return t + "_rcnew" }

// SentryComment marks the sentry table, telling it apart from an old table
// left under the sentry's name by a run killed right after its swap.
const SentryComment = "recast cut-over sentry"

// Result reports what the cut-over cost.
type Result struct {
	Attempts   int
	LockedFor  time.Duration // how long the successful attempt held the table
	Drain      time.Duration // of which: waiting for the applier to reach the drain point
	Queue      time.Duration // of which: waiting for the RENAME to queue
	Rename     time.Duration // of which: renaming the ghost for the swap
	UnderLock  time.Duration // of which: Config.UnderLock
	LockWait   time.Duration // waiting for LOCK TABLES (before LockedFor)
	DrainPos   binlog.Position
	OldTable   string // the old table's name (the sentry's with DropOld)
	TotalDelay time.Duration
	// Waited is the time spent waiting for blockers before requesting the
	// lock; Blockers and Kills are what the metadata-lock policy saw and did.
	Waited   time.Duration
	Blockers []mdl.Blocker
	Kills    []mdl.Kill
	// Blocked is how long the application's statements on T could be made
	// to wait, over all attempts: from each LOCK TABLES request (queued or
	// granted) to its UNLOCK, or, in the attempt that swaps, to the end of
	// B's RENAME (the queued statements get T after it). AttemptLocks is
	// that time per attempt.
	Blocked      time.Duration
	AttemptLocks []time.Duration
	// AttemptHolds is, per attempt, how long A held LOCK TABLES (granted
	// to UNLOCK; 0 when the lock was not granted).
	AttemptHolds []time.Duration
	// Recovered says the swap session lost its connection (or its RENAME
	// reported an error) and the server showed the RENAME done.
	Recovered bool
}

// ErrOutcomeUnknown is returned (wrapped) when the swap's RENAME reported
// an error and the server's tables do not show for certain whether it
// happened: nothing is renamed back, and the caller must keep its state.
var ErrOutcomeUnknown = errors.New("the outcome of the cut-over RENAME is unknown")

// ErrGaveUp is returned (wrapped) when no attempt succeeded.
var ErrGaveUp = mdl.ErrGaveUp

// Run performs the cut-over with retries.
func Run(ctx context.Context, db *sql.DB, cfg Config) (Result, error) {
	if cfg.LockWaitTimeout <= 0 {
		cfg.LockWaitTimeout = 3 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Pause == nil {
		cfg.Pause = func(context.Context, string) {}
	}
	if len(SentryName(cfg.Table)) > 64 {
		return Result{}, fmt.Errorf("table name %q is too long for recast's cut-over sentry (%d characters max)", cfg.Table, 64-len(SentryName("")))
	}
	start := time.Now()
	var res Result
	pol := mdl.Policy{}
	if cfg.Blockers != nil {
		pol = *cfg.Blockers
	}
	pol.LockWaitTimeout, pol.Attempts, pol.Budget, pol.Logger = cfg.LockWaitTimeout, cfg.Attempts, cfg.Budget, cfg.Logger
	fl, err := flavor.Detect(ctx, db)
	if err != nil {
		return Result{}, err
	}
	var st attemptStats
	rep, err := mdl.Run(ctx, pol, "cut-over", func(ctx context.Context) error {
		var err error
		st, err = attemptOnce(ctx, db, cfg, realServer{db, fl}, fl)
		res.Blocked += st.blocked
		if st.blocked > 0 {
			res.AttemptLocks = append(res.AttemptLocks, st.blocked)
			res.AttemptHolds = append(res.AttemptHolds, st.held)
		}
		return err
	}, func(err error) bool { return errors.Is(err, errRetry) })
	res.Attempts, res.Waited, res.Blockers, res.Kills = rep.Attempts, rep.Waited, rep.Blockers, rep.Kills
	if err != nil {
		return res, err
	}
	res.LockedFor, res.Drain, res.Queue, res.DrainPos, res.Recovered = st.locked, st.drain, st.queue, st.pos, st.recovered
	res.Rename, res.LockWait, res.UnderLock = st.rename, st.lockWait, st.underLock
	cfg.Logger.Info("cut-over: table swapped", "lock_and_rename", st.locked.Round(time.Millisecond),
		"lock_wait", st.lockWait.Round(time.Millisecond), "drain", st.drain.Round(time.Millisecond),
		"under_lock", st.underLock.Round(time.Millisecond), "ghost_rename", st.rename.Round(time.Millisecond),
		"attempts", res.Attempts, "application_blocked_total", res.Blocked.Round(time.Millisecond),
		"waited_for_blockers", res.Waited.Round(time.Millisecond),
		"blockers_seen", len(res.Blockers), "kills", len(res.Kills))
	// The swap is done: finish even if ctx ended meanwhile (an abort that
	// arrives now is too late to undo anything).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	old, err := finish(fctx, db, cfg)
	res.OldTable = old
	res.TotalDelay = time.Since(start)
	return res, err
}

var errRetry = errors.New("retryable")

// ErrRetry, wrapped by an UnderLock error, makes the attempt retryable.
var ErrRetry = errRetry

type attemptStats struct {
	locked, drain, queue time.Duration
	rename, lockWait     time.Duration
	underLock            time.Duration
	blocked              time.Duration // LOCK TABLES request to UNLOCK
	held                 time.Duration // LOCK TABLES granted to UNLOCK
	pos                  binlog.Position
	recovered            bool
}

// attemptOnce runs the protocol once. A nil error means T is now the new table.
//
// One deadline bounds the attempt, from the LOCK TABLES request to UNLOCK:
// the application's statements on T queue behind A's lock request as soon
// as it is made, so the wait for the lock, the drain, UnderLock, the
// ghost's rename and the wait for B to queue all share LockWaitTimeout.
// MariaDB's own waits count whole seconds; a statement still waiting at the
// deadline is killed (KILL QUERY) instead.
func attemptOnce(ctx context.Context, db *sql.DB, cfg Config, srv server, fl flavor.Server) (st attemptStats, err error) {
	q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
	tbl, ghost, sentry, swap := q(cfg.Table), q(cfg.Ghost), q(SentryName(cfg.Table)), q(SwapName(cfg.Table))
	lockSecs := max(1, int((cfg.LockWaitTimeout+time.Second-1)/time.Second))

	if cfg.BeforeAttempt != nil {
		if err := cfg.BeforeAttempt(ctx); err != nil {
			return st, err
		}
	}
	connA, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	// A and B change their lock_wait_timeout: never hand them back to the pool.
	defer discard(connA)
	var aID int64
	if err := connA.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&aID); err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	defer mdl.RegisterOwn(aID)()
	// On failure: unlock first, keeping the sentry, so that a RENAME still
	// queued fails (its target exists) instead of swapping an undrained
	// ghost in; wait for it; only then drop the sentry. Runs even when ctx is
	// cancelled: never leave T locked.
	var renameDone chan error
	var lockRequested, lockedAt time.Time
	finished, ghostMaybeMoved, armed := false, false, false
	inLock := fl.RenameUnderLockTables() // MySQL: swapUnderLock (mysql.go)
	var bQueued int64                    // MySQL: B's session, once its LOCK TABLES was sent
	defer func() {
		if finished {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if inLock && renameDone != nil {
			// No sentry stops B's queued LOCK TABLES and RENAME: end B
			// before A unlocks (while A holds T, B cannot have been granted).
			if !stopQueued(cctx, srv, bQueued, renameDone, cfg.Logger) {
				cfg.Logger.Error("cut-over: the queued swap session could not be confirmed stopped; unlocking anyway (the ghost is drained: a swap it makes is complete)", "session", bQueued)
			}
			renameDone = nil
		}
		if ghostMaybeMoved {
			// Back to the name the applier writes to, before T is unlocked
			// (a queued RENAME then fails: its source is gone, the sentry
			// exists). Only if it moved: a RENAME that did not (killed at
			// the deadline) may have been waiting for a session holding the
			// ghost's name, and renaming back would wait for it too.
			moved, err := srv.tables(cctx, cfg.Schema, SwapName(cfg.Table))
			if _, ok := moved[SwapName(cfg.Table)]; err != nil || ok {
				if err := srv.rename(cctx, swap, ghost); err != nil && dbconn.Number(err) != dbconn.ErNoSuchTable {
					cfg.Logger.Error("cut-over: renaming the ghost back failed; recast cleanup or --resume restores it", "from", swap, "to", ghost, "err", err)
				}
			}
		}
		if armed { // the ghost has its name back: the changes held may be applied
			cfg.Disarmed()
		}
		if _, err := connA.ExecContext(cctx, "UNLOCK TABLES"); err != nil {
			_ = connA.Raw(func(any) error { return driver.ErrBadConn })
		}
		if !lockRequested.IsZero() {
			st.blocked = time.Since(lockRequested)
		}
		if !lockedAt.IsZero() {
			st.held = time.Since(lockedAt)
		}
		if renameDone != nil {
			select {
			case err := <-renameDone:
				if err != nil {
					cfg.Logger.Debug("cut-over: the queued RENAME failed, as it must once the attempt failed", "err", err)
				}
			case <-cctx.Done():
			}
		}
		if !inLock { // MySQL has no sentry: the name may hold the old table of a RENAME that went through
			// Only recast's sentry: another table there is the original
			// of a swap that went through.
			if tabs, err := srv.tables(cctx, cfg.Schema, SentryName(cfg.Table)); err == nil {
				if c, ok := tabs[SentryName(cfg.Table)]; ok && c == SentryComment {
					_, _ = db.ExecContext(cctx, dbconn.Tag+"DROP TABLE IF EXISTS "+sentry)
				} else if ok {
					cfg.Logger.Error("cut-over: a table that is not recast's sentry holds its name after a failed attempt: left as it is (see recast cleanup)", "table", sentry)
				}
			}
		}
	}()

	// The sentry's CREATE and DROP need not reach the binlog (replicas only
	// replay B's RENAME, whose target does not exist there): unlogged, the
	// DROP under lock does not wait for a binlog group commit. Needs SUPER or
	// BINLOG ADMIN; without, they are logged.
	if _, err := connA.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
		cfg.Logger.Debug("cut-over: the sentry's CREATE and DROP are binlogged (setting sql_log_bin needs SUPER or BINLOG ADMIN)", "err", err)
	}
	// MySQL with GTIDs refuses to LOCK TABLES a non-transactional table
	// together with InnoDB ones (error 1785): its sentry is InnoDB.
	sentryEngine := "MEMORY"
	if fl.MySQL() {
		sentryEngine = "InnoDB"
	}
	prepare := []string{
		fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lockSecs),
		dbconn.Tag + "DROP TABLE IF EXISTS " + sentry,
		dbconn.Tag + "CREATE TABLE " + sentry + " (id INT) ENGINE=" + sentryEngine + " COMMENT='" + SentryComment + "'",
	}
	lockStmt := dbconn.Tag + "LOCK TABLES " + tbl + " WRITE, " + sentry + " WRITE"
	if inLock {
		// No sentry; the name must be free for the old table.
		prepare = prepare[:2]
		lockStmt = dbconn.Tag + "LOCK TABLES " + tbl + " WRITE"
	}
	// The sentry's name holds recast's sentry or nothing. Another table
	// there is the original of a swap that went through (an attempt that
	// failed after its RENAME): dropped, the application's rows would go.
	if tabs, err := srv.tables(ctx, cfg.Schema, SentryName(cfg.Table)); err != nil {
		return st, fmt.Errorf("%w: look for the sentry: %w", errRetry, err)
	} else if c, ok := tabs[SentryName(cfg.Table)]; ok && c != SentryComment {
		return st, fmt.Errorf("table %s exists and is not recast's sentry: it may be the original table of a swap that went through; it is left as it is (see recast cleanup)", sentry)
	}
	for _, s := range prepare {
		if _, err := connA.ExecContext(ctx, s); err != nil {
			return st, fmt.Errorf("%w: prepare the sentry: %w", errRetry, err)
		}
	}
	// Session B, opened before the lock is requested: the ghost's rename
	// and the swap run there.
	connB, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	bOwned := true // closed here unless the swap goroutine took it
	defer func() {
		if bOwned {
			discard(connB)
		}
	}()
	var bID int64
	if err := connB.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&bID); err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	unregB := mdl.RegisterOwn(bID)
	defer func() {
		if bOwned {
			unregB()
		}
	}()
	if _, err := connB.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lockSecs+2)); err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}

	cfg.Pause(ctx, "before-lock")
	// Last: the catch-up, so that what the drain under lock has to apply is
	// what came in since it ended.
	if cfg.BeforeLock != nil {
		if err := cfg.BeforeLock(ctx); err != nil {
			return st, err
		}
	}
	lockRequested = time.Now()
	deadline := lockRequested.Add(cfg.LockWaitTimeout)
	lctx, lcancel := context.WithDeadline(ctx, deadline)
	defer lcancel()
	if err := within(ctx, srv, connA, aID, deadline, lockStmt); err != nil {
		if dbconn.IsLockTimeout(err) || errors.Is(err, errDeadline) {
			return st, fmt.Errorf("%w: LOCK TABLES waited %s for other sessions' metadata locks on %s", errRetry, cfg.LockWaitTimeout, tbl)
		}
		return st, fmt.Errorf("%w: LOCK TABLES: %w", errRetry, err)
	}
	lockedAt = time.Now()
	st.lockWait = lockedAt.Sub(lockRequested)
	cfg.Pause(ctx, "locked")

	pos, err := masterPosition(lctx, connA)
	st.pos = pos
	if err != nil {
		return st, fmt.Errorf("%w: read the binlog position under lock: %w", errRetry, err)
	}
	err = cfg.WaitApplied(lctx, pos)
	st.drain = time.Since(lockedAt)
	if err != nil {
		return st, fmt.Errorf("%w: the applier did not reach %s within the lock timeout (%s, %s of it under lock): %w", errRetry, pos, cfg.LockWaitTimeout, st.drain.Round(time.Millisecond), err)
	}
	cfg.Pause(ctx, "drained")
	cfg.Armed()
	armed = true
	if cfg.UnderLock != nil {
		u0 := time.Now()
		err := cfg.UnderLock(lctx, connA)
		st.underLock = time.Since(u0)
		if err != nil {
			if lctx.Err() != nil && ctx.Err() == nil {
				return st, fmt.Errorf("%w: under lock: the lock timeout (%s) passed: %w", errRetry, cfg.LockWaitTimeout, err)
			}
			return st, err
		}
	}

	cfg.Pause(ctx, "verified")
	if inLock {
		// The ghost first takes a name that sorts after T (as on MariaDB,
		// below): B's LOCK TABLES requests its locks in name order, and
		// "_t_new" sorts before "t", so B would otherwise wait on a session
		// holding the ghost while A's UNLOCK hands T to the application's
		// queued writes, which would land in the old table (gh-ost #653).
		// The RENAME here waits for such a holder within the deadline.
		ghostMaybeMoved = true
		renameAt := time.Now()
		if err := within(ctx, srv, connB, bID, deadline, dbconn.Tag+"RENAME TABLE "+ghost+" TO "+swap); err != nil {
			return st, fmt.Errorf("%w: rename the ghost for the swap: %w", errRetry, err)
		}
		st.rename = time.Since(renameAt)
		err := swapUnderLock(ctx, lctx, cfg, srv, swapSessions{db: db, a: connA, b: connB, bID: bID, unregB: unregB},
			deadline, lockRequested, lockedAt, attemptRefs{st: &st, renameDone: &renameDone, bOwned: &bOwned, bQueued: &bQueued, finished: &finished})
		return st, err
	}

	// The ghost takes a name that sorts after T, so that T is the first table
	// B's RENAME locks: waiting for a metadata lock then means waiting on T.
	// Nothing writes to the ghost now: T is locked and the applier drained.
	ghostMaybeMoved = true
	renameAt := time.Now()
	if err := within(ctx, srv, connB, bID, deadline, dbconn.Tag+"RENAME TABLE "+ghost+" TO "+swap); err != nil {
		return st, fmt.Errorf("%w: rename the ghost for the swap: %w", errRetry, err)
	}
	st.rename = time.Since(renameAt)

	// Session B: the RENAME that waits on T.
	renameDone = make(chan error, 1)
	bOwned = false
	go func() {
		_, err := connB.ExecContext(context.WithoutCancel(ctx),
			dbconn.Tag+"RENAME TABLE "+tbl+" TO "+sentry+", "+swap+" TO "+tbl)
		discard(connB)
		unregB()
		renameDone <- err
	}()
	queued := time.Now()
	if err := waitForMDLWait(lctx, connA, fl.SessionStateQuery(), bID, renameDone, time.Until(deadline)); err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	st.queue = time.Since(queued)
	cfg.Pause(ctx, "rename-waiting")
	// Not cancelled with ctx: a DROP abandoned by the client may still run
	// on the server, and A's session, ending, hands T to B, whose RENAME
	// then swaps. The failure path would have taken that swap for a failed
	// attempt, and dropped the old table under the sentry's name.
	if _, err := connA.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"DROP TABLE "+sentry); err != nil {
		if !dbconn.StatementFateUnknown(err) {
			return st, fmt.Errorf("%w: drop the sentry: %w", errRetry, err) // it did not run: A's UNLOCK makes B's RENAME fail on it
		}
		// A's session is gone, and its lock: whether the DROP ran shows in
		// B's RENAME (it fails while the sentry exists).
		cfg.Logger.Warn("cut-over: the locking session was lost while dropping the sentry; the swap's outcome is read from the queued RENAME", "err", err)
	}
	finished = true // from here on the RENAME may run: never recreate the sentry
	cfg.Pause(ctx, "sentry-dropped")
	if _, err := connA.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); err != nil {
		cfg.Logger.Warn("UNLOCK TABLES failed; closing the session releases the lock", "err", err)
		_ = connA.Raw(func(any) error { return driver.ErrBadConn })
	}
	st.locked = time.Since(lockedAt)
	st.held = st.locked
	rerr := <-renameDone
	// The statements queued on T wait for B's RENAME too (granted first).
	st.blocked = time.Since(lockRequested)
	if rerr != nil {
		swapped, err := resolveSwap(context.WithoutCancel(ctx), srv, cfg, bID, SwapName(cfg.Table), rerr)
		if swapped {
			st.recovered = true
			return st, nil
		}
		if err != nil {
			return st, err
		}
		cfg.Disarmed()
		return st, fmt.Errorf("%w: RENAME failed, the table is unchanged: %w", errRetry, rerr)
	}
	return st, nil
}

// resolveSwap finds out, after B's RENAME reported rerr, whether it
// happened: a lost connection leaves the client without an answer though the
// server may have committed the RENAME. B's session is killed and waited
// for first, so that nothing changes any more; then the tables tell: the
// RENAME moves the ghost (under SwapName) to T and T to the sentry's name
// atomically. If it did not happen, the ghost gets its name back (nil
// error, not swapped). If it did, swapped is true. Otherwise the error
// wraps ErrOutcomeUnknown and nothing is touched.
//
// ghostAt is the ghost's name while the swap runs (SwapName on both
// protocols; the ghost's own name is handled too).
func resolveSwap(ctx context.Context, srv server, cfg Config, bID int64, ghostAt string, rerr error) (swapped bool, _ error) {
	unknown := func(format string, args ...any) error {
		return fmt.Errorf("%w: the swap session's RENAME reported %w; %s; nothing was renamed back: look at %s.%s, %s and %s before doing anything",
			ErrOutcomeUnknown, rerr, fmt.Sprintf(format, args...), cfg.Schema, cfg.Table, SentryName(cfg.Table), ghostAt)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.killSession(ctx, bID); err != nil {
		return false, unknown("killing its session %d failed: %v", bID, err)
	}
	for {
		gone, err := srv.sessionGone(ctx, bID)
		if err != nil {
			return false, unknown("reading the processlist failed: %v", err)
		}
		if gone {
			break
		}
		select {
		case <-ctx.Done():
			return false, unknown("its session %d is still on the server", bID)
		case <-time.After(10 * time.Millisecond):
		}
	}
	tabs, err := srv.tables(ctx, cfg.Schema, cfg.Table, SentryName(cfg.Table), ghostAt)
	if err != nil {
		return false, unknown("reading the tables failed: %v", err)
	}
	_, hasT := tabs[cfg.Table]
	sentryComment, hasSentry := tabs[SentryName(cfg.Table)]
	_, hasSwap := tabs[ghostAt]
	switch {
	case hasT && hasSwap && !hasSentry:
		q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
		if ghostAt == cfg.Ghost {
			cfg.Logger.Warn("cut-over: the swap's RENAME failed; the server shows the table unchanged", "err", rerr)
			return false, nil
		}
		if err := srv.rename(ctx, q(ghostAt), q(cfg.Ghost)); err != nil {
			return false, fmt.Errorf("RENAME failed (the table is unchanged: %w), and renaming the ghost back failed: %w", rerr, err)
		}
		cfg.Logger.Warn("cut-over: the swap's RENAME failed; the server shows the table unchanged", "err", rerr)
		return false, nil
	case hasT && !hasSwap && hasSentry && sentryComment != SentryComment:
		cfg.Logger.Warn("cut-over: the swap session reported an error, but the server shows the RENAME done: the new table is in place", "err", rerr)
		return true, nil
	default:
		return false, unknown("the server shows %s %v, %s %v (comment %q), %s %v", cfg.Table, hasT, SentryName(cfg.Table), hasSentry, sentryComment, ghostAt, hasSwap)
	}
}

// server is what the cut-over asks of the server outside sessions A and B
// (tests inject faults through it).
type server interface {
	// killQuery interrupts the statement session id runs.
	killQuery(ctx context.Context, id int64) error
	// killSession ends session id (no error if it is gone already).
	killSession(ctx context.Context, id int64) error
	sessionGone(ctx context.Context, id int64) (bool, error)
	// sessionStateQuery selects a session's state by id (flavor).
	sessionStateQuery() string
	// tables returns which of names exist in schema, with their comments.
	tables(ctx context.Context, schema string, names ...string) (map[string]string, error)
	rename(ctx context.Context, from, to string) error
}

type realServer struct {
	db *sql.DB
	fl flavor.Server
}

func (r realServer) killQuery(ctx context.Context, id int64) error {
	_, err := r.db.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id))
	if dbconn.Number(err) == dbconn.ErNoSuchThread {
		return nil
	}
	return err
}

func (r realServer) killSession(ctx context.Context, id int64) error {
	_, err := r.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	if dbconn.Number(err) == dbconn.ErNoSuchThread {
		return nil
	}
	return err
}

func (r realServer) sessionStateQuery() string { return r.fl.SessionStateQuery() }

func (r realServer) sessionGone(ctx context.Context, id int64) (bool, error) {
	var state sql.NullString
	err := r.db.QueryRowContext(ctx, r.fl.SessionStateQuery(), id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	return false, err
}

func (r realServer) tables(ctx context.Context, schema string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		ok, comment, err := table.Exists(ctx, r.db, schema, n)
		if err != nil {
			return nil, err
		}
		if ok {
			out[n] = comment
		}
	}
	return out, nil
}

func (r realServer) rename(ctx context.Context, from, to string) error {
	_, err := r.db.ExecContext(ctx, dbconn.Tag+"RENAME TABLE "+from+" TO "+to)
	return err
}

// errDeadline: a statement was killed at the attempt's deadline.
var errDeadline = errors.New("the attempt's lock timeout passed")

// within runs stmt on conn (session id); if it still runs at deadline, it
// is killed (KILL QUERY) and the error wraps errDeadline.
func within(ctx context.Context, srv server, conn *sql.Conn, id int64, deadline time.Time, stmt string) error {
	var mu sync.Mutex
	done, killed := false, false
	t := time.AfterFunc(time.Until(deadline), func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		killed = true
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.killQuery(kctx, id)
	})
	_, err := conn.ExecContext(ctx, stmt)
	t.Stop()
	mu.Lock()
	done = true
	k := killed
	mu.Unlock()
	if k {
		if err == nil {
			// It completed as the deadline passed: keep the result.
			return nil
		}
		return fmt.Errorf("%w: %w", errDeadline, err)
	}
	return err
}

// waitForMDLWait polls the processlist until session id waits for a metadata
// lock (its RENAME queued behind A's lock).
func waitForMDLWait(ctx context.Context, conn interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, stateQuery string, id int64, done <-chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-done:
			if err == nil {
				return errors.New("RENAME completed while the table was locked: impossible, refusing to continue")
			}
			return fmt.Errorf("RENAME failed before it queued: %w", err)
		default:
		}
		var state sql.NullString
		err := conn.QueryRowContext(ctx, stateQuery, id).Scan(&state)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the processlist: %w", err)
		}
		if state.String == "Waiting for table metadata lock" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("RENAME did not queue for the metadata lock within %s (state %q)", limit, state.String)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// finish renames the old table (now under the sentry's name) to its final
// name; with DropOld it stays under the sentry's name for the caller.
func finish(ctx context.Context, db *sql.DB, cfg Config) (string, error) {
	q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
	sentry := q(SentryName(cfg.Table))
	if cfg.DropOld {
		return SentryName(cfg.Table), nil
	}
	if _, err := db.ExecContext(ctx, dbconn.Tag+"RENAME TABLE "+sentry+" TO "+q(cfg.Old)); err != nil {
		return SentryName(cfg.Table), fmt.Errorf("the new table is in place; renaming the old table %s to %s failed: %w", sentry, q(cfg.Old), err)
	}
	return cfg.Old, nil
}

// masterPosition reads the primary's current binlog position on conn (it must
// run on A's session: under LOCK TABLES other statements would wait for A).
func masterPosition(ctx context.Context, conn *sql.Conn) (binlog.Position, error) {
	return binlog.CurrentPosition(ctx, conn)
}

// discard closes conn without handing its session back to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
