package migration

// Throttling and live control against the test sandbox (primary + 1
// replica). The replica-lag and max-load tests are not parallel: they stop
// the shared replica's SQL thread and measure the server-wide
// Threads_running (Go runs non-parallel tests before the parallel ones
// start).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/status"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/throttle"
)

// thrTable creates table tbl (id, a, b) with n rows and fresh statistics.
func thrTable(t *testing.T, db *sql.DB, tbl string, n int) {
	t.Helper()
	testutil.Exec(t, db,
		fmt.Sprintf("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, a VARCHAR(40) NOT NULL, b INT NOT NULL)", tbl),
		fmt.Sprintf("INSERT INTO %s SELECT seq, CONCAT('row-', seq), seq %% 97 FROM seq_1_to_%d", tbl, n),
		"ANALYZE TABLE "+tbl)
}

// thrDigest is an order-independent digest of the columns id, a, b.
func thrDigest(t *testing.T, db *sql.DB, tbl string) string {
	t.Helper()
	var n, sum int64
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('#', id, a, b))), 0) FROM "+tbl).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("rows=%d sum=%d", n, sum)
}

// running is a migration started in the background under a Control.
type running struct {
	ctl  *Control
	done chan struct{}
	res  *Result
	err  error
}

func startControlled(t *testing.T, ctl *Control, o testOpts) *running {
	t.Helper()
	r := &running{ctl: ctl, done: make(chan struct{})}
	ctx := ctxFor(t, 3*time.Minute)
	go func() {
		defer close(r.done)
		r.res, r.err = ctl.Run(ctx, o.Options, o.Runtime)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			ctl.Abort("test ended")
			<-r.done
		}
	})
	return r
}

func (r *running) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("the migration did not end within %s; status:\n%s", d, r.ctl.Status().Text())
		return nil
	}
}

