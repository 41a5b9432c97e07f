package reload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/validate"
)

// Captured from HAProxy 2.6.12 (Debian bookworm).
const (
	procStart = `#<PID>          <type>          <reloads>       <uptime>        <version>      
5693            master          0 [failed: 0]   0d00h00m00s     2.6.12-1+deb12u4
# workers
5697            worker          0               0d00h00m00s     2.6.12-1+deb12u4
# programs

`
	procOldWorker = `#<PID>          <type>          <reloads>       <uptime>        <version>      
5693            master          3 [failed: 0]   0d00h00m08s     2.6.12-1+deb12u4
# workers
5850            worker          0               0d00h00m01s     2.6.12-1+deb12u4
# old workers
5837            worker          1               0d00h00m02s     2.6.12-1+deb12u4
# programs

`
	// After a failed reload the current worker's reloads column moves too: only the section
	// tells old workers apart.
	procFailed = `#<PID>          <type>          <reloads>       <uptime>        <version>      
5693            master          4 [failed: 1]   0d00h00m11s     2.6.12-1+deb12u4
# workers
5850            worker          1               0d00h00m04s     2.6.12-1+deb12u4
# old workers
5837            worker          2               0d00h00m05s     2.6.12-1+deb12u4
# programs

`
	procFailedNoOld = `#<PID>          <type>          <reloads>       <uptime>        <version>      
5693            master          8 [failed: 1]   0d00h00m27s     2.6.12-1+deb12u4
# workers
6225            worker          1               0d00h00m04s     2.6.12-1+deb12u4
# programs

`
	procProgram = `#<PID>          <type>          <reloads>       <uptime>        <version>
100             master          2 [failed: 0]   0d00h01m00s     2.6.12-1+deb12u4
# workers
120             worker          0               0d00h00m10s     2.6.12-1+deb12u4
# old workers
110             worker          1               0d00h00m30s     2.6.12-1+deb12u4
105             worker          2               0d00h00m50s     2.6.12-1+deb12u4
# programs
101             dataplaneapi    0               0d00h01m00s     -
`
)

