package migration

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/throttle"
)

// TestThrottleQueryCheck: --throttle-query against the server: a number
// above 0 throttles, 0 does not, an error and a non-number throttle with
// the reason.
func TestThrottleQueryCheck(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE flag (n INT)")
	ctx := ctxFor(t, time.Minute)
	q := "SELECT COALESCE(SUM(n), 0) FROM " + testutil.QuoteIdent(schema) + ".flag"
	if r := throttle.QueryCheck(db, q).Run(ctx); r != "" {
		t.Errorf("empty flag table throttles: %s", r)
	}
	testutil.Exec(t, db, "INSERT INTO flag VALUES (2)")
	if r := throttle.QueryCheck(db, q).Run(ctx); r != "throttle-query returned 2" {
		t.Errorf("2: %q", r)
	}
	if r := throttle.QueryCheck(db, "SELECT * FROM nosuch").Run(ctx); !strings.HasPrefix(r, "throttle-query failed: ") {
		t.Errorf("error: %q", r)
	}
	if r := throttle.QueryCheck(db, "SELECT 'x'").Run(ctx); !strings.Contains(r, "not a number") {
		t.Errorf("non-number: %q", r)
	}
	if r := throttle.QueryCheck(db, "SELECT 1 FROM DUAL WHERE 0").Run(ctx); r != "throttle-query returned no row" {
		t.Errorf("no row: %q", r)
	}
}

// TestThrottleSourcesMigration: a migration with --throttle-query and
// --throttle-http pauses its copy while either says so (the status shows
// the reason), completes once both allow it, and --exact-rowcount gives
// the progress the exact row count.
func TestThrottleSourcesMigration(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 3000)
	testutil.Exec(t, db, "CREATE TABLE flag (n INT)", "INSERT INTO flag VALUES (1)",
		"INSERT INTO t SELECT seq + 100000, 'later', 1 FROM seq_1_to_777") // the statistics do not know these
	before := thrDigest(t, db, "t")
	var code atomic.Int32
	code.Store(http.StatusTooManyRequests)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) }))
	defer srv.Close()

	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	o.ThrottleQuery = "SELECT COALESCE(SUM(n), 0) FROM " + testutil.QuoteIdent(schema) + ".flag"
	o.ThrottleHTTP = srv.URL
	o.ExactRowcount = true
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	s := until(t, r, time.Minute, "throttled by the query and the URL", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCopy && s.Throttle.Throttled &&
			strings.Contains(s.Throttle.Reason, "throttle-query returned 1") && strings.Contains(s.Throttle.Reason, "answered 429")
	})
	if line := Line(s); !strings.Contains(line, "ETA unknown: the copy is paused") {
		t.Errorf("progress line while throttled: %s", line)
	}
	s = until(t, r, time.Minute, "the exact row count", func(s status.Snapshot) bool { return s.Copy.RowsEstimated == 3777 })
	copied := s.Copy.RowsCopied
	time.Sleep(1500 * time.Millisecond)
	if s := ctl.Status(); s.Copy.RowsCopied > copied+int64(o.Threads*o.MaxChunkRows) {
		t.Fatalf("the copy went on while throttled: %d then %d rows", copied, s.Copy.RowsCopied)
	}
	code.Store(http.StatusOK)
	until(t, r, time.Minute, "throttled by the query only", func(s status.Snapshot) bool {
		return s.Throttle.Throttled && !strings.Contains(s.Throttle.Reason, "throttle-http")
	})
	testutil.Exec(t, db, "DELETE FROM flag")
	finishFast(t, ctl)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := thrDigest(t, db, "t"); after != before {
		t.Errorf("table changed: %s, was %s", after, before)
	}
}

