package migration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/workload"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// recastBinary builds cmd/recast with the faultinject tag (RECAST_PAUSE_AT).
func recastBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "recast-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "recast")
		out, err := exec.Command("go", "build", "-tags", "faultinject", "-o", binPath, "github.com/recast-osc/recast/cmd/recast").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// killable runs `recast migrate` as a child process.
type killable struct {
	cmd    *exec.Cmd
	paused chan string
	done   chan error
	stderr strings.Builder
	mu     sync.Mutex
}

func startRecast(t *testing.T, o testOpts, pauseAt string, extra ...string) *killable {
	t.Helper()
	args := []string{"migrate", "--host", o.Conn.Host, "--port", strconv.Itoa(o.Conn.Port), "--user", o.Conn.User,
		"--password", o.Conn.Password, "--database", o.Database, "--table", o.Table, "--alter", o.Alter, "--execute",
		"--progress-interval", "0", "--checkpoint-interval", "100ms", "--cut-over-lock-timeout", "2s", "--method", "copy", "--max-lag", "0",
		// Not paced, as testOptions (main_test.go): the other tests' writes
		// on the shared server would hold the copy at the pacer's floor.
		"--max-latency-ratio", strconv.FormatFloat(o.MaxLatencyRatio, 'g', -1, 64)}
	cmd := exec.Command(recastBinary(t), append(args, extra...)...)
	cmd.Env = append(os.Environ(), "RECAST_PAUSE_AT="+pauseAt)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	k := &killable{cmd: cmd, paused: make(chan string, 1), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			k.mu.Lock()
			k.stderr.WriteString(line + "\n")
			k.mu.Unlock()
			if p, ok := strings.CutPrefix(line, "PAUSED "); ok {
				k.paused <- p
			}
		}
		k.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return k
}

func (k *killable) kill(t *testing.T) {
	t.Helper()
	if err := k.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-k.done
}

// waitPaused waits until the run pauses at point (RECAST_PAUSE_AT).
func (k *killable) waitPaused(ctx context.Context, t *testing.T, point string) {
	t.Helper()
	select {
	case <-k.paused:
	case err := <-k.done:
		t.Fatalf("recast ended before pausing at %s: %v\n%s", point, err, k.output())
	case <-ctx.Done():
		t.Fatalf("recast did not reach %s\n%s", point, k.output())
	}
}

func (k *killable) output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stderr.String()
}

// resumeCase kills a running migration at one moment, then resumes it.
type resumeCase struct {
	name     string
	fraction float64 // kill when the ghost holds this share of the rows...
	pauseAt  string  // ...or at this pause point
	rows     int
	// start is how the resumed run must start its stream: "gtid" (the
	// checkpoint as written: every sandbox flavor has GTIDs), "file" (the
	// checkpoint's GTIDs removed, as in a format-1 checkpoint), or
	// "gtid-only" (the checkpoint's file made another server's, as after
	// a failover or a purge: only its GTIDs can be used).
	start string
	// deferred: run the killed migration with --defer-indexes and an
	// ALTER that adds these plain indexes; the resumed run (without the
	// flag) must build them.
	deferred []string
	// alter, when set, replaces the default ALTER (ADD COLUMN note INT NULL).
	alter string
	// orphan: after the kill, a statement of recast's kind that writes to
	// the new table is still running (as a killed run's chunk can be); the
	// resume must end it before it starts.
	orphan bool
	// earlierOld: an earlier migration's old table is there under the old
	// table's name (_wl_old); both runs pass --drop-old-table, and it must
	// stay as it was.
	earlierOld bool
	// keptOld: the killed run had swapped the tables and left its old
	// table under the sentry's name; under --drop-old-table the resume
	// keeps it (nothing proves no write reached it after the drain point),
	// renamed to a timestamped old name when _wl_old is taken.
	keptOld bool
}