func TestParseProc(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    Proc
		wantErr bool
	}{
		{name: "start", out: procStart, want: Proc{MasterPID: 5693, Reloads: 0, Failed: 0, Workers: 1, Version: "2.6.12-1+deb12u4"}},
		{name: "old worker", out: procOldWorker, want: Proc{MasterPID: 5693, Reloads: 3, Workers: 1, OldWorkers: 1, Version: "2.6.12-1+deb12u4"}},
		{name: "failed reload with old worker", out: procFailed, want: Proc{MasterPID: 5693, Reloads: 4, Failed: 1, Workers: 1, OldWorkers: 1, Version: "2.6.12-1+deb12u4"}},
		{name: "failed reload", out: procFailedNoOld, want: Proc{MasterPID: 5693, Reloads: 8, Failed: 1, Workers: 1, Version: "2.6.12-1+deb12u4"}},
		{name: "program and two old workers", out: procProgram, want: Proc{MasterPID: 100, Reloads: 2, Workers: 1, OldWorkers: 2, Version: "2.6.12-1+deb12u4"}},
		{name: "empty answer", out: "", wantErr: true},
		{name: "unknown command", out: "Unknown command, but maybe one of the following ones is a better match:\n  show proc : show processes status\n", wantErr: true},
		{name: "bad reloads", out: "1 master x [failed: 0] 0d 2.6\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProc(tt.out)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseProc = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Raw = tt.out
			if got != tt.want {
				t.Fatalf("ParseProc =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, addr string) string {
	t.Helper()
	body, err := haproxytest.Get(addr)
	if err != nil {
		t.Fatalf("GET %s: %v", addr, err)
	}
	return body
}

func TestMasterSocketReload(t *testing.T) {
	haproxytest.Binary(t)
	port := haproxytest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	backendA := haproxytest.Backend(t, "backend A")
	backendB := haproxytest.Backend(t, "backend B")
	backendC := haproxytest.Backend(t, "backend C")
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backendA, ""))
	p := haproxytest.Start(t, cfg)
	m := &MasterSocket{Path: p.MasterSocket}
	ctx := context.Background()

	haproxytest.WaitFor(t, 5*time.Second, func() bool {
		b, err := haproxytest.Get(addr)
		return err == nil && b == "backend A"
	}, "HAProxy serving backend A")

	loadID := func() string {
		t.Helper()
		id, err := m.LoadID(ctx)
		if err != nil {
			t.Fatalf("LoadID: %v", err)
		}
		return id
	}
	started := loadID()
	if again := loadID(); again != started {
		t.Fatalf("LoadID %q then %q with no reload between", started, again)
	}

	// A good config: Reload returns once the new worker serves it.
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backendB, ""))
	start := time.Now()
	if err := m.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	t.Logf("reload confirmed after %v", time.Since(start))
	if body := get(t, addr); body != "backend B" {
		t.Fatalf("after Reload, HAProxy serves %q", body)
	}
	proc, err := m.ShowProc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if proc.Reloads != 1 || proc.Failed != 0 || proc.Workers != 1 {
		t.Fatalf("show proc after a good reload: %+v", proc)
	}
	reloaded := loadID()
	if reloaded == started {
		t.Fatalf("LoadID %q unchanged by a reload", reloaded)
	}

	// A config haproxy -c accepts but HAProxy cannot load: a bind on a port someone else holds.
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backendC, "frontend clash\n  bind "+holder.Addr().String()+"\n  default_backend be\n"))
	if err := (validate.Checker{}).Check(ctx, cfg); err != nil {
		t.Fatalf("haproxy -c rejects the clashing config, the test needs one it accepts: %v", err)
	}
	start = time.Now()
	err = m.Reload(ctx)
	var failed *Failed
	if !errors.As(err, &failed) {
		t.Fatalf("Reload of a config that cannot bind = %v, want *Failed", err)
	}
	t.Logf("failed reload known after %v: %v", time.Since(start), err)
	if !strings.Contains(failed.Output, "failed") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Failed output %q / error %q", failed.Output, err)
	}
	if body := get(t, addr); body != "backend B" {
		t.Fatalf("after a failed reload, HAProxy serves %q, want the previous backend B", body)
	}
	if proc, err = m.ShowProc(ctx); err != nil || proc.Failed != 1 || proc.Reloads != 2 {
		t.Fatalf("show proc after a failed reload: %+v %v", proc, err)
	}
	if id, err := m.LoadID(ctx); err == nil {
		t.Fatalf("LoadID after a failed reload = %q, want an error (the workers run an older load)", id)
	}

	// A good config again: the failed counter resets.
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backendC, ""))
	if err := m.Reload(ctx); err != nil {
		t.Fatalf("Reload after a failure: %v", err)
	}
	if body := get(t, addr); body != "backend C" {
		t.Fatalf("after recovering, HAProxy serves %q", body)
	}
	if proc, err = m.ShowProc(ctx); err != nil || proc.Failed != 0 || proc.Reloads != 3 {
		t.Fatalf("show proc after recovering: %+v %v", proc, err)
	}
	if id := loadID(); id == reloaded || id == started {
		t.Fatalf("LoadID %q after another reload, seen before", id)
	}

	// A syntax error fails fast.
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, backendC, "frobnicate\n"))
	if err := m.Reload(ctx); !errors.As(err, &failed) {
		t.Fatalf("Reload of an invalid config = %v, want *Failed", err)
	}
	if body := get(t, addr); body != "backend C" {
		t.Fatalf("after a failed reload, HAProxy serves %q", body)
	}

	out, err := m.Command(ctx, "@1 show info")
	if err != nil || !strings.Contains(out, "Name: HAProxy") {
		t.Fatalf("@1 show info = %q, %v", out, err)
	}
}

// A worker that still holds a connection stays as an old worker after a reload.
func TestShowProcOldWorkers(t *testing.T) {
	haproxytest.Binary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := held.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	port, tcpPort := haproxytest.FreePort(t), haproxytest.FreePort(t)
	tcp := fmt.Sprintf("frontend tcpfe\n  mode tcp\n  bind 127.0.0.1:%d\n  default_backend held\nbackend held\n  mode tcp\n  server s1 %s\n", tcpPort, held.Addr())
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, haproxytest.Backend(t, "x"), tcp))
	p := haproxytest.Start(t, cfg)
	m := &MasterSocket{Path: p.MasterSocket}
	ctx := context.Background()

	client, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tcpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var server net.Conn
	select {
	case server = <-accepted:
		defer server.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the connection through HAProxy never reached the backend")
	}

	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	proc, err := m.ShowProc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if proc.OldWorkers != 1 || proc.Workers != 1 {
		t.Fatalf("with a connection open across a reload: %+v", proc)
	}
	client.Close()
	server.Close()
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		proc, err = m.ShowProc(ctx)
		return err == nil && proc.OldWorkers == 0
	}, "the old worker exits once its connection is closed")
}

