package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certs serves the certificate in a directory (tls.crt, tls.key: a Secret of type
// kubernetes.io/tls mounted as a volume, or cert-manager's), read again when either file
// changes: a rotated certificate is used without a restart.
type certs struct {
	dir string

	mu    sync.Mutex
	cert  *tls.Certificate
	files [2]os.FileInfo // of tls.crt and tls.key when cert was read
}

func (c *certs) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	paths := [2]string{filepath.Join(c.dir, "tls.crt"), filepath.Join(c.dir, "tls.key")}
	var files [2]os.FileInfo
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("webhook certificate: %w", err)
		}
		files[i] = fi
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && same(c.files, files) {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(paths[0], paths[1])
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // half-written by a rotation: the previous one until it is whole
		}
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	c.cert, c.files = &cert, files
	return c.cert, nil
}

// same reports whether the files are those read before: the kubelet replaces a Secret's files
// (a new inode), an editor may rewrite them in place (a new modification time or size).
func same(a, b [2]os.FileInfo) bool {
	for i := range a {
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}

// Serve serves h over TLS on addr with the certificate in certDir until ctx ends; it returns
// once listening (or with why it cannot).
func Serve(ctx context.Context, addr, certDir string, h http.Handler, log *slog.Logger) error {
	c := &certs{dir: certDir}
	if _, err := c.get(nil); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("webhook: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/validate", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook server", "addr", addr, "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("admission webhook serving", "addr", ln.Addr().String(), "path", "/validate")
	return nil
}
