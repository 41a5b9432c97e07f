// Package dataplanetest is a stand-in HAProxy Data Plane API for tests, written from the
// published contract (v2 and v3), with a real HAProxy (internal/haproxytest, master-worker
// mode) behind it that it writes and reloads through its master socket, so that a test sees
// real traffic change.
//
// What it implements, under /v2 or /v3:
//
//	GET  /info
//	GET  /services/haproxy/configuration/version
//	GET  /services/haproxy/configuration/raw          v2: JSON {"_version": N, "data": "..."} (406 for text/plain); v3: text/plain
//	POST /services/haproxy/configuration/raw          version, skip_version, only_validate, skip_reload, force_reload
//	GET  /services/haproxy/reloads[/{id}]
//	GET|POST /services/haproxy/storage/ssl_certificates
//	GET|PUT|DELETE /services/haproxy/storage/ssl_certificates/{name}
//	GET|POST /services/haproxy/storage/{maps,general}
//	GET|PUT|DELETE /services/haproxy/storage/{maps,general}/{name}   (storage.go)
//	POST|GET /services/haproxy/transactions, GET|PUT|DELETE /services/haproxy/transactions/{id}   (transactions.go)
//	the configuration's servers and backends, and the runtime servers (servers.go):
//	  v3 /services/haproxy/configuration/backends/{parent}/servers[/{name}], v2 .../configuration/servers[/{name}]?backend=
//	  GET|PUT /services/haproxy/configuration/backends/{name}
//	  v3 /services/haproxy/runtime/backends/{parent}/servers[/{name}], v2 .../runtime/servers[/{name}]?backend=
//	GET  /services/haproxy/stats/native, /services/haproxy/runtime/info (stats.go)
//
// Every response carries Configuration-Version. The configuration is validated with the real
// `haproxy -c` (only_validate and every write, as the real API does), and a write answers 202
// with a Reload-Id; changes inside one reload delay window share a Reload-Id. Like the real API
// on HAProxy 2.6, a failed reload leaves the new file stored while the previous workers keep
// serving.
//
// Behaviours of the real API (v3.0.21 and v2.9.25) measured and reproduced here:
//   - a fresh host's certificate storage lists `[]`, and the POST of a certificate answers the
//     stored file's model with its full path (the only way to learn the storage directory);
//   - the configuration is stored as the API rewrites it, not as it was sent: `# _version=`
//     and `# _md5hash=` comments in front, anonymous defaults sections named
//     unnamed_defaults_N, sections reordered by kind (global, defaults, ..., frontends,
//     backends), with `from` added to proxies when several defaults sections exist, so that
//     the rewritten file means what was sent (see rewrite.go);
//   - after each reload the API reconnects its runtime client while holding the lock that
//     GET /services/haproxy/reloads/{id} needs: with no `stats socket` it can connect to (and
//     no master_runtime in its own configuration) that takes about 15 s
//     (Options.RuntimeReconnect), so the reload's status is answered only then.
package dataplanetest

import (
	"context"
	"crypto/md5"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
)

// Options configure a stand-in.
type Options struct {
	// APIVersion is 2 or 3 (default 3): the path prefix and the raw GET format follow it.
	APIVersion int
	// Username and Password enable basic authentication (401 without it). Token, when set, is
	// accepted as "Authorization: Bearer TOKEN" too. All empty: no authentication.
	Username, Password, Token string
	// TLS serves HTTPS with this configuration (nil: plain HTTP). The certificates clients
	// present are recorded (ClientCerts).
	TLS *tls.Config
	// ReloadDelay is how long a requested reload waits before it runs (default 20ms); writes
	// inside the window share its Reload-Id, as with the real API's reload delay.
	ReloadDelay time.Duration
	// Config is the initial haproxy.cfg (default: a minimal configuration with one frontend on
	// a free loopback port).
	Config string
	// RuntimeReconnect is how long the API spends after each reload reconnecting its runtime
	// client when the configuration has no `stats socket` (a UNIX socket in global) that
	// answers and MasterRuntime is off; GET /services/haproxy/reloads/{id} waits for it.
	// Default DefaultRuntimeReconnect, as measured; tests that do not study it set it short.
	RuntimeReconnect time.Duration
	// MasterRuntime plays an API configured with master_runtime (the master socket): its
	// runtime client reconnects at once after a reload.
	MasterRuntime bool
	// LocalPeer is passed to HAProxy as -L (in validation too), which sets the environment
	// variable HAPROXY_LOCALPEER. Stand-ins on one machine play separate hosts with it: one
	// configuration that binds "${HAPROXY_LOCALPEER}:8443" listens on 127.0.0.2 behind one
	// stand-in and on 127.0.0.3 behind another, as the same file would on two machines.
	LocalPeer string
	// GeneralReplaceText plays a v3.0 API before 3.0.6, whose PUT of a general file takes
	// text/plain (from 3.0.6 on, and in later versions, a multipart form; v2 takes text/plain).
	GeneralReplaceText bool
	// Hook, when set, is called with each authorized request before it is handled ("METHOD
	// /path", without the version prefix): a test plays another client writing at that moment.
	Hook func(request string)
	// BeforeReload, when set, is called before each scheduled reload runs: a test changes
	// what HAProxy will load after the API checked it.
	BeforeReload func()
}

