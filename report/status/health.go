package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// Health is what /healthz and /readyz answer. Ready means a good configuration is live and
// HAProxy, as far as the sidecar can tell, runs it: inputs held back (see package quarantine)
// do not make it unready, HAProxy being down does. What HAProxy runs is read from its owner
// (HAProxy); Health keeps only what the syncs said: the last error, standing by, what is held.
type Health struct {
	// Redact, when set, is applied to every message Health keeps (secrets never reach /readyz).
	Redact func(string) string
	// HAProxy is what HAProxy runs (package live); nil: nothing is known.
	HAProxy func() live.State

	mu      sync.Mutex
	standby bool
	// stopping: the sidecar was asked to stop and drains (--shutdown-delay): not ready, so that
	// load balancers stop sending to the pod while HAProxy still serves.
	stopping bool
	lastErr  string
	errSince time.Time
	// failingSince is when the syncs began to fail in a row (zero once one goes through): how
	// long the latest changes have waited, for haproxy_sidecar_failing_since_timestamp_seconds.
	failingSince time.Time
	held         []HeldInput
	// source is why the source of inputs cannot be followed ("" while it is followed), since
	// when: the last good configuration keeps serving meanwhile, so it is a reason shown, not
	// a cause of unreadiness.
	source      string
	sourceSince time.Time
}

// HeldInput is one input held back, as /readyz lists it.
type HeldInput struct {
	Input  string `json:"input"`           // "service/web", "templates", "certificate/site"
	Object string `json:"object"`          // "ConfigMap lb/services key \"web\""
	Stage  string `json:"stage"`           // decode, render, validate, reload
	Reason string `json:"reason"`          // why
	Kept   bool   `json:"lastGoodKept"`    // its last good version serves meanwhile (else it is left out)
	Since  string `json:"since,omitempty"` // RFC 3339
	since  time.Time
}

func (h *Health) redact(s string) string {
	if h.Redact == nil {
		return s
	}
	return h.Redact(s)
}

// Applied records that a sync made its configuration live, or found it live: no error to show,
// not standing by.
func (h *Health) Applied() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr, h.standby, h.failingSince = "", false, time.Time{}
}

// Stopping records that the sidecar was asked to stop: /readyz answers 503 from now on, whatever
// HAProxy runs (it keeps serving while the pod drains).
func (h *Health) Stopping() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopping = true
}

// Written records that a sync wrote its configuration while HAProxy does not run: not
// standing by (HAProxy loads it when it starts).
func (h *Health) Written() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standby = false
}

// Standby records that the inputs render and validate but this instance does not apply them
// (a follower under leader election): it is ready to take over.
func (h *Health) Standby() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standby, h.lastErr, h.failingSince = true, "", time.Time{}
}

// Failed records why the latest sync did not go through; readiness is unchanged: a good
// configuration that was live stays live.
func (h *Health) Failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr, h.errSince = h.redact(err.Error()), time.Now()
	if h.failingSince.IsZero() {
		h.failingSince = h.errSince
	}
}

// FailingSince is when the syncs began to fail in a row (an operational failure, a rendering
// HAProxy refused, no rendering possible), so that the latest changes wait; zero once a sync
// goes through or stands by. Inputs held one by one do not count: the rest goes live.
func (h *Health) FailingSince() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failingSince
}

// SourceDown records that the source of inputs cannot be followed, and why (the message names
// the source); readiness is unchanged: HAProxy keeps serving what it runs.
func (h *Health) SourceDown(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.source == "" {
		h.sourceSince = time.Now()
	}
	h.source = h.redact(why.Error())
}

// SourceUp records that the source of inputs is followed again.
func (h *Health) SourceUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.source, h.sourceSince = "", time.Time{}
}

// SetHeld replaces the list of inputs held back (kept since they were first held).
func (h *Health) SetHeld(held []HeldInput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	since := map[string]time.Time{}
	for _, x := range h.held {
		since[x.Input+"\x00"+x.Reason] = x.since
	}
	out := make([]HeldInput, len(held))
	for i, x := range held {
		x.Reason = h.redact(x.Reason)
		x.since = since[x.Input+"\x00"+x.Reason]
		if x.since.IsZero() {
			x.since = time.Now()
		}
		out[i] = x
	}
	slices.SortFunc(out, func(a, b HeldInput) int { return strings.Compare(a.Input, b.Input) })
	h.held = out
}

