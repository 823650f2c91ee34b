package sandbox

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/flavor"

	_ "github.com/go-sql-driver/mysql"
)

// freePorts returns n consecutive free ports on 127.0.0.1.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := base+n-1 <= 65535
		for p := base + 1; ok && p < base+n; p++ {
			ok = checkPortFree(p) == nil
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free consecutive ports")
	return 0
}

func TestUpReplicateStatusDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "sb")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	var (
		sb    *Sandbox
		err   error
		port  int
		start time.Time
	)
	for range 5 { // other test binaries may grab the ports in between
		port = freePorts(t, 2)
		start = time.Now()
		sb, err = Up(ctx, Config{Dir: dir, Port: port, Replicas: 1, Fast: true, Flavor: os.Getenv("RECAST_TEST_FLAVOR"), Logger: log})
		if !errors.Is(err, ErrPortInUse) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("Up took %s", time.Since(start).Round(time.Millisecond))
	downed := false
	defer func() {
		if !downed {
			Down(context.Background(), dir)
		}
	}()

	if sb.Primary.Port != port || len(sb.Replicas) != 1 || sb.Replicas[0].Port != port+1 {
		t.Fatalf("unexpected instances: %+v", sb)
	}
	if sb.Primary.ServerID != 1 || sb.Replicas[0].ServerID != 2 {
		t.Fatalf("server ids: %d %d", sb.Primary.ServerID, sb.Replicas[0].ServerID)
	}
	if _, err := os.Stat(filepath.Join(dir, "sandbox.json")); err != nil {
		t.Fatal(err)
	}

	// A second Up on the same dir must refuse.
	if _, err := Up(ctx, Config{Dir: dir, Port: port + 10, Fast: true, Flavor: os.Getenv("RECAST_TEST_FLAVOR")}); err == nil || !strings.Contains(err.Error(), "already holds a running sandbox") {
		t.Fatalf("second Up: %v", err)
	}
	// A busy port is reported clearly.
	if _, err := Up(ctx, Config{Dir: filepath.Join(t.TempDir(), "other"), Port: port, Fast: true, Flavor: os.Getenv("RECAST_TEST_FLAVOR")}); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("Up on busy port: %v", err)
	}

	primary, err := sql.Open("mysql", sb.DSN(sb.Primary, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	replica, err := sql.Open("mysql", sb.DSN(sb.Replicas[0], ""))
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()

	for _, s := range []string{
		"CREATE DATABASE sbtest",
		"CREATE TABLE sbtest.t (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO sbtest.t VALUES (1,'a'),(2,'b'),(3,'c')",
	} {
		if _, err := primary.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	srv, err := flavor.Detect(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("RECAST_TEST_FLAVOR"); want != "" && !strings.HasPrefix(strings.ToLower(srv.String()), strings.ReplaceAll(want, "-", " ")) {
		t.Fatalf("flavor %s asked for, server is %s", want, srv)
	}
	var pos string
	if err := primary.QueryRowContext(ctx, srv.GTIDExecutedQuery()).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	var res int
	if err := replica.QueryRowContext(ctx, srv.WaitGTIDQuery(), pos, 30).Scan(&res); err != nil || res != 0 {
		t.Fatalf("%s(%q): %d %v", srv.WaitGTIDQuery(), pos, res, err)
	}
	// The replica replicates by GTID (MariaDB MASTER_USE_GTID=slave_pos,
	// MySQL SOURCE_AUTO_POSITION=1 with gtid_mode=ON).
	for _, is := range sb.Check(ctx) {
		if is.Replica && (is.Replication == nil || !is.Replication.ByGTID) {
			t.Errorf("%s does not replicate by GTID: %+v", is.Instance.Name, is.Replication)
		}
	}
	gtidVar, want := "gtid_strict_mode", "1"
	if srv.MySQL() {
		gtidVar, want = "gtid_mode", "ON"
	}
	for name, db := range map[string]*sql.DB{"primary": primary, "replica": replica} {
		var v string
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+gtidVar).Scan(&v); err != nil || v != want {
			t.Errorf("%s: %s = %q (%v), want %s", name, gtidVar, v, err, want)
		}
	}
	var n int
	var concat string
	if err := replica.QueryRowContext(ctx, "SELECT COUNT(*), GROUP_CONCAT(v ORDER BY id) FROM sbtest.t").Scan(&n, &concat); err != nil {
		t.Fatal(err)
	}
	if n != 3 || concat != "a,b,c" {
		t.Fatalf("replica has %d rows %q", n, concat)
	}
	// Settings that the tool relies on.
	var format, image string
	if err := primary.QueryRowContext(ctx, "SELECT @@binlog_format, @@binlog_row_image").Scan(&format, &image); err != nil || format != "ROW" || image != "FULL" {
		t.Fatalf("binlog settings %q %q %v", format, image, err)
	}

	st, err := Status(ctx, dir)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Primary.PID != sb.Primary.PID || st.Replicas[0].PID != sb.Replicas[0].PID {
		t.Fatalf("Status pids differ: %+v vs %+v", st, sb)
	}
	checks := st.Check(ctx)
	if len(checks) != 2 || !checks[0].Alive || !checks[0].Answering || checks[1].Replication == nil ||
		checks[1].Replication.IORunning != "Yes" || checks[1].Replication.SQLRunning != "Yes" {
		t.Fatalf("Check: %+v", checks)
	}
	primary.Close()
	replica.Close()

	start = time.Now()
	if err := Down(ctx, dir); err != nil {
		t.Fatalf("Down: %v", err)
	}
	downed = true
	t.Logf("Down took %s", time.Since(start).Round(time.Millisecond))
	for _, inst := range sb.Instances() {
		if processAlive(inst.PID, inst.DataDir) {
			t.Errorf("%s pid %d still alive", inst.Name, inst.PID)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dir still there: %v", err)
	}
	if _, err := Status(ctx, dir); err == nil {
		t.Error("Status after Down succeeded")
	}
	if err := Down(ctx, dir); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func TestDownRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Down(context.Background(), dir); err == nil {
		t.Fatal("Down removed a dir without sandbox.json")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal(err)
	}
	if _, err := Up(context.Background(), Config{Dir: dir, Port: 1, Fast: true}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Up on non-empty dir: %v", err)
	}
}

func TestStaleSandboxIsReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sb")
	if err := os.MkdirAll(filepath.Join(dir, "primary", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A recorded pid that is not this instance's mariadbd (our own pid).
	stale := &Sandbox{Dir: dir, Primary: Instance{Name: "primary", PID: os.Getpid(), DataDir: filepath.Join(dir, "primary", "data")}}
	if err := writeState(dir, stale); err != nil {
		t.Fatal(err)
	}
	existed, err := prepareDir(context.Background(), dir, slog.New(slog.DiscardHandler))
	if err != nil || existed {
		t.Fatalf("prepareDir: %v %v", existed, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale dir not removed: %v", err)
	}
}

func TestSocketPath(t *testing.T) {
	short := socketPath("/tmp/x/primary")
	if short != "/tmp/x/primary/mysqld.sock" {
		t.Errorf("short: %s", short)
	}
	longDir := "/tmp/" + strings.Repeat("d", 120) + "/primary"
	long := socketPath(longDir)
	if len(long) > maxSocketPath || long == socketPath(longDir+"2") {
		t.Errorf("long: %s", long)
	}
}