// DefaultRuntimeReconnect is the real API's post-reload reconnection time without a stats
// socket (measured: about 15 s with v3.0.21 and v2.9.25).
const DefaultRuntimeReconnect = 15 * time.Second

// Server is a running stand-in and its HAProxy.
type Server struct {
	// URL is the API's base URL, with its version prefix: http://127.0.0.1:PORT/v3.
	URL string
	// Addr is the listening address (host:port).
	Addr string
	// Dir holds ConfigPath, StorageDir (certificates), MapsDir and GeneralDir: the API's
	// ssl_certs_dir, maps_dir and general_storage_dir.
	Dir, ConfigPath, StorageDir, MapsDir, GeneralDir string
	HAProxy                                          *haproxytest.Process

	opts   Options
	prefix string
	ctx    context.Context // ends when the test does
	cancel context.CancelFunc

	mu         sync.Mutex
	version    int64
	srv        *http.Server
	closed     bool
	requests   []string
	clientCert []*x509.Certificate
	conflicts  int // versioned writes still to be preceded by a concurrent writer
	reloads    map[string]*Reload
	order      []string // reload ids, oldest first
	pending    string   // the scheduled reload not started yet
	pendingT   *time.Timer
	nextIndex  int
	timers     sync.WaitGroup

	txns     map[string]*transaction // configuration transactions, by id (transactions.go)
	commitMu sync.Mutex              // one commit at a time

	reloadMu sync.Mutex // one HAProxy reload at a time
	// runtimeMu is the lock the real API holds while its runtime client reconnects after a
	// reload; reading a reload's status needs it.
	runtimeMu sync.RWMutex
}

// Reload is the API's reload model.
type Reload struct {
	ID        string `json:"id"`
	Status    string `json:"status"` // in_progress, succeeded, failed
	Response  string `json:"response,omitempty"`
	Timestamp int64  `json:"reload_timestamp,omitempty"`
}

// Certificate is the API's ssl_certificate storage model.
type Certificate struct {
	StorageName string `json:"storage_name"`
	File        string `json:"file"`
	Description string `json:"description,omitempty"`
}

// DefaultConfig is a minimal configuration that HAProxy accepts and starts with: one frontend
// on port answering "initial".
func DefaultConfig(port int) string {
	return fmt.Sprintf(`global
  hard-stop-after 5s
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend initial
  bind 127.0.0.1:%d
  http-request return status 200 content-type text/plain string initial
`, port)
}

// Start writes the initial configuration, starts HAProxy on it and serves the API until the
// test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.APIVersion == 0 {
		opts.APIVersion = 3
	}
	if opts.APIVersion != 2 && opts.APIVersion != 3 {
		t.Fatalf("dataplanetest: APIVersion %d: want 2 or 3", opts.APIVersion)
	}
	if opts.ReloadDelay <= 0 {
		opts.ReloadDelay = 20 * time.Millisecond
	}
	if opts.RuntimeReconnect <= 0 {
		opts.RuntimeReconnect = DefaultRuntimeReconnect
	}
	if opts.Config == "" {
		opts.Config = DefaultConfig(haproxytest.FreePort(t))
	}
	dir := t.TempDir()
	s := &Server{
		Dir:        dir,
		ConfigPath: filepath.Join(dir, "haproxy.cfg"),
		StorageDir: filepath.Join(dir, "ssl"),
		MapsDir:    filepath.Join(dir, "maps"),
		GeneralDir: filepath.Join(dir, "general"),
		opts:       opts,
		prefix:     fmt.Sprintf("/v%d", opts.APIVersion),
		version:    1,
		reloads:    map[string]*Reload{},
	}
	for _, d := range []string{s.StorageDir, s.MapsDir, s.GeneralDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.writeConfig(opts.Config, s.version); err != nil {
		t.Fatal(err)
	}
	s.HAProxy = haproxytest.Start(t, s.ConfigPath, s.haproxyArgs()...)
	s.ctx, s.cancel = context.WithCancel(context.Background())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	scheme := "http"
	if opts.TLS != nil {
		scheme = "https"
	}
	s.URL = scheme + "://" + s.Addr + s.prefix
	s.serve(l)
	t.Cleanup(s.close)
	return s
}

