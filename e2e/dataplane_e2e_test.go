package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
)

// standIn starts a Data Plane API stand-in for the end-to-end tests: the demo template has no
// stats socket, so the API's post-reload reconnection is made short (it is studied in
// internal/dataplanetest and dataplane).
func standIn(t *testing.T, opts dataplanetest.Options) *dataplanetest.Server {
	t.Helper()
	if opts.RuntimeReconnect == 0 {
		opts.RuntimeReconnect = 300 * time.Millisecond
	}
	return dataplanetest.Start(t, opts)
}

// TestDataPlaneModeEndToEnd: the sidecar renders examples/local and pushes it, certificates
// included, through the (stand-in) Data Plane API to a real HAProxy it does not run itself.
// The host starts with an empty certificate storage and no --dataplane-ssl-dir is given: the
// directory is learned from the first upload. Nothing local is written outside --state-dir.
func TestDataPlaneModeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	host := standIn(t, dataplanetest.Options{Username: "admin", Password: "s3cret-pw"})
	stateDir := t.TempDir()
	logs := &haproxytest.SyncBuffer{}
	runSidecar(t, logs, append(e.sidecarArgs(), "--reload=dataplane", "--dataplane-url", host.URL,
		"--dataplane-username", "admin", "--dataplane-password", "s3cret-pw", "--state-dir", stateDir)...)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	t.Run("a fresh host's storage directory is learned; the certificate is served", func(t *testing.T) {
		if files := host.StorageFiles(t); len(files) != 1 || !strings.HasSuffix(files[0], "localhost.pem") {
			t.Errorf("storage = %v, want localhost.pem", files)
		}
		haproxytest.WaitFor(t, 5*time.Second, func() bool {
			cn, err := servedCertificate(os.Getenv("HTTPS_BIND"), "web.localhost")
			return err == nil && cn == "web.localhost"
		}, "HAProxy behind the API serves the certificate")
		if !strings.Contains(logs.String(), "learned the hosts' certificate storage directory") || !strings.Contains(host.StoredConfig(t), host.StorageDir+"/") {
			t.Errorf("the configuration does not name the host's storage directory %s:\n%s", host.StorageDir, host.StoredConfig(t))
		}
	})

	t.Run("everything local is under --state-dir", func(t *testing.T) {
		for _, name := range []string{"haproxy.cfg", "certs"} {
			if fi, err := os.Lstat(filepath.Join(stateDir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s/%s is not the live generation's symlink: %v", stateDir, name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(stateDir, "dataplane-hosts.json")); err != nil {
			t.Errorf("no record of what the host has: %v", err)
		}
		if _, err := os.Lstat(e.cfgPath); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created: %v", e.cfgPath, err)
		}
	})

	t.Run("the configuration without a stats socket is warned about once", func(t *testing.T) {
		if n := countLines(logs.String(), "level=WARN", "no `stats socket`"); n != 1 {
			t.Errorf("%d warnings about the missing stats socket, want 1:\n%s", n, logs.String())
		}
	})

	t.Run("an edit reaches the remote HAProxy", func(t *testing.T) {
		const changeToLive = `haproxy_sidecar_change_to_live_seconds_count{path="dataplane"}`
		seen := e.metric(t, changeToLive)
		e.editFile(t, "services.yaml", func(s string) string {
			return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
		})
		e.waitServed(t, "shop.localhost", "/", "api-1")
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			return e.metric(t, fmt.Sprintf(`haproxy_sidecar_reloads_total{endpoint=%q,result="success"}`, host.URL)) == 2
		}, "two confirmed reloads counted for the host")
		haproxytest.WaitFor(t, 10*time.Second, func() bool { return e.metric(t, changeToLive) > seen },
			"the host's confirmation observed from the edit seen")
		if n := countLines(logs.String(), "level=WARN", "no `stats socket`"); n != 1 {
			t.Errorf("warned %d times about the missing stats socket, want still once", n)
		}
	})

	t.Run("a config the API refuses is rolled back and reported", func(t *testing.T) {
		before := e.metric(t, `haproxy_sidecar_rejected_total{stage="reload"}`)
		// The local haproxy -c passes (it does not bind), the host cannot bind a held port.
		held := haproxytest.Backend(t, "held")
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "frontend http\n", "frontend http\n      bind "+held+"\n", 1)
		})
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			return e.metric(t, `haproxy_sidecar_rejected_total{stage="reload"}`) > before
		}, "the refusal is reported")
		_, r := e.readyz(t)
		if strings.Contains(r.LastError, "s3cret-pw") {
			t.Errorf("the error leaks the password: %q", r.LastError)
		}
		e.waitServed(t, "shop.localhost", "/", "api-1")
	})
}