// TestThrottleQueryLive: a migration started without --throttle-query gets
// one while it runs (the socket's throttle-query=, recast ctl set), is
// throttled by it, and runs on once it is cleared.
func TestThrottleQueryLive(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 3000)
	before := thrDigest(t, db, "t")
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	until(t, r, time.Minute, "the copy phase", func(s status.Snapshot) bool { return s.Phase == status.PhaseCopy })
	// An operator's pause holds the copy (on a quiet machine it would
	// otherwise end before the query is installed); reasons add up.
	if err := ctl.Pause(); err != nil {
		t.Fatal(err)
	}
	if out := status.Command(ctl, "throttle-query=SELECT 7"); !strings.Contains(out, "set") {
		t.Fatalf("socket throttle-query=: %q", out)
	}
	until(t, r, time.Minute, "the live query among the reasons", func(s status.Snapshot) bool {
		return strings.Contains(s.Throttle.Reason, "throttle-query returned 7")
	})
	if err := ctl.Resume(); err != nil {
		t.Fatal(err)
	}
	s := until(t, r, time.Minute, "throttled by the live query alone", func(s status.Snapshot) bool {
		return s.Throttle.Throttled && strings.Contains(s.Throttle.Reason, "throttle-query returned 7") && !strings.Contains(s.Throttle.Reason, "operator")
	})
	if s.Phase != status.PhaseCopy {
		t.Errorf("phase %s while throttled by the query, want copy", s.Phase)
	}
	if s.Settings.ThrottleQuery != "SELECT 7" {
		t.Errorf("status settings: throttle query %q", s.Settings.ThrottleQuery)
	}
	if out := status.Command(ctl, "throttle-query=?"); strings.TrimSpace(out) != "SELECT 7" {
		t.Errorf("throttle-query=? answered %q", out)
	}
	if err := ctl.Set("throttle-query", ""); err != nil {
		t.Fatal(err)
	}
	until(t, r, time.Minute, "no longer throttled by the query", func(s status.Snapshot) bool {
		return !strings.Contains(s.Throttle.Reason, "throttle-query")
	})
	finishFast(t, ctl)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := thrDigest(t, db, "t"); after != before {
		t.Errorf("table changed: %s, was %s", after, before)
	}
}

