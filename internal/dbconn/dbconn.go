// Package dbconn opens recast's connections with the session settings every
// recast statement relies on, and classifies errors by MySQL error number.
package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/flavor"
)

// Config says where to connect and as whom.
type Config struct {
	Host     string
	Port     int
	User     string
	Password string
	Schema   string
	// Socket, when set, is the unix socket to connect to instead of
	// Host:Port (the connections to replicas, found by host and port, use
	// TCP).
	Socket string
	// TLS is how the connections are encrypted (tls.go).
	TLS TLS
	// TLSActive records that the probed connection was encrypted (Probe):
	// under --ssl-mode PREFERRED the binlog connection is encrypted too.
	TLSActive bool
	// MaxErrorCountSettable records that the probed session could raise
	// max_error_count (Probe): always on MariaDB; on MySQL only with
	// SESSION_VARIABLES_ADMIN or SYSTEM_VARIABLES_ADMIN (else 1227).
	MaxErrorCountSettable bool
	// LockWaitTimeout bounds every metadata-lock wait of a recast statement
	// (MariaDB's default is 86400 s). Cut-over sets its own, shorter one.
	LockWaitTimeout time.Duration
	// InnodbLockWaitTimeout bounds row-lock waits (copy chunks, applier batches).
	InnodbLockWaitTimeout time.Duration
	// SetVars are extra session variables (name -> SQL value) for every connection.
	SetVars map[string]string
	// MaxOpen caps the pool (0: no cap).
	MaxOpen int
	// Server is the server's flavor (Probe fills it in; Open probes when it
	// is unset). It picks the server's name of session variables.
	Server flavor.Server
	// SQLMode and TimeZone, when set, replace recast's defaults (strict mode,
	// UTC) with these values (unquoted, e.g. "STRICT_TRANS_TABLES,..." and
	// "+05:00"): a migration runs its DDL and conversions under the server's
	// own settings (Semantics). NO_AUTO_VALUE_ON_ZERO is always added to the
	// mode, so that a copied row keeps its AUTO_INCREMENT value 0. They win
	// over SetVars' sql_mode and time_zone.
	SQLMode  string
	TimeZone string
}

// MaxErrorCount is the max_error_count of recast's sessions: the most
// warnings the server keeps for one statement.
const MaxErrorCount = 65535

// Tag is a comment on every statement recast sends, so that processlist
// readers (and recast's own blocker detection) can tell recast's sessions apart.
const Tag = "/* recast */ "

// DSN renders a go-sql-driver DSN. Session variables:
//   - time_zone '+00:00': TIMESTAMP values cross the binlog in UTC;
//   - sql_mode strict plus NO_AUTO_VALUE_ON_ZERO: a row whose AUTO_INCREMENT
//     key is 0 keeps its 0 instead of getting a new value, and a value the new
//     column cannot hold is an error, not a silent truncation;
//   - READ COMMITTED: locking reads take no gap locks, so copy chunks block the
//     application as little as possible;
//   - short lock waits, so that no recast statement queues for long.
func (c Config) DSN() string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = c.User, c.Password
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	if c.Socket != "" {
		cfg.Net, cfg.Addr = "unix", c.Socket
	}
	if name, err := c.TLS.driverTLS(c.tlsHost()); err != nil {
		// Probe and Validate report the cause; a connection must not
		// silently go unencrypted.
		cfg.TLSConfig = "recast-invalid-tls-settings"
	} else {
		cfg.TLSConfig = name
		// PREFERRED with a client certificate: encrypted when the server
		// offers TLS, plain otherwise (as "preferred" without one).
		cfg.AllowFallbackToPlaintext = c.TLS.EffectiveMode() == SSLPreferred
	}
	cfg.DBName = c.Schema
	cfg.InterpolateParams = true
	cfg.Timeout = 10 * time.Second
	cfg.Collation = "utf8mb4_general_ci"
	lwt := c.LockWaitTimeout
	if lwt <= 0 {
		lwt = 30 * time.Second
	}
	ilwt := c.InnodbLockWaitTimeout
	if ilwt <= 0 {
		ilwt = 5 * time.Second
	}
	cfg.Params = map[string]string{
		"time_zone":                "'+00:00'",
		"sql_mode":                 "'STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'",
		"lock_wait_timeout":        strconv.Itoa(seconds(lwt)),
		"innodb_lock_wait_timeout": strconv.Itoa(seconds(ilwt)),
	}
	// The isolation variable's name differs between servers; until the
	// server is known (Probe) the sessions keep the server's default.
	if c.Server.Major > 0 {
		cfg.Params[c.Server.IsolationVar()] = "'READ-COMMITTED'"
	}
	if c.Server.MySQL() {
		// MySQL caches information_schema.TABLES statistics (AUTO_INCREMENT
		// among them) for a day by default: recast reads them live.
		cfg.Params["information_schema_stats_expiry"] = "0"
	}
	// Every warning of a statement is kept, so that a copy chunk's can all
	// be examined (MariaDB keeps 64 by default). MySQL needs
	// SESSION_VARIABLES_ADMIN to set it (1227) and keeps 1024 otherwise: a
	// chunk with more warnings than were kept is examined again (package
	// copier). A hot key range gives a chunk a duplicate-key warning for
	// every row the applier wrote before it: 2,088 in one 5,000-row chunk
	// under sysbench's default distribution.
	if c.Server.Major > 0 && (!c.Server.MySQL() || c.MaxErrorCountSettable) {
		cfg.Params["max_error_count"] = strconv.Itoa(MaxErrorCount)
	}
	for k, v := range c.SetVars {
		cfg.Params[k] = v
	}
	if c.SQLMode != "" {
		cfg.Params["sql_mode"] = QuoteString(WithMode(c.SQLMode, "NO_AUTO_VALUE_ON_ZERO"))
	}
	if c.TimeZone != "" {
		cfg.Params["time_zone"] = QuoteString(c.TimeZone)
	}
	return cfg.FormatDSN()
}

