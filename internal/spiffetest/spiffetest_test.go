package spiffetest

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const clientID = "spiffe://example.org/sidecar"

func newSource(t *testing.T, ctx context.Context, w *WorkloadAPI) *workloadapi.X509Source {
	t.Helper()
	src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(w.Addr)))
	if err != nil {
		t.Fatalf("NewX509Source: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func TestWorkloadAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ca := NewCA(t, "example.org")
	w := Start(t, ca, clientID)

	t.Run("X509Source gets the SVID and the bundle", func(t *testing.T) {
		src := newSource(t, ctx, w)
		svid, err := src.GetX509SVID()
		if err != nil {
			t.Fatal(err)
		}
		if svid.ID.String() != clientID {
			t.Fatalf("SVID ID %s, want %s", svid.ID, clientID)
		}
		if svid.Certificates[0].SerialNumber.Cmp(w.SVID().Certificates[0].SerialNumber) != 0 {
			t.Fatal("the source holds another SVID than the one handed out")
		}
		b, err := src.GetX509BundleForTrustDomain(ca.TrustDomain)
		if err != nil || !b.HasX509Authority(ca.Cert) {
			t.Fatalf("bundle for %s: %v", ca.TrustDomain, err)
		}
	})

	t.Run("Rotate pushes a new SVID on the open stream", func(t *testing.T) {
		src := newSource(t, ctx, w)
		before, _ := src.GetX509SVID()
		rotated := w.Rotate(t)
		if err := src.WaitUntilUpdated(ctx); err != nil {
			t.Fatalf("no update after Rotate: %v", err)
		}
		after, _ := src.GetX509SVID()
		if after.Certificates[0].SerialNumber.Cmp(rotated.Certificates[0].SerialNumber) != 0 ||
			after.Certificates[0].SerialNumber.Cmp(before.Certificates[0].SerialNumber) == 0 {
			t.Fatal("after Rotate the source does not hold the new SVID")
		}
	})

	t.Run("FetchX509Bundles", func(t *testing.T) {
		c, err := workloadapi.New(ctx, workloadapi.WithAddr(w.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		set, err := c.FetchX509Bundles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := set.Get(ca.TrustDomain)
		if !ok || !b.HasX509Authority(ca.Cert) {
			t.Fatalf("bundle set %v lacks the CA", set.Bundles())
		}
	})

	t.Run("a request without the security header is refused", func(t *testing.T) {
		conn, err := grpc.NewClient("unix://"+w.Path, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		stream, err := workload.NewSpiffeWorkloadAPIClient(conn).FetchX509SVID(ctx, &workload.X509SVIDRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("FetchX509SVID without the header: %v, want InvalidArgument", err)
		}
	})
}

// The CA's SVIDs work for mutual TLS with go-spiffe's tlsconfig, and the server's ID is
// checked.
func TestMTLSWithSVIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ca := NewCA(t, "example.org")
	w := Start(t, ca, clientID)
	src := newSource(t, ctx, w)

	// Not httptest's StartTLS: it would put its own certificate before GetCertificate.
	l, err := tls.Listen("tcp", "127.0.0.1:0", ca.MTLSServerConfig(t, "spiffe://example.org/haproxy"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, r.TLS.PeerCertificates[0].URIs[0].String())
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(l)
	defer srv.Close()
	url := "https://" + l.Addr().String()

	get := func(authorizer tlsconfig.Authorizer) (string, error) {
		tr := &http.Transport{TLSClientConfig: tlsconfig.MTLSClientConfig(src, src, authorizer)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	t.Run("expected server ID", func(t *testing.T) {
		got, err := get(tlsconfig.AuthorizeID(spiffeid.RequireFromString("spiffe://example.org/haproxy")))
		if err != nil || got != clientID {
			t.Fatalf("GET = %q, %v; want the server to see %s", got, clientID, err)
		}
	})
	t.Run("another server ID is refused", func(t *testing.T) {
		_, err := get(tlsconfig.AuthorizeID(spiffeid.RequireFromString("spiffe://example.org/other")))
		if err == nil || !strings.Contains(err.Error(), "unexpected ID") {
			t.Fatalf("GET with the wrong expected ID: %v, want an unexpected ID error", err)
		}
	})
}
