package dbconn

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseMyCnf(t *testing.T) {
	const file = `# a comment
[mysql]
user = not-this-one
[client]
user=dba
password = "p#ss 'w\"d"
host = db1.example ; not a comment in a value? it is the value
port=3307
socket = /run/mysqld/mysqld.sock # trailing comment
ssl_ca = '/etc/ssl/ca.pem'
ssl-cert=/c.pem
ssl-key=/k.pem
ssl-mode = VERIFY_IDENTITY
default-character-set = utf8mb4
no-auto-rehash
[mysqldump]
password = other
`
	c, err := ParseMyCnf(strings.NewReader(file), "f")
	if err != nil {
		t.Fatal(err)
	}
	want := MyCnf{User: "dba", Password: `p#ss 'w"d`, Host: "db1.example ; not a comment in a value? it is the value", Port: 3307,
		Socket: "/run/mysqld/mysqld.sock", SSLCA: "/etc/ssl/ca.pem", SSLCert: "/c.pem", SSLKey: "/k.pem", SSLMode: "VERIFY_IDENTITY"}
	if len(c.Set) != 9 {
		t.Errorf("set %v, want the 9 options", c.Set)
	}
	c.Set = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	for _, bad := range []struct{ file, want string }{
		{"[client]\n!include /etc/other.cnf\n", "does not follow !include"},
		{"!includedir /etc/mysql/conf.d/\n", "!includedir"},
		{"[client]\nport = 99999\n", "not a port number"},
		{"[client]\npassword = 'open\n", "unterminated quote"},
		{"[client]\npassword\n", "has no value"},
		{"[client\n", "lacks ]"},
	} {
		if _, err := ParseMyCnf(strings.NewReader(bad.file), "f"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.file, err, bad.want)
		}
	}
}

func TestReadMyCnfOptional(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.cnf")
	if c, err := ReadMyCnf(missing, true); err != nil || len(c.Set) != 0 {
		t.Errorf("optional missing file: %+v, %v", c, err)
	}
	if _, err := ReadMyCnf(missing, false); err == nil || !strings.Contains(err.Error(), "--conf") {
		t.Errorf("explicit missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(p, []byte("[client]\nuser=u\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ReadMyCnf(p, false)
	if err != nil || c.User != "u" || !c.Set["user"] || c.Path != p {
		t.Errorf("%+v, %v", c, err)
	}
}

func TestTLSModes(t *testing.T) {
	for _, c := range []struct {
		tls  TLS
		mode string
		err  string
	}{
		{TLS{}, SSLPreferred, ""},
		{TLS{CA: "/nonexistent/ca.pem"}, SSLVerifyCA, "--ssl-ca"},
		{TLS{Mode: "required"}, SSLRequired, ""},
		{TLS{Mode: "verify_identity"}, SSLVerifyIdentity, "needs --ssl-ca"},
		{TLS{Mode: "bogus"}, "BOGUS", "want one of DISABLED"},
		{TLS{Mode: "REQUIRED", Cert: "/c.pem"}, SSLRequired, "go together"},
		{TLS{Mode: "DISABLED", CA: "/nonexistent/ca.pem"}, SSLDisabled, ""},
	} {
		if got := c.tls.EffectiveMode(); got != c.mode {
			t.Errorf("%+v: mode %s, want %s", c.tls, got, c.mode)
		}
		err := c.tls.Validate()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.tls, err, c.err)
		}
	}
}
