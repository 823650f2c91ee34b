package flavor

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// GTID differences: MySQL names transactions by GTID only with
// gtid_mode=ON and keeps a GTID set (@@gtid_executed, @@gtid_purged);
// MariaDB always logs GTIDs (domain-server-sequence) and a replica starts
// from a GTID list, one GTID per domain.

// queryOne runs query on q and returns the first column of its first row.
func queryOne(ctx context.Context, q Queryer, query string, args ...any) (sql.NullString, error) {
	var v sql.NullString
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return v, fmt.Errorf("%s: %w", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return v, fmt.Errorf("%s: %w", query, err)
	}
	if rows.Next() {
		dest := make([]any, len(cols))
		dest[0] = &v
		for i := 1; i < len(dest); i++ {
			dest[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(dest...); err != nil {
			return v, fmt.Errorf("%s: %w", query, err)
		}
	}
	return v, rows.Err()
}

// Identity names the server whose binlog files a file+offset position
// refers to: MySQL's server_uuid, MariaDB's server_id (a MariaDB replica
// promoted in its place has another server_id, and other files).
func Identity(ctx context.Context, q Queryer, s Server) (string, error) {
	if s.MySQL() {
		v, err := queryOne(ctx, q, "SELECT @@GLOBAL.server_uuid")
		return "mysql " + v.String, err
	}
	v, err := queryOne(ctx, q, "SELECT @@GLOBAL.server_id")
	return "mariadb server_id " + v.String, err
}

// GTIDEnabled reports whether positions can be named by GTID: MySQL with
// gtid_mode=ON; MariaDB always.
func GTIDEnabled(ctx context.Context, q Queryer, s Server) (bool, error) {
	if !s.MySQL() {
		return true, nil
	}
	v, err := queryOne(ctx, q, "SELECT @@GLOBAL.gtid_mode")
	return strings.EqualFold(v.String, "ON"), err
}

// GTIDAvailable reports whether a stream can start from gtids (a MySQL
// GTID set or a MariaDB GTID list) on this server: the server logged them
// (MySQL: they are in gtid_executed; MariaDB: the binlog state has each
// domain at or past them) and still has every later transaction in its
// binlog (MySQL: gtid_purged is within them; MariaDB: the oldest binlog
// file starts at or before each of them). why says what is missing.
func GTIDAvailable(ctx context.Context, q Queryer, s Server, gtids string) (ok bool, why string, err error) {
	if s.MySQL() {
		v, err := queryOne(ctx, q, "SELECT CONCAT(GTID_SUBSET(?, @@GLOBAL.gtid_executed), GTID_SUBSET(@@GLOBAL.gtid_purged, ?))", gtids, gtids)
		if err != nil {
			return false, "", err
		}
		switch v.String {
		case "11":
			return true, "", nil
		case "01", "00":
			return false, "the server has not executed all of them (another server, or behind)", nil
		default:
			return false, "transactions after them were purged from the binlog (gtid_purged)", nil
		}
	}
	want, err := parseMariaList(gtids)
	if err != nil {
		return false, "", err
	}
	state, err := queryOne(ctx, q, "SELECT @@GLOBAL.gtid_binlog_state")
	if err != nil {
		return false, "", err
	}
	have, err := parseMariaList(state.String)
	if err != nil {
		return false, "", err
	}
	for d, g := range want {
		found := false
		for _, h := range have[d] {
			if h.server == g[0].server && h.seq >= g[0].seq {
				found = true
			}
		}
		if !found {
			return false, fmt.Sprintf("the binlog state (%s) does not contain GTID %d-%d-%d", state.String, d, g[0].server, g[0].seq), nil
		}
	}
	first, err := firstBinlogGTIDList(ctx, q)
	if err != nil {
		return false, "", err
	}
	for d, g := range want {
		for _, h := range first[d] {
			if h.seq > g[0].seq {
				return false, fmt.Sprintf("the oldest binlog file starts after GTID %d-%d-%d (purged)", d, g[0].server, g[0].seq), nil
			}
		}
	}
	return true, "", nil
}

type mariaGTID struct {
	server uint32
	seq    uint64
}

// parseMariaList parses "d-s-n,..." into GTIDs by domain.
func parseMariaList(s string) (map[uint32][]mariaGTID, error) {
	out := map[uint32][]mariaGTID{}
	for _, part := range strings.Split(strings.Trim(strings.TrimSpace(s), "[]"), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("flavor: MariaDB GTID %q: want domain-server-sequence", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		n, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("flavor: MariaDB GTID %q: want domain-server-sequence", part)
		}
		out[uint32(d)] = append(out[uint32(d)], mariaGTID{uint32(sv), n})
	}
	return out, nil
}

// firstBinlogGTIDList reads the Gtid_list event at the head of the oldest
// binlog file (the GTIDs logged before it).
func firstBinlogGTIDList(ctx context.Context, q Queryer) (map[uint32][]mariaGTID, error) {
	first, err := queryOne(ctx, q, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	if !first.Valid {
		return nil, fmt.Errorf("SHOW BINARY LOGS returned no file")
	}
	rows, err := q.QueryContext(ctx, "SHOW BINLOG EVENTS IN '"+strings.ReplaceAll(first.String, "'", "''")+"' LIMIT 5")
	if err != nil {
		return nil, fmt.Errorf("SHOW BINLOG EVENTS IN %s: %w", first.String, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var typ, info string
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "event_type":
				typ = vals[i].String
			case "info":
				info = vals[i].String
			}
		}
		if strings.EqualFold(typ, "Gtid_list") {
			return parseMariaList(info)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no Gtid_list event at the head of %s", first.String)
}