// until polls the Control's status until cond holds (or fails the test).
func until(t *testing.T, r *running, d time.Duration, what string, cond func(status.Snapshot) bool) status.Snapshot {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := r.ctl.Status()
		if cond(s) {
			return s
		}
		select {
		case <-r.done:
			t.Fatalf("the migration ended (err %v) while waiting for: %s\n%s", r.err, what, s.Text())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s\n%s", d, what, s.Text())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowCopy makes the copy take a while: chunks of 5 rows, one thread (a
// few thousand rows a second at most).
func slowCopy(o *testOpts) {
	o.Threads, o.MaxChunkRows, o.ChunkTime = 1, 5, 5*time.Millisecond
}

// finishFast lets the rest of the copy go at full speed.
func finishFast(t *testing.T, ctl *Control) {
	t.Helper()
	for _, kv := range [][2]string{{"max-chunk-rows", "5000"}, {"chunk-time", "200ms"}, {"threads", "4"}} {
		if err := ctl.Set(kv[0], kv[1]); err != nil && !strings.Contains(err.Error(), "has ended") {
			t.Fatal(err)
		}
	}
}

// TestThrottleReplicaLag (acceptance 1): stopping the replica's SQL thread
// pauses the copy within 2 s with reason "replica lag"; while the lag keeps
// growing with the copy paused the applier is slowed; restarting the
// thread resumes the migration, which completes correctly.
func TestThrottleReplicaLag(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000)
	testutil.WaitReplicaCaughtUp(t, 0)
	rdb := testutil.ReplicaDB(t, 0, "")
	t.Cleanup(func() { rdb.Exec("START REPLICA SQL_THREAD") })

	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	o.MaxLag = time.Second
	ctl := NewControl()
	ctl.Pause() // start paused: the copy must not finish before the replica stops
	r := startControlled(t, ctl, o)
	sb := testutil.Sandbox(t)
	st := until(t, r, time.Minute, "the copy phase with the replica watched", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCopy && len(s.Replicas) == 1 && s.Replicas[0].LagSeconds != nil
	})
	if st.Replicas[0].Name != sb.Replicas[0].Addr() {
		t.Fatalf("watched %q, the sandbox's replica is %s", st.Replicas[0].Name, sb.Replicas[0].Addr())
	}
	ctl.Resume()
	until(t, r, 30*time.Second, "copying, not throttled", func(s status.Snapshot) bool {
		return s.Copy.RowsCopied >= 1000 && !s.Throttle.Throttled
	})

	// Writes while the replica is stopped: the applier keeps applying. They
	// go to rows already copied: a change to a row no chunk has read yet is
	// left to the copy (docs/copy.md) and would give the applier nothing
	// to slow down.
	wctx, stopWrites := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; wctx.Err() == nil; i++ {
			db.Exec("UPDATE t SET b = b + 1 WHERE id = ?", i*37%1000+1)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() { stopWrites(); wg.Wait() }()

	if _, err := rdb.Exec("STOP REPLICA SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	st = until(t, r, 10*time.Second, "throttled for replica lag", func(s status.Snapshot) bool {
		return s.Throttle.Throttled && strings.Contains(s.Throttle.Reason, "replica lag")
	})
	latency := time.Since(stopped)
	t.Logf("paused %s after STOP REPLICA SQL_THREAD (max-lag %s): %s", latency.Round(time.Millisecond), o.MaxLag, st.Throttle.Reason)
	if latency > 2*time.Second {
		t.Errorf("the copy paused %s after the replica stopped, want within 2s", latency)
	}
	// The copy stays paused (a chunk in flight may finish).
	time.Sleep(300 * time.Millisecond)
	c0 := r.ctl.Status().Copy.Chunks
	// The lag grows with the copy paused: the applier slows down.
	st = until(t, r, 10*time.Second, "the applier slowed", func(s status.Snapshot) bool { return s.Apply.ApplierDelaySeconds > 0 })
	if c1 := st.Copy.Chunks; c1 != c0 {
		t.Errorf("%d chunk(s) copied while throttled for lag", c1-c0)
	}
	if st.Apply.EventsApplied == 0 {
		t.Error("the applier applied nothing while the copy was paused")
	}
	// Slowed means fewer changes applied than come in (the replica must
	// get the chance to catch up), not the same changes in bigger windows.
	// (Incoming row changes are counted as the reader takes them, and the
	// reader waits for the applier: compare binlog bytes written and applied.)
	st = until(t, r, 30*time.Second, "the applier applying less than comes in", func(s status.Snapshot) bool {
		return s.Apply.ApplierDelaySeconds > 0 && s.Apply.BinlogBytesPerSecond > 1000 &&
			s.Apply.BinlogAppliedBytesPerSecond < 0.7*s.Apply.BinlogBytesPerSecond && s.Apply.Backlog == "not draining"
	})
	t.Logf("slowed applier: delay %.2fs, binlog applied %.0f B/s, written %.0f B/s", st.Apply.ApplierDelaySeconds,
		st.Apply.BinlogAppliedBytesPerSecond, st.Apply.BinlogBytesPerSecond)
	stopWrites()
	wg.Wait()

	if _, err := rdb.Exec("START REPLICA SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	until(t, r, 30*time.Second, "the throttle lifted", func(s status.Snapshot) bool {
		return !s.Throttle.Throttled && s.Copy.Chunks > c0 || s.Phase != status.PhaseCopy
	})
	finishFast(t, ctl)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := thrDigest(t, db, "t"), thrDigest(t, db, "_t_old"); got != want {
		t.Errorf("new table %s, original %s", got, want)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "_t_old,t" {
		t.Errorf("tables after the migration: %v (the heartbeat table must be gone)", got)
	}
	if s := ctl.Status(); s.Phase != status.PhaseDone || s.Throttle.ThrottledSeconds < 1 {
		t.Errorf("final status: %s, throttled %.1fs", s.Phase, s.Throttle.ThrottledSeconds)
	}
}

