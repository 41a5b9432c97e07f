package watcher

import (
	"errors"
	"log/slog"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// DecodeManifests reads the objects of manifests held in memory (YAML or JSON, what kubectl
// apply -f takes; name is where they come from, for messages), as the file source reads a file:
// the objects a test of the templates gives. Objects without a namespace belong to namespace;
// watch are the watched resources whose objects are kept.
func DecodeManifests(name string, data []byte, namespace string, watch watchspec.List) (*snapshot.Objects, error) {
	dec := newManifestDecoder(namespace, slog.New(slog.DiscardHandler))
	if len(watch) > 0 {
		var err error
		if dec.watched, err = resolve(watch); err != nil {
			return nil, err
		}
		dec.objConv = &snapshot.ObjectConverter{}
	}
	dec.file(name, data)
	dec.finish()
	dec.fileOrigin(name)
	objs := dec.objs
	return &objs, errors.Join(dec.errs...)
}
