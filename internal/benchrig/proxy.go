package benchrig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Proxy is the sidecar binary and the HAProxy it configures, on ports chosen at run time on
// loopback (StartProxy).
type Proxy struct {
	HTTP        string        // HAProxy's HTTP frontend (HTTP_BIND)
	Metrics     string        // the sidecar's /metrics
	Health      string        // the sidecar's /healthz and /readyz
	Config      string        // haproxy.cfg
	PID         int           // the sidecar's process
	Started     time.Time     // just before the sidecar was started
	FirstConfig time.Duration // from Started to haproxy.cfg written

	rig    *Rig
	client *http.Client
	peak   peakParts
}

// peakParts is what the sidecar's RSS was made of when its maximum last grew: anonymous memory
// (the heap, stacks) and file-backed pages (the binary's), in MB, sampled every 100 ms.
type peakParts struct {
	mu              sync.Mutex
	max, anon, file int
}

// StartProxy starts the sidecar binary (`run`, its files in Run, its metrics and health on
// ports of their own, then args) and, once it has written the first configuration, HAProxy
// (master-worker, on the sidecar's master socket). Both have HTTP_BIND and HTTPS_BIND, loopback
// addresses on free ports, in their environment, and env. It returns once HAProxy's master
// socket answers and the sidecar is ready (/readyz).
func (r *Rig) StartProxy(sidecar string, env []string, args ...string) (*Proxy, error) {
	ports := make([]int, 4)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	p := &Proxy{rig: r, Config: filepath.Join(r.Run, "haproxy.cfg"),
		HTTP:    fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Metrics: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		Health:  fmt.Sprintf("127.0.0.1:%d", ports[3]),
		client:  &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	env = append([]string{"HTTP_BIND=" + p.HTTP, fmt.Sprintf("HTTPS_BIND=127.0.0.1:%d", ports[1])}, env...)
	sock := r.Socket()
	if r.StartProfile != "" || r.HeapProfiles != "" || r.Pprof {
		args = append([]string{"--pprof"}, args...)
	}
	p.Started = time.Now()
	cmd, err := r.Spawn("sidecar.log", sidecar, env, append([]string{"run", "--haproxy-config", p.Config, "--master-socket", sock,
		"--metrics-addr", p.Metrics, "--health-addr", p.Health}, args...)...)
	if err != nil {
		return nil, err
	}
	if r.StartProfile != "" {
		go p.profileStart(r.StartProfile, r.StartProfileFor)
	}
	p.PID = cmd.Process.Pid
	go p.samplePeak()
	if r.HeapProfiles != "" {
		go p.heapAtPeaks(r.HeapProfiles)
	}
	if err := WaitUntil("the first configuration", 5*time.Minute, func() bool { _, err := os.Stat(p.Config); return err == nil }); err != nil {
		return nil, err
	}
	p.FirstConfig = time.Since(p.Started)
	if _, err := r.Spawn("haproxy.log", "haproxy", env, "-W", "-S", sock+",level,admin", "-f", p.Config); err != nil {
		return nil, err
	}
	if err := WaitUntil("HAProxy's master socket", time.Minute, func() bool { _, err := r.Reloads(); return err == nil }); err != nil {
		return nil, err
	}
	if err := WaitUntil("the sidecar ready", 5*time.Minute, func() bool {
		resp, err := p.client.Get("http://" + p.Health + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Get sends one request through HAProxy (a new connection) and returns the body, or the
// status and error.
func (p *Proxy) Get(host, path string) string {
	req, _ := http.NewRequest("GET", "http://"+p.HTTP+path, nil)
	req.Host = host
	resp, err := p.client.Do(req)
	if err != nil {
		return err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.Status
	}
	return string(body)
}

// Settled waits until the sidecar has nothing in flight: the generation on disk is the one it
// reports live.
func (p *Proxy) Settled() error {
	return WaitUntil("the sidecar to settle", time.Minute, func() bool {
		target, err := os.Readlink(filepath.Join(p.rig.Run, ".haproxy-sidecar", "current"))
		if err != nil {
			return false
		}
		resp, err := p.client.Get("http://" + p.Health + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			LiveConfig string `json:"liveConfig"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			return false
		}
		h := target[strings.LastIndex(target, "-")+1:]
		return len(r.LiveConfig) >= len(h) && r.LiveConfig[:len(h)] == h
	})
}

// Metric sums the sidecar's samples whose line starts with prefix (Metric).
func (p *Proxy) Metric(prefix string) float64 { return Metric(p.Metrics, prefix) }

// CPU is the CPU time the sidecar has used.
func (p *Proxy) CPU() time.Duration { return CPU(p.PID) }

// RSS and MaxRSS are the sidecar's resident memory now and its peak (VmHWM), in MB.
func (p *Proxy) RSS() int    { return Memory(p.PID, "VmRSS") }
func (p *Proxy) MaxRSS() int { return Memory(p.PID, "VmHWM") }

// PeakParts is RssAnon and RssFile (MB) when the sidecar's maximum RSS last grew: how much
// of the peak was the heap and how much the binary's pages.
func (p *Proxy) PeakParts() (anon, file int) {
	p.peak.mu.Lock()
	defer p.peak.mu.Unlock()
	return p.peak.anon, p.peak.file
}

// samplePeak keeps RssAnon and RssFile each time VmHWM grows, until the sidecar exits. The
// sample may lag the peak by up to 100 ms.
func (p *Proxy) samplePeak() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		f := Memories(p.PID, "VmHWM", "RssAnon", "RssFile")
		if f["VmHWM"] == 0 { // exited
			return
		}
		p.peak.mu.Lock()
		if f["VmHWM"] > p.peak.max {
			p.peak.max, p.peak.anon, p.peak.file = f["VmHWM"], f["RssAnon"], f["RssFile"]
		}
		p.peak.mu.Unlock()
	}
}

// profileStart writes a CPU profile of the sidecar's first seconds to file, asked for as soon
// as its metrics server answers (a failure is printed: the bench goes on without it).
func (p *Proxy) profileStart(file string, d time.Duration) {
	var err error
	WaitUntil("the sidecar's pprof", time.Minute, func() bool {
		err = p.savePprof(fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), file)
		return !errors.Is(err, errNotServing)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start profile: %v\n", err)
	}
}

// errNotServing: the sidecar's pprof server did not answer (not started yet, or gone).
var errNotServing = errors.New("the sidecar's pprof does not answer")

// savePprof writes what the sidecar's /debug/pprof/PATH answers to file.
func (p *Proxy) savePprof(path, file string) error {
	resp, err := http.Get("http://" + p.Metrics + "/debug/pprof/" + path)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotServing, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Request.URL, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s: %w", resp.Request.URL, err)
	}
	return os.WriteFile(file, b, 0o644)
}

// heapAtPeaks saves the sidecar's heap profile in dir (heap-<MB>.pb.gz) each time its maximum
// RSS has grown by 5 MB, until it exits. A profile shows the heap at the collection before it:
// what was live near the peak. A failure is printed; the bench goes on without it.
func (p *Proxy) heapAtPeaks(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "heap profiles: %v\n", err)
		return
	}
	saved := 0
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		hwm := p.MaxRSS()
		if hwm == 0 { // exited
			return
		}
		if hwm < saved+5 {
			continue
		}
		err := p.savePprof("heap", filepath.Join(dir, fmt.Sprintf("heap-%dMB.pb.gz", hwm)))
		if errors.Is(err, errNotServing) {
			continue // not serving yet
		}
		saved = hwm // answered: the next try at 5 MB more, saved or not
		if err != nil {
			fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
		}
	}
}
