package watcher

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// What the sources know of a watched resource (--watch) without asking the API server: its
// kind, whether client-go has its Go type (a built-in resource, stored as protobuf in etcd) or
// not (a custom resource, stored as JSON), where kube-apiserver keeps it in etcd, and whether a
// built-in resource is cluster-scoped.

// watched is a --watch resource as a source uses it.
type watched struct {
	spec watchspec.Resource
	// kind is the kind of the resource's objects: given (;kind=), or the built-in's; "" for a
	// custom resource whose kind the file source derives from the objects it finds.
	kind string
	// builtin: client-go's scheme has the type (gvk): decoded typed, converted with FromTyped.
	builtin bool
	// clusterScoped: a built-in resource known to be cluster-scoped (Node, Namespace, ...).
	clusterScoped bool
}

// CheckWatch checks what the sources can check of the watched resources without the API
// server: a ;kind= that is not the built-in resource's own.
func CheckWatch(specs watchspec.List) error {
	_, err := resolve(specs)
	return err
}

// resolve finds what is known of each watched resource; a kind given with ;kind= that is not
// the built-in's is an error.
func resolve(specs watchspec.List) ([]*watched, error) {
	out := make([]*watched, 0, len(specs))
	for _, s := range specs {
		w := &watched{spec: s, kind: s.Kind}
		if kind, ok := builtinKind(s.GVR()); ok {
			if s.Kind != "" && s.Kind != kind {
				return nil, fmt.Errorf("--watch %s: its objects are of kind %s, not %s", s.Qualified(), kind, s.Kind)
			}
			w.kind, w.builtin = kind, true
			w.clusterScoped = clusterScopedKinds[schema.GroupKind{Group: s.Group, Kind: kind}]
		}
		out = append(out, w)
	}
	return out, nil
}

// gvk is the kind of the resource's objects ("" Kind when unknown).
func (w *watched) gvk() schema.GroupVersionKind {
	return w.spec.GroupVersion().WithKind(w.kind)
}

// matches reports whether an object of kind gvk is one of the resource's: same group and
// version, and the resource's kind (known or given), else a kind whose plural is the
// resource's (HTTPRoute: httproutes), as the API server derives plurals.
func (w *watched) matches(gvk schema.GroupVersionKind) bool {
	if gvk.Group != w.spec.Group || gvk.Version != w.spec.Version {
		return false
	}
	if w.kind != "" {
		return gvk.Kind == w.kind
	}
	return pluralOf(gvk.Kind) == w.spec.Resource || strings.ToLower(gvk.Kind) == w.spec.Resource
}

// pluralOf is the plural the API machinery derives from a kind, except that a vowel before a
// final y takes an s (Gateway: gateways, where the machinery guesses "gatewaies").
func pluralOf(kind string) string {
	if k := strings.ToLower(kind); len(k) >= 2 && k[len(k)-1] == 'y' && strings.IndexByte("aeiou", k[len(k)-2]) >= 0 {
		return k + "s"
	}
	plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Kind: kind})
	return plural.Resource
}

// builtinKind finds the kind of a resource client-go's scheme knows, by its plural.
func builtinKind(gvr schema.GroupVersionResource) (string, bool) {
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Group != gvr.Group || gvk.Version != gvr.Version || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if pluralOf(gvk.Kind) != gvr.Resource && strings.ToLower(gvk.Kind) != gvr.Resource {
			continue
		}
		// Only objects with metadata (not ListOptions, WatchEvent, ...).
		if f, ok := t.FieldByName("ObjectMeta"); !ok || !f.Anonymous {
			continue
		}
		return gvk.Kind, true
	}
	return "", false
}

// clusterScopedKinds are the cluster-scoped kinds among client-go's built-ins (the file source
// leaves such objects without a namespace).
var clusterScopedKinds = groupKinds(
	"Node", "Namespace", "PersistentVolume", "ComponentStatus",
	"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io",
	"StorageClass.storage.k8s.io", "VolumeAttachment.storage.k8s.io", "CSIDriver.storage.k8s.io", "CSINode.storage.k8s.io",
	"VolumeAttributesClass.storage.k8s.io",
	"IngressClass.networking.k8s.io", "IPAddress.networking.k8s.io", "ServiceCIDR.networking.k8s.io",
	"PriorityClass.scheduling.k8s.io", "RuntimeClass.node.k8s.io",
	"CertificateSigningRequest.certificates.k8s.io", "ClusterTrustBundle.certificates.k8s.io",
	"MutatingWebhookConfiguration.admissionregistration.k8s.io", "ValidatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicy.admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	"MutatingAdmissionPolicy.admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	"FlowSchema.flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io",
	"DeviceClass.resource.k8s.io", "ResourceSlice.resource.k8s.io", "StorageVersion.internal.apiserver.k8s.io",
	"StorageVersionMigration.storagemigration.k8s.io",
)

func groupKinds(gks ...string) map[schema.GroupKind]bool {
	out := make(map[schema.GroupKind]bool, len(gks))
	for _, gk := range gks {
		out[schema.ParseGroupKind(gk)] = true
	}
	return out
}

// specialEtcdPrefixes are kube-apiserver's storage prefixes that are not the resource's plural
// (SpecialDefaultResourcePrefixes in k8s.io/kubernetes/pkg/kubeapiserver).
var specialEtcdPrefixes = map[schema.GroupResource]string{
	{Group: "", Resource: "replicationcontrollers"}:     "controllers",
	{Group: "", Resource: "endpoints"}:                  "services/endpoints",
	{Group: "", Resource: "nodes"}:                      "minions",
	{Group: "", Resource: "services"}:                   "services/specs",
	{Group: "extensions", Resource: "ingresses"}:        "ingress",
	{Group: "networking.k8s.io", Resource: "ingresses"}: "ingress",
}

// etcdPath is where kube-apiserver keeps the resource's objects below its --etcd-prefix:
// built-in resources under their plural (with the exceptions above: Nodes under minions,
// Ingresses under ingress, Services under services/specs; Events of both groups under events);
// custom resources under GROUP/PLURAL.
func (w *watched) etcdPath() string {
	gr := w.spec.GVR().GroupResource()
	if p, ok := specialEtcdPrefixes[gr]; ok {
		return p
	}
	if w.builtin {
		return gr.Resource
	}
	return gr.Group + "/" + gr.Resource
}

// keep reports whether a converted object belongs to the watch: in its namespace (when it has
// one) and matched by its selector (when it has one).
func (w *watched) keep(o *snapshot.Object) bool {
	if w.spec.Namespace != "" && o.Namespace() != w.spec.Namespace {
		return false
	}
	return w.spec.Labels == nil || w.spec.Labels.Matches(o.Labels())
}