// countLines counts the lines of logs that contain every one of parts.
func countLines(logs string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// fileState is what a test remembers of a path to tell whether anything touched it.
type fileState struct {
	exists  bool
	mode    fs.FileMode
	inode   uint64
	mtime   time.Time
	content []byte
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileState{}
	}
	if err != nil {
		t.Fatal(err)
	}
	s := fileState{exists: true, mode: fi.Mode(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	if fi.Mode().IsRegular() {
		if s.content, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s fileState) same(o fileState) bool {
	return s.exists == o.exists && s.mode == o.mode && s.inode == o.inode && s.mtime.Equal(o.mtime) && bytes.Equal(s.content, o.content)
}

// TestDataplaneModeLeavesLocalHAProxyAlone: with --reload=dataplane the machine's own HAProxy
// files are not touched: not the default --haproxy-config (Debian's /etc/haproxy/haproxy.cfg
// here), nor files given with --haproxy-config and --ssl-dir (ignored, with a warning); the
// local copies live in the state directory, by default under $XDG_STATE_HOME.
func TestDataplaneModeLeavesLocalHAProxyAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	watched := []string{config.DefaultHAProxyConfig, filepath.Join(filepath.Dir(config.DefaultHAProxyConfig), "certs"),
		filepath.Join(filepath.Dir(config.DefaultHAProxyConfig), ".haproxy-sidecar")}
	before := map[string]fileState{}
	for _, p := range watched {
		before[p] = stateOf(t, p)
	}
	t.Logf("%s exists before the test: %v", config.DefaultHAProxyConfig, before[config.DefaultHAProxyConfig].exists)
	untouched := func(t *testing.T) {
		t.Helper()
		for _, p := range watched {
			if after := stateOf(t, p); !after.same(before[p]) {
				t.Errorf("%s changed: before %+v, after %+v", p, before[p], after)
			}
		}
	}

	t.Run("default paths", func(t *testing.T) {
		e := newDemoEnv(t)
		host := standIn(t, dataplanetest.Options{})
		xdg := t.TempDir()
		t.Setenv("XDG_STATE_HOME", xdg)
		runSidecar(t, io.Discard, append(e.sidecarArgs(), "--reload=dataplane", "--dataplane-url", host.URL)...)
		e.waitReady(t)
		e.waitServed(t, "web.localhost", "/", "web-")
		state := filepath.Join(xdg, "haproxy-sidecar", "dataplane")
		if got := readString(t, filepath.Join(state, "haproxy.cfg")); !strings.Contains(got, "frontend http") {
			t.Errorf("the local copy in %s is not the rendered configuration:\n%s", state, got)
		}
		untouched(t)
	})

	t.Run("--haproxy-config and --ssl-dir given: ignored and untouched", func(t *testing.T) {
		e := newDemoEnv(t)
		host := standIn(t, dataplanetest.Options{})
		mine := t.TempDir()
		cfg := haproxytest.WriteFile(t, mine, "haproxy.cfg", "# the machine's own\n")
		ssl := filepath.Join(mine, "ssl")
		if err := os.Mkdir(ssl, 0o700); err != nil {
			t.Fatal(err)
		}
		haproxytest.WriteFile(t, ssl, "own.pem", "own")
		cfgBefore, sslBefore := stateOf(t, cfg), stateOf(t, ssl)
		logs := &haproxytest.SyncBuffer{}
		runSidecar(t, logs, append(e.sidecarArgs(), "--reload=dataplane", "--dataplane-url", host.URL,
			"--state-dir", t.TempDir(), "--haproxy-config", cfg, "--ssl-dir", ssl)...)
		e.waitReady(t)
		if !stateOf(t, cfg).same(cfgBefore) || !stateOf(t, ssl).same(sslBefore) || readString(t, filepath.Join(ssl, "own.pem")) != "own" {
			t.Error("a file given with --haproxy-config or --ssl-dir was touched in Data Plane API mode")
		}
		if countLines(logs.String(), "level=WARN", "--haproxy-config is not used with --reload=dataplane") != 1 ||
			countLines(logs.String(), "level=WARN", "--ssl-dir is not used with --reload=dataplane") != 1 {
			t.Errorf("no warning that the flags are not used:\n%s", logs.String())
		}
		untouched(t)
	})
}
