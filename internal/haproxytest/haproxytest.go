// Package haproxytest runs a real HAProxy (master-worker mode, master CLI socket) and real HTTP
// backends for tests. Every process it starts is stopped, with its whole process group, when the
// test ends; a test is skipped when haproxy is not installed.
package haproxytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartTimeout bounds how long Start waits for the master socket to answer.
const StartTimeout = 15 * time.Second

// Binary returns the path of the haproxy executable, or skips the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skipf("haproxy is not installed: %v", err)
	}
	return path
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("choose a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
// foreground in its own process group, waits until the master socket answers `show proc` with
// a worker listed, and stops HAProxy (and every worker) when the test ends. It fails the test
// if HAProxy exits or does not answer within StartTimeout.
func Start(t testing.TB, configPath string, extraArgs ...string) *Process {
	t.Helper()
	bin := Binary(t)
	sock := filepath.Join(ShortTempDir(t), "master.sock")
	args := append([]string{"-W", "-S", sock + ",level,admin", "-f", configPath}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
		out, err := p.Command("show proc")
		if err == nil && strings.Contains(out, " worker ") {
			return p
		}
		if p.Exited() {
			t.Fatalf("haproxy exited during start (%v):\n%s", p.err, p.Logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy master socket %s did not answer within %v (last error %v):\n%s", sock, StartTimeout, err, p.Logs())
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
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// Kill kills the master and every worker with SIGKILL, as a crash or the OOM killer would,
// and waits for the master to be gone.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
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

// MasterCommand sends cmd to the CLI socket at path and returns the answer. The connection is
// half-closed after the command: HAProxy keeps it open until the client does.
func MasterCommand(path, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", fmt.Errorf("send %q: %w", cmd, err)
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return "", fmt.Errorf("half-close after %q: %w", cmd, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return string(out), fmt.Errorf("read answer to %q: %w", cmd, err)
	}
	return string(out), nil
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
