package dataplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

// The wiring of the pipeline in Data Plane API mode: the templates name the host's storage
// directory, the generation store checks the staged certificates under that name locally
// (SetTemplateSSLDir), activates, and the Reloader pushes the live files.
func TestWithGenerationStore(t *testing.T) {
	haproxytest.Binary(t)
	s := startHost(t, peerA, dataplanetest.Options{})
	root := t.TempDir()
	store, err := generation.Open(filepath.Join(root, "haproxy.cfg"), filepath.Join(root, "certs"), "")
	if err != nil {
		t.Fatal(err)
	}
	remote := s.StorageDir // what --dataplane-ssl-dir says: the templates' ssldir
	port, tlsPort := peerPort(t), peerPort(t)
	config := []byte(httpConfig(port, haproxytest.Backend(t, "from the store"), fmt.Sprintf(
		"frontend tls\n  mode tcp\n  bind \"${HAPROXY_LOCALPEER}:%d\" ssl crt %s/site.pem\n  default_backend be\n", tlsPort, remote)))
	gen, err := store.Stage(config, map[string][]byte{"site": testcert.Combined(t, "store.example")}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The local check runs haproxy with -L as the stand-in does, for ${HAPROXY_LOCALPEER}.
	wrapper := haproxytest.WriteFile(t, "", "haproxy", "#!/bin/sh\nexec haproxy -L "+peerA+" \"$@\"\n")
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	checker := validate.Checker{Binary: wrapper}
	check := func() error {
		path, err := store.CheckFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		return checker.Check(ctx, path)
	}
	t.Run("without the template SSL directory, haproxy -c misses the certificate", func(t *testing.T) {
		if err := check(); err == nil || !strings.Contains(err.Error(), remote+"/site.pem") {
			t.Fatalf("haproxy -c = %v, want a complaint about %s/site.pem, which the host does not have yet", err, remote)
		}
	})
	store.SetTemplateSSLDir(remote)
	if err := check(); err != nil {
		t.Fatalf("haproxy -c with the template SSL directory: %v", err)
	}
	if err := store.Activate(gen); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{URLs: []string{s.URL}, SSLDir: remote, ConfigPath: store.ConfigPath(), CertDir: store.SSLDir()})
	if err := h.r.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	mustServe(t, peerA+":"+strconv.Itoa(port), "from the store")
	if cn, err := testcert.ServedCN(peerA+":"+strconv.Itoa(tlsPort), ""); err != nil || cn != "store.example" {
		t.Fatalf("served certificate %q %v", cn, err)
	}
}
