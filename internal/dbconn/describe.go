package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/recast-osc/recast/internal/flavor"
)

// Privileges recast needs: GlobalPrivileges on *.* (read the binlog as a
// replica, its position, the processlist during the cut-over) and
// SchemaPrivileges on the table's database (copy, apply, create and drop
// the helper tables, lock and rename for the cut-over, the dry run's
// temporary copy).
var (
	GlobalPrivileges = []string{"REPLICATION SLAVE", "REPLICATION CLIENT", "PROCESS"}
	SchemaPrivileges = []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER", "LOCK TABLES", "CREATE TEMPORARY TABLES"}
)

// More error numbers Describe knows.
const (
	erHostNotPrivileged  = 1130
	erTooManyConnections = 1040
	erSpecificAccess     = 1227 // e.g. SET SESSION binlog_format without BINLOG ADMIN
	erUnknownSystemVar   = 1193
	erGlobalVariable     = 1229
	erReadOnlyVariable   = 1238
	erWrongValueForVar   = 1231
	erWrongTypeForVar    = 1232
)

var (
	reUserHost = regexp.MustCompile(`for user '((?:[^']|'')*)'@'((?:[^']|'')*)'`)
	reDatabase = regexp.MustCompile(`to database '((?:[^']|'')*)'`)
)