// TestResumeAfterKill: a migration killed with SIGKILL at 30% and 80% of the
// copy and during the catch-up, under concurrent writes, resumes with
// --resume without starting the copy over, and ends with the exact content.
func TestResumeAfterKill(t *testing.T) {
	for _, c := range []resumeCase{
		{name: "copy-30pct", fraction: 0.3, rows: 20000},
		{name: "copy-80pct", fraction: 0.8, rows: 20000},
		{name: "catch-up", pauseAt: "caught-up", rows: 5000},
		{name: "orphan-statement", pauseAt: "caught-up", rows: 3000, orphan: true},
		{name: "by-file-offset", fraction: 0.5, rows: 10000, start: "file"},
		{name: "by-gtid-only", fraction: 0.5, rows: 10000, start: "gtid-only"},
		{name: "deferred-indexes", pauseAt: "copy-done", rows: 5000, deferred: []string{"i_bi", "vc_p"}},
		// No unique key but the primary one: the killed run leaves changes
		// to rows not copied yet to the copy (docs/copy.md), the resumed
		// one may not.
		{name: "copy-50pct-skipping", fraction: 0.5, rows: 20000, alter: "DROP INDEX uk_u, ADD INDEX u_plain (u), ADD COLUMN note INT NULL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runKillResume(t, c)
		})
	}
}

// TestKillDuringCutOver: SIGKILL at each step of the cut-over leaves either
// the original table in place or the new one swapped in complete; the
// application never sees the table missing, and --resume finishes the job.
func TestKillDuringCutOver(t *testing.T) {
	for _, p := range []string{"cutover:before-lock", "cutover:locked", "cutover:drained", "cutover:verified", "cutover:rename-waiting", "cutover:sentry-dropped", "cutover:checked"} {
		t.Run(strings.ReplaceAll(p, ":", "-"), func(t *testing.T) {
			t.Parallel()
			runKillResume(t, resumeCase{pauseAt: p, rows: 3000})
		})
	}
	// Killed with the ghost renamed for the swap (on MySQL, no sentry
	// then) while an earlier migration's old table is there: the resume
	// must not take that table for this run's and call the swap done.
	t.Run("cutover-rename-waiting-earlier-old", func(t *testing.T) {
		t.Parallel()
		runKillResume(t, resumeCase{pauseAt: "cutover:rename-waiting", rows: 3000, earlierOld: true})
	})
	// Killed after the swap and the stream's lost-write check, with the
	// old table still under the sentry's name (--drop-old-table drops it
	// only then): the resume cannot know the check passed, so it keeps
	// that table (renamed), and the earlier _wl_old is untouched.
	t.Run("cutover-checked-earlier-old", func(t *testing.T) {
		t.Parallel()
		runKillResume(t, resumeCase{pauseAt: "cutover:checked", rows: 3000, earlierOld: true, keptOld: true})
	})
}

