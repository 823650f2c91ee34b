// Package cutover swaps the ghost table in for the original one, atomically
// and without losing a write, on MariaDB (which refuses RENAME TABLE under
// LOCK TABLES, ERROR 1192) and on MySQL 8.0+ alike.
//
// Why not MySQL's one-session swap (RENAME TABLE under LOCK TABLES, allowed
// there since 8.0.13): the RENAME needs the ghost write-locked by the locking
// session too, and recast's applier, which must bring the ghost up to the
// drain point after the lock, writes the ghost from other sessions; it would
// wait for that lock forever. The two-session protocol locks only T.
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
// and waits (without requesting anything) while they exist, up to
// Budget/Attempts; only then does it request the lock, for at most
// LockWaitTimeout. Blockers that outlast KillAfter are killed if the policy
// says so. The application therefore never waits for recast's lock longer
// than LockWaitTimeout per attempt.
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
	// Armed is called just before the sentry is dropped: from then on the
	// RENAME of T may complete, and the binlog stream will show it.
	Armed func()
	// Disarmed is called when an armed attempt did not rename (the RENAME failed).
	Disarmed func()
	// UnderLock, if set, runs after the drain while T is still locked and
	// nothing reaches the ghost: locked is A's session (the only one that
	// can read T now; other sessions of db can read the ghost). Its time
	// counts as lock time. An error aborts the cut-over (no retry) unless it
	// wraps ErrRetry.
	UnderLock func(ctx context.Context, locked *sql.Conn) error
	// BeforeAttempt, if set, runs before each attempt requests the lock.
	// An error aborts the cut-over unless it wraps ErrRetry.
	BeforeAttempt func(ctx context.Context) error
	// DropOld drops the old table instead of keeping it.
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
	DrainPos   binlog.Position
	OldTable   string // empty when dropped
	TotalDelay time.Duration
	// Waited is the time spent waiting for blockers before requesting the
	// lock; Blockers and Kills are what the metadata-lock policy saw and did.
	Waited   time.Duration
	Blockers []mdl.Blocker
	Kills    []mdl.Kill
}

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
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return Result{}, err
	}
	var st attemptStats
	rep, err := mdl.Run(ctx, pol, "cut-over", func(ctx context.Context) error {
		var err error
		st, err = attemptOnce(ctx, db, cfg, srv)
		return err
	}, func(err error) bool { return errors.Is(err, errRetry) })
	res.Attempts, res.Waited, res.Blockers, res.Kills = rep.Attempts, rep.Waited, rep.Blockers, rep.Kills
	if err != nil {
		return res, err
	}
	res.LockedFor, res.Drain, res.Queue, res.DrainPos = st.locked, st.drain, st.queue, st.pos
	cfg.Logger.Info("cut-over: table swapped", "lock_and_rename", st.locked.Round(time.Millisecond),
		"attempts", res.Attempts, "waited_for_blockers", res.Waited.Round(time.Millisecond),
		"blockers_seen", len(res.Blockers), "kills", len(res.Kills))
	old, err := finish(ctx, db, cfg)
	res.OldTable = old
	res.TotalDelay = time.Since(start)
	return res, err
}

var errRetry = errors.New("retryable")

// ErrRetry, wrapped by an UnderLock error, makes the attempt retryable.
var ErrRetry = errRetry

type attemptStats struct {
	locked, drain, queue time.Duration
	pos                  binlog.Position
}

