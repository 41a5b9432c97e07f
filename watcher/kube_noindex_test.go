package watcher

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// The watched resources' informers keep no index: the objects are read by key and listed
// whole, and a namespace index of every key costs 2 MB at 10,000 Ingresses, Services and
// EndpointSlices (issue 25, item 3).
func TestWatchedInformersKeepNoIndex(t *testing.T) {
	// The fake lists only the kinds it is told of; without them it panics in the informers'
	// first list, which may still be under way when they are shut down.
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}: "IngressList",
		{Version: "v1", Resource: "services"}:                              "ServiceList",
	})
	k := &Kube{Dynamic: dyn,
		Watch: watchList(t, "ingresses.v1.networking.k8s.io", "services.v1")}
	res, factories, err := k.watchResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || len(factories) != 2 {
		t.Fatalf("%d watches, %d factories", len(res), len(factories))
	}
	for _, rw := range res {
		if ix := rw.informer.GetIndexer().GetIndexers(); len(ix) != 0 {
			t.Errorf("%s: the informer keeps indexes %v", rw.w.spec.Qualified(), ix)
		}
	}
	stop := make(chan struct{})
	for _, f := range factories {
		f.Start(stop)
	}
	close(stop)
	for _, f := range factories {
		f.Shutdown() // returns once the informer stopped
	}
}