func (s *Server) haproxyArgs() []string {
	if s.opts.LocalPeer != "" {
		return []string{"-L", s.opts.LocalPeer}
	}
	return nil
}

// close stops the API and waits for scheduled reloads; HAProxy is stopped by its own cleanup.
func (s *Server) close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.closed = true // no new timers from here on
	if s.pendingT != nil && s.pendingT.Stop() {
		s.timers.Done() // a reload that never ran stays in progress
	}
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
	s.cancel()
	s.timers.Wait()
	s.reloadMu.Lock() // a reload in progress finishes (its context is cancelled)
	defer s.reloadMu.Unlock()
}

func (s *Server) serve(l net.Listener) {
	if s.opts.TLS != nil {
		cfg := s.opts.TLS.Clone()
		verify := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				s.mu.Lock()
				s.clientCert = append(s.clientCert, cs.PeerCertificates[0])
				s.mu.Unlock()
			}
			if verify != nil {
				return verify(cs)
			}
			return nil
		}
		l = tls.NewListener(l, cfg)
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(l)
}

// Down stops answering: the listener and every open connection are closed, as when the host
// or its API is down. HAProxy keeps running.
func (s *Server) Down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Up listens again on the same address after Down.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	var l net.Listener
	err := haproxytest.Poll(5*time.Second, func() bool {
		var err error
		l, err = net.Listen("tcp", s.Addr)
		return err == nil
	})
	if err != nil {
		t.Fatalf("listen again on %s: %v", s.Addr, err)
	}
	s.serve(l)
}

// Version is the configuration version.
func (s *Server) Version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Requests lists every request received so far as "METHOD /path?query" (without the version
// prefix), unauthenticated ones included.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// ClientCerts lists the leaf certificate clients presented, one per TLS handshake.
func (s *Server) ClientCerts() []*x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*x509.Certificate(nil), s.clientCert...)
}

// ConcurrentWrites makes the next n versioned configuration writes find that another client
// wrote just before them: the version moves on, so they get 409.
func (s *Server) ConcurrentWrites(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = n
}

