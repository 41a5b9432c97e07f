package validate

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

const header = `global
  log stderr format raw local0
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
`

func requireHAProxy(t *testing.T) {
	t.Helper()
	haproxytest.Binary(t) // skips, or fails when a version is required
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned returns a PEM certificate for key.
func selfSigned(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "test.example"},
		DNSNames:     []string{"test.example"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestCheckRealHAProxy(t *testing.T) {
	requireHAProxy(t)
	dir := t.TempDir()
	k1, k2 := testcert.Key(t), testcert.Key(t)
	good := writeFile(t, dir, "good.pem", append(selfSigned(t, k1), keyPEM(t, k1)...))
	mismatched := writeFile(t, dir, "mismatch.pem", append(selfSigned(t, k1), keyPEM(t, k2)...))
	garbage := writeFile(t, dir, "garbage.pem", []byte("not a pem\n"))

	tlsFrontend := func(crt string) string {
		return header + "frontend fe\n  bind 127.0.0.1:18080 ssl crt " + crt + "\n  http-request return status 200\n"
	}

	tests := []struct {
		name      string
		config    string
		wantValid bool
		wantLine  int      // 0: don't care / none
		wantIn    []string // substrings of Error()
	}{
		{name: "valid", config: header + "frontend fe\n  bind 127.0.0.1:18080\n  http-request return status 200\n", wantValid: true},
		{name: "valid with certificate", config: tlsFrontend(good), wantValid: true},
		{
			name:     "unknown keyword",
			config:   header + "frontend fe\n  bind 127.0.0.1:18080\n  frobnicate yes\n",
			wantLine: 10,
			wantIn:   []string{"unknown keyword 'frobnicate'"},
		},
		{
			name:     "missing certificate",
			config:   tlsFrontend(filepath.Join(dir, "absent.pem")),
			wantLine: 9,
			wantIn:   []string{"absent.pem", "No such file"},
		},
		{
			name:     "key does not match certificate",
			config:   tlsFrontend(mismatched),
			wantLine: 9,
			wantIn:   []string{"inconsistencies between private key and certificate"},
		},
		{
			name:     "not a PEM",
			config:   tlsFrontend(garbage),
			wantLine: 9,
			wantIn:   []string{"unable to load certificate"},
		},
		{
			name:   "empty config",
			config: "",
			wantIn: []string{"no listener"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeFile(t, t.TempDir(), "haproxy.cfg", []byte(tt.config))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Checker{}.Check(ctx, cfg)
			if tt.wantValid {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("Check = %v (%T), want *CheckError", err, err)
			}
			if ce.Line != tt.wantLine {
				t.Errorf("Line = %d, want %d (alerts %q)", ce.Line, tt.wantLine, ce.Alerts)
			}
			if tt.wantLine != 0 && ce.File == "" {
				t.Errorf("File is empty, alerts %q", ce.Alerts)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(ce.Error(), s) {
					t.Errorf("Error() = %q, want it to contain %q", ce.Error(), s)
				}
			}
			if strings.Contains(ce.Error(), "Fatal errors found") {
				t.Errorf("Error() repeats the generic summary: %q", ce.Error())
			}
			if ce.Output == "" {
				t.Error("Output is empty")
			}
		})
	}
}

func TestCheckCannotRun(t *testing.T) {
	t.Run("missing binary", func(t *testing.T) {
		err := Checker{Binary: "/nonexistent/haproxy"}.Check(context.Background(), "/dev/null")
		var ce *CheckError
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("Check = %v, want a plain error", err)
		}
		if !strings.Contains(err.Error(), "/nonexistent/haproxy") {
			t.Errorf("error does not name the binary: %v", err)
		}
	})
	t.Run("binary killed by a signal", func(t *testing.T) {
		script := writeFile(t, t.TempDir(), "haproxy", []byte("#!/bin/sh\nkill -9 $$\n"))
		if err := os.Chmod(script, 0o755); err != nil {
			t.Fatal(err)
		}
		err := Checker{Binary: script}.Check(context.Background(), "/dev/null")
		var ce *CheckError
		if err == nil || errors.As(err, &ce) {
			t.Fatalf("Check = %v, want a plain error", err)
		}
	})
	t.Run("context cancelled", func(t *testing.T) {
		script := writeFile(t, t.TempDir(), "haproxy", []byte("#!/bin/sh\nexec sleep 30\n"))
		if err := os.Chmod(script, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := Checker{Binary: script}.Check(ctx, "/dev/null")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Check = %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Check took %v after the deadline", d)
		}
	})
}

func TestAvailable(t *testing.T) {
	if Available("/nonexistent/haproxy") {
		t.Error("Available reports a missing binary")
	}
	if !Available("sh") {
		t.Error("Available does not find sh")
	}
}

// Captured from haproxy 2.6.12 -c.
func TestParseOutput(t *testing.T) {
	tests := []struct {
		name       string
		output     string
		wantAlerts int
		wantFile   string
		wantLine   int
		wantError  string
	}{
		{
			name: "unknown keyword",
			output: `[NOTICE]   (10568) : haproxy version is 2.6.12-1+deb12u4
[NOTICE]   (10568) : path to executable is /usr/sbin/haproxy
[ALERT]    (10568) : config : parsing [bad.cfg:5] : unknown keyword 'bogus' in 'frontend' section
[ALERT]    (10568) : config : Error(s) found in configuration file : bad.cfg
[ALERT]    (10568) : config : Fatal errors found in configuration.
`,
			wantAlerts: 3, wantFile: "bad.cfg", wantLine: 5,
			wantError: "haproxy rejected the configuration: parsing [bad.cfg:5] : unknown keyword 'bogus' in 'frontend' section",
		},
		{
			name: "no position",
			output: `[NOTICE]   (10574) : haproxy version is 2.6.12-1+deb12u4
[ALERT]    (10574) : config : Cannot open configuration file/directory /nonexistent.cfg : No such file or directory
`,
			wantAlerts: 1,
			wantError:  "haproxy rejected the configuration: Cannot open configuration file/directory /nonexistent.cfg : No such file or directory",
		},
		{
			name: "empty",
			output: `Configuration file has no error but will not start (no listener) => exit(2).
[NOTICE]   (10572) : haproxy version is 2.6.12-1+deb12u4
[NOTICE]   (10572) : path to executable is /usr/sbin/haproxy
`,
			wantError: "haproxy rejected the configuration: Configuration file has no error but will not start (no listener) => exit(2).",
		},
		{
			name: "many alerts",
			output: `[ALERT]    (1) : config : parsing [a.cfg:1] : one
[ALERT]    (1) : config : parsing [a.cfg:2] : two
[ALERT]    (1) : config : parsing [a.cfg:3] : three
[ALERT]    (1) : config : parsing [a.cfg:4] : four
   | detail of four
[ALERT]    (1) : config : Fatal errors found in configuration.
`,
			wantAlerts: 5, wantFile: "a.cfg", wantLine: 1,
			wantError: "haproxy rejected the configuration: parsing [a.cfg:1] : one; parsing [a.cfg:2] : two; parsing [a.cfg:3] : three (and 1 more)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCheckError(tt.output)
			if len(e.Alerts) != tt.wantAlerts {
				t.Errorf("Alerts = %q, want %d", e.Alerts, tt.wantAlerts)
			}
			if e.File != tt.wantFile || e.Line != tt.wantLine {
				t.Errorf("position = %s:%d, want %s:%d", e.File, e.Line, tt.wantFile, tt.wantLine)
			}
			if e.Error() != tt.wantError {
				t.Errorf("Error() = %q\nwant       %q", e.Error(), tt.wantError)
			}
		})
	}
	if got := newCheckError("[ALERT] (1) : config : parsing [a.cfg:4] : four\n   | detail\n").Alerts[0]; got != "parsing [a.cfg:4] : four detail" {
		t.Errorf("continuation line: %q", got)
	}
}

func TestWarnings(t *testing.T) {
	out := `[NOTICE]   (4986) : haproxy version is 3.2.26-1
[WARNING]  (4986) : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems
[WARNING]  (4984) : config : parsing [/tmp/stage/gen-3/check.cfg:12] : 'option httplog' not usable with proxy 'x' (needs 'mode http').
Warnings were found.`
	got := warnings(out)
	want := []string{"missing timeouts for frontend 'f'.", "parsing [haproxy.cfg:12] : 'option httplog' not usable with proxy 'x' (needs 'mode http')."}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}
}

// TestCheckWarnings: a configuration HAProxy accepts with a warning is valid, and the warning
// is said.
func TestCheckWarnings(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy is not installed")
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte("defaults\n  mode http\nfrontend f\n  bind 127.0.0.1:8111\n  default_backend b\nbackend b\n  server s 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := Checker{}.CheckWarnings(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) == 0 || !strings.Contains(w[0], "missing timeouts for frontend 'f'") {
		t.Errorf("warnings %q", w)
	}
}
