package throttle

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/recast-osc/recast/internal/flavor"
)

// OwnHostname is the host name recast's binlog connections register with
// (binlog package): such entries of SHOW SLAVE HOSTS are recast runs, not
// replicas.
const OwnHostname = "recast"

// Discovered is a replica found on the primary.
type Discovered struct {
	Addr     string // host:port
	ServerID uint32
	Via      string // "SHOW SLAVE HOSTS" or "processlist"
}

// DiscoverReplicas lists the primary's replicas from SHOW SLAVE HOSTS
// (MariaDB shows every connected replica, with its report_host or else its
// address, and its report_port or else its port), leaving out recast's own
// binlog connections. Every MariaDB replica registers, so an empty list
// means no replicas. Only when SHOW SLAVE HOSTS cannot be read (privileges)
// does it fall back to the processlist's Binlog Dump threads, whose port is
// unknown: the primary's port is assumed (as gh-ost does), and the
// primary's own address is left out.
func DiscoverReplicas(ctx context.Context, db *sql.DB, primaryHost string, primaryPort int) ([]Discovered, error) {
	var out []Discovered
	var unnamed []slaveHost
	hosts, herr := slaveHosts(ctx, db)
	for _, h := range hosts {
		if strings.EqualFold(h.Host, OwnHostname) || h.Port == 0 {
			continue
		}
		if h.Host == "" {
			unnamed = append(unnamed, h)
			continue
		}
		out = append(out, Discovered{Addr: net.JoinHostPort(h.Host, strconv.Itoa(h.Port)), ServerID: h.ServerID, Via: "SHOW SLAVE HOSTS"})
	}
	if herr == nil {
		if len(unnamed) == 0 {
			return out, nil
		}
		named, err := nameReplicas(ctx, db, unnamed)
		return append(out, named...), err
	}
	ips, perr := dumpThreadHosts(ctx, db)
	if perr != nil {
		return nil, fmt.Errorf("find replicas: SHOW SLAVE HOSTS: %w; processlist: %w", herr, perr)
	}
	seen := map[string]bool{}
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, strconv.Itoa(primaryPort))
		if seen[addr] || sameAddr(ip, primaryHost) {
			continue
		}
		seen[addr] = true
		out = append(out, Discovered{Addr: addr, Via: "processlist"})
	}
	return out, nil
}

// nameReplicas finds the address of replicas registered without a host
// (MySQL's SHOW REPLICAS leaves Host empty unless the replica sets
// report_host; its Port is report_port, by default the replica's port):
// the address of the processlist's Binlog Dump threads, when they come from
// one address once recast's own is left out (or only from recast's own, a
// replica on recast's machine). Several candidate addresses cannot be told
// apart: the error asks for --replica.
func nameReplicas(ctx context.Context, db *sql.DB, unnamed []slaveHost) ([]Discovered, error) {
	ips, err := dumpThreadHosts(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("find replicas: SHOW REPLICAS lists %d replica(s) without report_host, and the processlist cannot be read: %w", len(unnamed), err)
	}
	pl, err := flavor.ProcesslistOf(ctx, db)
	if err != nil {
		return nil, err
	}
	var own string
	if err := db.QueryRowContext(ctx, "SELECT HOST FROM "+pl+" WHERE ID = CONNECTION_ID()").Scan(&own); err != nil {
		return nil, fmt.Errorf("find replicas: read recast's own address: %w", err)
	}
	if h, _, err := net.SplitHostPort(own); err == nil {
		own = h
	}
	candidates := map[string]bool{}
	for _, ip := range ips {
		if !sameAddr(ip, own) {
			candidates[ip] = true
		}
	}
	if len(candidates) == 0 && len(ips) > 0 {
		candidates[ips[0]] = true // the replicas run on recast's machine
	}
	if len(candidates) != 1 {
		return nil, fmt.Errorf("find replicas: SHOW REPLICAS lists %d replica(s) without report_host, and their binlog connections come from %d addresses", len(unnamed), len(candidates))
	}
	var ip string
	for c := range candidates {
		ip = c
	}
	var out []Discovered
	for _, h := range unnamed {
		out = append(out, Discovered{Addr: net.JoinHostPort(ip, strconv.Itoa(h.Port)), ServerID: h.ServerID, Via: "SHOW REPLICAS+processlist"})
	}
	return out, nil
}

type slaveHost struct {
	ServerID uint32
	Host     string
	Port     int
}

// slaveHosts lists the registered replicas: SHOW SLAVE HOSTS on MariaDB,
// SHOW REPLICAS on MySQL (flavor.ReplicaHostsQuery; same columns).
func slaveHosts(ctx context.Context, db *sql.DB) ([]slaveHost, error) {
	srv, err := flavor.Detect(ctx, db)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, srv.ReplicaHostsQuery())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []slaveHost
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var h slaveHost
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "server_id":
				n, _ := strconv.ParseUint(vals[i].String, 10, 32)
				h.ServerID = uint32(n)
			case "host":
				h.Host = vals[i].String
			case "port":
				h.Port, _ = strconv.Atoi(vals[i].String)
			}
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func dumpThreadHosts(ctx context.Context, db *sql.DB) ([]string, error) {
	pl, err := flavor.ProcesslistOf(ctx, db)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT HOST FROM "+pl+" WHERE COMMAND IN ('Binlog Dump', 'Binlog Dump GTID')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, err
		}
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if h != "" {
			out = append(out, h)
		}
	}
	return out, rows.Err()
}

func sameAddr(a, b string) bool {
	norm := func(h string) string {
		if h == "localhost" || h == "::1" {
			return "127.0.0.1"
		}
		return h
	}
	return norm(a) == norm(b)
}

// ParseAddr checks a --replica value: HOST:PORT (or HOST, port 3306).
func ParseAddr(s string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
			return "", 0, fmt.Errorf("--replica %q: want HOST:PORT", s)
		}
		h, p = s, "3306"
	}
	port, err = strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 || h == "" {
		return "", 0, fmt.Errorf("--replica %q: want HOST:PORT", s)
	}
	return h, port, nil
}
