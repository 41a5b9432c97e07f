// Package admission answers the Kubernetes API server's admission reviews for the sidecar's
// inputs (a ValidatingWebhookConfiguration): it takes the proposed object through the steps a
// sync takes (held inputs, rendering, haproxy -c, the templates' tests) with the object in
// place, or removed on DELETE, and denies the change when the object would be held, naming the
// input, key and line. It only reads: every replica answers, leader or not.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Change is the change an admission review proposes.
type Change struct {
	Operation       string // CREATE, UPDATE, DELETE
	Kind            string // the object's kind (ConfigMap, Secret, Ingress, ...)
	Namespace, Name string
	// Object is the object as it would be (JSON); nil on DELETE.
	Object []byte
}

// Verdict is the answer to a change.
type Verdict struct {
	Allowed bool
	// Reason says why a change is denied: the input, key, line and what is wrong.
	Reason string
	// Warnings go back to the client (kubectl prints them) whether or not it is allowed.
	Warnings []string
}

// Evaluator says what a change would do.
type Evaluator interface {
	Evaluate(ctx context.Context, c Change) Verdict
}

// Handler serves admission.k8s.io/v1 AdmissionReviews with an Evaluator. An evaluation is
// bounded by Timeout (well inside the API server's own, at most 10 s): past it, the change is
// allowed with a warning, as the webhook's failurePolicy Ignore would.
type Handler struct {
	Eval    Evaluator
	Timeout time.Duration
	Log     *slog.Logger
	// Redact takes the sidecar's secrets out of what goes back to the API server (a rendered
	// line quoted in a reason may hold the stats password); nil: nothing to take out.
	Redact func(string) string
}

// maxReview bounds a review's size (an object is at most about 1.5 MiB in etcd).
const maxReview = 8 << 20

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview))
	if err != nil {
		http.Error(w, "read the review: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	c := Change{Operation: string(req.Operation), Kind: req.Kind.Kind, Namespace: req.Namespace, Name: req.Name}
	if req.Operation != admissionv1.Delete {
		c.Object = req.Object.Raw
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 8 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	start := time.Now()
	v := h.Eval.Evaluate(ctx, c)
	if ctx.Err() != nil {
		v = Verdict{Allowed: true, Warnings: []string{fmt.Sprintf("haproxy-sidecar could not evaluate the change within %s: allowed unchecked", timeout)}}
	}
	if h.Redact != nil {
		v.Reason = h.Redact(v.Reason)
		for i := range v.Warnings {
			v.Warnings[i] = h.Redact(v.Warnings[i])
		}
	}
	h.log().Info("admission review", "operation", c.Operation, "kind", c.Kind, "object", c.Namespace+"/"+c.Name,
		"allowed", v.Allowed, "reason", v.Reason, "took", time.Since(start).Round(time.Millisecond))
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: v.Allowed, Warnings: v.Warnings}
	if !v.Allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid, Message: v.Reason}
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}