func runKillResume(t *testing.T, c resumeCase) {
	ctx := ctxFor(t, 4*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	rows := c.rows
	cfg := workload.Config{Schema: schema, Table: "wl", Writers: 4, Rows: rows, Seed: 42, OpsPerSec: 400}
	sh, load := startLoad(ctx, t, db, cfg)

	alter := "ADD COLUMN note INT NULL"
	if c.alter != "" {
		alter = c.alter
	}
	extra := []string{"--max-chunk-rows", "100", "--threads", "1", "--chunk-time", "20ms"}
	if len(c.deferred) > 0 {
		alter += ", ADD INDEX i_bi (i, bi), ADD INDEX vc_p (vc(20)) COMMENT 'built after the copy'"
		extra = append(extra, "--defer-indexes")
	}
	o := testOptions(t, schema, "wl", alter)
	if testutil.Server(t).MySQL() {
		extra = append(extra, "--experimental-mysql")
	}
	if c.earlierOld {
		testutil.Exec(t, db, "CREATE TABLE _wl_old (id INT PRIMARY KEY, what VARCHAR(40))", "INSERT INTO _wl_old VALUES (1, 'an earlier migration')")
		extra = append(extra, "--drop-old-table")
		o.DropOldTable = true
	}
	k := startRecast(t, o, c.pauseAt, extra...)
	if c.pauseAt != "" {
		k.waitPaused(ctx, t, c.pauseAt)
	} else {
		for {
			var n int
			err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM _wl_new").Scan(&n)
			if err == nil && float64(n) >= c.fraction*float64(rows) {
				break
			}
			select {
			case err := <-k.done:
				t.Fatalf("recast ended before the kill: %v\n%s", err, k.output())
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	checkpointState := func() string {
		var saved string
		if err := db.QueryRowContext(ctx, "SELECT state FROM _wl_chk WHERE id = 1").Scan(&saved); err != nil {
			t.Fatal(err)
		}
		return saved
	}
	// The stream learns the GTIDs once it has read its binlog file up to
	// its start; until then checkpoints carry file+offset only. The GTID
	// cases kill the run once a checkpoint has them.
	for c.start == "gtid-only" && !strings.Contains(checkpointState(), `"gtid":`) {
		select {
		case err := <-k.done:
			t.Fatalf("recast ended before its checkpoint had GTIDs: %v\n%s", err, k.output())
		case <-ctx.Done():
			t.Fatalf("no checkpoint with GTIDs: %s\n%s", checkpointState(), k.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	k.kill(t)
	time.Sleep(300 * time.Millisecond) // the application goes on meanwhile
	orphanDone := make(chan error, 1)
	orphanStart := time.Now()
	if c.orphan {
		// It writes nothing (SLEEP returns 0, or 1 when interrupted), locks
		// no row of wl, and would run for 60 s.
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go func() {
			_, err := conn.ExecContext(context.Background(), dbconn.Tag+"INSERT IGNORE INTO "+testutil.QuoteIdent(schema)+".`_wl_new` (id) SELECT 1 FROM DUAL WHERE SLEEP(60) = 2")
			orphanDone <- err
		}()
		for { // until it runs
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+testutil.Server(t).Processlist()+" WHERE INFO LIKE '/* recast */ INSERT IGNORE%SLEEP(60)%'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	saved := checkpointState()
	indexes := func(tbl string) []string {
		names, err := queryStrings(ctx, db, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, tbl)
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if have := indexes("_wl_new"); slices.ContainsFunc(c.deferred, func(n string) bool { return slices.Contains(have, n) }) {
		t.Errorf("--defer-indexes: killed with the copy done, the new table has %v already (deferred: %v)", have, c.deferred)
	}
	if !strings.Contains(saved, `"server":`) {
		t.Fatalf("the checkpoint has no server identity: %s", saved)
	}
	hasGTID := strings.Contains(saved, `"gtid":`)
	t.Logf("checkpoint at the kill: %s", saved)
	// The resumed run logs where its stream starts: file:offset (gtid G).
	startOK := func(start string) bool {
		return strings.HasPrefix(start, "binlog.") && strings.Contains(start, " (gtid ") == hasGTID
	}
	switch c.start {
	case "file":
		testutil.Exec(t, db, `UPDATE _wl_chk SET state = JSON_REMOVE(state, '$.gtid') WHERE id = 1`)
		startOK = func(start string) bool {
			return strings.HasPrefix(start, "binlog.") && !strings.Contains(start, "gtid")
		}
	case "gtid-only":
		testutil.Exec(t, db, `UPDATE _wl_chk SET state = JSON_SET(state, '$.file', 'other-bin.000042', '$.server', 'another server') WHERE id = 1`)
		startOK = func(start string) bool { return strings.HasPrefix(start, ":0 (gtid ") }
	}
	var logBuf lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testLogWriter{t}, &logBuf), &slog.HandlerOptions{Level: slog.LevelInfo}))
	o.Resume = true
	res, err := runT(ctx, o)
	if err != nil {
		t.Fatalf("resume: %v\nkilled run's log:\n%s", err, k.output())
	}
	if c.orphan {
		select {
		case err := <-orphanDone:
			if err == nil {
				t.Errorf("the orphan statement ended without an error: not killed")
			}
			t.Logf("orphan statement ended after %s: %v", time.Since(orphanStart).Round(time.Millisecond), err)
		default:
			t.Errorf("the resumed run finished while the orphan statement on the new table still ran")
		}
		if !strings.Contains(logBuf.String(), "ending statements the killed run left running") {
			t.Errorf("the resume did not log ending the orphan statement")
		}
	}
	start := ""
	for l := range strings.SplitSeq(logBuf.String(), "\n") {
		if _, after, ok := strings.Cut(l, "the checkpoint matches"); ok {
			if _, v, ok := strings.Cut(after, ` start="`); ok {
				start, _, _ = strings.Cut(v, `"`)
			} else if _, v, ok := strings.Cut(after, ` start=`); ok {
				start, _, _ = strings.Cut(v, " ")
			}
		}
	}
	finishedSwap := strings.Contains(logBuf.String(), "the killed run had swapped the tables") // nothing to stream
	if !finishedSwap && !startOK(start) {
		t.Errorf("resume (%s): the stream did not start as expected: start=%q", c.name, start)
	}
	if c.fraction > 0 && res.CopiedRows >= int64(rows) {
		t.Errorf("the resumed run copied %d rows of %d: it started over", res.CopiedRows, rows)
	}
	time.Sleep(200 * time.Millisecond)
	st := load.Stop()
	t.Logf("resumed: %d rows copied, %d changes applied, checksum %+v; load %s", res.CopiedRows, res.Applied, res.Checksum, st)
	if st.NoSuchTable != 0 || st.OtherErrors != 0 {
		t.Errorf("application errors: %s", st)
	}
	if res.Checksum.Repaired != 0 {
		// A change the killed run lost (left to the copy, held when it
		// died, written by an orphan statement) would show here first: the
		// repair hides it from the comparison below.
		t.Errorf("the resumed run's checksum repaired %d chunk(s)", res.Checksum.Repaired)
	}
	diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !diff.OK() {
		t.Fatalf("after kill and resume the table differs: %s", diff)
	}
	if len(c.deferred) > 0 {
		if !strings.Contains(saved, `"deferred_indexes":`) {
			t.Errorf("the killed run's checkpoint lists no deferred indexes: %s", saved)
		}
		names := indexes("wl")
		for _, n := range c.deferred {
			if !slices.Contains(names, n) {
				t.Errorf("after the resume the table lacks the deferred index %s (it has %v)", n, names)
			}
		}
	}
	got := tableNames(t, db, schema)
	if c.keptOld {
		if len(got) != 3 || !regexp.MustCompile(`^_wl_\d{14}_old$`).MatchString(got[0]) || got[1] != "_wl_old" || got[2] != "wl" {
			t.Errorf("tables left: %v; want the killed run's old table kept under a timestamped name, _wl_old, wl", got)
		} else if !strings.Contains(logBuf.String(), "kept despite --drop-old-table") {
			t.Errorf("the resume did not say it kept the old table")
		}
	} else if strings.Join(got, ",") != "_wl_old,wl" {
		t.Errorf("tables left: %v", got)
	}
	if c.earlierOld {
		var what string
		if err := db.QueryRowContext(ctx, "SELECT what FROM _wl_old WHERE id = 1").Scan(&what); err != nil || what != "an earlier migration" {
			t.Errorf("the earlier migration's old table: %q, %v; want it untouched", what, err)
		}
	}
	if c.alter == "" {
		// The ALTER took effect: the resumed run did not call a swap done
		// that had not happened.
		if _, err := db.ExecContext(ctx, "SELECT note FROM wl LIMIT 1"); err != nil {
			t.Errorf("after the resume wl has no column note: %v", err)
		}
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestResumeRefusalKeepsHelpers: a --resume that does not match the
// checkpoint (another ALTER, a dry run with another ALTER, an ALTER the
// server could run INSTANT under --method auto) is refused before anything
// is created or dropped: the ghost and the checkpoint stay, the dry run with
// the right ALTER prints the resume state, and the correct command resumes.
func TestResumeRefusalKeepsHelpers(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	const rows = 5000
	cfg := workload.Config{Schema: schema, Table: "wl", Writers: 2, Rows: rows, Seed: 7, OpsPerSec: 200}
	sh, load := startLoad(ctx, t, db, cfg)
	o := testOptions(t, schema, "wl", "ADD COLUMN note INT NULL")
	k := startRecast(t, o, "caught-up", "--max-chunk-rows", "100", "--threads", "1")
	k.waitPaused(ctx, t, "caught-up")
	k.kill(t)
	waitLockFree(ctx, t, db, schema, "wl")
	helpers := func(when string) {
		t.Helper()
		got := strings.Join(tableNames(t, db, schema), ",")
		if !strings.Contains(got, "_wl_chk") || !strings.Contains(got, "_wl_new") {
			t.Fatalf("%s: helper tables lost: %s", when, got)
		}
	}
	helpers("after the kill")

	wrong := o
	wrong.Resume, wrong.Alter = true, "ADD COLUMN note BIGINT NULL"
	if _, err := runT(ctx, wrong); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("mistyped --alter with --resume: want a refusal naming the checkpoint, got %v", err)
	}
	helpers("after a mistyped --resume")

	dry := wrong
	dry.Execute = false
	if _, err := runT(ctx, dry); err == nil {
		t.Fatal("dry run with --resume and another ALTER: want a refusal")
	}
	helpers("after a mistyped dry run")

	// Other semantics than the interrupted run's: the rest would convert
	// differently.
	zoned := o
	zoned.Resume = true
	zoned.Conn.SetVars = map[string]string{"time_zone": "'+03:00'"}
	if _, err := runT(ctx, zoned); err == nil || !strings.Contains(err.Error(), `time_zone="+03:00"`) {
		t.Fatalf("--resume under another time_zone: want a refusal naming it, got %v", err)
	}
	helpers("after a --resume under another time_zone")

	// A checkpoint whose binlog position is gone (purged, another server).
	var saved string
	if err := db.QueryRowContext(ctx, "SELECT state FROM _wl_chk WHERE id = 1").Scan(&saved); err != nil {
		t.Fatal(err)
	}
	// Its GTIDs are gone too (a GTID the server never logged), or the
	// resume would start from them.
	badGTID := "0-1-999999999"
	if testutil.Server(t).MySQL() {
		badGTID = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-999999999"
	}
	testutil.Exec(t, db, `UPDATE _wl_chk SET state = JSON_SET(state, '$.file', 'binlog.999999', '$.gtid', '`+badGTID+`') WHERE id = 1`)
	right := o
	right.Resume = true
	if _, err := runT(ctx, right); err == nil || !strings.Contains(err.Error(), "no longer on the server") {
		t.Fatalf("a checkpoint position not in the binlog: want a refusal, got %v", err)
	}
	helpers("after a resume from a purged position")
	if _, err := db.ExecContext(ctx, "UPDATE _wl_chk SET state = ? WHERE id = 1", saved); err != nil {
		t.Fatal(err)
	}
	// A ghost that is not what the ALTER makes of the table.
	testutil.Exec(t, db, "ALTER TABLE _wl_new ADD INDEX rc_extra (note)")
	if _, err := runT(ctx, right); err == nil || !strings.Contains(err.Error(), "not what the ALTER makes") {
		t.Fatalf("a ghost with another definition: want a refusal, got %v", err)
	}
	helpers("after a resume onto a changed ghost")
	testutil.Exec(t, db, "ALTER TABLE _wl_new DROP INDEX rc_extra")

	auto := o
	auto.Resume, auto.Method = true, "auto"
	if _, err := runT(ctx, auto); err == nil || !strings.Contains(err.Error(), "INSTANT") {
		t.Fatalf("INSTANT-able ALTER with a checkpoint: want a refusal naming INSTANT, got %v", err)
	}
	helpers("after --method auto")

	good := o
	good.Resume, good.Execute = true, false
	res, err := runT(ctx, good)
	if err != nil {
		t.Fatalf("dry run with --resume: %v", err)
	}
	if res.Plan == nil || res.Plan.Resume == nil || res.Plan.Resume.CopiedRows == 0 ||
		!strings.Contains(res.Plan.Describe(), "resume:") {
		t.Fatalf("dry run with --resume does not show the resume state: %+v", res.Plan)
	}
	t.Logf("dry run:\n%s", res.Plan.Describe())
	helpers("after the dry run")

	good.Execute = true
	if _, err := runT(ctx, good); err != nil {
		t.Fatalf("resume: %v", err)
	}
	st := load.Stop()
	if st.NoSuchTable != 0 || st.OtherErrors != 0 {
		t.Errorf("application errors: %s", st)
	}
	diff, err := workload.Verify(ctx, db, schema, "wl", sh, workload.VerifyOptions{MaxExamples: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !diff.OK() {
		t.Fatalf("after the refused and the correct resume the table differs: %s", diff)
	}
}

// TestResumeNewUniqueNeedsChecksum: rows a run sets aside under a unique key
// the table does not enforce (the applier removes a ghost row whose value a
// written row took; the copy skips one) are known to that run only, so a
// --resume with --checksum=false, which would swap in a table without them,
// is refused before anything changes; with the checksum it completes.
func TestResumeNewUniqueNeedsChecksum(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO t SELECT seq, seq FROM (WITH RECURSIVE s(seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < 500) SELECT seq FROM s) q")
	o := testOptions(t, schema, "t", "ADD UNIQUE KEY uv (v)")
	k := startRecast(t, o, "caught-up", "--checksum=false", "--max-chunk-rows", "100")
	k.waitPaused(ctx, t, "caught-up")
	// Rows swap their unique values while the run is gone: the resumed
	// applier writes them.
	testutil.Exec(t, db, "UPDATE t SET v = -v WHERE id IN (7, 8)", "UPDATE t SET v = 7 WHERE id = 8", "UPDATE t SET v = 8 WHERE id = 7")
	k.kill(t)
	waitLockFree(ctx, t, db, schema, "t")
	r := o
	r.Resume, r.Checksum = true, false
	if _, err := runT(ctx, r); err == nil || !strings.Contains(err.Error(), "--checksum=false") || !strings.Contains(err.Error(), "`uv`") {
		t.Fatalf("--resume --checksum=false with a new unique key: want a refusal naming the key and the flag, got %v", err)
	}
	if got := strings.Join(tableNames(t, db, schema), ","); !strings.Contains(got, "_t_chk") || !strings.Contains(got, "_t_new") {
		t.Fatalf("the refusal dropped helper tables: %s", got)
	}
	r.Checksum = true
	if _, err := runT(ctx, r); err != nil {
		t.Fatalf("--resume with the checksum: %v", err)
	}
	var n, uniq int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT v) FROM t WHERE v BETWEEN 1 AND 500").Scan(&n, &uniq); err != nil {
		t.Fatal(err)
	}
	var v7, v8 int
	if err := db.QueryRowContext(ctx, "SELECT (SELECT v FROM t WHERE id = 7), (SELECT v FROM t WHERE id = 8)").Scan(&v7, &v8); err != nil {
		t.Fatal(err)
	}
	if n != 500 || uniq != 500 || v7 != 8 || v8 != 7 {
		t.Fatalf("after the resume: %d rows, %d distinct values, v(7) = %d, v(8) = %d; want 500, 500, 8, 7", n, uniq, v7, v8)
	}
}

// TestResumeKilledWhileAbandoning: a run killed while it dropped its helper
// tables (the ghost gone, the checkpoint not yet) with an earlier
// migration's old table under the old table's name (--drop-old-table lets
// it be there): the resume must not take that table for this run's swap,
// report the ALTER done and drop it; it refuses, and nothing changes.
func TestResumeKilledWhileAbandoning(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)", "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
		"CREATE TABLE "+OldName("t")+" (id INT PRIMARY KEY, what VARCHAR(40))", "INSERT INTO "+OldName("t")+" VALUES (1, 'an earlier migration')")
	o := testOptions(t, schema, "t", "ADD COLUMN note INT NULL")
	o.DropOldTable = true
	k := startRecast(t, o, "caught-up", "--drop-old-table")
	k.waitPaused(ctx, t, "caught-up")
	k.kill(t)
	waitLockFree(ctx, t, db, schema, "t")
	testutil.Exec(t, db, "DROP TABLE "+GhostName("t")) // the kill came between the two DROPs
	r := o
	r.Resume = true
	if _, err := runT(ctx, r); err == nil || !strings.Contains(err.Error(), "recast cleanup") {
		t.Fatalf("--resume of a run killed while abandoning: want a refusal, got %v", err)
	}
	var what string
	if err := db.QueryRowContext(ctx, "SELECT what FROM "+OldName("t")+" WHERE id = 1").Scan(&what); err != nil || what != "an earlier migration" {
		t.Fatalf("the earlier migration's old table: %q, %v; want it untouched", what, err)
	}
	if _, err := db.ExecContext(ctx, "SELECT note FROM t LIMIT 1"); err == nil {
		t.Fatal("t has the column note: the ALTER was not run")
	}
	if got := strings.Join(tableNames(t, db, schema), ","); !strings.Contains(got, "_t_chk") {
		t.Fatalf("the refusal dropped the checkpoint: %s", got)
	}
}
