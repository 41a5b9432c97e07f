package runtimeapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// countingClient counts the commands sent through it and passes them on.
type countingClient struct {
	*Socket
	sent atomic.Int32
}

func (c *countingClient) Command(ctx context.Context, cmd string) (string, error) {
	c.sent.Add(1)
	return c.Socket.Command(ctx, cmd)
}

func (c *countingClient) Session(ctx context.Context) (*cli.Session, error) {
	c.sent.Add(1)
	return c.Socket.Session(ctx)
}

// failingClient is a stats socket that fails with err: EACCES when its mode refuses the
// sidecar (HAProxy running as another user; the tests run as root, which no socket's mode
// refuses), or any other error of a socket.
type failingClient struct{ err error }

func (c failingClient) Command(context.Context, string) (string, error) {
	return "", fmt.Errorf("connect to stats.sock: %w", c.err)
}

func (c failingClient) Session(context.Context) (*cli.Session, error) {
	return nil, fmt.Errorf("connect to stats.sock: %w", c.err)
}

// TestUpdaterRoutesThroughTheStatsSocketElseTheMaster: with a stats socket and the master
// socket, an update (and the question of HAProxy's version after a reload) goes through the
// stats socket when the configuration declares it (the master is not asked), through the
// master socket ("@1") while the stats socket cannot be used (a template that declares none,
// a socket whose mode refuses the sidecar: its changes stay runtime updates, not reloads),
// and says which once; without the master it fails as before, and so it does when the stats
// socket is there but fails otherwise (what HAProxy made of the commands sent is unknown:
// the caller reloads rather than send them again another way).
func TestUpdaterRoutesThroughTheStatsSocketElseTheMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real HAProxy")
	}
	ctx := context.Background()
	r, cfg, certs := startRig(t)
	absent := filepath.Join(r.dir, "undeclared.sock")
	servers := [][]string{{"s1", "s2"}, {"s1", "s2", "s3"}, {"s2", "s3"}, {"s1", "s3"}, {"s1", "s2", "s3"}}

	for i, tc := range []struct {
		name       string
		stats      string
		failing    error // the stats socket fails so (syscall.EACCES: its mode refuses the sidecar)
		master     bool
		wantMaster bool   // the master socket carried the update
		wantErr    bool   // the update failed (the caller reloads)
		wantLog    string // said once
	}{
		{name: "the stats socket declared", stats: r.stats, master: true},
		{name: "no stats socket where the sidecar looks", stats: absent, master: true, wantMaster: true, wantLog: "the stats socket cannot be used"},
		{name: "a stats socket whose mode refuses the sidecar", failing: syscall.EACCES, master: true, wantMaster: true, wantLog: "the stats socket cannot be used"},
		{name: "no stats socket and no master to fall back to", stats: absent, wantErr: true},
		{name: "a stats socket that fails otherwise", failing: syscall.ECONNRESET, master: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			master := &countingClient{Socket: &Socket{Path: r.proc.MasterSocket}}
			opts := Options{Client: &Socket{Path: tc.stats}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if tc.master {
				opts.Master = master
			}
			if tc.failing != nil {
				opts.Client = failingClient{tc.failing}
			}
			u := track(New(opts))
			u.Reloaded(u.Plan(cfg, certs, nil))
			next := r.config(servers[i], []string{"a.pem"})
			p := u.Plan(next, certs, nil)
			if p.Reload() != "" {
				t.Fatalf("reload asked: %s", p.Reload())
			}
			err := u.Apply(ctx, p)
			if tc.wantErr {
				if err == nil {
					t.Fatal("the update went through with no socket to take it")
				}
				if n := master.sent.Load(); n > 0 {
					t.Errorf("the master socket carried %d commands of an update that failed on the stats socket", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			cfg = next
			r.write(t, cfg, certs)
			r.servedBy(t, servers[i]...)
			if got := master.sent.Load() > 0; got != tc.wantMaster {
				t.Errorf("the master socket carried the update: %v, want %v", got, tc.wantMaster)
			}
			// After a reload HAProxy's version is asked the same way; then a second update
			// goes the same way, and is not said again.
			u.Reloaded(u.Plan(cfg, certs, nil))
			u.Learn(ctx)
			if u.live.version == (Version{}) {
				t.Error("HAProxy's version not learned after a reload")
			}
			if err := u.Apply(ctx, u.Plan(cfg, certs, nil)); err != nil {
				t.Fatalf("second update: %v", err)
			}
			if n := strings.Count(logs.String(), "runtime API:"); tc.wantLog != "" && (n != 1 || !strings.Contains(logs.String(), tc.wantLog)) || tc.wantLog == "" && n != 0 {
				t.Errorf("the route said %d times, want it once when it is the master's (%q):\n%s", n, tc.wantLog, logs.String())
			}
		})
	}
}
