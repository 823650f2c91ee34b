package check

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	varName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	unquotedValue = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
)

// driverParams are DSN parameters of go-sql-driver/mysql (lower case): a
// --set-vars name among them would configure the driver instead of reaching
// the server as SET name=value.
var driverParams = map[string]bool{}

func init() {
	for _, p := range []string{"allowAllFiles", "allowCleartextPasswords", "allowFallbackToPlaintext",
		"allowNativePasswords", "allowOldPasswords", "charset", "checkConnLiveness", "clientFoundRows",
		"collation", "columnsWithAlias", "compress", "connectionAttributes", "interpolateParams", "loc",
		"maxAllowedPacket", "multiStatements", "parseTime", "readTimeout", "rejectReadOnly",
		"serverPubKey", "timeTruncate", "timeout", "tls", "writeTimeout"} {
		driverParams[strings.ToLower(p)] = true
	}
}

// ParseSetVars parses --set-vars: "name=value[,name=value...]". A value is
// a word or number (row, 10, 0.5) or a quoted string ('a b', "x,y"); it is
// returned as the SQL value to assign (strings single-quoted). Names are
// returned lower case. It checks the syntax only; the set-vars check and the
// server check the names.
func ParseSetVars(s string) (map[string]string, error) {
	out := map[string]string{}
	rest := strings.TrimSpace(s)
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return nil, fmt.Errorf("--set-vars: %q has no '=': write name=value[,name=value...]", rest)
		}
		name := strings.ToLower(strings.TrimSpace(rest[:eq]))
		if !varName.MatchString(name) {
			return nil, fmt.Errorf("--set-vars: %q is not a variable name", strings.TrimSpace(rest[:eq]))
		}
		if driverParams[name] {
			return nil, fmt.Errorf("--set-vars: %s is not a server variable (the MySQL driver would take it as one of its own options)", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--set-vars: %s is given twice", name)
		}
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var val string
		if rest != "" && (rest[0] == '\'' || rest[0] == '"') {
			v, n, err := unquote(rest)
			if err != nil {
				return nil, fmt.Errorf("--set-vars: value of %s: %w", name, err)
			}
			val, rest = sqlString(v), strings.TrimLeft(rest[n:], " \t")
			if rest != "" && rest[0] != ',' {
				return nil, fmt.Errorf("--set-vars: unexpected %q after the value of %s", rest, name)
			}
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			val, rest = strings.TrimSpace(rest[:end]), rest[end:]
			if val == "" {
				return nil, fmt.Errorf("--set-vars: %s has no value", name)
			}
			if !unquotedValue.MatchString(val) {
				return nil, fmt.Errorf("--set-vars: value %q of %s: quote it ('...')", val, name)
			}
		}
		out[name] = val
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ","))
	}
	return out, nil
}

// unquote reads a '...' or "..." string at the start of s (backslash escapes
// and doubled quotes) and returns its content and length in s.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == q && i+1 < len(s) && s[i+1] == q:
			i++
			b.WriteByte(q)
		case c == q:
			return b.String(), i + 1, nil
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string %s", s)
}

// sqlString quotes s as a single-quoted SQL string.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
