package etcdtest

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// ClientCommonName is the common name of the client certificate NewCerts makes: etcd takes it
// as the user name when authentication is on.
const ClientCommonName = "haproxy-sidecar"

// Certs is a test CA with a server certificate for 127.0.0.1/localhost and a client
// certificate, as PEM files (what --etcd-cacert, --etcd-cert and --etcd-key point at).
type Certs struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string

	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewCerts generates the CA and certificates into dir (created if missing).
func NewCerts(t testing.TB, dir string) *Certs {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("create %s: %v", dir, err)
	}
	c := &Certs{dir: dir}
	key := testcert.Key(t)
	tmpl := &x509.Certificate{
		SerialNumber:          testcert.Serial(t),
		Subject:               pkix.Name{CommonName: "etcdtest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create the CA certificate: %v", err)
	}
	c.caCert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse the CA certificate: %v", err)
	}
	c.caKey = key
	c.CA = writePEM(t, dir, "ca.crt", "CERTIFICATE", der)
	c.ServerCert, c.ServerKey = c.issue(t, "server", "etcd", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	c.ClientCert, c.ClientKey = c.NewClientCert(t, ClientCommonName)
	return c
}

// NewClientCert issues another client certificate with the common name cn and returns the
// paths of the certificate and key files.
func (c *Certs) NewClientCert(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return c.issue(t, "client-"+cn, cn, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (c *Certs) issue(t testing.TB, file, cn string, usage []x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key := testcert.Key(t)
	tmpl := &x509.Certificate{
		SerialNumber: testcert.Serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.caCert, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatalf("issue the %s certificate: %v", file, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal the %s key: %v", file, err)
	}
	return writePEM(t, c.dir, file+".crt", "CERTIFICATE", der), writePEM(t, c.dir, file+".key", "PRIVATE KEY", keyDER)
}

// ClientTLS returns a TLS configuration trusting the CA and presenting the given certificate.
func (c *Certs) ClientTLS(t testing.TB, certFile, keyFile string) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatalf("load the client certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.caCert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}