func TestNotRunning(t *testing.T) {
	t.Run("no socket", func(t *testing.T) {
		m := &MasterSocket{Path: filepath.Join(t.TempDir(), "absent.sock")}
		err := m.Reload(context.Background())
		if !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Reload = %v, want ErrNotRunning", err)
		}
		if _, err := m.ShowProc(context.Background()); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("ShowProc = %v, want ErrNotRunning", err)
		}
	})
	t.Run("stale socket file", func(t *testing.T) {
		path := filepath.Join(haproxytest.ShortTempDir(t), "m.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		err = (&MasterSocket{Path: path}).Reload(context.Background())
		if !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Reload = %v, want ErrNotRunning", err)
		}
	})
}

// fakeMaster answers master CLI commands from a function, one command per connection.
func fakeMaster(t *testing.T, answer func(cmd string) string) string {
	t.Helper()
	path := filepath.Join(haproxytest.ShortTempDir(t), "m.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte(answer(strings.TrimSpace(line))))
			c.Close()
		}
	}()
	return path
}

func TestReloadStatusAnswer(t *testing.T) {
	// HAProxy 2.7+ answers the reload command itself.
	tests := []struct {
		name       string
		answer     string
		wantFailed bool
		wantOutput string
	}{
		{name: "success", answer: "Success=1\n--\n[NOTICE]   (1) : haproxy version is 2.8.3\n"},
		{
			name:       "failure",
			answer:     "Success=0\n--\n[NOTICE]   (1) : haproxy version is 2.8.3\n[ALERT]    (1) : config : parsing [/etc/haproxy/haproxy.cfg:12] : unknown keyword 'frobnicate'\n",
			wantFailed: true,
			wantOutput: "[ALERT]    (1) : config : parsing [/etc/haproxy/haproxy.cfg:12] : unknown keyword 'frobnicate'",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fakeMaster(t, func(cmd string) string {
				if cmd == "reload" {
					return tt.answer
				}
				return strings.Replace(procStart, "2.6.12-1+deb12u4", "2.8.3", -1)
			})
			err := (&MasterSocket{Path: path, Timeout: 5 * time.Second}).Reload(context.Background())
			var failed *Failed
			if tt.wantFailed {
				if !errors.As(err, &failed) {
					t.Fatalf("Reload = %v, want *Failed", err)
				}
				if !strings.Contains(failed.Output, tt.wantOutput) || !strings.Contains(err.Error(), "unknown keyword 'frobnicate'") {
					t.Fatalf("Failed = %q / %q", failed.Output, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Reload = %v", err)
			}
		})
	}
}

func TestReloadNeverConfirmed(t *testing.T) {
	path := fakeMaster(t, func(cmd string) string {
		if cmd == "reload" {
			return ""
		}
		return procStart // the counter never moves
	})
	start := time.Now()
	err := (&MasterSocket{Path: path, Timeout: 300 * time.Millisecond}).Reload(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("Reload = %v, want a not-confirmed DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Reload took %v with a 300ms timeout", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = (&MasterSocket{Path: path}).Reload(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Reload with a cancelled context = %v", err)
	}
}

func TestCommandReloader(t *testing.T) {
	ctx := context.Background()
	if err := (Command{Argv: []string{"true"}}).Reload(ctx); err != nil {
		t.Fatalf("true: %v", err)
	}
	err := (Command{Argv: []string{"sh", "-c", "echo '[ALERT] bad config' >&2; exit 1"}}).Reload(ctx)
	var failed *Failed
	if !errors.As(err, &failed) || !strings.Contains(err.Error(), "[ALERT] bad config") {
		t.Fatalf("failing command = %v, want *Failed with its output", err)
	}
	if err := (Command{Argv: []string{"false"}}).Reload(ctx); !errors.As(err, &failed) {
		t.Fatalf("false = %v, want *Failed", err)
	}
	err = (Command{Argv: []string{"/nonexistent/reload"}}).Reload(ctx)
	if err == nil || errors.As(err, &failed) {
		t.Fatalf("missing command = %v, want a plain error", err)
	}
	if err := (Command{}).Reload(ctx); err == nil {
		t.Fatal("empty command accepted")
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := (Command{Argv: []string{"sleep", "30"}}).Reload(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow command = %v, want DeadlineExceeded", err)
	}
	if err := (None{}).Reload(ctx); err != nil {
		t.Fatal(err)
	}
	var _ Reloader = &MasterSocket{}
	var _ Reloader = Command{}
	var _ Reloader = None{}
}
