// Package deps pins modules the packages under construction need, so that go.mod is stable
// while they are written. Remove once each module is imported by real code.
package deps

import (
	_ "github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	_ "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	_ "github.com/spiffe/go-spiffe/v2/workloadapi"
	_ "go.etcd.io/etcd/api/v3/mvccpb"
	_ "go.etcd.io/etcd/client/v3"
	_ "google.golang.org/grpc"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/client-go/tools/record"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
