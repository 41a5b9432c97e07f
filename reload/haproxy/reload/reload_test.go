package reload

import (
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

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/fakesocket"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

// A 2.6 master with a program section (captured with a program; no worker test starts one).
const procProgram = `#<PID>          <type>          <reloads>       <uptime>        <version>
100             master          2 [failed: 0]   0d00h01m00s     2.6.12-1+deb12u4
# workers
120             worker          0               0d00h00m10s     2.6.12-1+deb12u4
# old workers
110             worker          1               0d00h00m30s     2.6.12-1+deb12u4
105             worker          2               0d00h00m50s     2.6.12-1+deb12u4
# programs
101             dataplaneapi    0               0d00h01m00s     -
`

// 3.3 and later print no "# programs" section at all (the format of haproxy's src/mworker.c).
const proc33 = `#<PID>          <type>          <reloads>       <uptime>        <version>      
7001            master          3 [failed: 0]   0d00h02m10s     3.3.1-1        
# workers
7040            worker          0               0d00h00m05s     3.3.1-1        
# old workers
7030            worker          1               0d00h00m40s     3.3.1-1        
`

// captured reads testdata/haproxy-<branch>/<name> (written by TestCaptureMasterCLI).
func captured(t *testing.T, branch, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "haproxy-"+branch, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseProc(t *testing.T) {
	type want struct{ reloads, failed, workers, old int }
	tests := []struct {
		branch, file string
		want         want
		version      string
	}{
		{"2.6", "show-proc-start.txt", want{0, 0, 1, 0}, "2.6.12-1+deb12u4"},
		{"2.6", "show-proc-after-reload.txt", want{1, 0, 1, 0}, "2.6.12-1+deb12u4"},
		{"2.6", "show-proc-after-failed-reload.txt", want{2, 1, 1, 0}, "2.6.12-1+deb12u4"},
		{"2.6", "show-proc-old-worker.txt", want{6, 0, 1, 2}, "2.6.12-1+deb12u4"},
		{"3.0", "show-proc-start.txt", want{0, 0, 1, 0}, "3.0.11-9e587df"},
		{"3.0", "show-proc-after-reload.txt", want{1, 0, 1, 0}, "3.0.11-9e587df"},
		{"3.0", "show-proc-after-failed-reload.txt", want{2, 1, 1, 0}, "3.0.11-9e587df"},
		{"3.0", "show-proc-old-worker.txt", want{6, 0, 1, 2}, "3.0.11-9e587df"},
		{"3.2", "show-proc-start.txt", want{0, 0, 1, 0}, "3.2.26-1"},
		{"3.2", "show-proc-after-reload.txt", want{1, 0, 1, 0}, "3.2.26-1"},
		// 3.2 lists the worker that keeps serving after a failed reload under "# old workers".
		{"3.2", "show-proc-after-failed-reload.txt", want{2, 1, 1, 0}, "3.2.26-1"},
		{"3.2", "show-proc-old-worker.txt", want{6, 0, 1, 1}, "3.2.26-1"},
		{"3.4", "show-proc-start.txt", want{0, 0, 1, 0}, "3.4.7-1"},
		// Captured while the old worker was still finishing.
		{"3.4", "show-proc-after-reload.txt", want{1, 0, 1, 1}, "3.4.7-1"},
		{"3.4", "show-proc-after-failed-reload.txt", want{2, 1, 1, 0}, "3.4.7-1"},
		{"3.4", "show-proc-old-worker.txt", want{6, 0, 1, 1}, "3.4.7-1"},
	}
	for _, tt := range tests {
		t.Run(tt.branch+"/"+tt.file, func(t *testing.T) {
			out := captured(t, tt.branch, tt.file)
			p, err := ParseProc(out)
			if err != nil {
				t.Fatal(err)
			}
			got := want{p.Reloads, p.Failed, p.Workers, p.OldWorkers}
			if got != tt.want || p.Version != tt.version || p.MasterPID <= 0 || p.Raw != out {
				t.Fatalf("ParseProc = %+v (%+v), want %+v version %s", got, p, tt.want, tt.version)
			}
		})
	}
	t.Run("program section", func(t *testing.T) {
		p, err := ParseProc(procProgram)
		if err != nil || p.MasterPID != 100 || p.Reloads != 2 || p.Workers != 1 || p.OldWorkers != 2 {
			t.Fatalf("ParseProc = %+v, %v", p, err)
		}
	})
	t.Run("3.3 without programs section", func(t *testing.T) {
		p, err := ParseProc(proc33)
		if err != nil || p.MasterPID != 7001 || p.Reloads != 3 || p.Workers != 1 || p.OldWorkers != 1 || !p.AtLeast(3, 3) || p.AtLeast(3, 4) {
			t.Fatalf("ParseProc = %+v, %v", p, err)
		}
	})
	for name, out := range map[string]string{
		"empty answer":    "",
		"unknown command": captured(t, "2.6", "startup-logs-after-failed-reload.txt"),
		"bad reloads":     "1 master x [failed: 0] 0d 2.6\n",
	} {
		t.Run(name, func(t *testing.T) {
			if p, err := ParseProc(out); err == nil {
				t.Fatalf("ParseProc = %+v, want an error", p)
			}
		})
	}
}

func TestProcAtLeast(t *testing.T) {
	for _, tt := range []struct {
		version      string
		major, minor int
		want         bool
	}{
		{"2.6.12-1+deb12u4", 2, 7, false},
		{"2.7.0", 2, 7, true},
		{"3.0.11-9e587df", 2, 7, true},
		{"3.0.11-9e587df", 3, 1, false},
		{"3.2.26-1", 3, 1, true},
		{"10.0", 3, 1, true},
		{"", 2, 7, false},
		{"-", 2, 7, false},
	} {
		if got := (Proc{Version: tt.version}).AtLeast(tt.major, tt.minor); got != tt.want {
			t.Errorf("Proc{Version: %q}.AtLeast(%d, %d) = %v", tt.version, tt.major, tt.minor, got)
		}
	}
}

// The answers each version gives to `reload`, read as the reload reads them.
func TestCapturedAnswers(t *testing.T) {
	tests := []struct {
		branch, file string
		want         Outcome
		reason       string // in (*Failed).Reason() when Refused
	}{
		{"2.6", "reload-ok.txt", NoAnswer, ""},
		{"2.6", "reload-bind-clash.txt", NoAnswer, ""},
		{"2.6", "reload-syntax-error.txt", NoAnswer, ""},
		{"3.0", "reload-ok.txt", Loaded, ""},
		{"3.0", "reload-bind-clash.txt", Refused, "Binding [/etc/haproxy/haproxy.cfg:15] for frontend clash: protocol tcpv4: cannot bind socket (Address already in use) for [127.0.0.1:41845]."},
		{"3.0", "reload-syntax-error.txt", Refused, "config : parsing [/etc/haproxy/haproxy.cfg:14] : unknown keyword 'frobnicate' in 'backend' section"},
		{"3.2", "reload-ok.txt", Loaded, ""},
		{"3.2", "reload-bind-clash.txt", Refused, "Binding [/etc/haproxy/haproxy.cfg:15] for frontend clash: protocol tcpv4: cannot bind socket (Address already in use) for [127.0.0.1:46845]."},
		{"3.2", "reload-syntax-error.txt", Refused, "config : parsing [/etc/haproxy/haproxy.cfg:14] : unknown keyword 'frobnicate' in 'backend' section"},
		{"3.2", "reload-busy.txt", Busy, ""},
		{"3.4", "reload-ok.txt", Loaded, ""},
		{"3.4", "reload-bind-clash.txt", Refused, "Binding [/etc/haproxy/haproxy.cfg:15] for frontend clash: protocol tcpv4: cannot bind socket (Address already in use) for [127.0.0.1:39007]."},
		{"3.4", "reload-syntax-error.txt", Refused, "config : parsing [/etc/haproxy/haproxy.cfg:14] : unknown keyword 'frobnicate' in 'backend' section"},
		{"3.4", "reload-busy.txt", Busy, ""},
	}
	for _, tt := range tests {
		t.Run(tt.branch+"/"+tt.file, func(t *testing.T) {
			a := ParseAnswer(captured(t, tt.branch, tt.file))
			if a.Outcome != tt.want {
				t.Fatalf("ParseAnswer = %+v, want outcome %d", a, tt.want)
			}
			if tt.want == Refused {
				if got := (&Failed{Output: a.Logs}).Reason(); got != tt.reason {
					t.Fatalf("Reason =\n%q\nwant\n%q", got, tt.reason)
				}
				if strings.HasPrefix(a.Logs, "Success") || strings.HasPrefix(a.Logs, "--") {
					t.Fatalf("Logs keep the status lines: %q", a.Logs)
				}
			}
		})
	}
}

func TestFailedReason(t *testing.T) {
	for _, tt := range []struct{ output, want string }{
		{"", ""},
		{"reload 4 failed (1 failed since the last successful reload); the reason is in HAProxy's log\n#<PID> ...", "reload 4 failed (1 failed since the last successful reload); the reason is in HAProxy's log"},
		// Only generic alerts: they are all there is to say.
		{"[ALERT]    (1) : config : Fatal errors found in configuration.\n", "config : Fatal errors found in configuration."},
		// A reload command's own output.
		{"reload command [\"false\"]: exit status 1\n[ALERT] bad config\n", "bad config"},
		{"[ALERT] (1) : a\n[ALERT] (1) : b\n[ALERT] (1) : c\n[ALERT] (1) : d\n", "a; b; c"},
	} {
		if got := (&Failed{Output: tt.output}).Reason(); got != tt.want {
			t.Errorf("Reason(%q) = %q, want %q", tt.output, got, tt.want)
		}
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
	if v := haproxytest.InstalledVersion(t); v.AtLeast(2, 7) {
		// HAProxy's own reason, from the answer to reload.
		want := "cannot bind socket (Address already in use) for [" + holder.Addr().String() + "]"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("HAProxy %s: Failed error %q, want HAProxy's reason %q", v, err, want)
		}
	} else if !strings.Contains(failed.Output, "failed") || !strings.Contains(err.Error(), "refused") {
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
	err = m.Reload(ctx)
	if !errors.As(err, &failed) {
		t.Fatalf("Reload of an invalid config = %v, want *Failed", err)
	}
	if v := haproxytest.InstalledVersion(t); v.AtLeast(2, 7) && !strings.Contains(err.Error(), "unknown keyword 'frobnicate'") {
		t.Errorf("HAProxy %s: Failed error %q, want HAProxy's reason", v, err)
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

// A reload asked while another one is still loading a large configuration is confirmed, and
// never taken for a refused configuration: 3.1+ answers "Another reload is still in progress"
// (retried), older versions queue it or drop the connection.
func TestReloadWhileAnotherStarts(t *testing.T) {
	haproxytest.Binary(t)
	port := haproxytest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, haproxytest.Backend(t, "backend A"), ""))
	p := haproxytest.Start(t, cfg)
	m := &MasterSocket{Path: p.MasterSocket}
	ctx := context.Background()

	var big strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&big, "backend b%d\n  server s 127.0.0.1:9\n", i)
	}
	writeConfig(t, cfg, haproxytest.HTTPConfig(port, haproxytest.Backend(t, "backend B"), big.String()))
	// Someone else's reload (no confirmation asked), then the sidecar's as soon as the master
	// counts the first.
	if _, err := m.Command(ctx, "reload"); err != nil && !cli.Dropped(err) {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Reload(ctx); err != nil {
		t.Fatalf("Reload while another reload starts: %v", err)
	}
	t.Logf("HAProxy %s: confirmed after %v", haproxytest.InstalledVersion(t), time.Since(start))
	if body := get(t, addr); body != "backend B" {
		t.Fatalf("after Reload, HAProxy serves %q", body)
	}
	proc, err := m.ShowProc(ctx)
	if err != nil || proc.Failed != 0 || proc.Workers != 1 {
		t.Fatalf("show proc after both reloads: %+v %v", proc, err)
	}
	t.Logf("test body done after %v", time.Since(start))
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
		start := time.Now()
		err = (&MasterSocket{Path: path, RefusedGrace: 200 * time.Millisecond}).Reload(context.Background())
		if !errors.Is(err, ErrNotRunning) {
			t.Fatalf("Reload = %v, want ErrNotRunning", err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
			t.Fatalf("a refused socket was retried for %v, want the 200ms grace", d)
		}
	})
}

// fakeMaster answers master CLI commands from a function, one command per connection.
func fakeMaster(t *testing.T, answer func(cmd string) string) string {
	return fakesocket.Serve(t, func(c net.Conn, request string) {
		c.Write([]byte(answer(strings.TrimSpace(request))))
	})
}

// procAt is a `show proc` answer of a master of that version, reload counter and failed count.
func procAt(version string, reloads, failed int) string {
	return fmt.Sprintf("#<PID>          <type>          <reloads>       <uptime>        <version>\n"+
		"100             master          %d [failed: %d]   0d00h00m10s     %s\n# workers\n120             worker          0               0d00h00m01s     %s\n",
		reloads, failed, version, version)
}

// The reload reads each version's answer: the outcome of 2.7+, a retry while another reload is
// starting (3.1+), the show proc confirmation where there is no answer (2.6, or a newer master
// that dropped the connection).
func TestReloadAnswers(t *testing.T) {
	bindClash := captured(t, "3.2", "reload-bind-clash.txt")
	busy := captured(t, "3.2", "reload-busy.txt")
	tests := []struct {
		name    string
		version string
		// reloads answers the n-th reload (0-based); each one moves the counter.
		reloads    func(n int) string
		loadStatus string
		timeout    time.Duration
		wantSent   int    // reloads sent
		wantErr    string // "" for success
		wantFailed bool   // *Failed (a refused configuration), not another error
	}{
		{name: "3.2 success", version: "3.2.26-1", reloads: func(int) string { return captured(t, "3.2", "reload-ok.txt") }, wantSent: 1},
		{
			name: "3.2 refused: HAProxy's reason", version: "3.2.26-1", reloads: func(int) string { return bindClash }, wantSent: 1,
			wantErr: "cannot bind socket (Address already in use) for [127.0.0.1:46845]", wantFailed: true,
		},
		{
			name: "3.2 busy twice, then loaded", version: "3.2.26-1", wantSent: 3,
			reloads: func(n int) string {
				if n < 2 {
					return busy
				}
				return "Success=1\n--\n[NOTICE]   (1) : Loading success.\n"
			},
		},
		{
			name: "3.2 busy until the timeout: not a bad configuration", version: "3.2.26-1", timeout: 400 * time.Millisecond,
			reloads: func(int) string { return busy }, wantErr: "another reload was still in progress",
		},
		{
			name: "3.2 dropped answer: the master's load status", version: "3.2.26-1", wantSent: 1,
			reloads: func(int) string { return "" }, loadStatus: bindClash,
			wantErr: "cannot bind socket", wantFailed: true,
		},
		{name: "2.6 no answer, counter moved", version: "2.6.12-1+deb12u4", reloads: func(int) string { return "" }, wantSent: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			sent := 0
			path := fakeMaster(t, func(cmd string) string {
				mu.Lock()
				defer mu.Unlock()
				switch cmd {
				case "reload":
					sent++
					return tt.reloads(sent - 1)
				case "_loadstatus":
					return tt.loadStatus
				case "show proc":
					return procAt(tt.version, sent, 0)
				}
				return "Unknown command.\n"
			})
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			err := (&MasterSocket{Path: path, Timeout: timeout}).Reload(context.Background())
			var failed *Failed
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Reload = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Reload = %v, want an error with %q", err, tt.wantErr)
			case tt.wantErr != "" && errors.As(err, &failed) != tt.wantFailed:
				t.Fatalf("Reload = %v (%T), *Failed: %v", err, err, tt.wantFailed)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.wantSent > 0 && sent != tt.wantSent {
				t.Fatalf("%d reloads sent, want %d", sent, tt.wantSent)
			}
		})
	}
}