// haproxy is what HAProxy runs, from its owner.
func (h *Health) haproxy() live.State {
	if h.HAProxy == nil {
		return live.State{}
	}
	return h.HAProxy()
}

// Ready reports whether a good configuration is live and HAProxy is not known to be down.
func (h *Health) Ready() bool {
	st := h.haproxy()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.readyLocked(st)
}

func (h *Health) readyLocked(st live.State) bool {
	if h.stopping {
		return false
	}
	if h.standby {
		return true
	}
	return st.Live != "" && st.Probe.Seen != live.Down
}

type healthBody struct {
	Ready      bool        `json:"ready"`
	Standby    bool        `json:"standby,omitempty"`
	Stopping   bool        `json:"stopping,omitempty"` // asked to stop: draining
	HAProxy    string      `json:"haproxy,omitempty"`  // up, down
	LiveConfig string      `json:"liveConfig,omitempty"`
	LiveSince  string      `json:"liveSince,omitempty"`
	Written    string      `json:"writtenConfig,omitempty"` // on disk, waiting for HAProxy to start
	Reason     string      `json:"reason,omitempty"`        // why not ready; or, ready, why the source cannot be followed
	Source     string      `json:"source,omitempty"`        // up, down: the source of inputs
	SourceErr  string      `json:"sourceError,omitempty"`   // why it is down
	SourceDown string      `json:"sourceDownSince,omitempty"`
	LastError  string      `json:"lastError,omitempty"`
	ErrorSince string      `json:"errorSince,omitempty"`
	Held       []HeldInput `json:"held,omitempty"`
}

func (h *Health) body() healthBody {
	st := h.haproxy()
	h.mu.Lock()
	defer h.mu.Unlock()
	b := healthBody{Ready: h.readyLocked(st), Standby: h.standby, Stopping: h.stopping, HAProxy: st.Probe.Seen.String(),
		Written: st.LoadsAtStart, LastError: h.lastErr, Held: slices.Clone(h.held)}
	if !h.standby {
		b.LiveConfig = st.Live
	}
	if !st.LiveSince.IsZero() && b.LiveConfig != "" {
		b.LiveSince = st.LiveSince.UTC().Format(time.RFC3339)
	}
	if !h.errSince.IsZero() && h.lastErr != "" {
		b.ErrorSince = h.errSince.UTC().Format(time.RFC3339)
	}
	for i := range b.Held {
		b.Held[i].Since = b.Held[i].since.UTC().Format(time.RFC3339)
	}
	if b.LastError == "" && len(h.held) > 0 {
		latest := h.held[0]
		for _, x := range h.held[1:] {
			if x.since.After(latest.since) {
				latest = x
			}
		}
		b.LastError = latest.Reason // the most recently held
	}
	b.Source = "up"
	if h.source != "" {
		b.Source, b.SourceErr, b.SourceDown = "down", h.source, h.sourceSince.UTC().Format(time.RFC3339)
	}
	downWhy := h.redact(st.Probe.Why)
	switch {
	case h.stopping:
		b.Reason = "stopping: the pod is being stopped; HAProxy keeps serving while load balancers stop sending to it"
	case st.Probe.Seen == live.Down && st.Probe.Process != 0:
		b.Reason = fmt.Sprintf("HAProxy runs (pid %d) but its master socket does not answer: the sidecar can neither reload it nor change it at runtime (check --master-socket): %s",
			st.Probe.Process, downWhy)
	case b.Ready:
		b.Reason = h.source // the last good configuration serves, but changes are not seen
	case st.Probe.Seen == live.Down && st.Live != "":
		b.Reason = "HAProxy is down: " + downWhy
	case st.LoadsAtStart != "":
		b.Reason = "the configuration is written; HAProxy is not running and loads it when it starts"
		if st.Probe.Seen == live.Down && downWhy != "" {
			b.Reason += " (" + downWhy + ")"
		}
	case h.lastErr != "":
		b.Reason = h.lastErr
	case h.source != "":
		b.Reason = "no configuration is live yet: " + h.source
	default:
		b.Reason = "no configuration is live yet"
	}
	return b
}

// Register adds /healthz (the process is up) and /readyz (a good configuration is live and
// HAProxy runs; 503 with the reason otherwise) to mux. Both answer JSON with the live hash,
// the last error, the inputs held back and whether the source is followed (a source that
// cannot be is the reason given while ready).
func (h *Health) Register(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.body())
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		b := h.body()
		code := http.StatusOK
		if !b.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, b)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
