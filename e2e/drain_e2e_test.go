package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/loadgen"
)

// front is what kube-proxy or a cloud load balancer does in front of the chart's pods: each new
// connection goes to a replica whose /readyz passed its last checks; a connection stays with its
// replica until one side closes it (established connections are not moved).
type front struct {
	addr     string
	replicas []*frontReplica
	next     atomic.Uint64
}

// frontReplica is one replica as the front sees it.
type frontReplica struct {
	addr, health string
	ready        atomic.Bool
	conns        atomic.Int64 // connections sent to it
	relayed      atomic.Int64 // bytes it answered
}

// Its checks: every checkEvery, down after checkFall failures in a row, up after one success.
const (
	checkEvery = 200 * time.Millisecond
	checkFall  = 2
)

func startFront(t *testing.T, replicas ...*frontReplica) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close() })
	f := &front{addr: ln.Addr().String(), replicas: replicas}
	for _, r := range replicas {
		go r.check(stop)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.relay(c)
		}
	}()
	return f
}

// check follows the replica's readiness until stop.
func (r *frontReplica) check(stop chan struct{}) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	failed := 0
	for {
		resp, err := client.Get("http://" + r.health + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			failed = 0
			r.ready.Store(true)
		} else if failed++; failed >= checkFall {
			r.ready.Store(false)
		}
		select {
		case <-stop:
			return
		case <-time.After(checkEvery):
		}
	}
}

// relay sends the client's connection to the next ready replica, round robin; with none, the
// connection is closed (the client sees the failure).
func (f *front) relay(c net.Conn) {
	defer c.Close()
	var r *frontReplica
	for range f.replicas {
		if next := f.replicas[f.next.Add(1)%uint64(len(f.replicas))]; next.ready.Load() {
			r = next
			break
		}
	}
	if r == nil {
		return
	}
	up, err := net.DialTimeout("tcp", r.addr, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	r.conns.Add(1)
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(counting{c, &r.relayed}, up)
}

// counting counts the bytes written through it as they go.
type counting struct {
	io.Writer
	n *atomic.Int64
}

func (c counting) Write(p []byte) (int, error) {
	n, err := c.Writer.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// podReplica is one pod of the chart, with real processes: HAProxy under the chart's script and
// the sidecar built from this tree, with the chart's settings.
type podReplica struct {
	front   *frontReplica
	sidecar *sidecarProcess
	haproxy *exec.Cmd
	done    chan struct{} // closed once HAProxy's container process has exited
	stderr  *haproxytest.SyncBuffer
}

// startPod starts one replica of e's manifests: its own binds, files, socket and endpoints; the
// HAProxy container's script as the chart renders it (its paths made the replica's), and the
// sidecar with the chart's shutdown delay.
func startPod(t *testing.T, e *demoEnv, bin, script, shutdownDelay string) *podReplica {
	t.Helper()
	ports := haproxytest.FreePorts(t, 5)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	run := haproxytest.ShortTempDir(t)
	cfg, sock := filepath.Join(run, "haproxy.cfg"), filepath.Join(run, "master.sock")
	p := &podReplica{front: &frontReplica{addr: addr(0), health: addr(3)}, done: make(chan struct{}), stderr: &haproxytest.SyncBuffer{}}
	p.sidecar = startSidecarProcess(t, bin,
		[]string{"HTTP_BIND=" + addr(0), "HTTPS_BIND=" + addr(1), "STATS_BIND=" + addr(2), "HAPROXY_SIDECAR_SHUTDOWN_DELAY=" + shutdownDelay},
		"--source=file", "--dir", e.dir, "--haproxy-config", cfg, "--master-socket", sock,
		"--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND", "--health-addr", addr(3), "--metrics-addr", addr(4))
	script = strings.NewReplacer("/etc/haproxy/haproxy.cfg", cfg, "/var/run/haproxy/master.sock", sock).Replace(script)
	p.haproxy = exec.Command("/bin/sh", "-c", script)
	p.haproxy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its workers are stopped with it
	p.haproxy.Stdout, p.haproxy.Stderr = io.Discard, p.stderr   // the access log is not kept
	if err := p.haproxy.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.haproxy.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.haproxy.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("HAProxy (%s):\n%s", p.front.addr, p.stderr)
		}
	})
	return p
}

