// Package snapshot turns the Kubernetes objects a source has seen into the source-independent
// input of the render stage: services with their ready pods, certificates, templates.
package snapshot

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Ref names the object (and key inside it) an input came from, so an error, a log line or a
// Kubernetes Event can point the operator at what they edited.
type Ref struct {
	Kind      string // ConfigMap, Secret, Pod, File
	Namespace string
	Name      string
	Key       string // data key inside the object, if any
	// Cluster is the cluster of a pod or watched object, with several clusters ("" with one).
	Cluster string
}

func (r Ref) String() string {
	s := r.Kind + " " + r.Name
	if r.Namespace != "" {
		s = r.Kind + " " + r.Namespace + "/" + r.Name
	}
	if r.Key != "" {
		s += fmt.Sprintf(" key %q", r.Key)
	}
	if r.Cluster != "" {
		s += " in cluster " + r.Cluster
	}
	return s
}

// Stages at which input can be rejected; they are the values of the rejected_total metric's
// stage label.
const (
	StageDecode   = "decode"
	StageRender   = "render"
	StageValidate = "validate"
	StageReload   = "reload"
	// StageCanary: the canary host's counters said no (--rollout=canary): it was rolled back
	// and the other hosts never had the configuration.
	StageCanary = "canary"
	// StageTest: the template set's own tests (keys tests.NAME.yaml) failed.
	StageTest = "test"
)

// InputError is bad input: it says which object (and key) is at fault and why. Everything the
// operator can fix is reported as an InputError; anything else is an operational failure.
type InputError struct {
	Stage string
	Ref   Ref
	Line  int // 1-based line inside Ref's key, 0 if unknown
	Col   int
	Err   error
}

func (e *InputError) Error() string {
	loc := e.Ref.String()
	if e.Line > 0 {
		loc += fmt.Sprintf(" line %d", e.Line)
		if e.Col > 0 {
			loc += fmt.Sprintf(" column %d", e.Col)
		}
	}
	if loc == "" || e.Ref == (Ref{}) {
		return fmt.Sprintf("%s: %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Stage, loc, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// Objects is what a source has seen: the raw Kubernetes objects, unfiltered. Every source (file,
// kube, etcd) hands the same shape to Build, so the same objects give the same Snapshot whatever
// the source.
type Objects struct {
	ConfigMaps []*corev1.ConfigMap
	Secrets    []*corev1.Secret
	Pods       []*corev1.Pod
	// ConvertedPods are pods a source converted itself (see PodConverter), keeping no typed
	// Pods: Build treats them as it treats Pods.
	ConvertedPods []*Pod
	// EndpointSlices back services that name a Kubernetes Service instead of a pod selector.
	EndpointSlices []*discoveryv1.EndpointSlice
	// ClusterEndpointSlices, with several clusters, are each cluster's EndpointSlices by its
	// name (EndpointSlices holds none then): typed objects carry no cluster of their own.
	ClusterEndpointSlices map[string][]*discoveryv1.EndpointSlice
	// Home, with several clusters, is the home cluster's name: the cluster of the ConfigMaps
	// and Secrets, and of the objects a proposed change gives (InHome).
	Home string
	// Resources are the objects of the watched resources (--watch), by their name in the
	// template context (watchspec.Resource.Name), in any order. They are not operator inputs:
	// never held back.
	Resources map[string][]*Object
	// Revision identifies this state of the source (a resourceVersion, an etcd revision, a
	// directory hash) for logs.
	Revision string
	// Origins are where the ConfigMaps and Secrets (and their data keys' values) and the
	// files are written, when the source reads files (nil otherwise): errors about them then
	// start with FILE:LINE:COL (Origins.Locate). Read-only.
	Origins Origins
}

// Certificate is one PEM file for HAProxy's `crt`: certificate(s) followed by the private key.
type Certificate struct {
	Name string // file name without .pem; safe as a path element
	PEM  []byte
	Ref  Ref // where the certificate came from
}

// Stats is the context for the stats page.
type Stats struct {
	Username    string
	Password    string
	PasswordSet bool
}

// Snapshot is everything the templates may see.
type Snapshot struct {
	// Services sorted by name: each is the JSON object from the services ConfigMap plus "name"
	// and "pods" (pod name -> pod as `kubectl get pod -o json` shows it, ready pods only), as
	// a record, its maps records too (templates read a record as the map it holds). Read-only.
	Services []*record.Record
	// Certificates sorted by name.
	Certificates []Certificate
	// Templates maps a key of the config object to its text; nil means the built-in default.
	Templates map[string]string
	// TemplateKey is the main template's key in Templates.
	TemplateKey string
	// TemplateRef is the object that holds Templates (zero for the built-in default).
	TemplateRef Ref
	// ServicesRef is the services ConfigMap, for errors about a service entry.
	ServicesRef Ref
	Env         map[string]string
	// SecretEnv are the names of Env whose values are secret (--env-secret): templates read
	// them as any other, and no message quotes a line they are printed on.
	SecretEnv []string
	Stats     Stats
	Revision  string
	// Resources are the watched resources (--watch), in the order of the options; nil
	// without any.
	Resources []Resource
	// Peers are the HAProxy replicas of this deployment (PeersOptions), the `peers` value.
	Peers Peers
}

// Summary is what the stages after rendering need to know of a snapshot: the objects to
// name in Events and errors, and counts for the logs.
type Summary struct {
	TemplateRef, ServicesRef Ref
	Services, Certificates   int
	Revision                 string
}

// Summary sums s up; revision is the source's revision of the objects it was built from.
func (s *Snapshot) Summary(revision string) Summary {
	return Summary{TemplateRef: s.TemplateRef, ServicesRef: s.ServicesRef,
		Services: len(s.Services), Certificates: len(s.Certificates), Revision: revision}
}
