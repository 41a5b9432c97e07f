// Package benchrig is what the scripted benchmarks (hack/bench-churn, hack/bench-ingress,
// hack/bench-routes) share: a work directory with the manifests (in/) and HAProxy's files
// (run/), the processes they start (the sidecar binary and HAProxy: Proxy; a real
// kube-apiserver and etcd: Kube), each in a process group of its own with its log in the work
// directory and all stopped by Stop, also on an interrupt (StopOnSignal), backends on loopback
// addresses, and the readings they take (HAProxy's reload counter, the sidecar's metrics and
// memory, percentiles).
package benchrig

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// Rig is one benchmark's work directory and what runs in it.
type Rig struct {
	Dir  string // the work directory
	In   string // Dir/in: the manifests the sidecar reads
	Run  string // Dir/run: haproxy.cfg, the master socket, the generations (RunIn: elsewhere)
	Keep bool   // keep Dir after Stop
	// runApart: Run is not inside Dir (RunIn); Stop removes it too.
	runApart bool
	// APIServerArgs are extra kube-apiserver flags for StartKube: name (without "--") -> values.
	APIServerArgs map[string][]string
	// StartProfile, when set, is where StartProxy writes a CPU profile of the sidecar's first
	// StartProfileFor (the sidecar runs with --pprof).
	StartProfile    string
	StartProfileFor time.Duration
	// HeapProfiles, when set, is a directory where StartProxy saves the sidecar's heap profile
	// each time its maximum RSS has grown by 5 MB: the last one is the nearest the peak (the
	// sidecar runs with --pprof).
	HeapProfiles string
	// Pprof runs the sidecar with --pprof (for Proxy.ProfileCPU).
	Pprof bool

	mu       sync.Mutex
	procs    []*proc
	servers  []*http.Server
	cleanups []func()       // what else to stop (Kube), after the processes
	stopped  bool           // Stop has begun: nothing more is started
	starting sync.WaitGroup // starts under way that Stop waits for (StartKube)
	once     sync.Once
}

// proc is a process Spawn started; done is closed once it has exited and been waited for
// (the only Wait on it).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// errStopped is the error of a start asked for once Stop has begun.
var errStopped = errors.New("the bench is stopping")

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

// RunIn makes Run a new directory under parent (before anything is started): a memory-backed
// file system (/dev/shm) stands for the chart's configVolume.medium=Memory, the rest of the
// bench (the API server's and etcd's files) staying where Dir is.
func (r *Rig) RunIn(parent string) error {
	run, err := os.MkdirTemp(parent, "bench-run")
	if err != nil {
		return err
	}
	r.Run, r.runApart = run, true
	return nil
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
	// Started and recorded under the lock: a Stop begun meanwhile finds it, or it is not started.
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		f.Close()
		return nil, errStopped
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	return cmd, nil
}

// Done is closed once the process cmd (from Spawn) has exited; then cmd.ProcessState says how.
// A process Spawn did not start is taken as done.
func (r *Rig) Done(cmd *exec.Cmd) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		if p.cmd == cmd {
			return p.done
		}
	}
	done := make(chan struct{})
	close(done)
	return done
}

// StopProcess stops the process cmd (from Spawn) as Stop does, and forgets it.
func (r *Rig) StopProcess(cmd *exec.Cmd) {
	r.mu.Lock()
	var stop *proc
	r.procs = slices.DeleteFunc(r.procs, func(p *proc) bool {
		if p.cmd == cmd {
			stop = p
		}
		return p.cmd == cmd
	})
	r.mu.Unlock()
	if stop != nil {
		stop.stop()
	}
}

// stop asks the process's group to stop (SIGTERM), and kills it after 5 s; it returns once the
// process has exited.
func (p *proc) stop() {
	select {
	case <-p.done:
		return // exited and reaped: its pid may be another's by now
	default:
	}
	terminate(p.cmd.Process.Pid, true)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		killGroup(p.cmd.Process.Pid)
		<-p.done
	}
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

// Stop stops the processes (newest first: SIGTERM to the group, SIGKILL after 5 s), then what
// StartKube started and the backends, and removes Dir unless Keep. It can be called more than
// once, and from another goroutine (StopOnSignal): a start under way is waited for and
// stopped too, and nothing starts after it.
func (r *Rig) Stop() {
	r.once.Do(func() {
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		r.starting.Wait()
		r.mu.Lock()
		procs, servers, cleanups := r.procs, r.servers, r.cleanups
		r.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		for _, s := range servers {
			s.Close()
		}
		switch {
		case r.Keep:
			log.Printf("work directory kept: %s", r.Dir)
			if r.runApart {
				log.Printf("run directory kept: %s", r.Run)
			}
		default:
			os.RemoveAll(r.Dir)
			if r.runApart {
				os.RemoveAll(r.Run)
			}
		}
	})
}

// StopOnSignal stops everything (Stop) and exits with status 130 on an interrupt (Ctrl-C),
// SIGTERM or SIGHUP: what the bench started runs in process groups of its own, which the
// terminal's signal does not reach.
func (r *Rig) StopOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-c
		log.Printf("%v: stopping what the bench started", s)
		r.Stop()
		os.Exit(130)
	}()
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
	samples, err := Samples(addr, prefix)
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, v := range samples {
		sum += v
	}
	return sum
}

// Samples are the samples of the sidecar's /metrics at addr whose line starts with prefix (a
// whole sample "name{labels}", or a name for all its samples), by what follows prefix (the
// labels; "" for a sample without).
func Samples(addr, prefix string) (map[string]float64, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
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
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			v, _ := strconv.ParseFloat(rest[i+1:], 64)
			out[rest[:i]] += v
		}
	}
	return out, sc.Err()
}

// Percentile is the p-th percentile (0 < p <= 1) of d by the nearest rank (p=1: the
// maximum); 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// CPU is the CPU time, user and system, a process has used (/proc/PID/stat, in USER_HZ ticks
// of 10 ms); 0 if unknown.
func CPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the command, in parentheses that may hold spaces, come the state (field 3), ...,
	// utime (14) and stime (15).
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * 10 * time.Millisecond
}

// Memory is a field of a process's /proc/PID/status in MB (VmRSS, VmHWM); 0 if unknown.
func Memory(pid int, field string) int { return Memories(pid, field)[field] }

// Memories reads fields of /proc/PID/status, in MB (absent: 0).
func Memories(pid int, fields ...string) map[string]int {
	m := make(map[string]int, len(fields))
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		for _, field := range fields {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				m[field] = kb / 1024
			}
		}
	}
	return m
}
