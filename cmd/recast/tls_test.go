package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/recast-osc/recast/internal/testutil"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert    *x509.Certificate
	key     *rsa.PrivateKey
	pemPath string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".pem")
	writePEM(t, p, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, pemPath: p}
}

// issue writes a server certificate for 127.0.0.1 and localhost signed by
// ca, and its key; it returns their paths.
func (ca *testCA) issue(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1), Subject: pkix.Name{CommonName: "recast test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "server-cert.pem"), filepath.Join(dir, "server-key.pem")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	return certPath, keyPath
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLS migrates over TLS on a sandbox started with a throwaway CA's
// certificate. The account REQUIRE SSL: every connection recast opens (the
// pools, the binlog connection, the replica's lag connection) must be
// encrypted, or the server refuses it. A wrong CA fails verification, and
// --ssl-mode REQUIRED against a server without TLS fails with the reason.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers")
	}
	t.Parallel()
	dir := t.TempDir()
	ca, wrong := newTestCA(t, dir, "ca"), newTestCA(t, dir, "wrong-ca")
	cert, key := ca.issue(t, dir)
	sb := testutil.ExtraSandbox(t, 1, "--ssl-ca="+ca.pemPath, "--ssl-cert="+cert, "--ssl-key="+key)
	admin, err := sql.Open("mysql", sb.DSN(sb.Primary, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const user, password = "tls_user", "Tls-Pw-4rq"
	testutil.Exec(t, admin,
		"CREATE DATABASE tls_db",
		"CREATE TABLE tls_db.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(40) NOT NULL)",
		"INSERT INTO tls_db.t SELECT seq, CONCAT('v', seq) FROM tls_db.seq_1_to_3000",
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s' REQUIRE SSL", user, password),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'", user))
	sum := func() string {
		t.Helper()
		var s string
		if err := admin.QueryRow("SELECT CONCAT(COUNT(*), '/', SUM(CRC32(CONCAT(id, ':', a)))) FROM tls_db.t").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := sum()
	replica := sb.Replicas[0].Addr()
	base := []string{"migrate", "--conf", "", "--host", "127.0.0.1", "--port", strconv.Itoa(sb.Primary.Port), "--user", user, "--password", password,
		"--database", "tls_db", "--table", "t", "--progress-interval", "0"}

	// Without TLS the account is refused: the oracle that TLS is in use.
	code, out := runCLI(t, append(base, "--ssl-mode", "DISABLED", "--alter", "FORCE")...)
	if code != 1 || !strings.Contains(out, "Access denied") {
		t.Fatalf("DISABLED against REQUIRE SSL: exit %d\n%s", code, out)
	}
	for _, mode := range []string{"VERIFY_IDENTITY", "VERIFY_CA"} {
		code, out = runCLI(t, append(base, "--ssl-mode", mode, "--ssl-ca", ca.pemPath, "--alter", "ADD COLUMN c_"+strings.ToLower(mode)+" INT, ALGORITHM=COPY",
			"--execute", "--method", "copy", "--replica", replica, "--max-lag", "30s", "--drop-old-table")...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", mode, code, out)
		}
		if strings.Contains(out, password) {
			t.Errorf("the password appears in the output:\n%s", out)
		}
	}
	if got := sum(); got != before {
		t.Errorf("rows changed: %s, before %s", got, before)
	}
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM tls_db.t WHERE c_verify_identity IS NULL AND c_verify_ca IS NULL").Scan(&n); err != nil || n != 3000 {
		t.Errorf("after the migrations: %d rows, %v", n, err)
	}
	// The sessions were encrypted (the replica's too: the lag connection).
	var name, accepts string
	if err := admin.QueryRow("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'").Scan(&name, &accepts); err != nil || accepts == "0" {
		t.Errorf("Ssl_accepts %q, %v", accepts, err)
	}

	// A CA that did not sign the server's certificate.
	code, out = runCLI(t, append(base, "--ssl-ca", wrong.pemPath, "--alter", "FORCE")...)
	if code != 1 || !strings.Contains(out, "not signed by the CA of --ssl-ca") || !strings.Contains(out, "fix:") {
		t.Errorf("wrong CA: exit %d\n%s", code, out)
	}
	// REQUIRED on the shared sandbox: MariaDB 10.11 started without
	// certificates offers no TLS, and recast refuses; MariaDB 11.4+ and
	// MySQL make their own certificates, and REQUIRED connects (the run then
	// stops at a later check: mysql.user is no base table).
	main := testutil.Sandbox(t)
	mdb, err := sql.Open("mysql", main.DSN(main.Primary, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer mdb.Close()
	var haveSSL string
	if testutil.Server(t).MySQL() { // no have_ssl since 8.4: a loaded certificate says it
		var cert string
		if err := mdb.QueryRow("SHOW GLOBAL STATUS LIKE 'Current_tls_cert'").Scan(&name, &cert); err != nil {
			t.Fatal(err)
		}
		haveSSL = map[bool]string{true: "YES", false: "NO"}[cert != ""]
	} else if err := mdb.QueryRow("SELECT @@have_ssl").Scan(&haveSSL); err != nil {
		t.Fatal(err)
	}
	code, out = runCLI(t, "migrate", "--conf", "", "--host", main.Primary.Host, "--port", strconv.Itoa(main.Primary.Port), "--user", main.User, "--password", main.Password,
		"--database", "mysql", "--table", "user", "--alter", "FORCE", "--ssl-mode", "REQUIRED")
	if haveSSL != "YES" {
		if code != 1 || !strings.Contains(out, "the server does not offer TLS but --ssl-mode is REQUIRED") {
			t.Errorf("REQUIRED without TLS (have_ssl %s): exit %d\n%s", haveSSL, code, out)
		}
	} else if code != 1 || strings.Contains(out, "TLS") || strings.Contains(out, "connect to") {
		t.Errorf("REQUIRED with the server's own TLS: exit %d\n%s", code, out)
	}
}

// TestSocketConnection migrates through the sandbox's unix socket (the
// pools and the binlog connection).
func TestSocketConnection(t *testing.T) {
	t.Parallel()
	schema, db, before := addColumnFixture(t)
	sb := testutil.Sandbox(t)
	code, out := runCLI(t, "migrate", "--conf", "", "--socket", sb.Primary.Socket, "--port", "1", "--user", sb.User, "--password", sb.Password,
		"--database", schema, "--table", "t", "--alter", "ADD COLUMN s INT, ALGORITHM=COPY", "--method", "copy", "--execute", "--progress-interval", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	checkAddedColumn(t, db, schema, before)
}

// TestMigrateWithConfOnly: a migration whose connection comes only from a
// --conf file ([client] host, port, user, password; no connection flag).
func TestMigrateWithConfOnly(t *testing.T) { // not parallel: it clears $RECAST_PASSWORD
	schema, db, before := addColumnFixture(t)
	sb := testutil.Sandbox(t)
	conf := filepath.Join(t.TempDir(), "client.cnf")
	cnf := fmt.Sprintf("[mysqld]\nport=1\n\n[client]\nhost = %s\nport = %d\nuser = %s\npassword = \"%s\"\n", sb.Primary.Host, sb.Primary.Port, sb.User, sb.Password)
	if err := os.WriteFile(conf, []byte(cnf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RECAST_PASSWORD", "")
	code, out := runCLI(t, "migrate", "--conf", conf,
		"--database", schema, "--table", "t", "--alter", "ADD COLUMN s INT, ALGORITHM=COPY", "--method", "copy", "--execute", "--progress-interval", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	checkAddedColumn(t, db, schema, before)
}

// checkAddedColumn: the old table kept its rows unchanged, and the new one
// has the 2,000 rows with the added column s (NULL).
// addColumnFixture: table t (id, a) with 2,000 rows in a new schema, and
// its checksum, for checkAddedColumn after a migration adds a column.
func addColumnFixture(t *testing.T) (string, *sql.DB, string) {
	t.Helper()
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db,
		"CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(40) NOT NULL)",
		"INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_2000")
	return schema, db, testutil.TableChecksum(t, db, schema, "t", "id")
}

func checkAddedColumn(t *testing.T, db *sql.DB, schema, before string) {
	t.Helper()
	if got := testutil.TableChecksum(t, db, schema, "_t_old", "id"); got != before {
		t.Errorf("old table %s, want %s", got, before)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE s IS NULL").Scan(&n); err != nil || n != 2000 {
		t.Errorf("new table: %d rows with the new column s, %v; want 2000", n, err)
	}
}
