package status

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Health tracks what /healthz and /readyz answer. Ready means a good configuration is live:
// HAProxy serves what the inputs describe (or, after a rejection, the last good version of it).
type Health struct {
	mu        sync.Mutex
	ready     bool
	standby   bool
	liveHash  string
	liveSince time.Time
	lastErr   string
	errSince  time.Time
}

// Live records that the configuration with this hash is live.
func (h *Health) Live(hash string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready, h.liveHash, h.liveSince = true, hash, time.Now()
	h.lastErr, h.standby = "", false
}

// Standby records that the inputs render and validate but this instance does not apply them
// (a follower under leader election): it is ready to take over.
func (h *Health) Standby(hash string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ready, h.standby, h.lastErr = true, true, ""
	h.liveHash = ""
}

// Failed records why the latest inputs did not go live; readiness is unchanged: a good
// configuration that was live stays live.
func (h *Health) Failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr, h.errSince = err.Error(), time.Now()
}

// LiveHash is the hash of the configuration this instance made live ("" if none, or while it
// is a standby).
func (h *Health) LiveHash() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.liveHash
}

// Ready reports whether a good configuration is live.
func (h *Health) Ready() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ready
}

type healthBody struct {
	Ready      bool   `json:"ready"`
	Standby    bool   `json:"standby,omitempty"`
	LiveConfig string `json:"liveConfig,omitempty"`
	LiveSince  string `json:"liveSince,omitempty"`
	LastError  string `json:"lastError,omitempty"`
	ErrorSince string `json:"errorSince,omitempty"`
}

func (h *Health) body() healthBody {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := healthBody{Ready: h.ready, Standby: h.standby, LiveConfig: h.liveHash, LastError: h.lastErr}
	if !h.liveSince.IsZero() {
		b.LiveSince = h.liveSince.UTC().Format(time.RFC3339)
	}
	if !h.errSince.IsZero() && h.lastErr != "" {
		b.ErrorSince = h.errSince.UTC().Format(time.RFC3339)
	}
	return b
}

// Register adds /healthz (the process is up) and /readyz (a good configuration is live; 503
// with the reason otherwise) to mux. Both answer JSON with the live hash and the last error.
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
