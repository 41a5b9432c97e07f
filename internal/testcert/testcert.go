// Package testcert makes the self-signed certificates tests serve through a real HAProxy, and
// reads back which one a server presents.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// Pair returns a self-signed server certificate for host (CN, and DNS name or IP address) and
// its key, PEM.
func Pair(t testing.TB, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := Key(t)
	tmpl := &x509.Certificate{
		SerialNumber: Serial(t),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// Combined returns Pair's certificate followed by its key in one PEM, as HAProxy's crt wants.
func Combined(t testing.TB, host string) []byte {
	t.Helper()
	cert, key := Pair(t, host)
	return append(cert, key...)
}

// ServedCN connects to addr with TLS (SNI serverName, no verification) and returns the common
// name of the certificate the server presents.
func ServedCN(addr, serverName string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: serverName, InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// Key returns a new P-256 key, for tests that build their own certificates.
func Key(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate a key: %v", err)
	}
	return key
}

// Serial returns a random positive certificate serial number.
func Serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatalf("serial number: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}
