// Package flavor is the one place that knows how the supported servers
// differ: MariaDB (10.11, 11.4, 11.8) and MySQL (8.0.29+, 8.4, 9.x). The
// flavor is chosen from SELECT VERSION() when recast connects; everything
// else asks a Server value instead of hard-coding one server's syntax.
//
// The differences (docs/flavors.md has them in full, with the reasons):
//   - statements and variables: IsolationVar, BinlogStatusQuery,
//     ReplicaHostsQuery, ReplicaStatusQuery, GTIDExecutedQuery,
//     WaitGTIDQuery;
//   - the session list: Processlist (MySQL: performance_schema.processlist,
//     since information_schema.PROCESSLIST and INNODB_TRX fail with error
//     3854 once any statement carries 4-byte or binary text; internal/mdl
//     reads transactions from performance_schema then);
//   - privileges: ReadSchemas (MySQL: SELECT on performance_schema);
//   - INSTANT/in-place ALTER: MaxRowVersions (MySQL's row-version limit,
//     64 or 255), HasNoCopy (MariaDB's ALGORITHM=NOCOPY; MySQL copies);
//   - metadata-lock blockers: METADATA_LOCK_INFO or the processlist on
//     MariaDB, performance_schema.metadata_locks + threads on MySQL
//     (internal/mdl);
//   - binlog: MySQL's binary JSON rebuilt with its scalar types as an SQL
//     expression (internal/binlog json.go); MySQL's compressed transaction
//     payloads and PARTIAL_JSON refused in preflight (internal/check);
//   - authentication: MySQL's caching_sha2_password needs no setting (both
//     drivers fetch the RSA key without TLS).
package flavor

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Server identifies a server product and version.
type Server struct {
	MariaDB bool
	Major   int
	Minor   int
	Patch   int
	Version string // VERSION() as the server returned it
}

// Queryer is what the readers here need: *sql.DB, *sql.Conn and *sql.Tx
// all qualify (a *sql.Conn keeps a reader on one session, e.g. under LOCK
// TABLES).
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var versionRe = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// Parse interprets a VERSION() string, e.g. "10.11.19-MariaDB-0+deb12u1",
// "11.8.9-MariaDB-0+deb13u1-log" or "9.7.4-2" (MySQL, which does not name
// itself).
func Parse(version string) (Server, error) {
	v := strings.TrimPrefix(version, "5.5.5-") // MariaDB's old replication-compatible prefix
	m := versionRe.FindStringSubmatch(v)
	if m == nil {
		return Server{}, fmt.Errorf("flavor: cannot parse server version %q", version)
	}
	s := Server{Version: version, MariaDB: strings.Contains(strings.ToLower(version), "mariadb")}
	s.Major, _ = strconv.Atoi(m[1])
	s.Minor, _ = strconv.Atoi(m[2])
	s.Patch, _ = strconv.Atoi(m[3])
	return s, nil
}

// Detect reads SELECT VERSION() on q.
func Detect(ctx context.Context, q Queryer) (Server, error) {
	rows, err := q.QueryContext(ctx, "SELECT VERSION()")
	if err != nil {
		return Server{}, fmt.Errorf("flavor: SELECT VERSION(): %w", err)
	}
	defer rows.Close()
	var v string
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return Server{}, fmt.Errorf("flavor: SELECT VERSION(): %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return Server{}, fmt.Errorf("flavor: SELECT VERSION(): %w", err)
	}
	return Parse(v)
}

// String is e.g. "MariaDB 11.8.9" or "MySQL 9.7.4".
func (s Server) String() string {
	name := "MySQL"
	if s.MariaDB {
		name = "MariaDB"
	}
	return fmt.Sprintf("%s %d.%d.%d", name, s.Major, s.Minor, s.Patch)
}

// AtLeast reports whether the version is major.minor.patch or later.
func (s Server) AtLeast(major, minor, patch int) bool {
	if s.Major != major {
		return s.Major > major
	}
	if s.Minor != minor {
		return s.Minor > minor
	}
	return s.Patch >= patch
}

// MySQL reports a MySQL (not MariaDB) server; false for the zero Server
// (not detected).
func (s Server) MySQL() bool { return s.Major > 0 && !s.MariaDB }