// StoredConfig is the configuration file as the API stores it.
func (s *Server) StoredConfig(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Reloads lists the reloads so far, oldest first.
func (s *Server) Reloads() []Reload {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Reload
	for _, id := range s.order {
		out = append(out, *s.reloads[id])
	}
	return out
}

// StorageFiles lists the names of the files in the certificate storage directory.
func (s *Server) StorageFiles(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(s.StorageDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	p := s.prefix + "/services/haproxy"
	mux.HandleFunc("GET "+s.prefix+"/info", s.info)
	mux.HandleFunc("GET "+p+"/configuration/version", s.getVersion)
	mux.HandleFunc("GET "+p+"/configuration/raw", s.getRaw)
	mux.HandleFunc("POST "+p+"/configuration/raw", s.postRaw)
	mux.HandleFunc("GET "+p+"/reloads", s.listReloads)
	mux.HandleFunc("GET "+p+"/reloads/{id}", s.getReload)
	mux.HandleFunc("GET "+p+"/storage/ssl_certificates", s.listCerts)
	mux.HandleFunc("POST "+p+"/storage/ssl_certificates", s.createCert)
	mux.HandleFunc("GET "+p+"/storage/ssl_certificates/{name}", s.getCert)
	mux.HandleFunc("PUT "+p+"/storage/ssl_certificates/{name}", s.replaceCert)
	mux.HandleFunc("DELETE "+p+"/storage/ssl_certificates/{name}", s.deleteCert)
	s.storageRoutes(mux, p)
	s.transactionRoutes(mux, p)
	s.serverRoutes(mux, p)
	s.statsRoutes(mux, p) // stats.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+strings.TrimPrefix(r.URL.RequestURI(), s.prefix))
		s.mu.Unlock()
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="HAProxy Data Plane API"`)
			writeError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		if s.opts.Hook != nil {
			s.opts.Hook(r.Method + " " + strings.TrimPrefix(r.URL.Path, s.prefix))
		}
		w.Header().Set("Configuration-Version", strconv.FormatInt(s.Version(), 10))
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	o := s.opts
	if o.Username == "" && o.Password == "" && o.Token == "" {
		return true
	}
	if o.Token != "" && r.Header.Get("Authorization") == "Bearer "+o.Token {
		return true
	}
	user, pass, ok := r.BasicAuth()
	return ok && (o.Username != "" || o.Password != "") && user == o.Username && pass == o.Password
}

type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"api":    map[string]string{"version": fmt.Sprintf("v%d.0.0 dataplanetest", s.opts.APIVersion), "build_date": "2026-01-01T00:00:00Z"},
		"system": map[string]any{},
	})
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Version())
}

// stored reads the configuration and its version.
func (s *Server) stored() (string, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.ConfigPath)
	return string(b), s.version, err
}

func (s *Server) getRaw(w http.ResponseWriter, r *http.Request) {
	text, version, err := s.stored()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if s.opts.APIVersion == 2 {
		accept := r.Header.Get("Accept")
		if accept != "" && !strings.Contains(accept, "json") && !strings.Contains(accept, "*/*") {
			writeError(w, http.StatusNotAcceptable, "unsupported media type "+accept+", want application/json")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"_version": version, "data": text})
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, text)
}

// boolParam reads a boolean query parameter; "" is false.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean", name, v)
	}
	return b, nil
}

type writeParams struct {
	version                                            int64
	hasVersion                                         bool
	skipVersion, onlyValidate, skipReload, forceReload bool
}

func parseWriteParams(r *http.Request) (writeParams, error) {
	var p writeParams
	var err error
	for name, dst := range map[string]*bool{"skip_version": &p.skipVersion, "only_validate": &p.onlyValidate, "skip_reload": &p.skipReload, "force_reload": &p.forceReload} {
		if *dst, err = boolParam(r, name); err != nil {
			return p, err
		}
	}
	if v := r.URL.Query().Get("version"); v != "" {
		if p.version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return p, fmt.Errorf("version: %q is not an integer", v)
		}
		p.hasVersion = true
	}
	return p, nil
}

var apiComment = regexp.MustCompile(`(?m)^# _(version|md5hash)=.*\n`)

func (s *Server) postRaw(w http.ResponseWriter, r *http.Request) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	text := apiComment.ReplaceAllString(string(body), "")
	if len(text) > 0 && !strings.Contains(text, "\n") {
		writeError(w, http.StatusBadRequest, "invalid configuration: no newline character found")
		return
	}
	// What is validated and stored is the API's own rendering of the configuration.
	text = rewrite(text)
	if p.onlyValidate {
		if msg, ok := s.validate(r.Context(), text); !ok {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, text)
		return
	}
	if !p.skipVersion && !p.hasVersion {
		writeError(w, http.StatusBadRequest, "version or transaction not specified")
		return
	}
	if msg, ok := s.validate(r.Context(), text); !ok {
		writeError(w, http.StatusBadRequest, msg)
		return
	}

	if !s.storeVersioned(w, text, !p.skipVersion, p.version, "version mismatch: the configuration is at version %d, the request has %d") {
		return
	}
	s.afterWrite(w, p, http.StatusCreated, "text/plain", text)
}

// storeVersioned stores text as the next version of the configuration and sets the
// Configuration-Version header. With check, the configuration must be at version given (after
// any concurrent writer set up by Conflicts), else it answers 409 with mismatch formatted with
// the current version and the given one: each endpoint of the real API words it its own way.
// It answers the request itself when it does not store, and then returns false.
func (s *Server) storeVersioned(w http.ResponseWriter, text string, check bool, given int64, mismatch string) bool {
	s.mu.Lock()
	if check && s.conflicts > 0 {
		s.conflicts--
		s.version++ // another client wrote just before
	}
	if check && given != s.version {
		cur := s.version
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf(mismatch, cur, given))
		return false
	}
	s.version++
	err := s.writeConfig(text, s.version)
	version := s.version
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return false
	}
	w.Header().Set("Configuration-Version", strconv.FormatInt(version, 10))
	return true
}