// appWriter starts the application: stmt (a write to the table app, which
// it creates) every 10 ms until the returned stop, which waits for it and
// may be called more than once. The pacer sees it in the binlog (without
// it the pacer would let the copy run unpaced).
func appWriter(t *testing.T, db *sql.DB, stmt string) (stop func()) {
	t.Helper()
	testutil.Exec(t, db, "CREATE TABLE app (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if _, err := db.ExecContext(ctx, stmt); err != nil && ctx.Err() == nil {
				t.Errorf("application write: %v", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestPacedCopy (--max-latency-ratio): the pacer takes the probe's latency
// before the copy as its baseline, cuts the copy's duty while the probe is
// slow (here: a session holds the probe's row lock, so each probe waits
// its full timeout), lets it grow back once the probe is fast again and
// the copy runs (not while it is paused), shows
// all of it in the status and the progress line, and the migrated table is
// the original with the ALTER applied.
func TestPacedCopy(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000) // enough left to copy while the duty grows back (from below 0.007)
	before := thrDigest(t, db, "t")
	// The application: writes to another table, which the pacer sees in
	// the binlog (without it the pacer would let the copy run unpaced).
	stopApp := appWriter(t, db, "INSERT INTO app (v) VALUES (1)")
	defer stopApp()
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	o.MaxLatencyRatio = 2
	o.MinCopyRate = 0 // the pacer alone (the floor would end the copy before the duty grows back)
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	s := until(t, r, time.Minute, "the paced copy, the application seen", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCopy && s.Pace != nil && s.Pace.BaselineSeconds > 0 && !s.Pace.AppIdle && !s.Pace.Measuring
	})
	if !strings.Contains(Line(s), "paced: duty") {
		t.Errorf("progress line without the pacing: %s", Line(s))
	}
	// Hold the copy while the pacer is steered (on a quiet machine it
	// would otherwise end first); the pacer keeps probing.
	if err := ctl.Pause(); err != nil {
		t.Fatal(err)
	}
	lock, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback() //nolint:errcheck // after the explicit one: no-op
	hb := testutil.QuoteIdent(schema) + "." + testutil.QuoteIdent(HeartbeatName("t"))
	var id int
	if err := lock.QueryRow("SELECT id FROM " + hb + " WHERE id = 2 FOR UPDATE").Scan(&id); err != nil {
		t.Fatalf("the probe's row: %v", err)
	}
	s = until(t, r, time.Minute, "the duty cut under a slow probe", func(s status.Snapshot) bool {
		return s.Pace != nil && s.Pace.Duty < 0.007 // it starts at 0.01: cut once at least
	})
	if s.Pace.AppIdle {
		t.Error("the application is writing, yet the pacer calls it idle")
	}
	// Held back, the copy aims at short chunks whatever --chunk-time says.
	if err := ctl.Set("chunk-time", "1s"); err != nil {
		t.Fatal(err)
	}
	if s := ctl.Status(); s.Pace == nil || s.Pace.ChunkTime != PacedChunkTime.String() || s.Settings.ChunkTime != "1s" {
		t.Errorf("paced with chunk-time 1s: pace %+v, setting %s; want chunks of %s", s.Pace, s.Settings.ChunkTime, PacedChunkTime)
	}
	if s.Pace.CurrentSeconds < 2*s.Pace.BaselineSeconds {
		t.Errorf("duty %.2f with the probe at %.4f s against a baseline of %.4f s", s.Pace.Duty, s.Pace.CurrentSeconds, s.Pace.BaselineSeconds)
	}
	// Live: ratio 0 stops the pacing at once (the probe stays slow), a
	// ratio again resumes it from where it was.
	if out := status.Command(ctl, "max-latency-ratio=0"); !strings.Contains(out, "set") {
		t.Fatalf("socket max-latency-ratio=0: %q", out)
	}
	if s := ctl.Status(); s.Pace == nil || s.Pace.Duty != 1 || s.Settings.MaxLatencyRatio != 0 || s.Pace.ChunkTime != "1s" {
		t.Errorf("after max-latency-ratio=0: pace %+v, setting %v (want duty 1, chunks of 1s)", s.Pace, s.Settings.MaxLatencyRatio)
	}
	if out := status.Command(ctl, "max-latency-ratio=1.1"); !strings.Contains(out, "between 1.2 and 100") {
		t.Errorf("socket max-latency-ratio=1.1: %q", out)
	}
	if err := ctl.Set("max-latency-ratio", "3"); err != nil {
		t.Fatal(err)
	}
	if out := status.Command(ctl, "max-latency-ratio=?"); strings.TrimSpace(out) != "3" {
		t.Errorf("max-latency-ratio=? answered %q", out)
	}
	cut := ctl.Status().Pace.Duty
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The probe is fast again, but the copy is paused: what the probe says
	// is not about the copy, and the duty does not grow (it would let the
	// copy burst at full duty once the pause ends).
	s = until(t, r, time.Minute, "the probe fast again", func(s status.Snapshot) bool {
		return s.Pace != nil && s.Pace.CurrentSeconds > 0 && s.Pace.CurrentSeconds < 1.5*s.Pace.BaselineSeconds
	})
	if s.Pace.Duty > cut {
		t.Errorf("duty grown from %.3f to %.3f while the copy was paused", cut, s.Pace.Duty)
	}
	if err := ctl.Resume(); err != nil {
		t.Fatal(err)
	}
	until(t, r, time.Minute, "the duty back up once the probe is fast and the copy runs", func(s status.Snapshot) bool {
		return s.Pace != nil && s.Pace.Duty >= 2*cut // 5 % a decision: about 7 s
	})
	finishFast(t, ctl)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := thrDigest(t, db, "t"); after != before {
		t.Errorf("table changed: %s, was %s", after, before)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, HeartbeatName("t")).Scan(&n); err != nil || n != 0 {
		t.Errorf("the heartbeat table is left behind: %d, %v", n, err)
	}
}

// TestPacedChecksum: with the application active the checksum is paced
// like the copy (here by --nice-ratio, the pacer seeing the application):
// its chunks are short ones (more than the 3 of 10,000 rows an unpaced
// checksum takes here), the status and the progress line show its rows and
// rate while it runs, and the migration completes with the table intact.
func TestPacedChecksum(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000)
	before := thrDigest(t, db, "t")
	stopApp := appWriter(t, db, "INSERT INTO app (v) VALUES (1)")
	defer stopApp()
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	// The pacer for its view of the application, at a ratio it does not
	// reach; the nice ratio slows the checksum enough to be seen.
	o.MaxLatencyRatio = 100
	o.NiceRatio = 20
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	s := until(t, r, 2*time.Minute, "the checksum under way", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseChecksum && s.Checksum != nil && !s.Checksum.Done &&
			s.Checksum.RowsCompared > 0 && s.Checksum.RowsCompared < s.Checksum.RowsTotal
	})
	if line := Line(s); !strings.Contains(line, "| checksum ") || !strings.Contains(line, "paced: duty") {
		t.Errorf("the checksum's progress line shows neither its rows nor its pacing: %s", line)
	}
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if cs := r.res.Checksum; cs.Chunks <= 3 || cs.Rows != 20000 {
		t.Errorf("checksum: %d chunks over %d rows: want short chunks over 20000 rows", cs.Chunks, cs.Rows)
	}
	if s := ctl.Status(); s.Checksum == nil || !s.Checksum.Done || s.Checksum.RowsCompared != 20000 {
		t.Errorf("the status after the checksum: %+v", s.Checksum)
	}
	if after := thrDigest(t, db, "t"); after != before {
		t.Errorf("table changed: %s, was %s", after, before)
	}
}