// IsolationVar is the session variable holding the transaction isolation
// level: tx_isolation on MariaDB before 11.1 (transaction_isolation is an
// alias since 11.1), transaction_isolation on MySQL (tx_isolation was
// removed in 8.0).
func (s Server) IsolationVar() string {
	if s.MariaDB && !s.AtLeast(11, 1, 0) {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

// BinlogStatusQuery is the statement that shows the binlog's current file and
// position: SHOW BINARY LOG STATUS on MySQL 8.2+ (SHOW MASTER STATUS is gone
// in 8.4), SHOW BINLOG STATUS on MariaDB 10.5.2+, SHOW MASTER STATUS before.
func (s Server) BinlogStatusQuery() string {
	switch {
	case s.MySQL() && s.AtLeast(8, 2, 0):
		return "SHOW BINARY LOG STATUS"
	case s.MariaDB && s.AtLeast(10, 5, 2):
		return "SHOW BINLOG STATUS"
	}
	return "SHOW MASTER STATUS"
}

// ReplicaHostsQuery lists the replicas registered with a primary: SHOW
// REPLICAS on MySQL 8.0.22+ (SHOW SLAVE HOSTS is gone in 8.4), SHOW SLAVE
// HOSTS on MariaDB. Both have the columns Server_id, Host, Port.
func (s Server) ReplicaHostsQuery() string {
	if s.MySQL() && s.AtLeast(8, 0, 22) {
		return "SHOW REPLICAS"
	}
	return "SHOW SLAVE HOSTS"
}

// ReplicaStatusQuery shows a replica's replication threads: SHOW REPLICA
// STATUS on MySQL 8.0.22+ (columns Replica_IO_Running, ...,
// Seconds_Behind_Source), SHOW SLAVE STATUS on MariaDB (Slave_IO_Running,
// ..., Seconds_Behind_Master).
func (s Server) ReplicaStatusQuery() string {
	if s.MySQL() && s.AtLeast(8, 0, 22) {
		return "SHOW REPLICA STATUS"
	}
	return "SHOW SLAVE STATUS"
}

// GTIDExecutedQuery selects the set of transactions the server has logged:
// @@GLOBAL.gtid_executed on MySQL (a GTID set), @@GLOBAL.gtid_binlog_pos on
// MariaDB (one domain-server-sequence per domain).
func (s Server) GTIDExecutedQuery() string {
	if s.MySQL() {
		return "SELECT @@GLOBAL.gtid_executed"
	}
	return "SELECT @@GLOBAL.gtid_binlog_pos"
}

// GTIDExecuted returns what GTIDExecutedQuery selects, without the line
// breaks MySQL puts in a long set.
func GTIDExecuted(ctx context.Context, q Queryer, s Server) (string, error) {
	v, err := queryOne(ctx, q, s.GTIDExecutedQuery())
	return strings.NewReplacer("\n", "", " ", "").Replace(v.String), err
}

// WaitGTIDQuery waits (first argument the position GTIDExecutedQuery
// returned on the primary, second a timeout in seconds) until a replica has
// applied it; it returns 0 on success.
func (s Server) WaitGTIDQuery() string {
	if s.MySQL() {
		return "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)"
	}
	return "SELECT MASTER_GTID_WAIT(?, ?)"
}

// BinlogStatus is the binlog's current end as the status statement shows it.
type BinlogStatus struct {
	File     string
	Position uint32
	// GTIDSet is MySQL's Executed_Gtid_Set (empty on MariaDB, whose status
	// statement does not show GTIDs).
	GTIDSet string
}

// ReadBinlogStatus runs s.BinlogStatusQuery on q: the one reader of the
// binlog's current position.
func ReadBinlogStatus(ctx context.Context, q Queryer, s Server) (BinlogStatus, error) {
	query := s.BinlogStatusQuery()
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return BinlogStatus{}, fmt.Errorf("%s: %w", query, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return BinlogStatus{}, fmt.Errorf("%s: %w", query, err)
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return BinlogStatus{}, fmt.Errorf("%s: %w", query, err)
		}
		return BinlogStatus{}, fmt.Errorf("%s returned no row: binary logging is off (log_bin)", query)
	}
	vals := make([]sql.NullString, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return BinlogStatus{}, fmt.Errorf("%s: %w", query, err)
	}
	var st BinlogStatus
	var offset string
	for i, n := range names {
		switch strings.ToLower(n) {
		case "file":
			st.File = vals[i].String
		case "position":
			offset = vals[i].String
		case "executed_gtid_set":
			st.GTIDSet = strings.ReplaceAll(vals[i].String, "\n", "")
		}
	}
	off, err := strconv.ParseUint(offset, 10, 32)
	if err != nil || st.File == "" {
		return BinlogStatus{}, fmt.Errorf("%s: unexpected File %q, Position %q", query, st.File, offset)
	}
	st.Position = uint32(off)
	if err := rows.Err(); err != nil {
		return BinlogStatus{}, fmt.Errorf("%s: %w", query, err)
	}
	return st, nil
}
