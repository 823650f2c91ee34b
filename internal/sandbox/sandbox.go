// Package sandbox starts and stops throwaway MariaDB instances (a primary and
// N replicas) from the locally installed mariadbd. It backs `recast sandbox`
// and the shared test server of package testutil.
//
// Layout of a sandbox directory:
//
//	Dir/sandbox.json        state (instances, pids, ports), written atomically
//	Dir/<name>/data/        datadir (binlogs are Dir/<name>/data/binlog.*)
//	Dir/<name>/mysqld.sock  unix socket (placed in the temp dir if the path is too long)
//	Dir/<name>/mysqld.pid   pid file written by mariadbd
//	Dir/<name>/error.log    error log
//	Dir/<name>/tmp/         private tmpdir (a starting mariadbd deletes every
//	                        #sql* file in its tmpdir, so it is never shared)
//
// The primary is called "primary", replicas "replica1", "replica2", ...
// Instances listen on 127.0.0.1 only. The root account (no password, from
// 127.0.0.1 and localhost) is left as mariadb-install-db creates it; the
// account meant for use is recast/recast with ALL PRIVILEGES WITH GRANT OPTION.
package sandbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

const (
	// DefaultUser and DefaultPassword are the credentials of the account Up
	// creates on every instance.
	DefaultUser     = "recast"
	DefaultPassword = "recast"

	replUser     = "recast_repl"
	replPassword = "recast_repl"

	stateFile    = "sandbox.json"
	stateVersion = 1

	readyTimeout = 60 * time.Second
	replTimeout  = 60 * time.Second
	stopTimeout  = 30 * time.Second

	// maxSocketPath is below the 108 bytes of sockaddr_un.sun_path.
	maxSocketPath = 100
)

// ErrPortInUse is wrapped by Up's error when a port it needs is taken
// (found before starting, or reported by mariadbd when binding).
var ErrPortInUse = errors.New("port already in use")

// Config describes the sandbox Up creates.
type Config struct {
	Dir      string // state dir; each instance gets Dir/<name>/; Dir/sandbox.json records the state
	Port     int    // primary port; replica i (1-based) gets Port+i
	Replicas int
	Fast     bool // for tests: no flushing/doublewrite, 64M buffer pool, no native AIO
	// Flavor is one of Flavors ("" means DefaultFlavor, the installed
	// MariaDB). Others are fetched into FlavorCache when missing.
	Flavor string
	Logger *slog.Logger
	// ServerArgs are extra server options for every instance (e.g.
	// --ssl-cert=..., --ssl-key=..., --ssl-ca=... for a TLS test).
	ServerArgs []string
}

// Instance is one mariadbd process of a sandbox.
type Instance struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	PID      int    `json:"pid"`
	DataDir  string `json:"datadir"`
	Socket   string `json:"socket"`
	ServerID int    `json:"server_id"`
}

// Addr returns host:port.
func (i Instance) Addr() string { return net.JoinHostPort(i.Host, strconv.Itoa(i.Port)) }

// Sandbox is a running (or recorded) set of instances.
type Sandbox struct {
	Dir      string     `json:"dir"`
	Flavor   string     `json:"flavor,omitempty"` // "" in old state files: DefaultFlavor
	Primary  Instance   `json:"primary"`
	Replicas []Instance `json:"replicas"`
	User     string     `json:"user"`
	Password string     `json:"password"`
}

// Instances returns the primary followed by the replicas.
func (s *Sandbox) Instances() []Instance {
	return append([]Instance{s.Primary}, s.Replicas...)
}

// DSN returns a go-sql-driver/mysql DSN for inst as the sandbox user. (On
// MySQL the account uses caching_sha2_password; without TLS the driver
// fetches the server's RSA key for the first, full authentication.)
func (s *Sandbox) DSN(inst Instance, schema string) string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?interpolateParams=true&parseTime=false&multiStatements=false",
		s.User, s.Password, inst.Addr(), url.PathEscape(schema))
}

// MySQL reports whether the sandbox runs MySQL rather than MariaDB.
func (s *Sandbox) MySQL() bool { return strings.HasPrefix(s.Flavor, "mysql-") }

// state is the content of Dir/sandbox.json.
type state struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	Sandbox   Sandbox   `json:"sandbox"`
}