// afterWrite answers a successful write: skip_reload -> okCode, force_reload -> okCode after a
// synchronous reload, otherwise 202 with a Reload-Id.
func (s *Server) afterWrite(w http.ResponseWriter, p writeParams, okCode int, contentType string, body any) {
	write := func(code int) {
		if code == http.StatusNoContent {
			w.WriteHeader(code)
			return
		}
		if text, ok := body.(string); ok {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(code)
			io.WriteString(w, text)
			return
		}
		writeJSON(w, code, body)
	}
	switch {
	case p.skipReload:
		write(okCode)
	case p.forceReload:
		if out, err := s.reloadNow(s.ctx); err != nil {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("Reload failed: %v, %s", err, out))
			return
		}
		write(okCode)
	default:
		w.Header().Set("Reload-Id", s.scheduleReload())
		if okCode == http.StatusNoContent {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		write(http.StatusAccepted)
	}
}

// writeConfig stores text as the API does: with its own comments in front.
func (s *Server) writeConfig(text string, version int64) error {
	sum := md5.Sum([]byte(text))
	out := fmt.Sprintf("# _version=%d\n# _md5hash=%s\n%s", version, hex.EncodeToString(sum[:]), text)
	return writeAtomic(s.ConfigPath, []byte(out), 0o600)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// validate runs the real `haproxy -c` on text, from the API's directory (so relative paths
// resolve as they would for HAProxy). It returns the message for a 400 when invalid.
func (s *Server) validate(ctx context.Context, text string) (string, bool) {
	f, err := os.CreateTemp(s.Dir, ".validate-*.cfg")
	if err != nil {
		return "validate: " + err.Error(), false
	}
	defer os.Remove(f.Name())
	if _, err := io.WriteString(f, text); err != nil {
		f.Close()
		return "validate: " + err.Error(), false
	}
	f.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "haproxy", append([]string{"-c", "-f", f.Name()}, s.haproxyArgs()...)...)
	cmd.Dir = s.Dir
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return "", true
	}
	// Like the real API: the validation error with HAProxy's own output.
	return fmt.Sprintf("validation error: %v: %s", err, strings.TrimSpace(string(out))), false
}

// scheduleReload returns the Reload-Id of the reload that will pick up the change: the pending
// one if a reload is already scheduled, else a new one that runs after ReloadDelay.
func (s *Server) scheduleReload() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != "" {
		return s.pending
	}
	id := fmt.Sprintf("%s-%d", time.Now().Format("2006-01-02"), s.nextIndex)
	s.nextIndex++
	s.pending = id
	s.reloads[id] = &Reload{ID: id, Status: "in_progress"}
	s.order = append(s.order, id)
	if s.closed {
		return id // the test is over: it stays in progress
	}
	s.timers.Add(1)
	s.pendingT = time.AfterFunc(s.opts.ReloadDelay, func() {
		defer s.timers.Done()
		s.mu.Lock()
		s.pending = ""
		s.pendingT = nil
		s.mu.Unlock()
		if s.opts.BeforeReload != nil {
			s.opts.BeforeReload()
		}
		out, err := s.reloadNow(s.ctx)
		// The outcome is recorded, then the runtime client reconnects under the lock that
		// reading a reload's status needs.
		s.runtimeMu.Lock()
		defer s.runtimeMu.Unlock()
		s.mu.Lock()
		r := s.reloads[id]
		r.Timestamp = time.Now().Unix()
		r.Response = out
		r.Status = "succeeded"
		if err != nil {
			r.Status = "failed"
		}
		s.mu.Unlock()
		s.reconnectRuntime()
	})
	return id
}

// reconnectRuntime plays the API's runtime client reconnecting after a reload: at once when it
// can use the master socket (MasterRuntime) or a stats socket of the stored configuration
// answers, else after RuntimeReconnect (or when the test ends).
func (s *Server) reconnectRuntime() {
	if s.opts.MasterRuntime {
		return
	}
	text, _, err := s.stored()
	if err == nil {
		for _, path := range StatsSockets(text) {
			if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
				c.Close()
				return
			}
		}
	}
	t := time.NewTimer(s.opts.RuntimeReconnect)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ctx.Done():
	}
}

