// Package haproxytest runs a real HAProxy (master-worker mode, master CLI socket) and real HTTP
// backends for tests. Every process it starts is stopped, with its whole process group, when the
// test ends. The haproxy is the one in PATH (hack/test.sh puts each tested version first in
// turn); a test is skipped when there is none, unless HAPROXY_SIDECAR_REQUIRE_TESTBINS=1 or
// HAPROXY_SIDECAR_HAPROXY_VERSION asks for one.
package haproxytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// StartTimeout bounds how long Start waits for the master socket to answer.
const StartTimeout = 15 * time.Second

// Environment variables that choose and require an HAProxy version (hack/test.sh sets them).
const (
	// VersionEnv names the HAProxy branch the tests must run against ("2.6", "3.0", "3.2", "3.4"):
	// when set, Binary fails the test unless the haproxy found in PATH is of that branch.
	VersionEnv = "HAPROXY_SIDECAR_HAPROXY_VERSION"
	// RequireEnv=1 turns a missing haproxy into a failure instead of a skip (as for the
	// Kubernetes test binaries).
	RequireEnv = "HAPROXY_SIDECAR_REQUIRE_TESTBINS"
)

// Version is an HAProxy version: its branch (Major.Minor) and the full string `haproxy -v`
// prints ("3.2.26-1", "2.6.12-1+deb12u4").
type Version struct {
	Major, Minor int
	Full         string
}

func (v Version) String() string { return v.Full }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Branch is "major.minor".
func (v Version) Branch() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

var versionRe = regexp.MustCompile(`(?m)^HAProxy version ((\d+)\.(\d+)\S*)`)

// ParseVersion reads the first line of `haproxy -v`.
func ParseVersion(out string) (Version, error) {
	m := versionRe.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no \"HAProxy version\" line in %q", strings.TrimSpace(out))
	}
	major, _ := strconv.Atoi(m[2])
	minor, _ := strconv.Atoi(m[3])
	return Version{Major: major, Minor: minor, Full: m[1]}, nil
}

// installed is the haproxy in PATH and its version, looked up once per test binary: PATH does
// not change while the tests run.
var installed = sync.OnceValues(func() (found, error) {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		return found{}, err
	}
	out, err := exec.Command(path, "-v").CombinedOutput()
	if err != nil {
		return found{path: path}, fmt.Errorf("%s -v: %w: %s", path, err, out)
	}
	v, err := ParseVersion(string(out))
	return found{path: path, version: v}, err
})

type found struct {
	path    string
	version Version
}

// Binary returns the path of the haproxy executable in PATH. Without one the test is skipped,
// or fails when HAPROXY_SIDECAR_REQUIRE_TESTBINS=1 or HAPROXY_SIDECAR_HAPROXY_VERSION is set;
// with HAPROXY_SIDECAR_HAPROXY_VERSION set, a haproxy of another branch fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	return lookup(t).path
}

// InstalledVersion is the version of the haproxy Binary returns (skipping or failing the test
// as Binary does), for tests of behaviour that differs between versions.
func InstalledVersion(t testing.TB) Version {
	t.Helper()
	return lookup(t).version
}

func lookup(t testing.TB) found {
	t.Helper()
	f, err := installed()
	want := os.Getenv(VersionEnv)
	if err != nil {
		msg := fmt.Sprintf("haproxy is not usable: %v (hack/install-deps.sh installs it; hack/haproxy-versions.sh provides 2.6, 3.0, 3.2 and 3.4)", err)
		if want != "" || os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s; %s=%q %s=%q require it", msg, VersionEnv, want, RequireEnv, os.Getenv(RequireEnv))
		}
		t.Skip(msg)
	}
	if want != "" && f.version.Branch() != want {
		t.Fatalf("%s=%s but the haproxy in PATH (%s) is %s", VersionEnv, want, f.path, f.version)
	}
	return f
}

// HTTPConfig is a minimal HAProxy configuration for tests: one frontend on 127.0.0.1:port
// that sends everything to one server at backend, plus extra (whole lines, or "").
func HTTPConfig(port int, backend, extra string) string {
	return fmt.Sprintf(`global
  log stderr format raw local0 notice
defaults
  mode http
  log global
  timeout connect 2s
  timeout client 10s
  timeout server 10s
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  server s1 %s
%s`, port, backend, extra)
}

// FreePort returns a loopback TCP port that was free when it was chosen.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// Ports are chosen below the kernel's ephemeral range (32768-60999 by default): a port the
// kernel hands out for a bind to port 0 or for an outgoing connection's source (the tests make
// thousands) can be taken again before the test listens on it; one of these cannot.
const (
	portMin = 20000
	portMax = 32767
)

