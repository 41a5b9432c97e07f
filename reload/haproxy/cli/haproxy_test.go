package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// "@1" commands sent from the moment HAProxy starts are answered, never left hanging: HAProxy
// 3.2.26 leaves some unanswered when they arrive while its first worker starts, unless the
// client waits for the master's load status first.
func TestWorkerCommandsWhileHAProxyStarts(t *testing.T) {
	bin := haproxytest.Binary(t)
	cfg := haproxytest.WriteFile(t, "", "haproxy.cfg", haproxytest.HTTPConfig(haproxytest.FreePort(t), haproxytest.Backend(t, "x"), ""))
	for run := range 10 {
		sock := filepath.Join(haproxytest.ShortTempDir(t), "master.sock")
		cmd := exec.Command(bin, "-W", "-S", sock+",level,admin", "-f", cfg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &cli.Client{Path: sock, Timeout: 3 * time.Second}
		var out string
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			start := time.Now()
			out, err = c.Command(context.Background(), "@1 show info")
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("run %d: @1 show info unanswered for %v while HAProxy starts", run, time.Since(start).Round(time.Millisecond))
			}
			if err == nil && strings.Contains(out, "Name: HAProxy") {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if err != nil || !strings.Contains(out, "Name: HAProxy") {
			t.Fatalf("run %d: @1 show info = %q, %v", run, out, err)
		}
	}
}

// startWithMap starts HAProxy with a stats socket and a map file of entries (hosts.map) that
// its frontend reads.
func startWithMap(t testing.TB, entries string) (p *haproxytest.Process, stats, hosts string) {
	dir := haproxytest.ShortTempDir(t)
	stats, hosts = filepath.Join(dir, "stats.sock"), filepath.Join(dir, "hosts.map")
	haproxytest.WriteFile(t, dir, "hosts.map", entries)
	cfg := haproxytest.WriteFile(t, dir, "haproxy.cfg", haproxytest.HTTPConfig(haproxytest.FreePort(t), haproxytest.Backend(t, "x"),
		"    http-request set-var(txn.be) req.hdr(host),map("+hosts+")\n")+
		"\nglobal\n    stats socket "+stats+" mode 600 level admin\n")
	return haproxytest.Start(t, cfg), stats, hosts
}

// A session sends many commands on one connection in interactive mode, payloads included, and
// answers each as Command would, through the master socket ("@1 ...") and on a stats socket;
// commands sent together (Commands) are answered in order.
func TestSessionAnswersAsCommandDoes(t *testing.T) {
	var entries strings.Builder
	for i := range 400 {
		fmt.Fprintf(&entries, "host-%03d.example.com be_%03d\n", i, i)
	}
	p, stats, hosts := startWithMap(t, "a.test be_a\n")
	ctx := context.Background()
	for _, via := range []struct{ name, path, prefix string }{{"master socket", p.MasterSocket, "@1 "}, {"stats socket", stats, ""}} {
		t.Run(via.name, func(t *testing.T) {
			c := &cli.Client{Path: via.path, Timeout: 10 * time.Second}
			s, err := c.Session(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			prepared, err := s.Command(ctx, via.prefix+"prepare map "+hosts)
			if err != nil || !strings.HasPrefix(prepared, "New version created: ") {
				t.Fatalf("prepare map = %q, %v", prepared, err)
			}
			ver := strings.TrimSpace(strings.TrimPrefix(prepared, "New version created: "))
			// The same command through Command answers the same way (another version).
			if once, err := c.Command(ctx, via.prefix+"prepare map "+hosts); err != nil || len(once) != len(prepared) || !strings.HasPrefix(once, "New version created: ") {
				t.Fatalf("prepare map through Command = %q, %v; through the session %q", once, err, prepared)
			}
			// 400 entries in payloads of about 1 kB, sent together, then a refusal and an
			// answer of many lines.
			var cmds []string
			lines := strings.SplitAfter(strings.TrimSuffix(entries.String(), "\n"), "\n")
			for len(lines) > 0 {
				n := min(40, len(lines))
				cmds = append(cmds, via.prefix+"add map @"+ver+" "+hosts+" <<\n"+strings.Join(lines[:n], ""))
				lines = lines[n:]
			}
			cmds = append(cmds, via.prefix+"set server nope/x state ready", via.prefix+"show map @"+ver+" "+hosts)
			answers, err := s.Commands(ctx, cmds)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range answers[:len(answers)-2] {
				if a != "\n" {
					t.Errorf("add map #%d answered %q, want %q (as Command answers it)", i, a, "\n")
				}
			}
			if a := answers[len(answers)-2]; a != "No such backend.\n\n" {
				t.Errorf("set server on no backend answered %q", a)
			}
			if n := strings.Count(answers[len(answers)-1], ".example.com be_"); n != 400 {
				t.Errorf("show map of the new version lists %d entries, want 400:\n%s", n, answers[len(answers)-1])
			}
			if out, err := s.Command(ctx, via.prefix+"commit map @"+ver+" "+hosts); err != nil || strings.TrimSpace(out) != "" {
				t.Fatalf("commit map = %q, %v", out, err)
			}
			if out, err := c.Command(ctx, via.prefix+"show map "+hosts); err != nil || strings.Count(out, ".example.com be_") != 400 || strings.Contains(out, "a.test") {
				t.Fatalf("after the commit, show map = %q, %v", cli.FirstLine(out), err)
			}
		})
	}
}

// BenchmarkUpdateThroughTheMasterAndAStatsSocket: what a runtime update of one map entry
// exchanges with HAProxy (a session opened, the worker asked its pid, an entry added and
// deleted), through the master socket ("@1 ...", relayed by the master to the worker) and on
// a stats socket (the worker's own); -benchtime 1000x or more; the p50-ms, p90-ms and max-ms
// fields are of the exchanges one by one, for the tails a busy node gives the relay
// (docs/performance.md).
func BenchmarkUpdateThroughTheMasterAndAStatsSocket(b *testing.B) {
	var entries strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&entries, "host-%04d.example.com be_x\n", i)
	}
	p, stats, hosts := startWithMap(b, entries.String())
	ctx := context.Background()
	for _, via := range []struct{ name, path, prefix string }{{"master socket", p.MasterSocket, "@1 "}, {"stats socket", stats, ""}} {
		b.Run(via.name, func(b *testing.B) {
			c := &cli.Client{Path: via.path, Timeout: 10 * time.Second}
			took := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				s, err := c.Session(ctx)
				if err != nil {
					b.Fatal(err)
				}
				host := fmt.Sprintf("new-%d.example.com", i)
				if _, err := s.Commands(ctx, []string{via.prefix + "show info", via.prefix + "add map " + hosts + " " + host + " be_x", via.prefix + "del map " + hosts + " " + host}); err != nil {
					b.Fatal(err)
				}
				s.Close()
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
			b.ReportMetric(ms(.5), "p50-ms")
			b.ReportMetric(ms(.9), "p90-ms")
			b.ReportMetric(ms(1), "max-ms")
		})
	}
}