// StatsSockets lists the UNIX socket paths of the `stats socket` lines of the global section
// of a configuration: the runtime API sockets the Data Plane API can use (not TCP ones).
func StatsSockets(config string) []string {
	var paths []string
	inGlobal := false
	for _, line := range strings.Split(config, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if sectionKinds[f[0]] {
			inGlobal = f[0] == "global"
			continue
		}
		if !inGlobal || len(f) < 3 || f[0] != "stats" || f[1] != "socket" {
			continue
		}
		addr := strings.Trim(f[2], `"'`)
		if p, ok := strings.CutPrefix(addr, "unix@"); ok {
			addr = p
		} else if strings.Contains(addr, "@") || !strings.Contains(addr, "/") {
			continue // ipv4@, ipv6@, abns@, fd@, or host:port
		}
		paths = append(paths, addr)
	}
	return paths
}

// reloadNow reloads HAProxy through its master socket and confirms it (reload.MasterSocket:
// the answer of 2.7+, `show proc` on 2.6). The output is what HAProxy logged meanwhile, as the
// reload command's output of the real API.
func (s *Server) reloadNow(ctx context.Context) (string, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	logStart := len(s.HAProxy.Logs())
	err := (&reload.MasterSocket{Path: s.HAProxy.MasterSocket, Timeout: 30 * time.Second}).Reload(ctx)
	return strings.TrimSpace(s.HAProxy.Logs()[logStart:]), err
}

func (s *Server) listReloads(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Reloads())
}

func (s *Server) getReload(w http.ResponseWriter, r *http.Request) {
	// Held while the API's runtime client reconnects after a reload.
	s.runtimeMu.RLock()
	defer s.runtimeMu.RUnlock()
	id := r.PathValue("id")
	s.mu.Lock()
	rl, ok := s.reloads[id]
	var c Reload
	if ok {
		c = *rl
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "reload "+id+" not found")
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) certModel(name string) Certificate {
	return Certificate{StorageName: name, File: filepath.Join(s.StorageDir, name), Description: "managed SSL file"}
}

// certPath checks a storage name and returns its file.
func (s *Server) certPath(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("invalid file name %q", name)
	}
	return filepath.Join(s.StorageDir, name), nil
}

func (s *Server) listCerts(w http.ResponseWriter, r *http.Request) {
	entries, err := os.ReadDir(s.StorageDir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	list := []Certificate{}
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			list = append(list, s.certModel(e.Name()))
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].StorageName < list[j].StorageName })
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getCert(w http.ResponseWriter, r *http.Request) {
	path, err := s.certPath(r.PathValue("name"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := os.Stat(path); err != nil {
		writeError(w, http.StatusNotFound, "file "+r.PathValue("name")+" not found")
		return
	}
	writeJSON(w, http.StatusOK, s.certModel(r.PathValue("name")))
}

func checkPEM(b []byte) error {
	if !strings.Contains(string(b), "-----BEGIN ") {
		return errors.New("invalid file content: no PEM block")
	}
	return nil
}

func (s *Server) createCert(w http.ResponseWriter, r *http.Request) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	file, hdr, err := r.FormFile("file_upload")
	if err != nil {
		writeError(w, http.StatusBadRequest, "file_upload: "+err.Error())
		return
	}
	defer file.Close()
	data, err := io.ReadAll(file)
	if err != nil {
		writeError(w, http.StatusBadRequest, "file_upload: "+err.Error())
		return
	}
	s.storeCert(w, p, hdr.Filename, data, false)
}

// storeCert checks and writes certificate name: a new one (POST: 409 if it exists), or a
// replacement (PUT: 404 if it does not).
func (s *Server) storeCert(w http.ResponseWriter, p writeParams, name string, data []byte, replace bool) {
	path, err := s.certPath(name)
	if err == nil {
		err = checkPEM(data)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	_, statErr := os.Stat(path)
	switch {
	case !replace && statErr == nil:
		writeError(w, http.StatusConflict, "file "+name+" already exists")
		return
	case replace && statErr != nil:
		writeError(w, http.StatusNotFound, "file "+name+" not found")
		return
	}
	if err := writeAtomic(path, data, 0o600); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	status := http.StatusCreated
	if replace {
		status = http.StatusOK
	}
	s.afterWrite(w, p, status, "", s.certModel(name))
}

func (s *Server) replaceCert(w http.ResponseWriter, r *http.Request) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.storeCert(w, p, r.PathValue("name"), data, true)
}

func (s *Server) deleteCert(w http.ResponseWriter, r *http.Request) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := r.PathValue("name")
	path, err := s.certPath(name)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			writeError(w, http.StatusNotFound, "file "+name+" not found")
			return
		}
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.afterWrite(w, p, http.StatusNoContent, "", nil)
}
