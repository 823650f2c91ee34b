package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/table"
)

// swapSessions are the attempt's two sessions.
type swapSessions struct {
	db     *sql.DB // reads B's state: performance_schema is closed to A under LOCK TABLES (error 1100)
	a, b   *sql.Conn
	bID    int64
	unregB func()
}

// attemptRefs are attemptOnce's variables its deferred clean-up reads.
type attemptRefs struct {
	st         *attemptStats
	renameDone *chan error
	bOwned     *bool
	bQueued    *int64
	finished   *bool
}

// swapUnderLock is the MySQL 8.0.13+ end of an attempt (see the package
// doc, "MySQL"): A holds LOCK TABLES T WRITE, the applier has drained to
// the position read under it, UnderLock has verified, and B has renamed the
// ghost G to SwapName (sorting after T). B requests LOCK TABLES T WRITE,
// G WRITE and queues on T; A confirms B waits, arms the
// pump, unlocks; B is granted before every statement queued on T (a
// waiting LOCK TABLES WRITE blocks new DML requests in MySQL's MDL) and
// runs RENAME TABLE T TO S, G TO T under its lock, then unlocks. The
// queued statements open T by name and find the new table.
//
// attemptOnce's deferred clean-up stops a queued B before A unlocks when
// the attempt fails; *finished is set once A's UNLOCK may let B swap.
func swapUnderLock(ctx, lctx context.Context, cfg Config, srv server, ss swapSessions, deadline, lockRequested, lockedAt time.Time, refs attemptRefs) error {
	st := refs.st
	q := func(n string) string { return table.QuoteIdent(cfg.Schema) + "." + table.QuoteIdent(n) }
	// The ghost is under SwapName (attemptOnce renamed it): it sorts after
	// T, so T is the first lock B's LOCK TABLES waits for.
	tbl, ghost, old := q(cfg.Table), q(SwapName(cfg.Table)), q(SentryName(cfg.Table))

	// Session B: its LOCK TABLES queues on T (A holds it); once granted,
	// the RENAME and the UNLOCK follow at once.
	// B's outcome is sent twice: waitForMDLWait may take one (B ended
	// before queuing), the clean-up or the swap below the other.
	done := make(chan error, 2)
	*refs.renameDone = done
	*refs.bOwned = false
	*refs.bQueued = ss.bID
	// queuedBehindA: set once B has been seen waiting behind A's lock.
	// Whichever way A's lock ends after that (its UNLOCK, or its session
	// killed or its connection lost), B is granted T before any statement
	// queued on it. B granted before that means A's session ended while
	// nothing waited behind it: the application's statements may have
	// written to T since the drain, and B must not swap (with no sentry on
	// MySQL, nothing else stops its RENAME).
	var queuedBehindA atomic.Bool
	go func() {
		bctx := context.WithoutCancel(ctx)
		_, err := ss.b.ExecContext(bctx, dbconn.Tag+"LOCK TABLES "+tbl+" WRITE, "+ghost+" WRITE")
		if err == nil {
			if queuedBehindA.Load() {
				_, err = ss.b.ExecContext(bctx, dbconn.Tag+"RENAME TABLE "+tbl+" TO "+old+", "+ghost+" TO "+tbl)
			} else {
				err = errGrantedEarly
			}
			if _, uerr := ss.b.ExecContext(bctx, "UNLOCK TABLES"); uerr != nil && err == nil {
				cfg.Logger.Warn("cut-over: UNLOCK TABLES after the swap failed; closing the session releases the lock", "err", uerr)
			}
		} else {
			err = fmt.Errorf("%w: %w", errNotGranted, err)
		}
		discard(ss.b)
		ss.unregB()
		done <- err
		done <- err
	}()
	queued := time.Now()
	if err := waitForMDLWait(lctx, ss.db, srv.sessionStateQuery(), ss.bID, done, time.Until(deadline)); err != nil {
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	// A answers after B was seen waiting: A held T meanwhile, and B, which
	// requests T first, was waiting on T. (Had A's session ended first, B
	// could have been granted T and be waiting on the ghost's lock.)
	if err := ss.a.PingContext(lctx); err != nil {
		return fmt.Errorf("%w: the locking session is gone: %w", errRetry, err)
	}
	queuedBehindA.Store(true)
	st.queue = time.Since(queued)
	cfg.Pause(ctx, "rename-waiting")
	*refs.finished = true // A's UNLOCK hands T to B, which swaps
	cfg.Pause(ctx, "sentry-dropped")
	if _, err := ss.a.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES"); err != nil {
		cfg.Logger.Warn("UNLOCK TABLES failed; closing the session releases the lock", "err", err)
		_ = ss.a.Raw(func(any) error { return driver.ErrBadConn })
	}
	unlockedAt := time.Now()
	rerr := <-done
	// B held T from its grant to its UNLOCK, right after A's: the table
	// was locked from A's grant to B's end.
	st.rename += time.Since(unlockedAt)
	st.locked = time.Since(lockedAt)
	st.held = st.locked
	st.blocked = time.Since(lockRequested)
	if rerr != nil {
		swapped, err := resolveSwap(context.WithoutCancel(ctx), srv, cfg, ss.bID, SwapName(cfg.Table), rerr)
		if swapped {
			st.recovered = true
			return nil
		}
		if err != nil {
			return err
		}
		cfg.Disarmed()
		return fmt.Errorf("%w: the swap session's LOCK TABLES or RENAME failed, the table is unchanged: %w", errRetry, rerr)
	}
	return nil
}

// errNotGranted: B's LOCK TABLES failed (never granted): nothing renamed.
var errNotGranted = fmt.Errorf("the swap session's LOCK TABLES failed")

// errGrantedEarly: B's LOCK TABLES was granted before B had been seen
// queued behind A (A's session ended early): B unlocked without renaming.
var errGrantedEarly = errors.New("the swap session was granted the table before it had queued behind the lock (the locking session ended early); it did not swap")

// stopQueued ends session id, whose LOCK TABLES is queued behind A's lock
// (so it cannot have been granted), and waits for its goroutine. It
// reports whether the session is known to have ended without renaming.
func stopQueued(ctx context.Context, srv server, id int64, done <-chan error, log *slog.Logger) bool {
	if err := srv.killSession(ctx, id); err != nil {
		log.Error("cut-over: killing the queued swap session failed", "session", id, "err", err)
	}
	select {
	case err := <-done:
		if err == nil {
			log.Error("cut-over: the swap session renamed while the attempt was failing")
			return false
		}
		log.Debug("cut-over: the queued swap session was stopped, as it must once the attempt failed", "err", err)
		return true
	case <-ctx.Done():
		return false
	}
}
