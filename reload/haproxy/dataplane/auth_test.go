package dataplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/spiffetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// noSecrets fails the test if any secret shows in the reloader's logs, in err or in the
// metric labels it reported.
func noSecrets(t *testing.T, h *harness, err error, secrets ...string) {
	t.Helper()
	texts := map[string]string{"logs": h.logs.String(), "results": strings.Join(h.res.all(), "\n")}
	if err != nil {
		texts["error"] = err.Error()
	}
	for what, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("the %s contain a secret %q:\n%s", what, s, text)
			}
		}
	}
}

func TestBasicAuth(t *testing.T) {
	haproxytest.Binary(t)
	s := startHost(t, peerA, dataplanetest.Options{Username: user, Password: pass})
	port := peerPort(t)
	const wrong = "wr0ng-Secret-42"

	t.Run("a wrong password is a 401 error, reported without the password", func(t *testing.T) {
		h := newHarness(t, Config{URLs: []string{s.URL}, Username: user, Password: wrong})
		h.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
		err := h.r.Reload(t.Context())
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "401") {
			t.Fatalf("Reload with a wrong password = %v, want a 401 error", err)
		}
		if h.res.count(s.URL, ResultError) != 1 {
			t.Fatalf("results %v", h.res.all())
		}
		noSecrets(t, h, err, wrong, pass)
	})

	t.Run("credentials in the URL are used and never shown", func(t *testing.T) {
		u := strings.Replace(s.URL, "://", "://"+user+":"+pass+"@", 1)
		h := newHarness(t, Config{URLs: []string{u}})
		if got := h.r.Endpoints(); len(got) != 1 || got[0] != s.URL {
			t.Fatalf("Endpoints = %v, want %s", got, s.URL)
		}
		h.live.set(t, httpConfig(port, "127.0.0.1:2"), nil)
		err := h.r.Reload(t.Context())
		if err != nil {
			t.Fatalf("Reload: %v", err)
		}
		noSecrets(t, h, err, pass)
		var flag URLs
		flag.Set(u + "," + s.URL)
		if strings.Contains(flag.String(), pass) || len(flag) != 2 {
			t.Fatalf("URLs flag %q (%d)", flag.String(), len(flag))
		}
	})

	t.Run("a password file is re-read", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "password")
		if err := os.WriteFile(file, []byte(wrong+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, Config{URLs: []string{s.URL}, Username: user, PasswordFile: file})
		h.live.set(t, httpConfig(port, "127.0.0.1:3"), nil)
		err := h.r.Reload(t.Context())
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("Reload with the wrong password in the file = %v", err)
		}
		noSecrets(t, h, err, wrong)
		if err := os.WriteFile(file, []byte(pass+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload after the password file was fixed: %v", err)
		}
	})
}

func TestBearerToken(t *testing.T) {
	haproxytest.Binary(t)
	const token = "tok-Secret-123"
	s := startHost(t, peerA, dataplanetest.Options{Token: token})
	port := peerPort(t)
	h := newHarness(t, Config{URLs: []string{s.URL}, Token: token})
	h.live.set(t, httpConfig(port, haproxytest.Backend(t, "token")), nil)
	if err := h.r.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	mustServe(t, peerA+":"+strconv.Itoa(port), "token")
	bad := newHarness(t, Config{URLs: []string{s.URL}, Token: "tok-Wrong-456"})
	bad.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
	err := bad.r.Reload(t.Context())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Reload with a wrong token = %v", err)
	}
	noSecrets(t, h, nil, token)
	noSecrets(t, bad, err, "tok-Wrong-456", token)
}

// testCA issues certificates for the static mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate (for 127.0.0.1 when server) as a tls.Certificate and PEMs.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

func writeFiles(t *testing.T, files map[string][]byte) {
	t.Helper()
	for path, data := range files {
		// Written beside and renamed, as a Secret volume update swaps files.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
}

func lastClientCN(s *dataplanetest.Server) string {
	certs := s.ClientCerts()
	if len(certs) == 0 {
		return ""
	}
	return certs[len(certs)-1].Subject.CommonName
}

// Static mutual TLS from files; a rotated client certificate and a rotated server CA are
// picked up from disk without a restart.
func TestStaticMTLS(t *testing.T) {
	haproxytest.Binary(t)
	serverCA, clientCA := newTestCA(t, "server CA"), newTestCA(t, "client CA")
	serverCert, _, _ := serverCA.issue(t, "dataplane", true)
	var current atomic.Pointer[tls.Certificate]
	current.Store(&serverCert)
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.cert)
	s := startHost(t, peerA, dataplanetest.Options{Username: user, Password: pass, TLS: &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      clientPool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil },
	}})
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("URL %s", s.URL)
	}
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_, c1, k1 := clientCA.issue(t, "client one", false)
	writeFiles(t, map[string][]byte{caFile: serverCA.pem, certFile: c1, keyFile: k1})
	h := newHarness(t, Config{URLs: []string{s.URL}, Username: user, Password: pass, CACert: caFile, Cert: certFile, Key: keyFile})
	port := peerPort(t)
	addr := peerA + ":" + strconv.Itoa(port)
	n := 0
	push := func(t *testing.T) error {
		t.Helper()
		n++
		h.live.set(t, httpConfig(port, haproxytest.Backend(t, fmt.Sprintf("push %d", n))), nil)
		return h.r.Reload(t.Context())
	}

	t.Run("mutual TLS works", func(t *testing.T) {
		if err := push(t); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addr, "push 1")
		if cn := lastClientCN(s); cn != "client one" {
			t.Fatalf("the server saw client %q", cn)
		}
	})
	t.Run("a rotated client certificate is used for new connections", func(t *testing.T) {
		_, c2, k2 := clientCA.issue(t, "client two", false)
		writeFiles(t, map[string][]byte{certFile: c2, keyFile: k2})
		if err := push(t); err != nil {
			t.Fatalf("Reload after the client certificate rotation: %v", err)
		}
		if cn := lastClientCN(s); cn != "client two" {
			t.Fatalf("after the rotation the server saw client %q", cn)
		}
		noSecrets(t, h, nil, string(k2), pass)
	})
	t.Run("a rotated server CA is trusted once its file changes", func(t *testing.T) {
		serverCA2 := newTestCA(t, "server CA 2")
		newCert, _, _ := serverCA2.issue(t, "dataplane", true)
		current.Store(&newCert)
		writeFiles(t, map[string][]byte{caFile: append(append([]byte{}, serverCA.pem...), serverCA2.pem...)})
		if err := push(t); err != nil {
			t.Fatalf("Reload after the CA rotation: %v", err)
		}
		// A client that still trusts only the old CA refuses the server.
		oldCA := filepath.Join(t.TempDir(), "old.crt")
		writeFiles(t, map[string][]byte{oldCA: serverCA.pem})
		stale := newHarness(t, Config{URLs: []string{s.URL}, Username: user, Password: pass, CACert: oldCA, Cert: certFile, Key: keyFile})
		stale.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
		err := stale.r.Reload(t.Context())
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Reload trusting only the old CA = %v, want a certificate error", err)
		}
	})
	t.Run("no client certificate: refused", func(t *testing.T) {
		bare := newHarness(t, Config{URLs: []string{s.URL}, Username: user, Password: pass, CACert: caFile})
		bare.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
		if err := bare.r.Reload(t.Context()); err == nil {
			t.Fatal("Reload without a client certificate succeeded")
		}
	})
}

