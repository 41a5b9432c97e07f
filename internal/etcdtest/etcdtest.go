package etcdtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// Timeouts for starting etcd, stopping it, and one request of a helper.
const (
	StartTimeout   = 30 * time.Second
	StopTimeout    = 20 * time.Second
	RequestTimeout = 10 * time.Second
)

// Options change how etcd is started; the zero value is a plain-HTTP server.
type Options struct {
	// TLS serves clients over HTTPS and requires a client certificate signed by the test CA
	// (--client-cert-auth), as kubeadm's etcd does. The server's Certs holds the files.
	TLS bool
	// Args are extra etcd flags ("--name=value").
	Args []string
}

// Server is a single-member etcd cluster on loopback.
type Server struct {
	// Endpoint is the client URL (https:// with Options.TLS).
	Endpoint string
	// DataDir is kept across Stop/Kill and Restart.
	DataDir string
	// Certs are the CA and certificates (nil without Options.TLS).
	Certs *Certs

	t        testing.TB
	bin      string
	args     []string
	logPath  string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	adminMu  sync.Mutex
	adminCli *clientv3.Client
}

// Start runs etcd on two free loopback ports (client and peer) and returns once it answers.
// It skips the test when the binary is missing (see BinDir). The server is killed when the
// test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := filepath.Join(BinDir(t, "etcd"), "etcd")
	dir := t.TempDir()
	s := &Server{t: t, bin: bin, DataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "etcd.log")}
	scheme := "http"
	if opts.TLS {
		scheme = "https"
		s.Certs = NewCerts(t, filepath.Join(dir, "pki"))
	}
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, haproxytest.FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", haproxytest.FreePort(t))
	s.Endpoint = client
	s.args = []string{
		"--name=test",
		"--data-dir=" + s.DataDir,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=test=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
		"--log-outputs=stderr",
	}
	if opts.TLS {
		s.args = append(s.args,
			"--cert-file="+s.Certs.ServerCert,
			"--key-file="+s.Certs.ServerKey,
			"--trusted-ca-file="+s.Certs.CA,
			"--client-cert-auth",
		)
	}
	s.args = append(s.args, opts.Args...)
	t.Cleanup(func() {
		s.closeAdmin()
		s.kill()
		if t.Failed() {
			s.logTail()
		}
	})
	s.Restart()
	return s
}

// Restart starts etcd again after Stop or Kill, on the same ports and data directory (Start
// calls it the first time). It returns once etcd serves reads.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatal("etcdtest: Restart while etcd is running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.mu.Unlock()
		s.t.Fatalf("open the etcd log: %v", err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = dieWithTest()
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.mu.Unlock()
		s.t.Fatalf("start etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	if err := s.waitReady(exited); err != nil {
		s.logTail()
		s.t.Fatalf("etcd did not start: %v", err)
	}
}

// waitReady polls until a linearizable read succeeds, the process exits, or StartTimeout.
func (s *Server) waitReady(exited <-chan struct{}) error {
	cli := s.Client()
	defer cli.Close()
	deadline := time.Now().Add(StartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %s: %w", StartTimeout, err)
		}
		select {
		case <-exited:
			return errors.New("etcd exited")
		case <-time.After(50 * time.Millisecond): // poll interval
		}
	}
}

// Stop stops etcd gracefully (SIGTERM) and waits for it to exit. etcd waits up to about 7 s for
// open watch streams to end: use Kill to stop at once.
func (s *Server) Stop() { s.t.Helper(); s.signal(syscall.SIGTERM) }

// Kill kills etcd (SIGKILL), as a crash would, and waits for it to exit.
func (s *Server) Kill() { s.t.Helper(); s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.closeAdmin()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("etcdtest: etcd is not running")
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(StopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		s.t.Fatalf("etcd did not stop within %s of %v", StopTimeout, sig)
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (s *Server) logTail() {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	lines = lines[max(0, len(lines)-40):]
	s.t.Logf("last lines of the etcd log:\n%s", strings.Join(lines, "\n"))
}

// ClientTLS returns the TLS configuration of a client with the test client certificate (nil
// without Options.TLS).
func (s *Server) ClientTLS() *tls.Config {
	s.t.Helper()
	if s.Certs == nil {
		return nil
	}
	return s.Certs.ClientTLS(s.t, s.Certs.ClientCert, s.Certs.ClientKey)
}

// Client returns a new client of the server (with the test client certificate under TLS), to
// be closed by the caller.
func (s *Server) Client() *clientv3.Client {
	s.t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		TLS:         s.ClientTLS(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		s.t.Fatalf("etcd client: %v", err)
	}
	return cli
}

// admin is a client the helpers share; it is closed by Stop, Kill and at the end of the test.
func (s *Server) admin() *clientv3.Client {
	s.t.Helper()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.adminCli == nil {
		s.adminCli = s.Client()
	}
	return s.adminCli
}

func (s *Server) closeAdmin() {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.adminCli != nil {
		s.adminCli.Close()
		s.adminCli = nil
	}
}

func reqCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), RequestTimeout)
}

