package testcert

import (
	"crypto/tls"
	"net"
	"testing"
)

func TestCombinedIsServedWithItsName(t *testing.T) {
	combined := Combined(t, "a.example")
	cert, err := tls.X509KeyPair(combined, combined)
	if err != nil {
		t.Fatalf("Combined is not a certificate and its key: %v", err)
	}
	certPEM, keyPEM := Pair(t, "b.example")
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) { c.(*tls.Conn).Handshake(); c.Close() }(c)
		}
	}()
	if cn, err := ServedCN(l.Addr().String(), "b.example"); err != nil || cn != "b.example" {
		t.Fatalf("ServedCN = %q, %v", cn, err)
	}
}
