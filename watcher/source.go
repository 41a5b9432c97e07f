// Package watcher holds the sources of the sidecar's inputs: where the Kubernetes objects that
// package snapshot reads come from, and how their changes are noticed. It is the first stage's
// folder, one package: the local directory (file.go, manifests read by decode.go and
// jsonstream.go), the Kubernetes API (kube*.go) and the etcd behind it (etcd*.go), each a
// Source that fills snapshot.Objects and calls back when they change.
package watcher

import (
	"context"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// Source is where the sidecar's inputs come from: a directory of manifests (File), the
// Kubernetes API (Kube) or the etcd of a kube-apiserver (Etcd).
type Source interface {
	// Run watches until ctx ends, calling changed() whenever the inputs may have changed.
	// changed must not block; it may be called often (the pipeline debounces), and is called
	// once when the watch is established, so that a change between the first Objects call and
	// the watch is not missed. A source that goes away (its directory, the API server, etcd)
	// is reported through the source's StateFunc and followed again once it is back: Run
	// returns ctx.Err() on a normal stop, another error only for a configuration that cannot
	// be watched at all.
	Run(ctx context.Context, changed func()) error
	// Objects returns the current inputs. An error is either bad input the operator must fix
	// (*snapshot.InputError, Stage decode, naming the file or object; several are joined with
	// errors.Join) or a failure to read them.
	Objects(ctx context.Context) (*snapshot.Objects, error)
}