// attemptOnce runs the protocol once. A nil error means T is now the new table.
func attemptOnce(ctx context.Context, db *sql.DB, cfg Config, srv flavor.Server) (st attemptStats, err error) {
	q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
	tbl, ghost, sentry, swap := q(cfg.Table), q(cfg.Ghost), q(SentryName(cfg.Table)), q(SwapName(cfg.Table))
	lockSecs := max(1, int(cfg.LockWaitTimeout/time.Second))

	if cfg.BeforeAttempt != nil {
		if err := cfg.BeforeAttempt(ctx); err != nil {
			return st, err
		}
	}
	connA, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	defer connA.Close()
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
	finished, ghostMoved := false, false
	defer func() {
		if finished {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if ghostMoved {
			// Back to the name the applier writes to, before T is unlocked
			// (a queued RENAME then fails: its source is gone, the sentry exists).
			if _, err := db.ExecContext(cctx, dbconn.Tag+"RENAME TABLE "+swap+" TO "+ghost); err != nil {
				cfg.Logger.Error("cut-over: renaming the ghost back failed; recast cleanup or --resume restores it", "from", swap, "to", ghost, "err", err)
			}
		}
		if _, err := connA.ExecContext(cctx, "UNLOCK TABLES"); err != nil {
			_ = connA.Raw(func(any) error { return driver.ErrBadConn })
		}
		if renameDone != nil {
			select {
			case <-renameDone:
			case <-cctx.Done():
			}
		}
		_, _ = db.ExecContext(cctx, dbconn.Tag+"DROP TABLE IF EXISTS "+sentry)
	}()

	// MySQL with GTIDs refuses to LOCK TABLES a non-transactional table
	// together with InnoDB ones (error 1785): its sentry is InnoDB.
	sentryEngine := "MEMORY"
	if srv.MySQL() {
		sentryEngine = "InnoDB"
	}
	for _, s := range []string{
		fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lockSecs),
		dbconn.Tag + "DROP TABLE IF EXISTS " + sentry,
		dbconn.Tag + "CREATE TABLE " + sentry + " (id INT) ENGINE=" + sentryEngine + " COMMENT='" + SentryComment + "'",
	} {
		if _, err := connA.ExecContext(ctx, s); err != nil {
			return st, fmt.Errorf("%w: prepare the sentry: %w", errRetry, err)
		}
	}
	cfg.Pause(ctx, "before-lock")
	if _, err := connA.ExecContext(ctx, dbconn.Tag+"LOCK TABLES "+tbl+" WRITE, "+sentry+" WRITE"); err != nil {
		if dbconn.IsLockTimeout(err) {
			return st, fmt.Errorf("%w: LOCK TABLES waited %ds for other sessions' metadata locks on %s", errRetry, lockSecs, tbl)
		}
		return st, fmt.Errorf("%w: LOCK TABLES: %w", errRetry, err)
	}
	lockedAt := time.Now()
	cfg.Pause(ctx, "locked")

	pos, err := masterPosition(ctx, connA)
	st.pos = pos
	if err != nil {
		return st, fmt.Errorf("%w: read the binlog position under lock: %w", errRetry, err)
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.LockWaitTimeout)
	err = cfg.WaitApplied(dctx, pos)
	cancel()
	st.drain = time.Since(lockedAt)
	if err != nil {
		return st, fmt.Errorf("%w: the applier did not reach %s within %s under lock: %w", errRetry, pos, cfg.LockWaitTimeout, err)
	}
	cfg.Pause(ctx, "drained")
	if cfg.UnderLock != nil {
		if err := cfg.UnderLock(ctx, connA); err != nil {
			return st, err
		}
	}

	// The ghost takes a name that sorts after T, so that T is the first table
	// B's RENAME locks: waiting for a metadata lock then means waiting on T.
	// Nothing writes to the ghost now: T is locked and the applier drained.
	renameGhost := fmt.Sprintf("%sRENAME TABLE %s WAIT %d TO %s", dbconn.Tag, ghost, lockSecs, swap)
	if srv.MySQL() { // no WAIT clause: the session's lock_wait_timeout applies
		renameGhost = fmt.Sprintf("%sRENAME TABLE %s TO %s", dbconn.Tag, ghost, swap)
	}
	if _, err := db.ExecContext(ctx, renameGhost); err != nil {
		return st, fmt.Errorf("%w: rename the ghost for the swap: %w", errRetry, err)
	}
	ghostMoved = true

	// Session B: the RENAME that waits on T.
	connB, err := db.Conn(ctx)
	if err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	var bID int64
	if err := connB.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&bID); err != nil {
		_ = connB.Close()
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	unregB := mdl.RegisterOwn(bID)
	if _, err := connB.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lockSecs+2)); err != nil {
		_ = connB.Close()
		unregB()
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	renameDone = make(chan error, 1)
	go func() {
		_, err := connB.ExecContext(context.WithoutCancel(ctx),
			dbconn.Tag+"RENAME TABLE "+tbl+" TO "+sentry+", "+swap+" TO "+tbl)
		_ = connB.Close()
		unregB()
		renameDone <- err
	}()
	queued := time.Now()
	if err := waitForMDLWait(ctx, connA, bID, renameDone, cfg.LockWaitTimeout); err != nil {
		return st, fmt.Errorf("%w: %w", errRetry, err)
	}
	st.queue = time.Since(queued)
	cfg.Pause(ctx, "rename-waiting")
	cfg.Armed()
	if _, err := connA.ExecContext(ctx, dbconn.Tag+"DROP TABLE "+sentry); err != nil {
		cfg.Disarmed()
		return st, fmt.Errorf("%w: drop the sentry: %w", errRetry, err)
	}
	finished = true // from here on the RENAME may run: never recreate the sentry
	cfg.Pause(ctx, "sentry-dropped")
	if _, err := connA.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); err != nil {
		cfg.Logger.Warn("UNLOCK TABLES failed; closing the session releases the lock", "err", err)
		_ = connA.Raw(func(any) error { return driver.ErrBadConn })
	}
	st.locked = time.Since(lockedAt)
	if err := <-renameDone; err != nil {
		// T is unchanged; put the ghost back under its name before the
		// applier needs it (T is writable again already).
		if _, rerr := db.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"RENAME TABLE "+swap+" TO "+ghost); rerr != nil {
			return st, fmt.Errorf("RENAME failed (the table is unchanged: %w), and renaming the ghost back failed: %w", err, rerr)
		}
		cfg.Disarmed()
		return st, fmt.Errorf("%w: RENAME failed, the table is unchanged: %w", errRetry, err)
	}
	return st, nil
}

// waitForMDLWait polls the processlist until session id waits for a metadata
// lock (its RENAME queued behind A's lock).
func waitForMDLWait(ctx context.Context, conn *sql.Conn, id int64, done <-chan error, limit time.Duration) error {
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
		err := conn.QueryRowContext(ctx, "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&state)
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
// name, or drops it.
func finish(ctx context.Context, db *sql.DB, cfg Config) (string, error) {
	q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
	sentry := q(SentryName(cfg.Table))
	if cfg.DropOld {
		if _, err := db.ExecContext(ctx, dbconn.Tag+"DROP TABLE "+sentry); err != nil {
			return SentryName(cfg.Table), fmt.Errorf("the new table is in place; dropping the old table %s failed: %w", sentry, err)
		}
		return "", nil
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
