package dbconn

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&mysql.MySQLError{Number: 1045, Message: "Access denied for user 'u'@'127.0.0.1' (using password: YES)"},
			[]string{"access denied: wrong user or password", "; fix: check --user and --password"}},
		{&mysql.MySQLError{Number: 1044, Message: "Access denied for user 'u'@'10.0.0.%' to database 'shop'"},
			[]string{"access denied to the database", "; fix: GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, CREATE TEMPORARY TABLES ON `shop`.* TO 'u'@'10.0.0.%'"}},
		{&mysql.MySQLError{Number: 1049, Message: "Unknown database 'nosuch'"}, []string{"the database does not exist", "nosuch", "; fix: check --database"}},
		{&mysql.MySQLError{Number: 1130, Message: "Host '10.1.1.1' is not allowed to connect"}, []string{"may not connect from this host"}},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.invalid", IsNotFound: true}},
			[]string{`unknown host "db.invalid": the name does not resolve`, "; fix: check --host"}},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
			[]string{"server unreachable: connection refused", "; fix: check --host and --port"}},
		{fmt.Errorf("dial: %w", os.ErrDeadlineExceeded), []string{"no answer in time"}},
	} {
		got := Describe(tc.err).Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Describe(%v) = %q, lacks %q", tc.err, got, w)
			}
		}
	}
}
