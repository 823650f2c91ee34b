package dbconn

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// MyCnf is what recast takes from the [client] section of a mysql option
// file (my.cnf): the values that were present are in Set.
type MyCnf struct {
	Path                   string
	User, Password, Host   string
	Port                   int
	Socket                 string
	SSLCA, SSLCert, SSLKey string
	SSLMode                string
	Set                    map[string]bool // option names present (dashes, lower case)
}

// myCnfOptions are the [client] options recast reads; others (for the
// mysql client: default-character-set, ...) are ignored.
var myCnfOptions = map[string]bool{
	"user": true, "password": true, "host": true, "port": true, "socket": true,
	"ssl-ca": true, "ssl-cert": true, "ssl-key": true, "ssl-mode": true,
}

// ReadMyCnf reads path's [client] section. With optional, a missing file
// is an empty MyCnf (~/.my.cnf by default), not an error.
func ReadMyCnf(path string, optional bool) (MyCnf, error) {
	f, err := os.Open(path)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return MyCnf{Set: map[string]bool{}}, nil
		}
		return MyCnf{}, fmt.Errorf("--conf: %w", err)
	}
	defer f.Close()
	c, err := ParseMyCnf(f, path)
	if err != nil {
		return MyCnf{}, err
	}
	c.Path = path
	return c, nil
}

// ParseMyCnf parses an option file (the mysql client's format: [section],
// name=value or name, # and ; comments, values optionally quoted, - and _
// alike in names) and keeps the [client] section. !include and
// !includedir are refused: recast does not follow them.
func ParseMyCnf(r io.Reader, name string) (MyCnf, error) {
	c := MyCnf{Set: map[string]bool{}}
	sc := bufio.NewScanner(r)
	section, n := "", 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "!include") {
			return c, fmt.Errorf("%s:%d: %s: recast does not follow !include/!includedir; fix: put the [client] options in the file given to --conf", name, n, strings.Fields(line)[0])
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return c, fmt.Errorf("%s:%d: section header %q lacks ]", name, n, line)
			}
			section = strings.ToLower(strings.TrimSpace(line[1:end]))
			continue
		}
		if section != "client" {
			continue
		}
		key, val, hasVal := strings.Cut(line, "=")
		key = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(key)), "_", "-")
		if !myCnfOptions[key] {
			continue
		}
		if !hasVal {
			return c, fmt.Errorf("%s:%d: option %s has no value", name, n, key)
		}
		v, err := myCnfValue(strings.TrimSpace(val))
		if err != nil {
			return c, fmt.Errorf("%s:%d: %s: %w", name, n, key, err)
		}
		switch key {
		case "user":
			c.User = v
		case "password":
			c.Password = v
		case "host":
			c.Host = v
		case "port":
			p, err := strconv.Atoi(v)
			if err != nil || p <= 0 || p > 65535 {
				return c, fmt.Errorf("%s:%d: port %q is not a port number", name, n, v)
			}
			c.Port = p
		case "socket":
			c.Socket = v
		case "ssl-ca":
			c.SSLCA = v
		case "ssl-cert":
			c.SSLCert = v
		case "ssl-key":
			c.SSLKey = v
		case "ssl-mode":
			c.SSLMode = v
		}
		c.Set[key] = true
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// myCnfValue unquotes a value: '...' or "..." (backslash escapes \n \t \\
// \' \" inside double or single quotes, as the mysql client does), or a bare
// value whose trailing " # comment" is dropped.
func myCnfValue(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if q := v[0]; q == '\'' || q == '"' {
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			ch := v[i]
			switch {
			case ch == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'b':
					b.WriteByte('\b')
				case 'r':
					b.WriteByte('\r')
				case 's':
					b.WriteByte(' ')
				default:
					b.WriteByte(v[i])
				}
			case ch == q:
				rest := strings.TrimSpace(v[i+1:])
				if rest != "" && rest[0] != '#' {
					return "", fmt.Errorf("unexpected %q after the quoted value", rest)
				}
				return b.String(), nil
			default:
				b.WriteByte(ch)
			}
		}
		return "", errors.New("unterminated quote")
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	if i := strings.Index(v, "\t#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}