// On 2.6 a failed reload shows only in show proc; its master CLI has no start-up logs.
func TestReloadFailedShowProc(t *testing.T) {
	var mu sync.Mutex
	moved := false
	path := fakeMaster(t, func(cmd string) string {
		mu.Lock()
		defer mu.Unlock()
		switch cmd {
		case "reload":
			moved = true
			return ""
		case "show proc":
			if moved {
				return captured(t, "2.6", "show-proc-after-failed-reload.txt")
			}
			return captured(t, "2.6", "show-proc-after-reload.txt")
		}
		return captured(t, "2.6", "startup-logs-after-failed-reload.txt") // Unknown command
	})
	err := (&MasterSocket{Path: path, Timeout: 5 * time.Second}).Reload(context.Background())
	var failed *Failed
	if !errors.As(err, &failed) || !strings.Contains(err.Error(), "reload 2 failed (1 failed since the last successful reload); the reason is in HAProxy's log") {
		t.Fatalf("Reload = %v, want *Failed that says where the reason is", err)
	}
	if strings.Contains(failed.Output, "Unknown command") {
		t.Fatalf("Failed output has the answer to an unknown command: %q", failed.Output)
	}
}

func TestReloadNeverConfirmed(t *testing.T) {
	path := fakeMaster(t, func(cmd string) string {
		if cmd == "reload" {
			return ""
		}
		return procAt("2.6.12-1+deb12u4", 0, 0) // the counter never moves
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
	if !errors.As(err, &failed) || !strings.HasSuffix(err.Error(), ": bad config") || !strings.Contains(failed.Output, "[ALERT] bad config") {
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
