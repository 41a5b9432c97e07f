package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestDataPlaneModeEndToEnd: the sidecar renders examples/local and pushes it, certificates
// included, through the (stand-in) Data Plane API to a real HAProxy it does not run itself.
func TestDataPlaneModeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	host := dataplanetest.Start(t, dataplanetest.Options{Username: "admin", Password: "s3cret-pw"})
	e.startSidecar(t, "--reload=dataplane", "--dataplane-url", host.URL,
		"--dataplane-username", "admin", "--dataplane-password", "s3cret-pw", "--dataplane-ssl-dir", host.StorageDir)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")

	t.Run("the certificate is pushed to the host's storage and served", func(t *testing.T) {
		if files := host.StorageFiles(t); len(files) != 1 || !strings.HasSuffix(files[0], "localhost.pem") {
			t.Errorf("storage = %v, want localhost.pem", files)
		}
		haproxytest.WaitFor(t, 5*time.Second, func() bool {
			cn, err := servedCertificate(os.Getenv("HTTPS_BIND"), "web.localhost")
			return err == nil && cn == "web.localhost"
		}, "HAProxy behind the API serves the certificate")
	})

	t.Run("an edit reaches the remote HAProxy", func(t *testing.T) {
		e.editFile(t, "services.yaml", func(s string) string {
			return strings.Replace(s, "\ndata:\n", fmt.Sprintf("\ndata:\n  shop: |\n    {\"namespace\": \"demo\", \"selector\": \"app=api\", \"hostnames\": [\"shop.localhost\"], \"ports\": [%d]}\n", e.port), 1)
		})
		e.waitServed(t, "shop.localhost", "/", "api-1")
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			return e.metric(t, fmt.Sprintf(`haproxy_sidecar_reloads_total{endpoint=%q,result="success"}`, host.URL)) == 2
		}, "two confirmed reloads counted for the host")
	})

	t.Run("a config the API refuses is rolled back and reported", func(t *testing.T) {
		before := e.metric(t, `haproxy_sidecar_rejected_total{stage="reload"}`)
		// The local haproxy -c passes (it does not bind), the host cannot bind a held port.
		held := haproxytest.Backend(t, "held")
		e.editFile(t, "config.yaml", func(s string) string {
			return strings.Replace(s, "frontend http\n", "frontend http\n      bind "+held+"\n", 1)
		})
		haproxytest.WaitFor(t, 20*time.Second, func() bool {
			return e.metric(t, `haproxy_sidecar_rejected_total{stage="reload"}`) > before
		}, "the refusal is reported")
		_, r := e.readyz(t)
		if strings.Contains(r.LastError, "s3cret-pw") {
			t.Errorf("the error leaks the password: %q", r.LastError)
		}
		e.waitServed(t, "shop.localhost", "/", "api-1")
	})
}