// Up initialises and starts a primary and cfg.Replicas replicas under cfg.Dir,
// creates the recast user and sets up GTID replication. cfg.Dir must not
// exist, be empty, or hold a sandbox whose processes are all gone (which is
// then removed). On error everything Up started is stopped and removed.
// The mariadbd processes run in their own process groups and outlive the
// caller; stop them with Down.
func Up(ctx context.Context, cfg Config) (sb *Sandbox, err error) {
	if errUnsupported != nil {
		return nil, errUnsupported
	}
	start := time.Now()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		return nil, errors.New("sandbox: Config.Dir is empty")
	}
	if cfg.Replicas < 0 {
		return nil, fmt.Errorf("sandbox: negative replica count %d", cfg.Replicas)
	}
	if cfg.Port <= 0 || cfg.Port+cfg.Replicas > 65535 {
		return nil, fmt.Errorf("sandbox: invalid port %d (with %d replicas)", cfg.Port, cfg.Replicas)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	bins, err := findFlavor(ctx, cfg.Flavor)
	if err != nil {
		return nil, err
	}

	existed, err := prepareDir(ctx, dir, log)
	if err != nil {
		return nil, err
	}

	sb = &Sandbox{Dir: dir, Flavor: bins.flavor, User: DefaultUser, Password: DefaultPassword}
	for i := 0; i <= cfg.Replicas; i++ {
		name := "primary"
		if i > 0 {
			name = fmt.Sprintf("replica%d", i)
		}
		instDir := filepath.Join(dir, name)
		inst := Instance{
			Name:     name,
			Host:     "127.0.0.1",
			Port:     cfg.Port + i,
			DataDir:  filepath.Join(instDir, "data"),
			Socket:   socketPath(instDir),
			ServerID: i + 1,
		}
		if i == 0 {
			sb.Primary = inst
		} else {
			sb.Replicas = append(sb.Replicas, inst)
		}
	}
	for _, inst := range sb.Instances() {
		if err := checkPortFree(inst.Port); err != nil {
			return nil, fmt.Errorf("sandbox: %s port %d on 127.0.0.1: %w", inst.Name, inst.Port, err)
		}
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var (
		mu      sync.Mutex
		started []Instance // pids to stop on failure
	)
	defer func() {
		if err == nil {
			return
		}
		log.Warn("sandbox up failed, cleaning up", "dir", dir, "err", err)
		mu.Lock()
		defer mu.Unlock()
		// SIGKILL right away: the data is throwaway, and a mariadbd still
		// initialising may not act on SIGTERM until it is up.
		_ = stopAll(context.WithoutCancel(ctx), started, log, true) // best effort: the start failed already
		for _, inst := range sb.Instances() {
			if filepath.Dir(inst.Socket) != filepath.Dir(inst.DataDir) {
				os.Remove(inst.Socket)
			}
		}
		if existed {
			removeContents(dir)
		} else {
			os.RemoveAll(dir)
		}
		sb = nil
	}()

	// 1. mariadb-install-db, all instances at once.
	log.Info("initialising datadirs", "dir", dir, "instances", cfg.Replicas+1)
	if err := forEach(sb.Instances(), func(_ int, inst Instance) error {
		return installDataDir(ctx, bins, inst, cfg.ServerArgs)
	}); err != nil {
		return sb, err
	}

	// 2. start every mariadbd and wait until each answers.
	exited := make([]<-chan error, cfg.Replicas+1)
	if err := forEach(sb.Instances(), func(i int, inst Instance) error {
		pid, done, err := startServer(bins, inst, i > 0, cfg.Fast, cfg.ServerArgs)
		if err != nil {
			return fmt.Errorf("sandbox: start %s: %w", inst.Name, err)
		}
		mu.Lock()
		inst.PID = pid
		started = append(started, inst)
		if i == 0 {
			sb.Primary.PID = pid
		} else {
			sb.Replicas[i-1].PID = pid
		}
		exited[i] = done
		mu.Unlock()
		log.Info("started mariadbd", "instance", inst.Name, "port", inst.Port, "pid", pid)
		return nil
	}); err != nil {
		return sb, err
	}
	// Record the pids at once so that Down can clean up even if we die now.
	if err := writeState(dir, sb); err != nil {
		return sb, err
	}
	if err := forEach(sb.Instances(), func(i int, inst Instance) error {
		return waitReady(ctx, inst, bins.mysql, exited[i])
	}); err != nil {
		return sb, err
	}

	// 3. accounts, not binlogged: the replicas replicate the primary's
	// binlog from its very beginning (empty gtid_slave_pos).
	if err := forEach(sb.Instances(), func(_ int, inst Instance) error {
		return createUsers(ctx, inst, bins.mysql)
	}); err != nil {
		return sb, err
	}

	// 4. replication.
	if err := forEach(sb.Replicas, func(_ int, inst Instance) error {
		return startReplication(ctx, inst, sb.Primary, bins.mysql)
	}); err != nil {
		return sb, err
	}

	log.Info("sandbox up", "dir", dir, "primary", sb.Primary.Addr(), "replicas", len(sb.Replicas),
		"elapsed", time.Since(start).Round(time.Millisecond))
	return sb, nil
}

// Down stops the mariadbd processes recorded in dir/sandbox.json (SIGTERM,
// up to 30 s, then SIGKILL) and removes dir. A pid is only signalled if it
// still is the mariadbd of that instance. A missing dir is not an error; a
// dir without sandbox.json is refused unless it is empty.
func Down(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	st, err := readState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		entries, derr := os.ReadDir(dir)
		if errors.Is(derr, fs.ErrNotExist) {
			return nil
		}
		if derr == nil && len(entries) == 0 {
			return os.Remove(dir)
		}
		return fmt.Errorf("sandbox: %s holds no %s; not removing it", dir, stateFile)
	}
	if err != nil {
		return err
	}
	insts := st.Sandbox.Instances()
	if err := stopAll(ctx, insts, nil, false); err != nil {
		return err
	}
	for _, inst := range insts {
		if inst.Socket != "" && !within(dir, inst.Socket) {
			os.Remove(inst.Socket)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: remove %s: %w", dir, err)
	}
	return nil
}

// Status reads dir/sandbox.json and checks that every recorded process is
// alive and its server answers (and that replicas replicate). When the state
// could be read the sandbox is returned even if the check failed; the error
// then describes the unhealthy instances. Use Sandbox.Check for details.
func Status(ctx context.Context, dir string) (*Sandbox, error) {
	st, err := readState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox: no sandbox in %s", dir)
	}
	if err != nil {
		return nil, err
	}
	sb := &st.Sandbox
	var errs []error
	for _, is := range sb.Check(ctx) {
		if err := is.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return sb, errors.Join(errs...)
}

// InstanceStatus is the health of one instance as seen by Check.
type InstanceStatus struct {
	Instance  Instance
	Replica   bool
	Alive     bool   // the recorded pid is this instance's mariadbd
	Answering bool   // the server accepted a connection and a ping
	Error     string // why it is not answering, or the replication query's error
	// Replication is set for replicas that answer.
	Replication *ReplicationStatus
}

// ReplicationStatus is the part of SHOW SLAVE STATUS that matters here.
type ReplicationStatus struct {
	IORunning           string // Slave_IO_Running: Yes, No, Connecting
	SQLRunning          string // Slave_SQL_Running
	SecondsBehindMaster *int64 // nil when NULL
	LastIOError         string
	LastSQLError        string
	GTIDIOPos           string // Gtid_IO_Pos
	// ByGTID says the replica positions itself by GTID: MariaDB's
	// Using_Gtid (Slave_Pos or Current_Pos), MySQL's Auto_Position = 1.
	ByGTID bool
}

// Err summarises a problem, or returns nil if the instance is healthy.
func (is InstanceStatus) Err() error {
	name := is.Instance.Name
	switch {
	case !is.Alive:
		return fmt.Errorf("%s (pid %d) is not running", name, is.Instance.PID)
	case !is.Answering:
		return fmt.Errorf("%s (pid %d, port %d) does not answer: %s", name, is.Instance.PID, is.Instance.Port, is.Error)
	case is.Replica && is.Replication == nil:
		return fmt.Errorf("%s: replication status unknown: %s", name, is.Error)
	case is.Replica && (is.Replication.IORunning != "Yes" || is.Replication.SQLRunning != "Yes"):
		r := is.Replication
		return fmt.Errorf("%s: replication not running (IO %s %q, SQL %s %q)", name, r.IORunning, r.LastIOError, r.SQLRunning, r.LastSQLError)
	}
	return nil
}

// Check inspects every instance (concurrently, a few seconds at most each).
func (s *Sandbox) Check(ctx context.Context) []InstanceStatus {
	insts := s.Instances()
	out := make([]InstanceStatus, len(insts))
	_ = forEach(insts, func(i int, inst Instance) error {
		is := InstanceStatus{Instance: inst, Replica: i > 0, Alive: processAlive(inst.PID, inst.DataDir)}
		if is.Alive {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			db, err := openDB(s.DSN(inst, "") + "&timeout=3s")
			if err == nil {
				defer db.Close()
				err = db.PingContext(cctx)
			}
			if err != nil {
				is.Error = err.Error()
			} else {
				is.Answering = true
				if is.Replica {
					rs, err := replicationStatus(cctx, db)
					if err != nil {
						is.Error = err.Error()
					} else {
						is.Replication = rs
					}
				}
			}
		}
		out[i] = is
		return nil
	})
	return out
}

// --- Up helpers ---

// prepareDir makes sure dir may be used: absent, empty, or a stale sandbox
// (removed here). existed reports whether dir exists afterwards.
func prepareDir(ctx context.Context, dir string, log *slog.Logger) (existed bool, err error) {
	st, err := readState(dir)
	switch {
	case err == nil:
		for _, inst := range st.Sandbox.Instances() {
			if processAlive(inst.PID, inst.DataDir) {
				return false, fmt.Errorf("sandbox: %s already holds a running sandbox (%s pid %d on port %d); run `recast sandbox down --dir %s` first",
					dir, inst.Name, inst.PID, inst.Port, dir)
			}
		}
		log.Info("removing stale sandbox (no process alive)", "dir", dir)
		if err := Down(ctx, dir); err != nil {
			return false, err
		}
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sandbox: %w", err)
	case len(entries) > 0:
		return false, fmt.Errorf("sandbox: %s is not empty and holds no %s; choose another dir or remove it", dir, stateFile)
	}
	return true, nil
}

func findBinary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	for _, n := range names {
		for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/local/mysql/bin"} {
			p := filepath.Join(d, n)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("sandbox: %s not found in PATH or the usual places; is MariaDB installed?", names[0])
}

// socketPath returns instDir/mysqld.sock, or a path in the temp dir when that
// would be too long for a unix socket.
func socketPath(instDir string) string {
	p := filepath.Join(instDir, "mysqld.sock")
	if len(p) <= maxSocketPath {
		return p
	}
	sum := sha256.Sum256([]byte(instDir))
	return filepath.Join(os.TempDir(), "recast-"+hex.EncodeToString(sum[:8])+".sock")
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w (%w)", ErrPortInUse, err)
	}
	return l.Close()
}