// FreePorts returns n distinct loopback TCP ports that were free when they were chosen (all n
// held open together while choosing) and that no other test, in this process or another, is
// given until this test ends.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt > 1000 {
			t.Fatalf("choose %d free ports between %d and %d: only %d found", n, portMin, portMax, len(ports))
		}
		port := portMin + rand.IntN(portMax-portMin+1)
		release, ok := reservePort(port)
		if !ok {
			continue // handed to another test that still runs
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			release()
			continue // in use
		}
		defer l.Close()
		t.Cleanup(release)
		ports = append(ports, port)
	}
	return ports
}

// ShortTempDir returns a new temporary directory with a short path (a Unix socket path must fit
// in 108 bytes, which t.TempDir() does not guarantee for long test names). It is removed when
// the test ends.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hx")
	if err != nil {
		t.Fatalf("create temporary directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// WriteFile writes content to name inside dir (t.TempDir() when dir is empty) and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}

// Process is a running HAProxy master (and its workers).
type Process struct {
	MasterSocket string // path of the master CLI socket (level admin)
	ConfigPath   string
	Cmd          *exec.Cmd

	logs *SyncBuffer
	done chan struct{} // closed when the master has exited
	err  error         // Wait's result, valid once done is closed
}

// Start runs `haproxy -W -S <tmp>/master.sock,level,admin -f configPath extraArgs...` in the
// foreground in its own process group, waits until its worker is ready, and stops HAProxy (and
// every worker) when the test ends. It fails the test if HAProxy exits or is not ready within
// StartTimeout.
//
// Ready means the current worker answers `@1 show info` through the master socket. `show proc`
// listing a worker is not enough: from 3.1 on the master forks the worker first and lists it
// while it is still parsing the configuration and binding its listeners (a connection made
// then is refused, and stopping the master then makes the starting worker log "Cannot transfer
// connection fd ... over the sockpair"). The CLI client sends `@1` commands only once no
// worker is starting (see cli.Client.Command).
func Start(t testing.TB, configPath string, extraArgs ...string) *Process {
	t.Helper()
	bin := Binary(t)
	sock := filepath.Join(ShortTempDir(t), "master.sock")
	args := append([]string{"-W", "-S", sock + ",level,admin", "-f", configPath}, extraArgs...)
	cmd := exec.Command(bin, args...)
	ownGroup(cmd)
	logs := &SyncBuffer{}
	cmd.Stdout = logs
	cmd.Stderr = logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &Process{MasterSocket: sock, ConfigPath: configPath, Cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", p.Logs())
		}
	})

	deadline := time.Now().Add(StartTimeout)
	for {
		out, err := p.Command("@1 show info")
		if err == nil && strings.Contains(out, "Name: HAProxy") {
			return p
		}
		if p.Exited() {
			t.Fatalf("haproxy exited during start (%v):\n%s", p.err, p.Logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy's worker did not answer on %s within %v (last answer %q, error %v):\n%s", sock, StartTimeout, out, err, p.Logs())
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop asks the master to stop (SIGTERM stops the workers too), waits a little, then kills
// the whole process group so that no worker, old or new, outlives the test.
func (p *Process) stop() {
	pgid := p.Cmd.Process.Pid
	if !p.Exited() {
		terminate(pgid, false)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	killGroup(pgid)
	<-p.done
}

// Kill kills the master and every worker with SIGKILL, as a crash or the OOM killer would,
// and waits for the master to be gone.
func (p *Process) Kill() {
	killGroup(p.Cmd.Process.Pid)
	<-p.done
}

// Exited reports whether the master process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Logs returns everything HAProxy wrote to stdout and stderr so far.
func (p *Process) Logs() string { return p.logs.String() }

// Command sends one line to the master CLI, half-closes the connection and returns the whole
// answer. Use an "@1 " prefix to talk to the current worker.
func (p *Process) Command(cmd string) (string, error) {
	return MasterCommand(p.MasterSocket, cmd, 5*time.Second)
}

// ShowProc returns the raw `show proc` output of the master, failing the test on error.
func (p *Process) ShowProc(t testing.TB) string {
	t.Helper()
	out, err := p.Command("show proc")
	if err != nil {
		t.Fatalf("show proc: %v", err)
	}
	return out
}

// MasterCommand sends cmd to the CLI socket at path and returns the answer, through the
// project's CLI client (haproxy/cli).
func MasterCommand(path, cmd string, timeout time.Duration) (string, error) {
	return (&cli.Client{Path: path, Timeout: timeout}).Command(context.Background(), cmd)
}

// Backend starts an HTTP server on loopback that answers every request with body and returns
// its address (host:port). It is closed when the test ends.
func Backend(t testing.TB, body string) (addr string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// Get fetches http://addr/ on a fresh connection (no keep-alive) and returns the body; a
// status other than 200 is an error. It is meant for WaitFor conditions.
func Get(addr string) (string, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET http://%s/: status %s", addr, resp.Status)
	}
	return string(b), nil
}

// WaitFor polls cond every 10ms until it returns true, failing the test with msg if it has not
// after timeout.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
}

// Poll is WaitFor without a test: it returns an error if cond is still false after timeout.
func Poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("condition not met after " + timeout.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SyncBuffer collects output (logs) written from several goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