// TestDrainLosesNoRequest: one of two replicas is stopped exactly as the kubelet stops the
// chart's pod, under keep-alive load through a front that follows the replicas' /readyz: at
// once, SIGTERM to the sidecar (no preStop) and HAProxy's preStop hook (its sleep); once that
// is done, the stop signal to HAProxy's container, the image's SIGTERM, which the chart's
// script turns into HAProxy's soft stop. The front stops sending new connections to the replica
// during the sleep while HAProxy still serves the ones it has, which HAProxy then closes after
// their last answer: no request fails.
func TestDrainLosesNoRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	spec := podSpec(t, helmTemplate(t, helmBin(t), "lb", "lb"))
	hap, side := container(t, spec, "haproxy"), container(t, spec, "sidecar")
	args, _ := hap["args"].([]any)
	preStop, _ := nested(hap, "lifecycle", "preStop", "exec", "command").([]any)
	if len(args) != 1 || len(preStop) == 0 || hap["command"] == nil {
		t.Fatalf("the chart's HAProxy container: command %v, args %v, preStop %v", hap["command"], args, preStop)
	}
	grace := time.Duration(num(spec["terminationGracePeriodSeconds"])) * time.Second
	bin := sidecarBinary(t)
	e := newDemoEnv(t)
	pods := []*podReplica{
		startPod(t, e, bin, args[0].(string), envOf(side)["HAPROXY_SIDECAR_SHUTDOWN_DELAY"]),
		startPod(t, e, bin, args[0].(string), envOf(side)["HAPROXY_SIDECAR_SHUTDOWN_DELAY"]),
	}
	f := startFront(t, pods[0].front, pods[1].front)
	haproxytest.WaitFor(t, 30*time.Second, func() bool { return pods[0].front.ready.Load() && pods[1].front.ready.Load() }, "both replicas ready")

	load := loadgen.Start(f.addr, "web.localhost", 8)
	var stopLoad sync.Once
	t.Cleanup(func() { stopLoad.Do(load.Stop) })
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		return load.OK() > 500 && pods[0].front.conns.Load() > 0 && pods[1].front.conns.Load() > 0
	}, "the load reaches both replicas")

	stopping := pods[0]
	started := time.Now()
	stopping.sidecar.signal(t, syscall.SIGTERM)
	relayedBefore := stopping.front.relayed.Load()
	hook := make([]string, len(preStop))
	for i, a := range preStop {
		hook[i] = a.(string)
	}
	if out, err := exec.Command(hook[0], hook[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("the preStop hook %v: %v\n%s", hook, err, out)
	}
	if stopping.front.ready.Load() {
		t.Fatal("the front still sends new connections to the replica when its preStop sleep ends")
	}
	if stopping.front.relayed.Load() == relayedBefore {
		t.Error("HAProxy served nothing during its preStop sleep: the kept connections were not served")
	}
	if err := stopping.haproxy.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopping.done:
	case <-time.After(grace - time.Since(started)):
		t.Fatalf("HAProxy still runs at the end of the grace period (%v); the kubelet would kill it", grace)
	}
	if !stopping.haproxy.ProcessState.Success() {
		t.Errorf("HAProxy's container exited with %v, want 0 (a soft stop)", stopping.haproxy.ProcessState)
	}
	if !stopping.sidecar.exitedWithin(shutdownBound) || !stopping.sidecar.cmd.ProcessState.Success() {
		t.Errorf("the sidecar did not stop cleanly after its shutdown delay: %v", stopping.sidecar.cmd.ProcessState)
	}
	okAtStop := load.OK()
	haproxytest.WaitFor(t, 30*time.Second, func() bool { return load.OK() > okAtStop+500 }, "the other replica serves the load")
	stopLoad.Do(load.Stop)
	if load.Failed() != 0 {
		t.Errorf("%d of %d requests failed while a replica drained: %v", load.Failed(), load.OK()+load.Failed(), load.Errors())
	}
	t.Logf("%d requests, %d failed; the replica drained in %v", load.OK()+load.Failed(), load.Failed(), time.Since(started).Round(time.Millisecond))
}
