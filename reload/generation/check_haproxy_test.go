package generation

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

func certPEM(t *testing.T) []byte { return testcert.Combined(t, "site.example") }

// haproxy -c on the check file sees the staged certificates, not the live ones.
func TestCheckFileWithHAProxy(t *testing.T) {
	haproxytest.Binary(t) // skips, or fails when a version is required
	e := newEnv(t)
	s := open(t, e)
	config := []byte(`defaults
  mode http
  timeout connect 1s
  timeout client 1s
  timeout server 1s
frontend fe
  bind 127.0.0.1:18443 ssl crt ` + s.SSLDir() + `/site.pem
  http-request return status 200
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := validate.Checker{}

	// Live generation: a broken certificate.
	bad, err := s.Stage(config, map[string][]byte{"site": []byte("not a certificate\n")}, "")
	if err != nil {
		t.Fatal(err)
	}
	mustActivate(t, s, bad)
	var ce *validate.CheckError
	if err := check.Check(ctx, s.ConfigPath()); !errors.As(err, &ce) || ce.Line != 7 {
		t.Fatalf("live config with a broken certificate: %v", err)
	}

	// Staged generation with a good certificate: valid through its check file although the
	// live certificate is still broken.
	good, err := s.Stage(config, map[string][]byte{"site": certPEM(t)}, "")
	if err != nil {
		t.Fatal(err)
	}
	path, err := s.CheckFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(ctx, path); err != nil {
		t.Fatalf("check file of the good generation: %v", err)
	}
	// And the other way round: a staged broken certificate fails while the live one is good.
	mustActivate(t, s, good)
	bad2, err := s.Stage(config, map[string][]byte{"site": []byte("garbage\n")}, "")
	if err != nil {
		t.Fatal(err)
	}
	path, err = s.CheckFile(bad2)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(ctx, path); !errors.As(err, &ce) {
		t.Fatalf("check file of the broken generation: %v", err)
	}
	if err := check.Check(ctx, s.ConfigPath()); err != nil {
		t.Fatalf("live config after activating the good generation: %v", err)
	}
}