// Where is the address connected to: host:port or the socket path.
func (c Config) Where() string {
	if c.Socket != "" {
		return c.Socket
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// Probe connects once and returns c with Server set from SELECT VERSION()
// (and TLSActive from the session's Ssl_cipher).
func Probe(ctx context.Context, c Config) (Config, error) {
	if c.Server.Major > 0 {
		return c, nil
	}
	if _, err := c.TLS.driverTLS(c.tlsHost()); err != nil {
		return c, err
	}
	plain := c
	plain.SetVars, plain.MaxOpen = nil, 1
	db, err := openTagged(plain.DSN())
	if err != nil {
		return c, fmt.Errorf("connect to %s: %w", c.Where(), err)
	}
	defer db.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s, err := flavor.Detect(pctx, db)
	if err != nil {
		return c, fmt.Errorf("connect to %s as %s: %w", c.Where(), c.User, c.describe(err))
	}
	c.Server = s
	var name, cipher string
	if err := db.QueryRowContext(pctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
		return c, fmt.Errorf("connect to %s: read Ssl_cipher: %w", c.Where(), err)
	}
	c.TLSActive = cipher != ""
	c.MaxErrorCountSettable = true
	if s.MySQL() {
		_, err := db.ExecContext(pctx, "SET SESSION max_error_count = "+strconv.Itoa(MaxErrorCount))
		switch {
		case err == nil:
		case Number(err) == erSpecificAccess:
			c.MaxErrorCountSettable = false
		default:
			return c, fmt.Errorf("connect to %s: %w", c.Where(), err)
		}
	}
	return c, nil
}

func seconds(d time.Duration) int {
	s := int(d / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// OpenLazy opens a pool without connecting: the first statement connects
// (a replica that cannot be reached is then reported where it is used).
func OpenLazy(c Config) (*sql.DB, error) {
	db, err := openTagged(c.DSN())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.Where(), err)
	}
	if c.MaxOpen > 0 {
		db.SetMaxOpenConns(c.MaxOpen)
		db.SetMaxIdleConns(c.MaxOpen)
	}
	return db, nil
}

// Open opens a pool and checks that the server answers. When c.Server is
// unset it probes the server first (see Probe).
func Open(ctx context.Context, c Config) (*sql.DB, error) {
	c, err := Probe(ctx, c)
	if err != nil {
		return nil, err
	}
	db, err := OpenLazy(c)
	if err != nil {
		return nil, err
	}
	db.SetConnMaxLifetime(time.Hour)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s as %s: %w", c.Where(), c.User, c.describeOpen(ctx, err))
	}
	return db, nil
}

// MySQL error numbers recast acts on.
const (
	ErLockWaitTimeout   = 1205
	ErLockDeadlock      = 1213
	ErQueryInterrupted  = 1317
	ErDupEntry          = 1062
	ErNoSuchTable       = 1146
	ErTableExists       = 1050
	ErAccessDenied      = 1045
	ErDBAccessDenied    = 1044
	ErTableAccessDenied = 1142
	ErBadDB             = 1049
	ErUnknownHost       = 2005
	ErServerGone        = 2006
	ErServerLost        = 2013
	ErConnectionKilled  = 1927
	ErNoSuchThread      = 1094 // KILL of a session that is gone
)

// Number returns the MySQL error number of err, or 0.
func Number(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// IsLockTimeout reports a metadata- or row-lock wait timeout.
func IsLockTimeout(err error) bool { return Number(err) == ErLockWaitTimeout }

// Retryable reports errors after which the same statement may simply be run
// again: lock wait timeout, deadlock, and a lost connection.
func Retryable(err error) bool {
	var nr *NotRetryable
	if errors.As(err, &nr) {
		return false
	}
	switch Number(err) {
	case ErLockWaitTimeout, ErLockDeadlock, ErServerGone, ErServerLost, ErConnectionKilled:
		return true
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
}

// NotRetryable is an error Retryable reports false for, whatever it wraps:
// a lost connection whose statement may still be running on a session that
// could not be ended must not be tried again.
type NotRetryable struct{ Err error }

func (e *NotRetryable) Error() string { return e.Err.Error() }
func (e *NotRetryable) Unwrap() error { return e.Err }

// StatementFateUnknown reports whether err leaves a statement's fate
// unknown: the session's connection failed, and the server may have run
// the statement (and the session may still be running it), rather than
// answering with an error, after which the statement is over.
func StatementFateUnknown(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) {
		return true
	}
	switch Number(err) {
	case 0, ErServerGone, ErServerLost:
		return true
	}
	return false
}

// Retry runs fn until it succeeds, fails with a non-retryable error, ctx ends,
// or attempts are used up. Backoff is jittered and grows from 50 ms to 2 s.
func Retry(ctx context.Context, attempts int, fn func(ctx context.Context) error) error {
	var err error
	backoff := 50 * time.Millisecond
	for i := 0; i < attempts; i++ {
		if err = fn(ctx); err == nil || !Retryable(err) {
			return err
		}
		d := backoff/2 + rand.N(backoff)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(d):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	return fmt.Errorf("gave up after %d attempts: %w", attempts, err)
}

// RedactDSN hides the password of a DSN for logging.
func RedactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparseable dsn)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}
