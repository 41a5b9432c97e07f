package main

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// echoPod is a pod of the suite's base manifests as kwok reports it running.
func echoPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "infra-backend-v1-abc", Namespace: "gateway-conformance-infra", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{
			Name:  "infra-backend-v1",
			Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "TLS_SERVER_CERT", Value: "/etc/secret-volume/crt"},
				{Name: "SERVICE_NAME", Value: "infra"},
				{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume"}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7"},
	}
}

func TestEchoEnv(t *testing.T) {
	env, why := echoEnv(echoPod())
	want := []string{"POD_NAME=infra-backend-v1-abc", "NAMESPACE=gateway-conformance-infra", "SERVICE_NAME=infra", "BIND_IP=10.244.1.7"}
	if why != "" || !reflect.DeepEqual(env, want) {
		t.Errorf("echoEnv: %q %q, want %q (the file in a volume and the Secret's key dropped)", env, why, want)
	}
	for name, change := range map[string]func(*corev1.Pod){
		"pending":  func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodPending} },
		"no IP":    func(p *corev1.Pod) { p.Status.PodIP = "" },
		"deleting": func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now },
		"coredns":  func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.k8s.io/coredns/coredns:v1.12.2" },
		"grpc": func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "GRPC_ECHO_SERVER", Value: "1"})
		},
	} {
		p := echoPod()
		change(p)
		if env, why := echoEnv(p); why == "" {
			t.Errorf("%s: runs %q, want no process", name, env)
		}
	}
}

const sampleReport = `apiVersion: gateway.networking.k8s.io/v1
date: "2026-11-28T10:00:00Z"
gatewayAPIChannel: standard
gatewayAPIVersion: v1.6.3
implementation:
  organization: haproxy-sidecar
kind: ConformanceReport
mode: default
profiles:
- core:
    failedTests:
    - GatewayInvalidRouteKind
    - HTTPRouteHeaderMatching
    result: failure
    statistics:
      Failed: 2
      Passed: 34
      Skipped: 0
  name: GATEWAY-HTTP
  summary: Core tests failed with 2 test failures.
`

func TestSummary(t *testing.T) {
	r, err := parseReport([]byte(sampleReport))
	if err != nil {
		t.Fatal(err)
	}
	want := "GATEWAY-HTTP core: 34/36 passed; extended: none claimed; failed: GatewayInvalidRouteKind, HTTPRouteHeaderMatching"
	if got := r.summary(); got != want {
		t.Errorf("summary:\n%s\nwant\n%s", got, want)
	}
	extended := strings.Replace(sampleReport, "  name: GATEWAY-HTTP\n", `  extended:
    result: partial
    statistics: {Failed: 1, Passed: 2, Skipped: 0}
    failedTests: [HTTPRouteQueryParamMatching]
    supportedFeatures: [HTTPRouteMethodMatching, HTTPRouteQueryParamMatching]
  name: GATEWAY-HTTP
`, 1)
	if r, err = parseReport([]byte(extended)); err != nil {
		t.Fatal(err)
	}
	want = "GATEWAY-HTTP core: 34/36 passed; extended: 2/3 passed (HTTPRouteMethodMatching, HTTPRouteQueryParamMatching); failed: GatewayInvalidRouteKind, HTTPRouteHeaderMatching, HTTPRouteQueryParamMatching"
	if got := r.summary(); got != want {
		t.Errorf("summary with extended features:\n%s\nwant\n%s", got, want)
	}
	if _, err := parseReport([]byte("kind: ConformanceReport\n")); err == nil {
		t.Error("a report without profiles: no error")
	}
}

func TestResults(t *testing.T) {
	log := `=== RUN   TestConformance/HTTPRouteSimpleSameNamespace
    --- PASS: TestConformance/HTTPRouteSimpleSameNamespace (3.01s)
        --- PASS: TestConformance/HTTPRouteSimpleSameNamespace/sub (1.00s)
    --- FAIL: TestConformance/HTTPRouteHeaderMatching (61.20s)
    --- SKIP: TestConformance/GRPCExactMethodMatching (0.00s)
--- FAIL: TestConformance (1900.00s)
`
	got := results([]byte(log))
	want := map[string][]string{"PASS": {"HTTPRouteSimpleSameNamespace"}, "FAIL": {"HTTPRouteHeaderMatching"}, "SKIP": {"GRPCExactMethodMatching"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results: %v, want %v", got, want)
	}
}

func TestGatewayAddresses(t *testing.T) {
	if got, want := gatewayAddresses("10.244.0.1", "10.244.2.0/29"), "10.244.0.1,10.244.2.1,10.244.2.2,10.244.2.3,10.244.2.4,10.244.2.5,10.244.2.6"; got != want {
		t.Errorf("gatewayAddresses: %s, want %s", got, want)
	}
}
