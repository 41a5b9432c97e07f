package fakesocket

import (
	"io"
	"net"
	"strings"
	"testing"
)

// TestServe: the request is everything sent until the half-close, the answer everything
// written until serve returns.
func TestServe(t *testing.T) {
	path := Serve(t, func(c net.Conn, req string) {
		io.WriteString(c, "got "+strings.ToUpper(req))
	})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "show ")
	io.WriteString(c, "info\n")
	c.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got SHOW INFO\n" {
		t.Fatalf("answer %q, %v", b, err)
	}
}