// Put writes value at key and returns the revision of the write.
func (s *Server) Put(key string, value []byte) int64 {
	s.t.Helper()
	ctx, cancel := reqCtx()
	defer cancel()
	resp, err := s.admin().Put(ctx, key, string(value))
	if err != nil {
		s.t.Fatalf("etcd put %s: %v", key, err)
	}
	return resp.Header.Revision
}

// Delete removes key and returns the revision of the deletion.
func (s *Server) Delete(key string) int64 {
	s.t.Helper()
	ctx, cancel := reqCtx()
	defer cancel()
	resp, err := s.admin().Delete(ctx, key)
	if err != nil {
		s.t.Fatalf("etcd delete %s: %v", key, err)
	}
	return resp.Header.Revision
}

// Revision returns the current revision of the store.
func (s *Server) Revision() int64 {
	s.t.Helper()
	ctx, cancel := reqCtx()
	defer cancel()
	resp, err := s.admin().Get(ctx, "revision-probe", clientv3.WithCountOnly())
	if err != nil {
		s.t.Fatalf("etcd get: %v", err)
	}
	return resp.Header.Revision
}

// Compact compacts (physically) the history up to the current revision, so that a watch from
// any earlier revision fails with ErrCompacted. It returns that revision.
func (s *Server) Compact() int64 {
	s.t.Helper()
	rev := s.Revision()
	ctx, cancel := reqCtx()
	defer cancel()
	if _, err := s.admin().Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		s.t.Fatalf("etcd compact at %d: %v", rev, err)
	}
	return rev
}

// EnableAuth turns on etcd authentication with a root user (password rootPassword) and adds
// user (password, empty for a certificate-only user: the common name of a client certificate
// is its user name) with a role granting read-only access to each key prefix. The helpers go
// on as root.
func (s *Server) EnableAuth(rootPassword, user, password string, readPrefixes ...string) {
	s.t.Helper()
	ctx, cancel := reqCtx()
	defer cancel()
	cli := s.admin()
	if _, err := cli.UserAdd(ctx, "root", rootPassword); err != nil {
		s.t.Fatalf("etcd auth: add the root user: %v", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		s.t.Fatalf("etcd auth: grant root the root role: %v", err)
	}
	s.AddReadUser(user, password, readPrefixes...)
	if _, err := cli.AuthEnable(ctx); err != nil {
		s.t.Fatalf("etcd auth: enable: %v", err)
	}
	s.closeAdmin()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	root, err := clientv3.New(clientv3.Config{
		Endpoints: []string{s.Endpoint}, TLS: s.ClientTLS(), DialTimeout: 5 * time.Second,
		Username: "root", Password: rootPassword, Logger: zap.NewNop(),
	})
	if err != nil {
		s.t.Fatalf("etcd root client: %v", err)
	}
	s.adminCli = root
}

// AddReadUser adds user (password; empty for a certificate-only user) with a role "<user>-read"
// granting read-only access to each key prefix. After EnableAuth it runs as root.
func (s *Server) AddReadUser(user, password string, readPrefixes ...string) {
	s.t.Helper()
	ctx, cancel := reqCtx()
	defer cancel()
	cli := s.admin()
	role := user + "-read"
	if _, err := cli.RoleAdd(ctx, role); err != nil {
		s.t.Fatalf("etcd auth: add role %s: %v", role, err)
	}
	var err error
	if password == "" {
		_, err = cli.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true})
	} else {
		_, err = cli.UserAdd(ctx, user, password)
	}
	if err != nil {
		s.t.Fatalf("etcd auth: add user %s: %v", user, err)
	}
	if _, err := cli.UserGrantRole(ctx, user, role); err != nil {
		s.t.Fatalf("etcd auth: grant %s to %s: %v", role, user, err)
	}
	for _, p := range readPrefixes {
		if _, err := cli.RoleGrantPermission(ctx, role, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermRead)); err != nil {
			s.t.Fatalf("etcd auth: grant read on %s to %s: %v", p, role, err)
		}
	}
}