// TestThrottleMaxLoad (acceptance 2): with --max-load Threads_running=N, an
// artificial load above N pauses the copy; below N it resumes.
func TestThrottleMaxLoad(t *testing.T) {
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000)
	const limit, load = 15, 25
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	o.MaxLoad, _ = throttle.ParseThresholds(fmt.Sprintf("Threads_running=%d", limit))
	ctl := NewControl()
	ctl.Pause()
	r := startControlled(t, ctl, o)
	until(t, r, time.Minute, "the copy phase", func(s status.Snapshot) bool { return s.Phase == status.PhaseCopy && s.Throttle.Paused })
	ctl.Resume()
	until(t, r, 30*time.Second, "copying under the limit", func(s status.Snapshot) bool {
		return s.Copy.RowsCopied > 0 && !s.Throttle.Throttled
	})

	// The load: sessions running SLEEP, counted by Threads_running.
	loadDB := testutil.DB(t, schema)
	loadDB.SetMaxOpenConns(load + 2)
	tag := "/* recast-load " + schema + " */ "
	var wg sync.WaitGroup
	for range load {
		wg.Add(1)
		go func() { defer wg.Done(); loadDB.Exec(tag + "SELECT SLEEP(30)") }()
	}
	kill := func() {
		ids, err := queryIDs(db, "SELECT ID FROM "+testutil.Server(t).Processlist()+" WHERE INFO LIKE ?", tag+"%")
		if err != nil {
			t.Error(err)
			return
		}
		for _, id := range ids {
			db.Exec(fmt.Sprintf("KILL QUERY %d", id))
		}
	}
	defer func() { kill(); wg.Wait() }()

	st := until(t, r, 10*time.Second, "throttled by max-load", func(s status.Snapshot) bool {
		return s.Throttle.Throttled && strings.Contains(s.Throttle.Reason, "max-load Threads_running=")
	})
	if !regexp.MustCompile(fmt.Sprintf(`max-load Threads_running=\d+ > %d`, limit)).MatchString(st.Throttle.Reason) {
		t.Errorf("reason %q", st.Throttle.Reason)
	}
	time.Sleep(300 * time.Millisecond)
	c0 := ctl.Status().Copy.Chunks
	time.Sleep(500 * time.Millisecond)
	if c1 := ctl.Status().Copy.Chunks; c1 != c0 {
		t.Errorf("%d chunk(s) copied while throttled by max-load", c1-c0)
	}
	kill()
	wg.Wait()
	until(t, r, 10*time.Second, "the load gone, the copy resumed", func(s status.Snapshot) bool {
		return !s.Throttle.Throttled && s.Copy.Chunks > c0 || s.Phase != status.PhaseCopy
	})
	finishFast(t, ctl)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := thrDigest(t, db, "t"), thrDigest(t, db, "_t_old"); got != want {
		t.Errorf("new table %s, original %s", got, want)
	}
}

// TestThrottleUnknownLoadVariable: a misspelt variable is refused at once
// (it would throttle forever).
func TestThrottleUnknownLoadVariable(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 100)
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.MaxLoad, _ = throttle.ParseThresholds("Threads_runing=10")
	_, err := runT(ctxFor(t, time.Minute), o)
	if err == nil || !strings.Contains(err.Error(), "Threads_runing is not a numeric status variable") {
		t.Fatalf("want the variable refused, got %v", err)
	}
	if got := tableNames(t, db, schema); strings.Join(got, ",") != "t" {
		t.Errorf("tables left: %v", got)
	}
}

// assertAborted checks an aborted migration: the error, the status, the
// original table untouched, no helper table left, nothing for cleanup.
func assertAborted(t *testing.T, r *running, db *sql.DB, o testOpts, before string, reason string) {
	t.Helper()
	err := r.wait(t, time.Minute)
	if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("want an abort (%s), got %v", reason, err)
	}
	if errors.Is(err, ErrInterrupted) {
		t.Fatalf("an abort must not be kept for --resume: %v", err)
	}
	if s := r.ctl.Status(); s.Phase != status.PhaseFailed || !strings.Contains(s.Error, reason) {
		t.Errorf("status: phase %s, error %q", s.Phase, s.Error)
	}
	if got := thrDigest(t, db, o.Table); got != before {
		t.Errorf("the original table changed: %s, was %s", got, before)
	}
	var left []string
	for _, n := range tableNames(t, db, o.Database) {
		if strings.Contains(n, o.Table) {
			left = append(left, n)
		}
	}
	if strings.Join(left, ",") != o.Table {
		t.Errorf("tables after the abort: %v", left)
	}
	done, err := Cleanup(context.Background(), o.Conn, o.Database, o.Table)
	if err != nil || len(done) != 0 {
		t.Errorf("cleanup after the abort: %q %v", done, err)
	}
}