// TestCopyRateCap (--max-copy-rate): while the application writes, the
// copy's rows over a stretch of the copy stay within the cap (plus the
// chunks in flight), and the status and the progress line say so; once the
// application stops, the pacer calls it idle and the cap no longer
// applies; the table is unchanged and the migration completes.
func TestCopyRateCap(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000) // 40 s at the cap: the copy is paused before it ends
	before := thrDigest(t, db, "t")
	stopApp := appWriter(t, db, "INSERT INTO app (v) VALUES (1), (2)")
	defer stopApp()
	const rate, threads, chunk = 500, 2, 100
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.Threads, o.MaxChunkRows, o.ChunkTime = threads, chunk, 5*time.Millisecond
	// The pacer only for its view of the application: a ratio it does not
	// reach, so that the cap alone holds the copy (uncapped, 100-row chunks
	// copy thousands of rows a second).
	o.MaxLatencyRatio = 100
	o.MaxCopyRate = rate
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	s0 := until(t, r, time.Minute, "the copy capped with the application seen", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCopy && s.Copy.CappedAt == rate && s.Copy.RowsCopied > 0 && s.Pace != nil && s.Pace.AppSeen
	})
	t0 := time.Now()
	if !strings.Contains(Line(s0), "capped: 500 rows/s") {
		t.Errorf("progress line without the cap: %s", Line(s0))
	}
	if s0.Settings.MaxCopyRate != rate {
		t.Errorf("settings max_copy_rate %g, want %d", s0.Settings.MaxCopyRate, rate)
	}
	s1 := until(t, r, time.Minute, "3 s of the capped copy", func(status.Snapshot) bool { return time.Since(t0) >= 3*time.Second })
	elapsed := time.Since(t0).Seconds()
	if s1.Copy.Done {
		t.Fatalf("the capped copy of 20,000 rows ended within %.1f s", elapsed)
	}
	copied := s1.Copy.RowsCopied - s0.Copy.RowsCopied
	if allowed := rate*elapsed + 2*threads*chunk; float64(copied) > allowed {
		t.Errorf("copied %d rows in %.2f s at --max-copy-rate %d (at most %.0f)", copied, elapsed, rate, allowed)
	}
	if copied == 0 {
		t.Errorf("the capped copy copied nothing in %.2f s", elapsed)
	}
	if out := status.Command(ctl, "max-copy-rate=?"); strings.TrimSpace(out) != "500" {
		t.Errorf("max-copy-rate=? answered %q", out)
	}
	// The application stops: with the copy paused (so that it cannot end
	// first), the pacer calls it idle and the cap is lifted.
	if err := ctl.Pause(); err != nil {
		t.Fatal(err)
	}
	stopApp()
	until(t, r, time.Minute, "the cap lifted with the application idle", func(s status.Snapshot) bool {
		return s.Pace != nil && s.Pace.AppIdle && s.Copy.CappedAt == 0 && !s.Copy.Done
	})
	finishFast(t, ctl)
	if err := ctl.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if after := thrDigest(t, db, "t"); after != before {
		t.Errorf("table changed: %s, was %s", after, before)
	}
}

// TestActiveSessions: the pacer's view of the application in the
// processlist: another session's statement counts, recast's own (tagged)
// statements and the asking session do not.
func TestActiveSessions(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	ctx := ctxFor(t, time.Minute)
	// recast's pools (dbconn) tag every statement, also one written without it.
	cc := testOptions(t, schema, "t", "").Conn
	cc.Schema = schema
	own, err := dbconn.Open(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	sleeper := func(db *sql.DB, stmt string) (id int64, done chan error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		done = make(chan error, 1)
		go func() {
			var v int
			done <- conn.QueryRowContext(ctx, stmt).Scan(&v)
		}()
		return id, done
	}
	// A 4-byte character in a statement: MySQL's information_schema
	// processlist would fail as a whole (3854); the flavor's one does not.
	appID, appDone := sleeper(db, "SELECT SLEEP(3) + LENGTH('😀')")
	ownID, ownDone := sleeper(db, dbconn.Tag+"SELECT SLEEP(3)")
	poolID, poolDone := sleeper(own, "SELECT SLEEP(3)")
	var seen []throttle.ActiveSession
	deadline := time.Now().Add(2800 * time.Millisecond)
	for {
		var err error
		if seen, err = throttle.ActiveSessions(ctx, db, testutil.Server(t).Processlist()); err != nil {
			t.Fatal(err)
		}
		// Seen, and for a second or more: the processlist's TIME is read
		// (a write running that long counts as a load).
		if slices.ContainsFunc(seen, func(a throttle.ActiveSession) bool { return a.ID == appID && a.Seconds >= 1 }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var sawApp bool
	for _, a := range seen {
		switch a.ID {
		case appID:
			sawApp = strings.Contains(a.Statement, "SLEEP(3)") && a.Seconds >= 1
		case ownID, poolID:
			t.Errorf("recast's own statement counted as the application's: %+v", a)
		}
	}
	if !sawApp {
		t.Errorf("the application's SELECT SLEEP(3) (session %d) not among the active sessions with TIME >= 1: %+v", appID, seen)
	}
	for _, ch := range []chan error{appDone, ownDone, poolDone} {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
}
