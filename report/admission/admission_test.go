package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/testcert"
)

// evalFunc is an Evaluator from a function.
type evalFunc func(ctx context.Context, c Change) Verdict

func (f evalFunc) Evaluate(ctx context.Context, c Change) Verdict { return f(ctx, c) }

func review(op admissionv1.Operation, kind, ns, name, object string) []byte {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "7c3a-uid", Operation: op,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: kind},
			Namespace: ns, Name: name},
	}
	if object != "" {
		r.Request.Object = runtime.RawExtension{Raw: []byte(object)}
	}
	b, _ := json.Marshal(r)
	return b
}

func post(t *testing.T, h http.Handler, body []byte) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Errorf("answered with %s %s", out.APIVersion, out.Kind)
	}
	return rec.Code, out.Response
}

func TestHandlerAnswersWithTheVerdict(t *testing.T) {
	var got Change
	h := &Handler{Eval: evalFunc(func(_ context.Context, c Change) Verdict {
		got = c
		if strings.Contains(string(c.Object), "bad") {
			return Verdict{Reason: `ConfigMap lb/services key "web": not JSON`, Warnings: []string{"w"}}
		}
		return Verdict{Allowed: true}
	})}

	_, resp := post(t, h, review(admissionv1.Update, "ConfigMap", "lb", "services", `{"data":{"web":"bad"}}`))
	if resp.UID != "7c3a-uid" || resp.Allowed {
		t.Fatalf("a bad change: uid %q allowed %v", resp.UID, resp.Allowed)
	}
	if resp.Result == nil || resp.Result.Message != `ConfigMap lb/services key "web": not JSON` || resp.Result.Code != 422 {
		t.Errorf("the denial says %+v", resp.Result)
	}
	if len(resp.Warnings) != 1 {
		t.Errorf("warnings %v", resp.Warnings)
	}
	if got.Operation != "UPDATE" || got.Kind != "ConfigMap" || got.Namespace != "lb" || got.Name != "services" {
		t.Errorf("the evaluator was asked about %+v", got)
	}

	_, resp = post(t, h, review(admissionv1.Create, "ConfigMap", "lb", "services", `{"data":{"web":"{}"}}`))
	if !resp.Allowed || resp.Result != nil {
		t.Errorf("a good change: %+v", resp)
	}

	_, resp = post(t, h, review(admissionv1.Delete, "Secret", "lb", "keys", ""))
	if !resp.Allowed || got.Object != nil || got.Operation != "DELETE" {
		t.Errorf("a delete: allowed %v, object %q", resp.Allowed, got.Object)
	}
}

func TestHandlerRedactsWhatItAnswers(t *testing.T) {
	h := &Handler{
		Eval: evalFunc(func(context.Context, Change) Verdict {
			return Verdict{Reason: `rendered line 9: "stats auth admin:s3cret x"`, Warnings: []string{"s3cret"}}
		}),
		Redact: func(s string) string { return strings.ReplaceAll(s, "s3cret", "[redacted]") },
	}
	_, resp := post(t, h, review(admissionv1.Update, "ConfigMap", "lb", "config", `{}`))
	if strings.Contains(resp.Result.Message, "s3cret") || strings.Contains(resp.Warnings[0], "s3cret") {
		t.Errorf("the answer holds the secret: %q %q", resp.Result.Message, resp.Warnings)
	}
}

func TestHandlerRefusesWhatIsNotAReview(t *testing.T) {
	h := &Handler{Eval: evalFunc(func(context.Context, Change) Verdict { t.Fatal("evaluated"); return Verdict{} })}
	for _, body := range []string{"", "{", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`} {
		if code, _ := post(t, h, []byte(body)); code != http.StatusBadRequest {
			t.Errorf("%q: answered %d, want 400", body, code)
		}
	}
}

// TestHandlerAllowsWhatItCannotEvaluateInTime: the API server's own timeout would fail the
// request; the handler answers first, allowing it with a warning, as failurePolicy Ignore would.
func TestHandlerAllowsWhatItCannotEvaluateInTime(t *testing.T) {
	h := &Handler{Timeout: 50 * time.Millisecond, Eval: evalFunc(func(ctx context.Context, _ Change) Verdict {
		<-ctx.Done()
		return Verdict{Reason: "interrupted"}
	})}
	_, resp := post(t, h, review(admissionv1.Update, "ConfigMap", "lb", "config", `{}`))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "50ms") {
		t.Errorf("answered %+v", resp)
	}
}

func writePair(t *testing.T, dir, host string) *x509.CertPool {
	t.Helper()
	crt, key := testcert.Pair(t, host)
	// As the kubelet updates a mounted Secret: the new files appear at once.
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	return pool
}

// TestServeUsesARotatedCertificate: a new certificate in the directory is served from the
// next connection on, without a restart.
func TestServeUsesARotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	first := writePair(t, dir, "127.0.0.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &Handler{Eval: evalFunc(func(context.Context, Change) Verdict { return Verdict{Allowed: true} })}
	if err := Serve(ctx, addr, dir, h, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ask := func(roots *x509.CertPool) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
		resp, err := c.Post("https://"+addr+"/validate", "application/json", bytes.NewReader(review(admissionv1.Create, "ConfigMap", "lb", "x", "{}")))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := ask(first); err != nil {
		t.Fatalf("with the first certificate: %v", err)
	}
	// Same second, same size: a rotation must not go unnoticed for equal modification times.
	second := writePair(t, dir, "127.0.0.1")
	if err := ask(second); err != nil {
		t.Fatalf("with the rotated certificate: %v", err)
	}
	if err := ask(first); err == nil {
		t.Error("the first certificate is still served")
	}
}

func TestServeNeedsACertificate(t *testing.T) {
	err := Serve(context.Background(), "127.0.0.1:0", t.TempDir(), &Handler{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("Serve without a certificate: %v", err)
	}
}