// TestThrottleFlagFilesAndAbort (acceptance 3): the throttle flag file
// pauses the copy; the panic flag file and an abort stop the migration,
// leaving the original table untouched and nothing for cleanup.
func TestThrottleFlagFilesAndAbort(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	dir := t.TempDir()

	t.Run("throttle-flag-file", func(t *testing.T) {
		thrTable(t, db, "t1", 3000)
		o := testOptions(t, schema, "t1", "ADD COLUMN c INT")
		slowCopy(&o)
		o.ThrottleFlagFile = filepath.Join(dir, "throttle")
		if err := os.WriteFile(o.ThrottleFlagFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := startControlled(t, NewControl(), o)
		until(t, r, time.Minute, "throttled by the flag file", func(s status.Snapshot) bool {
			return s.Phase == status.PhaseCopy && s.Throttle.Throttled && strings.Contains(s.Throttle.Reason, "throttle flag file "+o.ThrottleFlagFile+" exists")
		})
		time.Sleep(500 * time.Millisecond)
		if s := r.ctl.Status(); s.Copy.RowsCopied != 0 || s.Copy.Done {
			t.Fatalf("copied %d rows while the flag file exists", s.Copy.RowsCopied)
		}
		os.Remove(o.ThrottleFlagFile)
		until(t, r, 10*time.Second, "copying after the flag file is gone", func(s status.Snapshot) bool {
			return s.Copy.RowsCopied > 0 || s.Phase != status.PhaseCopy
		})
		finishFast(t, r.ctl)
		if err := r.wait(t, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, want := thrDigest(t, db, "t1"), thrDigest(t, db, "_t1_old"); got != want {
			t.Errorf("new table %s, original %s", got, want)
		}
	})

	t.Run("panic-flag-file", func(t *testing.T) {
		thrTable(t, db, "t2", 20000)
		before := thrDigest(t, db, "t2")
		o := testOptions(t, schema, "t2", "ADD COLUMN c INT")
		slowCopy(&o)
		o.PanicFlagFile = filepath.Join(dir, "panic")
		r := startControlled(t, NewControl(), o)
		until(t, r, time.Minute, "copying", func(s status.Snapshot) bool { return s.Copy.RowsCopied > 0 })
		if err := os.WriteFile(o.PanicFlagFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		assertAborted(t, r, db, o, before, "panic flag file "+o.PanicFlagFile)
	})

	t.Run("abort", func(t *testing.T) {
		thrTable(t, db, "t3", 20000)
		before := thrDigest(t, db, "t3")
		o := testOptions(t, schema, "t3", "ADD COLUMN c INT")
		slowCopy(&o)
		ctl := NewControl()
		srv, err := status.Listen("127.0.0.1:0", ctl, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		r := startControlled(t, ctl, o)
		until(t, r, time.Minute, "copying", func(s status.Snapshot) bool { return s.Copy.RowsCopied > 0 })
		if _, err := status.NewClient(srv.Addr()).Post(context.Background(), "abort", nil); err != nil {
			t.Fatal(err)
		}
		assertAborted(t, r, db, o, before, "aborted by operator")
	})
}

// TestLiveControl (acceptance 4): through the HTTP endpoint (recast ctl's
// client), set threads=1 and chunk-time take effect on the running copy
// and show in the status; pause stops the copy within one chunk; resume
// continues it.
func TestLiveControl(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 60000)
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.Threads, o.MaxChunkRows, o.ChunkTime = 4, 5, 2*time.Millisecond
	ctl := NewControl()
	ctl.Pause()
	srv, err := status.Listen("127.0.0.1:0", ctl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl := status.NewClient(srv.Addr())
	ctx := context.Background()
	post := func(path string, kv ...string) {
		t.Helper()
		v := map[string][]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			v[kv[i]] = []string{kv[i+1]}
		}
		if _, err := cl.Post(ctx, path, v); err != nil {
			t.Fatalf("%s %v: %v", path, kv, err)
		}
	}
	get := func() status.Snapshot {
		t.Helper()
		s, err := cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r := startControlled(t, ctl, o)
	until(t, r, time.Minute, "the copy phase, paused", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCopy && s.Throttle.Paused && s.Throttle.Reason == "paused by operator"
	})
	if s := get(); s.Copy.RowsCopied != 0 || s.Settings.Threads != 4 {
		t.Fatalf("paused from the start, yet: %d rows copied, threads %d", s.Copy.RowsCopied, s.Settings.Threads)
	}
	post("resume")
	until(t, r, 30*time.Second, "chunks copied", func(s status.Snapshot) bool { return s.Copy.Chunks >= 4 })
	// The copy lock mode and the lock-free copy's deferral (copy_lock.go).
	if s := get(); s.Copy.Lock != "lock-free" || s.Copy.LockReason == "" || s.Copy.Deferral == nil {
		t.Fatalf("copy lock %q (%q), deferral %+v: want the lock-free copy with its deferral stats", s.Copy.Lock, s.Copy.LockReason, s.Copy.Deferral)
	}

	// threads=1: after the chunks in flight, at most one at a time.
	post("set", "threads", "1")
	if s := get(); s.Settings.Threads != 1 {
		t.Fatalf("status shows threads=%d", s.Settings.Threads)
	}
	time.Sleep(200 * time.Millisecond)
	for range 40 {
		if s := get(); s.Copy.InFlight > 1 {
			t.Fatalf("%d chunks in flight with threads=1", s.Copy.InFlight)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// pause: the row copy stops within one chunk.
	post("pause")
	c0 := get().Copy.Chunks
	time.Sleep(300 * time.Millisecond)
	c1 := get().Copy.Chunks
	time.Sleep(500 * time.Millisecond)
	s := get()
	if c1-c0 > 1 || s.Copy.Chunks != c1 {
		t.Fatalf("after pause: %d chunk(s) within 300ms, %d more in the next 500ms", c1-c0, s.Copy.Chunks-c1)
	}
	if !s.Throttle.Throttled || !s.Throttle.Paused || s.ETA.Seconds != nil || !strings.Contains(s.ETA.Text, "paused") {
		t.Fatalf("paused status: %+v, ETA %q", s.Throttle, s.ETA.Text)
	}
	// max-chunk-rows: chunks of 5 rows become at least 100 (the minimum)
	// at once; chunk-time: with 2 ms they stay there (a chunk of 100 rows
	// takes longer), with 300 ms they grow.
	post("set", "max-chunk-rows", "4000")
	if s := get(); s.Settings.MaxChunkRows != 4000 || s.Copy.ChunkSize != 100 {
		t.Fatalf("after max-chunk-rows=4000: setting %d, chunk %d rows", s.Settings.MaxChunkRows, s.Copy.ChunkSize)
	}
	post("set", "chunk-time", "300ms")
	if s := get(); s.Settings.ChunkTime != "300ms" {
		t.Fatalf("status shows chunk-time %s", s.Settings.ChunkTime)
	}
	post("resume")
	s = until(t, r, 30*time.Second, "bigger chunks", func(s status.Snapshot) bool {
		return s.Copy.ChunkSize >= 400 || s.Copy.Done
	})
	if s.Copy.Done {
		t.Fatalf("the copy ended before the chunk size grew from 100 (now %d)", s.Copy.ChunkSize)
	}
	t.Logf("chunk size 100 -> %d rows after chunk-time 2ms -> 300ms", s.Copy.ChunkSize)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := thrDigest(t, db, "t"), thrDigest(t, db, "_t_old"); got != want {
		t.Errorf("new table %s, original %s", got, want)
	}
	if _, err := cl.Post(ctx, "pause", nil); err == nil {
		t.Error("pause accepted after the migration ended")
	}
}

// TestStatusPageInBrowser: the status page of a running migration, loaded
// in headless Chromium, shows the phase and charts with content. The
// screenshot is kept in $RECAST_ARTIFACTS (default: a recast-artifacts
// directory in the temp dir).
func TestStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
	}
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 20000)
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	slowCopy(&o)
	o.ThrottleFlagFile = filepath.Join(t.TempDir(), "throttle")
	o.MaxLag = time.Hour // lag measured and charted, never throttling (other tests load the shared replica)
	ctl := NewControl()
	ctl.Pause()
	srv, err := status.Listen("127.0.0.1:0", ctl, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := startControlled(t, ctl, o)
	until(t, r, time.Minute, "the copy phase", func(s status.Snapshot) bool { return s.Phase == status.PhaseCopy })
	ctl.Resume()
	until(t, r, time.Minute, "some copy progress", func(s status.Snapshot) bool { return s.Copy.RowsCopied >= 1000 })
	// Keep it in the copy phase (throttled) while the browser looks.
	if err := os.WriteFile(o.ThrottleFlagFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	until(t, r, 10*time.Second, "throttled", func(s status.Snapshot) bool {
		return strings.Contains(s.Throttle.Reason, "throttle flag file")
	})
	// A throttled period on the charts, and history to draw.
	until(t, r, 10*time.Second, "history", func(status.Snapshot) bool { return len(ctl.History()) >= 4 })

	url := "http://" + srv.Addr() + "/"
	chrome := func(extra ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
			"--user-data-dir=" + t.TempDir(), "--window-size=1200,900", "--virtual-time-budget=5000"}, extra...)
		cmd := exec.CommandContext(ctx, browser, append(args, url)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
		}
		return out
	}
	start := time.Now()
	dom := string(chrome("--dump-dom"))
	t.Logf("chromium --dump-dom took %s", time.Since(start).Round(time.Millisecond))
	if !regexp.MustCompile(`<span id="phase" class="badge copy">copy</span>`).MatchString(dom) {
		t.Errorf("the page does not show the phase; DOM:\n%.3000s", dom)
	}
	progress := regexp.MustCompile(`(?s)<svg id="chart-progress".*?</svg>`).FindString(dom)
	if !regexp.MustCompile(`<path class="line" d="M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+"`).MatchString(progress) {
		t.Errorf("the copy progress chart has no line; chart:\n%.2000s", progress)
	}
	if !strings.Contains(progress, `class="band"`) {
		t.Error("the copy progress chart shows no throttled period")
	}
	// The copy rate has its own chart (its own axis), not the apply chart's.
	copyRate := regexp.MustCompile(`(?s)<svg id="chart-copy".*?</svg>`).FindString(dom)
	if !regexp.MustCompile(`<path class="line" d="M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+"`).MatchString(copyRate) {
		t.Errorf("the copy rate chart has no line; chart:\n%.2000s", copyRate)
	}
	rates := regexp.MustCompile(`(?s)<svg id="chart-rates".*?</svg>`).FindString(dom)
	if n := strings.Count(rates, `<path class="line"`); n != 2 {
		t.Errorf("the apply chart draws %d lines, want 2 (applied, incoming); chart:\n%.2000s", n, rates)
	}
	if !strings.Contains(dom, "throttle flag file") {
		t.Error("the page does not show the throttle reason")
	}

	artifacts := os.Getenv("RECAST_ARTIFACTS") // kept only where asked: nothing is left in the temp dir
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifacts, "status-page.png")
	chrome("--screenshot=" + shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("status page screenshot: %s", shot)

	finishFast(t, ctl)
	os.Remove(o.ThrottleFlagFile)
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestStatusShowsMDLBlockers: while the cut-over waits for a session
// holding the table's metadata lock, the status lists it.
func TestStatusShowsMDLBlockers(t *testing.T) {
	t.Parallel()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	thrTable(t, db, "t", 500)
	idle := newClient(t, db)
	idle.exec(t, "BEGIN", "SELECT * FROM t LIMIT 1") // an idle transaction holding t's metadata lock
	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	o.CutOverLockTimeout, o.CutOverBudget = time.Second, time.Minute
	ctl := NewControl()
	r := startControlled(t, ctl, o)
	// Without the metadata_lock_info plugin every open transaction on the
	// server is a possible blocker, other tests' too (a checksum's
	// snapshot between two chunks): the idle client must be among them.
	listed := func(s status.Snapshot) bool {
		return slices.ContainsFunc(s.MDLBlockers, func(b status.Blocker) bool { return b.ID == idle.id && b.InTrx })
	}
	st := until(t, r, time.Minute, "the blocker in the status", func(s status.Snapshot) bool {
		return s.Phase == status.PhaseCutOver && len(s.MDLBlockers) > 0
	})
	if !listed(st) {
		t.Logf("blockers %+v; waiting for connection %d among them", st.MDLBlockers, idle.id)
		until(t, r, 10*time.Second, "the idle client (a transaction) among the blockers", listed) // fails the test otherwise
	}
	idle.exec(t, "COMMIT")
	if err := r.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := ctl.Status(); len(s.MDLBlockers) != 0 || s.Phase != status.PhaseDone {
		t.Errorf("after the cut-over: phase %s, blockers %+v", s.Phase, s.MDLBlockers)
	}
}