// installDataDir creates inst's datadir. serverArgs are the instance's
// extra server options: MySQL takes --lower-case-table-names when it
// initialises the datadir (the server refuses another value later).
func installDataDir(ctx context.Context, bins binaries, inst Instance, serverArgs []string) error {
	for _, d := range []string{inst.DataDir, tmpDir(inst)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	installDB := bins.installDB
	var args []string
	if bins.mysql {
		// MySQL has no install script: the server initialises an empty
		// datadir itself (root@localhost without a password).
		installDB = bins.server
		args = []string{"--no-defaults", "--initialize-insecure", "--datadir=" + inst.DataDir, "--tmpdir=" + tmpDir(inst),
			"--log-error=" + filepath.Join(filepath.Dir(inst.DataDir), "init.log")}
		if u := rootUser(); u != "" {
			args = append(args, "--user="+u)
		}
		for _, a := range serverArgs {
			if strings.HasPrefix(strings.ReplaceAll(a, "_", "-"), "--lower-case-table-names") {
				args = append(args, a)
			}
		}
		return runInstall(ctx, installDB, args, inst)
	}
	args = []string{
		"--no-defaults",
		"--datadir=" + inst.DataDir,
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve", // no root@<hostname>, which --skip-name-resolve servers warn about
	}
	if bins.baseDir != "" {
		args = append(args, "--basedir="+bins.baseDir)
	}
	if u := rootUser(); u != "" {
		args = append(args, "--user="+u)
	}
	// Passed through to the bootstrap mariadbd. A private tmpdir is
	// essential: every mariadbd deletes all #sql* files in its tmpdir when
	// it starts, so concurrent bootstraps sharing /tmp break each other
	// ("Unknown table 'mysql.tmp_user_sys'").
	args = append(args, "--tmpdir="+tmpDir(inst))
	return runInstall(ctx, installDB, args, inst)
}

func runInstall(ctx context.Context, installDB string, args []string, inst Instance) error {
	cmd := exec.CommandContext(ctx, installDB, args...)
	cmd.Dir = filepath.Dir(inst.DataDir)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmpDir(inst))
	// On cancellation kill the script and its bootstrap mariadbd alike.
	cmd.SysProcAttr = detachedAttr()
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	out, err := cmd.CombinedOutput()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("sandbox: %s for %s: %w", filepath.Base(installDB), inst.Name, ctx.Err())
	}
	if err != nil {
		msg := string(out)
		if b, rerr := os.ReadFile(filepath.Join(filepath.Dir(inst.DataDir), "init.log")); rerr == nil {
			msg += string(b)
		}
		if len(msg) > 3000 {
			msg = msg[:3000] + "..."
		}
		return fmt.Errorf("sandbox: %s for %s: %w\n%s", filepath.Base(installDB), inst.Name, err, strings.TrimSpace(msg))
	}
	return nil
}

