// Package spiffetest is a stand-in SPIFFE Workload API for tests: a gRPC server on a unix
// socket that implements FetchX509SVID and FetchX509Bundles from go-spiffe's public
// proto/spiffe/workload package, issuing X.509-SVIDs from a test CA, with Rotate to push a new
// SVID on the open streams, as a SPIRE agent does when it renews one.
package spiffetest

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// SVIDLifetime is how long the SVIDs a CA issues are valid.
const SVIDLifetime = time.Hour

// CA is a trust domain's signing authority.
type CA struct {
	TrustDomain spiffeid.TrustDomain
	Cert        *x509.Certificate
	key         crypto.Signer
}

// NewCA creates a self-signed CA for trustDomain ("example.org").
func NewCA(t testing.TB, trustDomain string) *CA {
	t.Helper()
	td, err := spiffeid.TrustDomainFromString(trustDomain)
	if err != nil {
		t.Fatalf("trust domain %q: %v", trustDomain, err)
	}
	key := testcert.Key(t)
	tmpl := &x509.Certificate{
		SerialNumber:          testcert.Serial(t),
		Subject:               pkix.Name{Organization: []string{"spiffetest"}, CommonName: td.Name() + " CA"},
		URIs:                  []*url.URL{td.ID().URL()},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	return &CA{TrustDomain: td, Cert: cert, key: key}
}

// Bundle is the trust domain's X.509 bundle (the CA certificate).
func (ca *CA) Bundle() *x509bundle.Bundle {
	return x509bundle.FromX509Authorities(ca.TrustDomain, []*x509.Certificate{ca.Cert})
}

// IssueSVID issues an X.509-SVID for id ("spiffe://example.org/workload") with a fresh key
// and serial number. The ID may belong to another trust domain than the CA's (to test a
// client that must refuse it).
func (ca *CA) IssueSVID(t testing.TB, id string) *x509svid.SVID {
	t.Helper()
	sid, err := spiffeid.FromString(id)
	if err != nil {
		t.Fatalf("SPIFFE ID %q: %v", id, err)
	}
	key := testcert.Key(t)
	tmpl := &x509.Certificate{
		SerialNumber: testcert.Serial(t),
		Subject:      pkix.Name{Organization: []string{"spiffetest"}},
		URIs:         []*url.URL{sid.URL()},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(SVIDLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("issue SVID %s: %v", id, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse SVID %s: %v", id, err)
	}
	return &x509svid.SVID{ID: sid, Certificates: []*x509.Certificate{cert}, PrivateKey: key}
}

// MTLSServerConfig is a TLS server configuration that presents a new SVID for id and requires
// clients to present an SVID of the CA's trust domain.
func (ca *CA) MTLSServerConfig(t testing.TB, id string) *tls.Config {
	t.Helper()
	return tlsconfig.MTLSServerConfig(ca.IssueSVID(t, id), ca.Bundle(), tlsconfig.AuthorizeMemberOf(ca.TrustDomain))
}

// WorkloadAPI is a running stand-in Workload API that hands one identity to every caller.
type WorkloadAPI struct {
	// Addr is the endpoint address as SPIFFE_ENDPOINT_SOCKET takes it: unix:///path.
	Addr string
	// Path is the unix socket's path.
	Path string

	ca *CA
	id string

	mu      sync.Mutex
	svid    *x509svid.SVID
	changed chan struct{} // closed and replaced at every Rotate
	streams int           // FetchX509SVID streams opened so far
}

// Start serves the Workload API on a new unix socket, handing out SVIDs for id signed by ca,
// until the test ends.
func Start(t testing.TB, ca *CA, id string) *WorkloadAPI {
	t.Helper()
	dir, err := os.MkdirTemp("", "spiffe")
	if err != nil {
		t.Fatalf("socket directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.sock")
	w := &WorkloadAPI{Addr: "unix://" + path, Path: path, ca: ca, id: id, changed: make(chan struct{})}
	w.svid = ca.IssueSVID(t, id)

	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	srv := grpc.NewServer()
	workload.RegisterSpiffeWorkloadAPIServer(srv, &handler{w: w})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop() // ends the open streams too
		<-done
	})
	return w
}

// SVID is the identity handed out now.
func (w *WorkloadAPI) SVID() *x509svid.SVID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svid
}

// Streams is how many FetchX509SVID streams clients have opened.
func (w *WorkloadAPI) Streams() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams
}

// Rotate issues a new SVID (new key and serial number, same ID) and pushes it on every open
// stream. It returns the new SVID.
func (w *WorkloadAPI) Rotate(t testing.TB) *x509svid.SVID {
	t.Helper()
	svid := w.ca.IssueSVID(t, w.id)
	w.mu.Lock()
	w.svid = svid
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	return svid
}

func (w *WorkloadAPI) current() (*x509svid.SVID, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svid, w.changed
}

type handler struct {
	workload.UnimplementedSpiffeWorkloadAPIServer
	w *WorkloadAPI
}

// checkHeader enforces the security header every Workload API request must carry (the SPIFFE
// Workload Endpoint specification; SPIRE refuses requests without it).
func checkHeader(ss grpc.ServerStream) error {
	md, ok := metadata.FromIncomingContext(ss.Context())
	if !ok || len(md.Get("workload.spiffe.io")) != 1 || md.Get("workload.spiffe.io")[0] != "true" {
		return status.Error(codes.InvalidArgument, "security header missing from request")
	}
	return nil
}

// FetchX509SVID sends the current SVID, then a new response at every rotation, until the
// client goes away.
func (h *handler) FetchX509SVID(_ *workload.X509SVIDRequest, stream grpc.ServerStreamingServer[workload.X509SVIDResponse]) error {
	if err := checkHeader(stream); err != nil {
		return err
	}
	h.w.mu.Lock()
	h.w.streams++
	h.w.mu.Unlock()
	for {
		svid, changed := h.w.current()
		certs, key, err := svid.MarshalRaw()
		if err != nil {
			return status.Errorf(codes.Internal, "marshal SVID: %v", err)
		}
		resp := &workload.X509SVIDResponse{Svids: []*workload.X509SVID{{
			SpiffeId:    svid.ID.String(),
			X509Svid:    certs,
			X509SvidKey: key,
			Bundle:      h.w.ca.Cert.Raw,
		}}}
		if err := stream.Send(resp); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// FetchX509Bundles sends the trust domain's bundle once and keeps the stream open.
func (h *handler) FetchX509Bundles(_ *workload.X509BundlesRequest, stream grpc.ServerStreamingServer[workload.X509BundlesResponse]) error {
	if err := checkHeader(stream); err != nil {
		return err
	}
	resp := &workload.X509BundlesResponse{Bundles: map[string][]byte{h.w.ca.TrustDomain.IDString(): h.w.ca.Cert.Raw}}
	if err := stream.Send(resp); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}
