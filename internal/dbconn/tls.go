package dbconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// TLS modes, as the mysql client names them (--ssl-mode).
const (
	SSLDisabled       = "DISABLED"
	SSLPreferred      = "PREFERRED"
	SSLRequired       = "REQUIRED"
	SSLVerifyCA       = "VERIFY_CA"
	SSLVerifyIdentity = "VERIFY_IDENTITY"
)

// SSLModes lists the modes --ssl-mode accepts.
var SSLModes = []string{SSLDisabled, SSLPreferred, SSLRequired, SSLVerifyCA, SSLVerifyIdentity}

// TLS is how recast's connections are encrypted (every connection: the
// pools, the binlog connection and the replica connections).
type TLS struct {
	// Mode is one of SSLModes; empty: VERIFY_CA when CA is set, else
	// PREFERRED (the mysql client's defaults).
	Mode string
	// CA is a PEM file of the certificate authorities the server's
	// certificate must chain to (VERIFY_CA, VERIFY_IDENTITY).
	CA string
	// Cert and Key are a PEM client certificate and its key (optional).
	Cert, Key string
}

// EffectiveMode is Mode with its default applied, upper case.
func (t TLS) EffectiveMode() string {
	m := strings.ToUpper(strings.TrimSpace(t.Mode))
	if m == "" {
		if t.CA != "" {
			return SSLVerifyCA
		}
		return SSLPreferred
	}
	return m
}

// Validate checks the mode and that the files load.
func (t TLS) Validate() error {
	_, err := t.config("")
	return err
}

// config builds the crypto/tls configuration for a connection to host
// (the name VERIFY_IDENTITY checks); nil when the mode asks for no TLS or
// leaves it to the server (DISABLED, PREFERRED).
func (t TLS) config(host string) (*tls.Config, error) {
	mode := t.EffectiveMode()
	switch mode {
	case SSLDisabled, SSLPreferred, SSLRequired, SSLVerifyCA, SSLVerifyIdentity:
	default:
		return nil, fmt.Errorf("--ssl-mode %q: want one of %s", t.Mode, strings.Join(SSLModes, ", "))
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, errors.New("--ssl-cert and --ssl-key go together: give both or neither")
	}
	needCA := mode == SSLVerifyCA || mode == SSLVerifyIdentity
	if needCA && t.CA == "" {
		return nil, fmt.Errorf("--ssl-mode %s needs --ssl-ca (the CA that signed the server's certificate)", mode)
	}
	if mode == SSLDisabled {
		return nil, nil // certificates (e.g. from a --conf file) are ignored, as by the mysql client
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		kp, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("--ssl-cert/--ssl-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	var roots *x509.CertPool
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("--ssl-ca: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ssl-ca %s: no PEM certificate in the file", t.CA)
		}
	}
	switch mode {
	case SSLPreferred, SSLRequired:
		// Encrypted, not verified (as the mysql client does in these modes).
		cfg.InsecureSkipVerify = true
	case SSLVerifyCA:
		// The chain must lead to the CA; the name is not checked.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	case SSLVerifyIdentity:
		cfg.RootCAs = roots
		cfg.ServerName = host
	}
	return cfg, nil
}

var (
	tlsMu    sync.Mutex
	tlsNames = map[string]string{} // TLS settings + host -> registered name
)

// driverTLS is the value of go-sql-driver's tls parameter for a connection
// to host: "" (no TLS), "preferred", or the name of a configuration
// registered with mysql.RegisterTLSConfig (one per settings and host).
func (t TLS) driverTLS(host string) (string, error) {
	switch t.EffectiveMode() {
	case SSLDisabled:
		return "", nil
	case SSLPreferred:
		if t.Cert == "" && t.CA == "" {
			return "preferred", nil
		}
	}
	key := strings.Join([]string{t.EffectiveMode(), t.CA, t.Cert, t.Key, host}, "\x00")
	tlsMu.Lock()
	defer tlsMu.Unlock()
	if name, ok := tlsNames[key]; ok {
		return name, nil
	}
	cfg, err := t.config(host)
	if err != nil {
		return "", err
	}
	name := "recast-" + strconv.Itoa(len(tlsNames)+1)
	if err := mysql.RegisterTLSConfig(name, cfg); err != nil {
		return "", fmt.Errorf("register the TLS configuration: %w", err)
	}
	tlsNames[key] = name
	return name, nil
}

// BinlogTLS is the TLS configuration of the binlog connection (go-mysql):
// nil without TLS. Under PREFERRED it encrypts when the probed connection
// was encrypted (Probe), as the pools do.
func (c Config) BinlogTLS() (*tls.Config, error) {
	mode := c.TLS.EffectiveMode()
	if mode == SSLPreferred && !c.TLSActive {
		return nil, nil
	}
	return c.TLS.config(c.tlsHost())
}

// tlsHost is the name VERIFY_IDENTITY checks: the host, or localhost for a
// unix socket.
func (c Config) tlsHost() string {
	if c.Socket != "" {
		return "localhost"
	}
	return c.Host
}

// describeTLS names the cause and the fix of a TLS failure; nil when err
// is not one.
func (c Config) describeTLS(err error) error {
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	switch {
	case errors.Is(err, mysql.ErrNoTLS):
		return fmt.Errorf("the server does not offer TLS but --ssl-mode is %s (%w); fix: enable TLS on the server (ssl_cert, ssl_key), or use --ssl-mode=PREFERRED or DISABLED", c.TLS.EffectiveMode(), err)
	case errors.As(err, &unknownAuth):
		return fmt.Errorf("TLS: the server's certificate is not signed by the CA of --ssl-ca %s (%w); fix: give the CA that signed the server's certificate", c.TLS.CA, err)
	case errors.As(err, &hostErr):
		return fmt.Errorf("TLS: the server's certificate is not valid for %q (%w); fix: connect by a name the certificate lists, or use --ssl-mode=VERIFY_CA", c.tlsHost(), err)
	case errors.As(err, &certErr):
		return fmt.Errorf("TLS: the server's certificate is invalid (%w); fix: renew it, or check --ssl-ca", err)
	}
	return nil
}

// describe is Describe, with TLS failures named first.
func (c Config) describe(err error) error {
	if d := c.describeTLS(err); d != nil {
		return d
	}
	return Describe(err)
}