// tmpDir is the instance's private tmpdir (see installDataDir).
func tmpDir(inst Instance) string { return filepath.Join(filepath.Dir(inst.DataDir), "tmp") }

func serverArgs(bins binaries, inst Instance, replica, fast bool) []string {
	instDir := filepath.Dir(inst.DataDir)
	args := []string{
		"--no-defaults",
		"--datadir=" + inst.DataDir,
		"--port=" + strconv.Itoa(inst.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + inst.Socket,
		"--pid-file=" + filepath.Join(instDir, "mysqld.pid"),
		"--log-error=" + filepath.Join(instDir, "error.log"),
		"--tmpdir=" + tmpDir(inst), // never share: startup deletes all #sql* files there
		"--skip-name-resolve",
		"--log-bin=" + filepath.Join(inst.DataDir, "binlog"),
		"--relay-log=" + filepath.Join(inst.DataDir, "relay-bin"),
		"--server-id=" + strconv.Itoa(inst.ServerID),
		"--binlog-format=ROW",
		"--binlog-row-image=FULL",
		"--max-binlog-size=64M",
		"--binlog-expire-logs-seconds=7200",
		"--max-connections=500",
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
		"--event-scheduler=ON",
	}
	if u := rootUser(); u != "" {
		args = append(args, "--user="+u)
	}
	switch {
	case bins.mysql:
		// log_replica_updates is on by default; GTIDs are off unless asked.
		// No X plugin (it would want port 33060), no secure-file-priv dir.
		args = append(args, "--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--mysqlx=OFF", "--secure-file-priv=")
	case replica:
		// gtid_strict_mode: sequence numbers only grow within a domain, on
		// the primary and the replicas (what recast's GTID positions and
		// the replicas' MASTER_USE_GTID=slave_pos rely on).
		args = append(args, "--log-slave-updates", "--gtid-strict-mode=ON")
	default:
		args = append(args, "--gtid-strict-mode=ON")
	}
	if fast {
		args = append(args,
			"--innodb-buffer-pool-size=64M",
			"--innodb-flush-log-at-trx-commit=0",
			"--sync-binlog=0",
			"--innodb-doublewrite=0",
			// Many test servers run at once: avoid io_uring/libaio limits
			// (memlock, aio-max-nr).
			"--innodb-use-native-aio=0",
		)
	} else {
		args = append(args, "--innodb-buffer-pool-size=256M")
	}
	return args
}

// startServer starts mariadbd detached (own process group, stdio on
// /dev/null). done receives the exit once the process ends; a goroutine
// reaps it for as long as this process lives.
func startServer(bins binaries, inst Instance, replica, fast bool, extra []string) (pid int, done <-chan error, err error) {
	//nolint:noctx // the server outlives every context of this process: it is detached and stopped by pid
	cmd := exec.Command(bins.server, append(serverArgs(bins, inst, replica, fast), extra...)...)
	cmd.Dir = filepath.Dir(inst.DataDir)
	cmd.SysProcAttr = detachedAttr()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return cmd.Process.Pid, ch, nil
}

func errorLogPath(inst Instance) string {
	return filepath.Join(filepath.Dir(inst.DataDir), "error.log")
}

// waitReady waits until inst answers a ping as root over TCP.
func waitReady(ctx context.Context, inst Instance, mysqlFlavor bool, exited <-chan error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	db, err := openDB(rootDSN(inst, mysqlFlavor) + "&timeout=2s")
	if err != nil {
		return err
	}
	defer db.Close()
	var lastErr error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		lastErr = db.PingContext(pctx)
		pcancel()
		if lastErr == nil {
			return nil
		}
		select {
		case werr := <-exited:
			logTail := errorLogTail(inst)
			err := fmt.Errorf("sandbox: mariadbd for %s exited during startup (%w); tail of %s:\n%s",
				inst.Name, werr, errorLogPath(inst), logTail)
			if strings.Contains(logTail, "Address already in use") {
				err = fmt.Errorf("%w: %w", ErrPortInUse, err)
			}
			return err
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("sandbox: waiting for %s to start: %w", inst.Name, parent.Err())
			}
			return fmt.Errorf("sandbox: %s on port %d not ready after %s (last error: %w); tail of %s:\n%s",
				inst.Name, inst.Port, readyTimeout, lastErr, errorLogPath(inst), errorLogTail(inst))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func createUsers(ctx context.Context, inst Instance, mysqlFlavor bool) error {
	db, err := openDB(rootDSN(inst, mysqlFlavor))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sandbox: connect to %s: %w", inst.Name, err)
	}
	defer conn.Close()
	stmts := []string{"SET SESSION sql_log_bin = 0"}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		stmts = append(stmts,
			fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", DefaultUser, host, DefaultPassword),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%s' WITH GRANT OPTION", DefaultUser, host),
		)
	}
	stmts = append(stmts,
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", replUser, replPassword),
		fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'127.0.0.1'", replUser),
	)
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sandbox: %s: %s: %w", inst.Name, s, err)
		}
	}
	return nil
}

