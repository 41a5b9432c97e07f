package main

import (
	"fmt"
	"log"
	"os/exec"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/benchrig"
)

// The servers echo-basic starts by an environment variable instead of its HTTP one: they listen
// on every address (not changed to bind one IP), and no test of the HTTP profile uses them.
var otherEchoServers = []string{"GRPC_ECHO_SERVER", "TCP_ECHO_SERVER", "UDP_ECHO_SERVER"}

// Why a pod runs no process for now; said of no pod, since it passes.
const (
	deleting   = "deleting"
	notRunning = "not running yet"
)

// echoEnv is the environment of the echo-basic process that stands for pod's echo container, as
// a kubelet would give it (literal values and the pod's fields), with BIND_IP, the pod's IP,
// for the listeners; or why the pod runs none (yet).
func echoEnv(pod *corev1.Pod) (env []string, why string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return nil, deleting
	case pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "":
		return nil, notRunning
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if strings.Contains(pod.Spec.Containers[i].Image, "echo-basic") {
			c = &pod.Spec.Containers[i]
			break
		}
	}
	if c == nil {
		return nil, "no echo-basic container"
	}
	for _, e := range c.Env {
		value, ok := envValue(pod, c, e)
		if !ok {
			continue
		}
		for _, other := range otherEchoServers {
			if e.Name == other {
				return nil, "a " + other + " (listens on every address; not in the HTTP profile)"
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return append(env, "BIND_IP="+pod.Status.PodIP), ""
}

// envValue resolves one variable of container c. Volumes are not mounted here: a value naming
// a file in one (TLS_SERVER_CERT) is dropped, which leaves echo-basic's HTTP listeners only.
func envValue(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar) (string, bool) {
	if e.ValueFrom == nil {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(e.Value, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return "", false
			}
		}
		return e.Value, true
	}
	if e.ValueFrom.FieldRef == nil {
		return "", false
	}
	switch e.ValueFrom.FieldRef.FieldPath {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.podIP":
		return pod.Status.PodIP, true
	}
	return "", false
}

// pods runs one echo-basic process for each running pod of the node, on the pod's IP, and
// stops it when the pod goes: what a kubelet and a container runtime would do.
type pods struct {
	rig  *benchrig.Rig
	echo string // the echo-basic binary

	mu      sync.Mutex
	running map[types.UID]*exec.Cmd
	told    map[types.UID]string // why a pod runs no process, said once
	stop    chan struct{}
}

// startPods watches the pods of node and keeps their processes; stopPods ends the watch.
func startPods(rig *benchrig.Rig, client kubernetes.Interface, node, echo string) (*pods, error) {
	p := &pods{rig: rig, echo: echo, running: map[types.UID]*exec.Cmd{}, told: map[types.UID]string{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + node
	}))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.sync(o) },
		UpdateFunc: func(_, o any) { p.sync(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if pod, ok := o.(*corev1.Pod); ok {
				p.end(pod.UID)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch the pods: %w", err)
	}
	f.Start(p.stop)
	return p, nil
}

func (p *pods) stopPods() { close(p.stop) }

// sync starts the pod's process, or stops it, as the pod now says.
func (p *pods) sync(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	env, why := echoEnv(pod)
	p.mu.Lock()
	defer p.mu.Unlock()
	if why != "" {
		if why != deleting && why != notRunning && p.told[pod.UID] != why {
			p.told[pod.UID] = why
			log.Printf("pod %s/%s: no echo process: %s", pod.Namespace, pod.Name, why)
		}
		p.endLocked(pod.UID)
		return
	}
	if p.running[pod.UID] != nil {
		return
	}
	cmd, err := p.rig.Spawn(fmt.Sprintf("pod-%s-%s.log", pod.Namespace, pod.Name), p.echo, env)
	if err != nil {
		log.Printf("pod %s/%s: start echo-basic: %v", pod.Namespace, pod.Name, err)
		return
	}
	delete(p.told, pod.UID)
	p.running[pod.UID] = cmd
}

func (p *pods) end(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked(uid)
	delete(p.told, uid)
}

func (p *pods) endLocked(uid types.UID) {
	if cmd := p.running[uid]; cmd != nil {
		delete(p.running, uid)
		p.rig.StopProcess(cmd)
	}
}