// SPIFFE mutual TLS through the Workload API: the server's SPIFFE ID is checked, and after a
// rotation new connections use the new SVID.
func TestSPIFFE(t *testing.T) {
	haproxytest.Binary(t)
	const (
		sidecarID = "spiffe://example.org/sidecar"
		haproxyID = "spiffe://example.org/haproxy"
	)
	ca := spiffetest.NewCA(t, "example.org")
	wl := spiffetest.Start(t, ca, sidecarID)
	good := startHost(t, peerA, dataplanetest.Options{Username: user, Password: pass, TLS: ca.MTLSServerConfig(t, haproxyID)})
	evil := startHost(t, peerB, dataplanetest.Options{Username: user, Password: pass, TLS: ca.MTLSServerConfig(t, "spiffe://example.org/evil")})
	port := peerPort(t)
	addr := peerA + ":" + strconv.Itoa(port)
	lastSerial := func(s *dataplanetest.Server) *big.Int {
		certs := s.ClientCerts()
		if len(certs) == 0 {
			return nil
		}
		return certs[len(certs)-1].SerialNumber
	}

	h := newHarness(t, Config{URLs: []string{good.URL}, Username: user, Password: pass, SPIFFESocket: wl.Path, SPIFFEID: haproxyID})
	t.Run("the right server ID", func(t *testing.T) {
		h.live.set(t, httpConfig(port, haproxytest.Backend(t, "spiffe")), nil)
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		mustServe(t, addr, "spiffe")
		certs := good.ClientCerts()
		if len(certs) == 0 || len(certs[0].URIs) != 1 || certs[0].URIs[0].String() != sidecarID {
			t.Fatalf("the server did not see the sidecar's SVID: %v", certs)
		}
	})

	t.Run("a server with another SPIFFE ID is refused", func(t *testing.T) {
		bad := newHarness(t, Config{URLs: []string{evil.URL}, Username: user, Password: pass, SPIFFESocket: wl.Addr, SPIFFEID: haproxyID})
		bad.live.set(t, httpConfig(port, "127.0.0.1:1"), nil)
		err := bad.r.Reload(t.Context())
		var failed *reload.Failed
		if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "unexpected ID") {
			t.Fatalf("Reload to a server with the wrong ID = %v, want an unexpected ID error", err)
		}
		if len(evil.Requests()) != 0 {
			t.Fatalf("requests reached the wrong server: %v", evil.Requests())
		}
	})

	t.Run("a trust domain accepts its members", func(t *testing.T) {
		member := newHarness(t, Config{URLs: []string{evil.URL}, Username: user, Password: pass, SPIFFESocket: wl.Addr, SPIFFEID: "spiffe://example.org"})
		if err := member.r.Check(t.Context()); err != nil {
			t.Fatalf("Check with the trust domain: %v", err)
		}
		other := newHarness(t, Config{URLs: []string{evil.URL}, Username: user, Password: pass, SPIFFESocket: wl.Addr, SPIFFEID: "spiffe://other.org"})
		if err := other.r.Check(t.Context()); err == nil {
			t.Fatal("Check with another trust domain succeeded")
		}
	})

	t.Run("after a rotation new connections use the new SVID", func(t *testing.T) {
		before := lastSerial(good)
		rotated := wl.Rotate(t)
		want := rotated.Certificates[0].SerialNumber
		if before == nil || before.Cmp(want) == 0 {
			t.Fatal("the rotation did not issue a new certificate")
		}
		// The source learns of the rotation asynchronously: poll with real requests until the
		// server sees a handshake with the new SVID.
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			if err := h.r.Check(t.Context()); err != nil {
				t.Fatalf("Check: %v", err)
			}
			s := lastSerial(good)
			return s != nil && s.Cmp(want) == 0
		}, "a handshake with the rotated SVID")
		h.live.set(t, httpConfig(port, haproxytest.Backend(t, "after rotation")), nil)
		if err := h.r.Reload(t.Context()); err != nil {
			t.Fatalf("Reload after the rotation: %v", err)
		}
		mustServe(t, addr, "after rotation")
	})
}