// Describe turns connection errors into one line that names the cause and
// the fix, and never the password (the server's and the driver's messages
// do not contain it).
func Describe(err error) error {
	switch Number(err) {
	case ErAccessDenied:
		return fmt.Errorf("access denied: wrong user or password (%w); fix: check --user and --password (or RECAST_PASSWORD)", err)
	case ErDBAccessDenied:
		fix := "grant the user privileges on the database"
		msg := err.Error()
		if u, d := reUserHost.FindStringSubmatch(msg), reDatabase.FindStringSubmatch(msg); u != nil && d != nil {
			fix = fmt.Sprintf("GRANT %s ON %s.* TO '%s'@'%s'", strings.Join(SchemaPrivileges, ", "),
				"`"+strings.ReplaceAll(d[1], "`", "``")+"`", u[1], u[2])
		}
		return fmt.Errorf("access denied to the database (%w); fix: %s", err, fix)
	case ErBadDB:
		return fmt.Errorf("the database does not exist (%w); fix: check --database (names are case-sensitive)", err)
	case erHostNotPrivileged:
		return fmt.Errorf("this user may not connect from this host (%w); fix: connect as a user defined for this host, or create one (CREATE USER ... ; GRANT ...)", err)
	case erTooManyConnections:
		return fmt.Errorf("the server refuses more connections (%w); fix: retry later or raise max_connections", err)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("unknown host %q: the name does not resolve (%v); fix: check --host", dnsErr.Name, dnsErr.Err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("server unreachable: connection refused (nothing listens on that port); fix: check --host and --port, and that the server is running")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("server unreachable: no answer in time (%w); fix: check --host and --port, and firewalls", err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("server unreachable (%w); fix: check --host and --port, and that the server is running", err)
	}
	return err
}

// describeOpen is Describe, plus: when the session variables of --set-vars
// are why the connection failed, which ones and why.
func (c Config) describeOpen(ctx context.Context, err error) error {
	if d := c.describeTLS(err); d != nil {
		return d
	}
	if len(c.SetVars) == 0 {
		return Describe(err)
	}
	switch Number(err) {
	case erUnknownSystemVar, erGlobalVariable, erReadOnlyVariable, erWrongValueForVar, erWrongTypeForVar,
		erSpecificAccess:
	default:
		return Describe(err)
	}
	plain := c
	plain.SetVars, plain.MaxOpen = nil, 1
	db, perr := openTagged(plain.DSN())
	if perr == nil {
		defer db.Close()
		if verr := CheckSetVars(ctx, db, c.SetVars); verr != nil {
			return verr
		}
	}
	fix := "correct or leave out that variable"
	if Number(err) == erSpecificAccess {
		fix = "grant the user the privilege the server names, or leave that variable out"
	}
	return fmt.Errorf("--set-vars: the server refuses one of %s (%w); fix: %s", setVarNames(c.SetVars), err, fix)
}

// CheckSetVars checks the names of session variables against the server's
// information_schema.SYSTEM_VARIABLES (MariaDB): every name must exist, be
// settable per session (scope SESSION or SESSION ONLY) and not be read-only.
// MySQL has no such table: there each variable is set on a throwaway session
// and the server's error number says what is wrong.
func CheckSetVars(ctx context.Context, db *sql.DB, vars map[string]string) error {
	if len(vars) == 0 {
		return nil
	}
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return fmt.Errorf("--set-vars: %w", err)
	}
	if srv.MySQL() {
		return checkSetVarsBySetting(ctx, db, vars)
	}
	names := setVarNamesSorted(vars)
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = strings.ToUpper(n)
	}
	rows, err := db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_SCOPE, READ_ONLY FROM information_schema.SYSTEM_VARIABLES
		WHERE VARIABLE_NAME IN (?`+strings.Repeat(",?", len(names)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("--set-vars: read information_schema.SYSTEM_VARIABLES: %w", err)
	}
	defer rows.Close()
	type info struct{ scope, readOnly string }
	known := map[string]info{}
	for rows.Next() {
		var n string
		var i info
		if err := rows.Scan(&n, &i.scope, &i.readOnly); err != nil {
			return fmt.Errorf("--set-vars: read information_schema.SYSTEM_VARIABLES: %w", err)
		}
		known[strings.ToLower(n)] = i
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("--set-vars: read information_schema.SYSTEM_VARIABLES: %w", err)
	}
	var unknown, global, readOnly []string
	for _, n := range names {
		i, ok := known[n]
		switch {
		case !ok:
			unknown = append(unknown, n)
		case i.readOnly == "YES":
			readOnly = append(readOnly, n)
		case i.scope == "GLOBAL":
			global = append(global, n)
		}
	}
	return setVarsRefusal(unknown, global, readOnly)
}

func setVarNamesSorted(vars map[string]string) []string {
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, strings.ToLower(n))
	}
	sort.Strings(names)
	return names
}

func setVarNames(vars map[string]string) string { return strings.Join(setVarNamesSorted(vars), ", ") }

// checkSetVarsBySetting runs SET SESSION name = value for each variable on a
// session that is closed afterwards (never returned to the pool) and
// classifies the errors by number: 1193 unknown, 1229 global-only, 1238
// read-only.
func checkSetVarsBySetting(ctx context.Context, db *sql.DB, vars map[string]string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("--set-vars: %w", err)
	}
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	var unknown, global, readOnly []string
	for _, n := range setVarNamesSorted(vars) {
		v := vars[n]
		for k := range vars {
			if strings.EqualFold(k, n) {
				v = vars[k]
			}
		}
		_, err := conn.ExecContext(ctx, "SET SESSION "+n+" = "+v)
		switch Number(err) {
		case 0:
			if err != nil {
				return fmt.Errorf("--set-vars: SET SESSION %s: %w", n, err)
			}
		case erUnknownSystemVar:
			unknown = append(unknown, n)
		case erGlobalVariable:
			global = append(global, n)
		case erReadOnlyVariable:
			readOnly = append(readOnly, n)
		default:
			return fmt.Errorf("--set-vars: SET SESSION %s = %s: %w; fix: correct or leave out that variable", n, v, err)
		}
	}
	return setVarsRefusal(unknown, global, readOnly)
}

// setVarsRefusal is the one-line refusal of --set-vars names the server has
// not, or that are global-only or read-only (nil: none).
func setVarsRefusal(unknown, global, readOnly []string) error {
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("--set-vars: the server has no variable %s; fix: check the name (SHOW VARIABLES LIKE '...') or leave it out", strings.Join(unknown, ", "))
	case len(global) > 0:
		return fmt.Errorf("--set-vars: %s is global-only, and --set-vars sets session variables of recast's own connections; fix: leave it out (set it yourself with SET GLOBAL if you mean to change the server)", strings.Join(global, ", "))
	case len(readOnly) > 0:
		return fmt.Errorf("--set-vars: %s is read-only; fix: leave it out", strings.Join(readOnly, ", "))
	}
	return nil
}