func startReplication(ctx context.Context, replica, primary Instance, mysqlFlavor bool) error {
	db, err := openDB(rootDSN(replica, mysqlFlavor))
	if err != nil {
		return err
	}
	defer db.Close()
	stmts := []string{
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			primary.Host, primary.Port, replUser, replPassword),
		"START SLAVE",
	}
	if mysqlFlavor {
		// GET_SOURCE_PUBLIC_KEY: caching_sha2_password without TLS.
		stmts = []string{
			fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='%s', SOURCE_PORT=%d, SOURCE_USER='%s', SOURCE_PASSWORD='%s', SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, GET_SOURCE_PUBLIC_KEY=1",
				primary.Host, primary.Port, replUser, replPassword),
			"START REPLICA",
		}
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sandbox: %s: %s: %w", replica.Name, s, err)
		}
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	for {
		rs, err := replicationStatus(ctx, db)
		if err == nil && rs.IORunning == "Yes" && rs.SQLRunning == "Yes" {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("sandbox: %s: waiting for replication: %w", replica.Name, parent.Err())
			}
			if err != nil {
				return fmt.Errorf("sandbox: %s: replication not running after %s: %w", replica.Name, replTimeout, err)
			}
			return fmt.Errorf("sandbox: %s: replication not running after %s (IO %s %q, SQL %s %q)",
				replica.Name, replTimeout, rs.IORunning, rs.LastIOError, rs.SQLRunning, rs.LastSQLError)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReplicaStatus runs SHOW REPLICA STATUS on db (a replica's connection).
func ReplicaStatus(ctx context.Context, db *sql.DB) (*ReplicationStatus, error) {
	return replicationStatus(ctx, db)
}

// replicationStatus runs SHOW REPLICA STATUS, which MariaDB 10.5+ and MySQL
// 8.0.22+ both know (with Slave_/Master or Replica_/Source column names).
func replicationStatus(ctx context.Context, db *sql.DB) (*ReplicationStatus, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("SHOW REPLICA STATUS returned no row (not a replica)")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	m := make(map[string]sql.NullString, len(cols))
	for i, c := range cols {
		// MySQL's names, mapped onto MariaDB's.
		c = strings.NewReplacer("Replica_", "Slave_", "_Source", "_Master").Replace(c)
		if c == "Retrieved_Gtid_Set" {
			c = "Gtid_IO_Pos"
		}
		m[c] = vals[i]
	}
	rs := &ReplicationStatus{
		IORunning:    m["Slave_IO_Running"].String,
		SQLRunning:   m["Slave_SQL_Running"].String,
		LastIOError:  m["Last_IO_Error"].String,
		LastSQLError: m["Last_SQL_Error"].String,
		GTIDIOPos:    m["Gtid_IO_Pos"].String,
		ByGTID:       m["Auto_Position"].String == "1" || strings.HasSuffix(strings.ToLower(m["Using_Gtid"].String), "_pos"),
	}
	if v := m["Seconds_Behind_Master"]; v.Valid {
		if n, err := strconv.ParseInt(v.String, 10, 64); err == nil {
			rs.SecondsBehindMaster = &n
		}
	}
	return rs, rows.Err()
}

// --- stopping ---

// stopAll stops the given instances concurrently; kill skips SIGTERM.
func stopAll(ctx context.Context, insts []Instance, log *slog.Logger, kill bool) error {
	return forEach(insts, func(_ int, inst Instance) error {
		if log != nil {
			log.Info("stopping mariadbd", "instance", inst.Name, "pid", inst.PID)
		}
		return stopProcess(ctx, inst, kill)
	})
}

func stopProcess(ctx context.Context, inst Instance, kill bool) error {
	if inst.PID <= 0 || !processAlive(inst.PID, inst.DataDir) {
		return nil
	}
	if !kill {
		if err := signalTerm(inst.PID); err != nil && processAlive(inst.PID, inst.DataDir) {
			return fmt.Errorf("sandbox: SIGTERM %s (pid %d): %w", inst.Name, inst.PID, err)
		}
		if waitGone(ctx, inst, stopTimeout) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sandbox: stopping %s (pid %d): %w", inst.Name, inst.PID, err)
		}
	}
	if err := signalKill(inst.PID); err != nil && processAlive(inst.PID, inst.DataDir) {
		return fmt.Errorf("sandbox: SIGKILL %s (pid %d): %w", inst.Name, inst.PID, err)
	}
	if waitGone(ctx, inst, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("sandbox: %s (pid %d) still running after SIGKILL", inst.Name, inst.PID)
}

func waitGone(ctx context.Context, inst Instance, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !processAlive(inst.PID, inst.DataDir) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// --- state file ---

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("sandbox: parse %s: %w", filepath.Join(dir, stateFile), err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("sandbox: %s: unsupported version %d", filepath.Join(dir, stateFile), st.Version)
	}
	return &st, nil
}

func writeState(dir string, sb *Sandbox) error {
	b, err := json.MarshalIndent(state{Version: stateVersion, CreatedAt: time.Now().UTC(), Sandbox: *sb}, "", "  ")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	f, err := os.CreateTemp(dir, stateFile+".tmp*")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, stateFile))
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("sandbox: write state: %w", werr)
	}
	return nil
}

// --- small helpers ---

// rootDSN connects as root: over TCP on MariaDB (whose install script
// creates root@127.0.0.1), over the socket on MySQL (whose
// --initialize-insecure creates root@localhost only).
func rootDSN(inst Instance, mysqlFlavor bool) string {
	if mysqlFlavor {
		return fmt.Sprintf("root@unix(%s)/?interpolateParams=true", inst.Socket)
	}
	return fmt.Sprintf("root@tcp(%s)/?interpolateParams=true", inst.Addr())
}

func openDB(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(2)
	return db, nil
}

// forEach runs f for every element concurrently and joins the errors.
func forEach[T any](xs []T, f func(int, T) error) error {
	errs := make([]error, len(xs))
	var wg sync.WaitGroup
	for i, x := range xs {
		wg.Go(func() { errs[i] = f(i, x) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func errorLogTail(inst Instance) string {
	f, err := os.Open(errorLogPath(inst))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const tailBytes = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
		if _, err := f.Seek(fi.Size()-tailBytes, 0); err != nil {
			return "(" + err.Error() + ")"
		}
	}
	b := make([]byte, tailBytes)
	n, _ := f.Read(b)
	return tail(string(b[:n]), 20)
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func removeContents(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
