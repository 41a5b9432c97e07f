// Package benchrig is what the scripted benchmarks (hack/bench-churn, hack/bench-ingress)
// share: a work directory with the manifests (in/) and HAProxy's files (run/), the processes
// they start (the sidecar binary, HAProxy), each in a process group of its own with its log in
// the work directory, backends on loopback addresses, and the readings they take (HAProxy's
// reload counter, the sidecar's metrics).
package benchrig

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// Rig is one benchmark's work directory and what runs in it.
type Rig struct {
	Dir  string // the work directory
	In   string // Dir/in: the manifests the sidecar reads
	Run  string // Dir/run: haproxy.cfg, the master socket, the generations
	Keep bool   // keep Dir after Stop

	mu      sync.Mutex
	procs   []*exec.Cmd
	servers []*http.Server
	once    sync.Once
}

// New makes a work directory (named after prefix) with in/ and run/.
func New(prefix string, keep bool) (*Rig, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	r := &Rig{Dir: dir, In: filepath.Join(dir, "in"), Run: filepath.Join(dir, "run"), Keep: keep}
	for _, d := range []string{r.In, r.Run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Spawn starts name with args in a process group of its own, its output in Dir/logName, with
// env added to the environment.
func (r *Rig) Spawn(logName, name string, env []string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(r.Dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	r.mu.Lock()
	r.procs = append(r.procs, cmd)
	r.mu.Unlock()
	return cmd, nil
}

// Backends starts n HTTP servers on one port free on every address addr(i), each answering
// its name(i); it returns the port.
func (r *Rig) Backends(n int, addr, name func(i int) string) (int, error) {
	for attempt := 0; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		var servers []*http.Server
		ok := true
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", addr(i), port))
			if err != nil {
				ok = false
				break
			}
			body := name(i)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, body)
			})}
			go srv.Serve(l)
			servers = append(servers, srv)
		}
		if ok {
			r.mu.Lock()
			r.servers = append(r.servers, servers...)
			r.mu.Unlock()
			return port, nil
		}
		for _, s := range servers {
			s.Close()
		}
		if attempt > 20 {
			return 0, errors.New("no port free on every backend address")
		}
	}
}

// Stop stops the processes (newest first: SIGTERM to the group, SIGKILL after 5 s) and the
// backends, and removes Dir unless Keep. It can be called more than once.
func (r *Rig) Stop() {
	r.once.Do(func() {
		r.mu.Lock()
		procs, servers := r.procs, r.servers
		r.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			p := procs[i]
			terminate(p.Process.Pid, true)
			done := make(chan struct{})
			go func() { p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				killGroup(p.Process.Pid)
				<-done
			}
		}
		for _, s := range servers {
			s.Close()
		}
		if r.Keep {
			log.Printf("work directory kept: %s", r.Dir)
		} else {
			os.RemoveAll(r.Dir)
		}
	})
}

// WriteFile replaces In/name in one rename, as editors and ConfigMap volumes do.
func (r *Rig) WriteFile(name string, data []byte) error {
	p := filepath.Join(r.In, name)
	if err := os.WriteFile(p+".tmp~", data, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp~", p)
}

// Socket is HAProxy's master socket in Run.
func (r *Rig) Socket() string { return filepath.Join(r.Run, "master.sock") }

// CLI sends one command to HAProxy's master socket (the project's one CLI client).
func (r *Rig) CLI(cmd string) (string, error) {
	c := &cli.Client{Path: r.Socket(), Timeout: 5 * time.Second}
	return c.Command(context.Background(), cmd)
}

// Reloads is HAProxy's reload counter (show proc).
func (r *Rig) Reloads() (int, error) {
	out, err := r.CLI("show proc")
	if err != nil {
		return 0, err
	}
	p, err := reload.ParseProc(out)
	return p.Reloads, err
}

// FreePort is a TCP port free on 127.0.0.1 now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitUntil polls cond every 2 ms until it holds, or fails after timeout.
func WaitUntil(what string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// Metric sums the samples of the sidecar's /metrics at addr whose line starts with prefix (a
// whole sample "name{labels}", or a name for all its samples); -1 when it cannot be read.
func Metric(addr, prefix string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(prefix):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts with prefix
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// Memory is a field of a process's /proc/PID/status in MB (VmRSS, VmHWM); 0 if unknown.
func Memory(pid int, field string) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb / 1024
		}
	}
	return 0
}
