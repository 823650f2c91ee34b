package throttle

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Limit is one status-variable threshold: the variable "exceeds" it when its
// value is greater than Max.
type Limit struct {
	Var string // as written by the user, e.g. Threads_running
	Max float64
}

// Thresholds are the limits of --max-load or --critical-load.
type Thresholds []Limit

// ParseThresholds parses "Threads_running=25,Threads_connected=500". The
// empty string is no thresholds.
func ParseThresholds(s string) (Thresholds, error) {
	var out Thresholds
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("threshold %q: want VARIABLE=NUMBER, e.g. Threads_running=25", part)
		}
		for _, r := range name {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return nil, fmt.Errorf("threshold %q: %q is not a status variable name", part, name)
			}
		}
		n, err := strconv.ParseFloat(val, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("threshold %q: %q is not a non-negative number", part, val)
		}
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("threshold %q: %s given twice", part, name)
		}
		seen[strings.ToLower(name)] = true
		out = append(out, Limit{Var: name, Max: n})
	}
	return out, nil
}

// String renders the thresholds as ParseThresholds reads them.
func (t Thresholds) String() string {
	parts := make([]string, len(t))
	for i, l := range t {
		parts[i] = l.Var + "=" + fmtNum(l.Max)
	}
	return strings.Join(parts, ",")
}

// Names are the variable names, lower-cased.
func (t Thresholds) Names() []string {
	out := make([]string, len(t))
	for i, l := range t {
		out[i] = strings.ToLower(l.Var)
	}
	return out
}

// Exceeded describes the limits that values (keyed by lower-cased name)
// exceed, "" if none. A variable missing from values is reported too: the
// server does not have it, so it cannot be checked.
func (t Thresholds) Exceeded(values map[string]float64) string {
	var out []string
	for _, l := range t {
		v, ok := values[strings.ToLower(l.Var)]
		switch {
		case !ok:
			out = append(out, l.Var+" unknown to the server")
		case v > l.Max:
			out = append(out, fmt.Sprintf("%s=%s > %s", l.Var, fmtNum(v), fmtNum(l.Max)))
		}
	}
	return strings.Join(out, ", ")
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// LoadReader reads global status variables (names lower-cased) and returns
// their numeric values keyed by lower-cased name.
type LoadReader func(ctx context.Context, names []string) (map[string]float64, error)

// StatusReader reads SHOW GLOBAL STATUS on db.
func StatusReader(db *sql.DB) LoadReader {
	return func(ctx context.Context, names []string) (map[string]float64, error) {
		if len(names) == 0 {
			return map[string]float64{}, nil
		}
		q := "SHOW GLOBAL STATUS WHERE Variable_name IN (" + strings.TrimSuffix(strings.Repeat("?,", len(names)), ",") + ")"
		args := make([]any, len(names))
		for i, n := range names {
			args[i] = n
		}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[string]float64{}
		for rows.Next() {
			var name, val string
			if err := rows.Scan(&name, &val); err != nil {
				return nil, err
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				out[strings.ToLower(name)] = f
			}
		}
		return out, rows.Err()
	}
}
