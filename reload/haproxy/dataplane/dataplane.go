// Package dataplane applies the live configuration to remote HAProxy hosts through the HAProxy
// Data Plane API (v2 or v3). It is a reload.Reloader: the pipeline stages, checks and
// activates a generation locally as usual, then calls Reload, which reads the live
// configuration and certificates from the local paths and pushes them to every host, in
// parallel (bounded).
//
// Per host: read the configuration version; upload the certificates, map files and other
// files that are new (the ssl_certificates, maps and general storage APIs, without reload);
// pre-check the configuration with only_validate (a 400 is the API's reason); replace the
// files that changed (without reload); push the configuration with ?version=N (a 409
// re-reads the version and retries, bounded), which reloads once for everything; follow the
// Reload-Id until the reload succeeded or failed; then delete the files the configuration no
// longer has. A host that already has this exact content (by the hash of the live files,
// content.Files.Hash, not the API's text, which it rewrites) is sent nothing.
//
// Outcome of Reload:
//   - at least one host has the configuration: nil; the hosts that failed (unreachable,
//     erroring, or refusing it) are retried in the background with backoff until they have it,
//     or until the next Reload replaces the work;
//   - no host has it and at least one refused it (only_validate or the write answered 400, or
//     the reload failed): *reload.Failed with the hosts' reasons, so the pipeline rolls back
//     and reports the rejection;
//   - no host could be reached or every host erred: an error, so the pipeline retries.
//
// With Config.Canary (--rollout=canary), one host gets the configuration first and is watched
// through its HAProxy's counters; the others follow only if it holds, else it is rolled back
// and Reload returns a *rollout.Refused (canary.go).
//
// The hosts' certificate storage directory (what templates see as ssldir) is either given
// (Config.SSLDir) or learned: from the files a host's storage lists, or, on a fresh host with
// an empty storage, from the answer to the first certificate upload, which names the stored
// file's full path. Until a host has said, templates see DefaultStorageDir (the Data Plane
// API's own default). When the learned directory differs, OnSSLDir is called (the caller
// renders again) and a push of a configuration rendered for the old directory stops before
// the host validates it, once, with an error wrapping ErrSSLDirChanged.
//
// Map files and other files go to the hosts' map storage (resources.maps_dir) and general
// storage (general_storage_dir), which templates see as mapsdir and filesdir: given
// (Config.MapsStorageDir, FilesStorageDir), or the directories the storages list at start
// (DiscoverAuxDirs), else the API's defaults.
//
// With Config.Mode ModeServers the Reloader syncs only the servers of backends of hosts someone
// else configures, through the API's transactions (servers.go).
//
// Credentials (passwords, tokens, keys) never appear in logs, errors or metric labels: a
// host is named by its URL without user information.
package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/content"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/reload"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/serversync"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"

	"go.opentelemetry.io/otel/attribute"
)

// Defaults of Config.
const (
	DefaultConcurrency  = 4
	DefaultTimeout      = 60 * time.Second
	DefaultRetryMin     = time.Second
	DefaultRetryMax     = 30 * time.Second
	DefaultPollInterval = 100 * time.Millisecond
	DefaultMaxConflicts = 5
	// DefaultSlowReload is how long a reload's status may take before the wait is logged.
	DefaultSlowReload = 3 * time.Second
	// DefaultStorageDir is the Data Plane API's default certificate storage directory
	// (its resources.ssl_certs_dir): what templates see as ssldir until a host says otherwise.
	DefaultStorageDir = "/etc/haproxy/ssl"
	// DefaultMapsStorageDir and DefaultGeneralStorageDir are the Data Plane API's default map
	// and general file storage directories (resources.maps_dir, general_storage_dir).
	DefaultMapsStorageDir    = "/etc/haproxy/maps"
	DefaultGeneralStorageDir = "/etc/haproxy/general"
)

// ErrSSLDirChanged is wrapped by the error of a push stopped because the configuration was
// rendered for another certificate directory than the one the hosts turned out to use: it
// is rendered again (Config.OnSSLDir), and the new rendering pushed.
// It wraps reload.ErrRenderAgain: the pipeline renders again at once, it is no failure.
var ErrSSLDirChanged = fmt.Errorf("%w: the configuration was rendered for another certificate directory than the hosts use", reload.ErrRenderAgain)

// Results passed to OnResult.
const (
	ResultSuccess = "success" // the host has the new configuration
	ResultFailed  = "failed"  // the host's API refused it (validation or reload failed)
	ResultError   = "error"   // the host could not be reached or answered an error
)

// Config configures a Reloader.
type Config struct {
	// URLs are the Data Plane API base URLs, one per HAProxy host: https://lb1:5555/v3, or
	// without the version (then GET /v3/info, else /v2/info, decides).
	URLs []string
	// Basic authentication: Username with Password or PasswordFile (re-read at each request).
	// Token is sent as a bearer token instead.
	Username, Password, PasswordFile, Token string
	// Secret, when set, is told the password each time it is read from PasswordFile (so
	// that the redactor knows a rotated one).
	Secret func(string)
	// Static mutual TLS: CACert verifies the servers (system roots when empty); Cert and Key
	// are the client's certificate. The files are re-read when they change on disk.
	CACert, Cert, Key string
	// SPIFFE mutual TLS: the client's SVID and bundle come from the Workload API at
	// SPIFFESocket (default $SPIFFE_ENDPOINT_SOCKET); SPIFFEID is the server's expected ID,
	// or "spiffe://trust.domain" to accept any member of a trust domain. Setting SPIFFEID
	// selects SPIFFE.
	SPIFFESocket, SPIFFEID string
	// ConfigPath and CertDir are the local live files to push: the configuration, and the
	// directory of <name>.pem certificates. MapsDir and FilesDir, when set, are the local live
	// directories of map files and other files, pushed to the hosts' map and general storage.
	ConfigPath, CertDir, MapsDir, FilesDir string
	// MapsStorageDir and FilesStorageDir are the hosts' map and general file storage
	// directories the templates refer to (mapsdir, filesdir), when given (--dataplane-maps-dir,
	// --dataplane-files-dir). Empty: the directory the hosts' storage lists at start, else the
	// API's default (DefaultMapsStorageDir, DefaultGeneralStorageDir).
	MapsStorageDir, FilesStorageDir string
	// SSLDir is the hosts' certificate storage directory the templates refer to, when given
	// (--dataplane-ssl-dir): a host that reports another one is warned about. Empty: learned
	// from the hosts (see the package documentation).
	SSLDir string
	// OnSSLDir is called when the storage directory learned from a host differs from the one
	// templates used until then (previous): render again with dir. It must not block.
	OnSSLDir func(dir, previous string)
	// OnWarning is called with warnings the operator should see on the template's object
	// (reason, message), once each: for now, a configuration without a runtime socket the
	// API can use. It must not block.
	OnWarning func(reason, message string)
	// SlowReload is how long a reload's status may take before the wait is logged (default
	// DefaultSlowReload).
	SlowReload time.Duration
	// Concurrency bounds how many hosts are updated at once (default DefaultConcurrency).
	Concurrency int
	// Timeout bounds one host's whole update, reload confirmation included (default
	// DefaultTimeout), and the first fetch of the SPIFFE identity.
	Timeout time.Duration
	// RetryMin and RetryMax bound the background retry backoff (defaults DefaultRetryMin,
	// DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// PollInterval is the pause between two reload status requests (default
	// DefaultPollInterval).
	PollInterval time.Duration
	// MaxConflicts bounds the retries after a 409 (default DefaultMaxConflicts).
	MaxConflicts int
	Logger       *slog.Logger
	// OnResult is called with each host's outcome (ResultSuccess, ResultFailed, ResultError),
	// for metrics; endpoint is the URL without credentials. It must not block.
	OnResult func(endpoint, result string)
	// OnConfirmed, when set, is called when a host confirmed it has the new configuration,
	// with the context of the Reload that asked for it (its values: the sync's trace, when
	// the change was seen), a background retry's too. It must not block.
	OnConfirmed func(ctx context.Context, endpoint string)
	// Canary, when set, sends a new configuration to one host first and watches it before the
	// others follow (--rollout=canary, see canary.go).
	Canary *Canary
	// StateFile keeps what each host was last given and the configuration version it then
	// reported, so that a restarted sidecar sends nothing to a host whose configuration has
	// not moved since (optional; without it each host gets one push after a start).
	StateFile string
	// Mode is ModeConfig (the default: push the whole configuration) or ModeServers (sync the
	// servers of backends only, see servers.go).
	Mode string
	// Backends are the backends ModeServers manages (default: every backend of the rendering).
	Backends []string
}

// Reloader pushes the live configuration to every Data Plane API host.
type Reloader struct {
	cfg   Config
	log   *slog.Logger
	hosts []*host
	tr    *transport
	state *stateFile

	reloadMu sync.Mutex // one Reload at a time

	dirMu   sync.Mutex
	dir     string // the storage directory templates use now
	prevDir string // the one they used before the last change ("" for none)
	learned bool   // dir was said by a host (or given)
	// auxDirs are the map and general storage directories templates use (by storage path).
	auxDirs map[string]string

	sockMu       sync.Mutex
	warnedSocket bool // the configuration without a runtime socket was warned about

	mu     sync.Mutex
	stopBG context.CancelFunc // cancels the background retries of the last Reload
	bg     sync.WaitGroup
	closed bool
}

// host is one Data Plane API host and what this Reloader knows it has.
type host struct {
	c *client

	mu         sync.Mutex
	has        *payload // confirmed content; nil when unknown
	warnedDir  bool
	warnedAux  map[string]bool // storages (by path) whose directory differs, warned about
	retryCount int
	staleHash  string // content whose push was stopped for its certificate directory
	// synced is what the last sync in ModeServers brought the host to (nil: unknown).
	synced []serversync.Backend
}

// payload is what a host is given: the live configuration with its certificates, map files
// and other files, and their hash.
type payload struct {
	files content.Files
	hash  string // files.Hash()
}

// in returns the files of c that go to storage st.
func (c *payload) in(st storage) map[string][]byte {
	switch st.path {
	case certStorage.path:
		return c.files.Certs
	case mapStorage.path:
		return c.files.Maps
	}
	return c.files.Files
}

// New checks cfg, prepares the transport (fetching the SPIFFE identity when configured) and
// returns a Reloader. ctx bounds only the preparation. Close releases it.
func New(ctx context.Context, cfg Config) (*Reloader, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	r := newReloader(cfg)
	state, err := openState(cfg.StateFile)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	r.state = state
	clients, err := r.newClients()
	if err != nil {
		return nil, err
	}
	tr, err := newTransport(ctx, &r.cfg, r.log)
	if err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	r.tr = tr
	hc := &http.Client{Transport: tr.rt, Timeout: cfg.Timeout}
	for _, c := range clients {
		c.hc = hc
		r.hosts = append(r.hosts, &host{c: c})
	}
	return r, nil
}

// check refuses a configuration that is incomplete or contradicts itself.
func (cfg *Config) check() error {
	if len(cfg.URLs) == 0 {
		return errors.New("dataplane: at least one Data Plane API URL is required (--dataplane-url)")
	}
	if cfg.ConfigPath == "" || cfg.CertDir == "" {
		return errors.New("dataplane: the local configuration path and certificate directory are required")
	}
	if cfg.Token != "" && (cfg.Password != "" || cfg.PasswordFile != "") {
		return errors.New("dataplane: give a bearer token or a password, not both")
	}
	if cfg.Password != "" && cfg.PasswordFile != "" {
		return errors.New("dataplane: give a password or a password file, not both")
	}
	if cfg.SPIFFEID != "" && (cfg.CACert != "" || cfg.Cert != "" || cfg.Key != "") {
		return errors.New("dataplane: SPIFFE (--dataplane-spiffe-id) and static TLS files (--dataplane-ca/-cert/-key) exclude each other")
	}
	switch cfg.Mode {
	case "", ModeConfig, ModeServers:
	default:
		return fmt.Errorf("dataplane: mode %q: want %s or %s", cfg.Mode, ModeConfig, ModeServers)
	}
	if len(cfg.Backends) > 0 && cfg.Mode != ModeServers {
		return errors.New("dataplane: backends to manage are given only with --dataplane-mode=servers")
	}
	return nil
}

// setDefaults fills what cfg leaves unset with the defaults (Default*). Canary is copied
// before its window is set: the caller's stays as it is.
func (cfg *Config) setDefaults() {
	if cfg.Mode == "" {
		cfg.Mode = ModeConfig
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRetryMin
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryMin)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxConflicts <= 0 {
		cfg.MaxConflicts = DefaultMaxConflicts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SlowReload <= 0 {
		cfg.SlowReload = DefaultSlowReload
	}
	if cfg.Canary != nil {
		c := *cfg.Canary
		if c.Window <= 0 {
			c.Window = DefaultCanaryWindow
		}
		cfg.Canary = &c
	}
}

// newReloader returns the Reloader of cfg (checked, defaults set) without hosts: the storage
// directories templates see are the given ones, else the API's defaults until the hosts say.
func newReloader(cfg Config) *Reloader {
	r := &Reloader{cfg: cfg, log: cfg.Logger.With("reloader", "dataplane"), dir: DefaultStorageDir,
		auxDirs: map[string]string{mapStorage.path: DefaultMapsStorageDir, generalStorage.path: DefaultGeneralStorageDir}}
	if cfg.SSLDir != "" {
		r.cfg.SSLDir = filepath.Clean(cfg.SSLDir)
		r.dir, r.learned = r.cfg.SSLDir, true
	}
	for _, d := range []struct {
		given *string
		st    storage
	}{{&r.cfg.MapsStorageDir, mapStorage}, {&r.cfg.FilesStorageDir, generalStorage}} {
		if *d.given != "" {
			*d.given = filepath.Clean(*d.given)
			r.auxDirs[d.st.path] = *d.given
		}
	}
	return r
}

// newClients makes a client of each URL, with the credentials given or those the URL holds.
// Their HTTP client is set once the transport is ready.
func (r *Reloader) newClients() ([]*client, error) {
	cfg := &r.cfg
	tlsWanted := cfg.SPIFFEID != "" || cfg.Cert != "" || cfg.CACert != ""
	creds := credentials{username: cfg.Username, password: cfg.Password, passwordFile: cfg.PasswordFile, token: cfg.Token, secret: cfg.Secret}
	var clients []*client
	seen := map[string]bool{}
	for _, raw := range cfg.URLs {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		c, hostCreds, err := newClient(raw, nil, creds, cfg.PollInterval)
		if err != nil {
			return nil, fmt.Errorf("dataplane: %w", err)
		}
		if seen[c.label] {
			return nil, fmt.Errorf("dataplane: URL %s given twice", c.label)
		}
		seen[c.label] = true
		if tlsWanted && c.base.Scheme != "https" {
			return nil, fmt.Errorf("dataplane: %s: TLS client credentials are configured but the URL is not https", c.label)
		}
		if c.base.Scheme == "http" && (hostCreds.password != "" || hostCreds.passwordFile != "" || hostCreds.token != "") {
			r.log.Warn("Data Plane API credentials will travel over plain HTTP", "endpoint", c.label)
		}
		c.creds = hostCreds
		clients = append(clients, c)
	}
	if len(clients) == 0 {
		return nil, errors.New("dataplane: at least one Data Plane API URL is required (--dataplane-url)")
	}
	return clients, nil
}

// Endpoints lists the hosts as they appear in logs and metrics (URLs without credentials).
func (r *Reloader) Endpoints() []string {
	var out []string
	for _, h := range r.hosts {
		out = append(out, h.c.label)
	}
	return out
}

// HostsHave reports whether every host has the live content whose hash is hash
// (content.Files.Hash, as render.Bundle.Hash): pushed and reloaded, or found there already.
// Reload returns once one host has it; the others may catch up later, in the background.
func (r *Reloader) HostsHave(hash string) bool {
	for _, h := range r.hosts {
		h.mu.Lock()
		has := h.has != nil && h.has.hash == hash
		h.mu.Unlock()
		if !has {
			return false
		}
	}
	return len(r.hosts) > 0 && hash != ""
}

// Close stops the background retries and releases the transport (and the SPIFFE source).
// Call it once nothing calls Reload any more (after the pipeline has stopped).
func (r *Reloader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	stop := r.stopBG
	r.stopBG = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	r.bg.Wait()
	r.tr.close()
	return nil
}

// stopRetries cancels the background retries of the previous Reload and waits for them.
func (r *Reloader) stopRetries() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("dataplane: reloader is closed")
	}
	stop := r.stopBG
	r.stopBG = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	r.bg.Wait()
	return nil
}

// Check asks every host for /info (detecting its API version): an error names the hosts that
// do not answer or refuse the credentials.
func (r *Reloader) Check(ctx context.Context) error {
	if err := r.tr.refresh(); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	errs := make([]error, len(r.hosts))
	r.each(ctx, func(ctx context.Context, i int, h *host) { errs[i] = h.c.Info(ctx) })
	return errors.Join(errs...)
}

// SSLDir is the certificate directory templates should use now: the one given, the one
// learned from the hosts, or DefaultStorageDir until a host says.
func (r *Reloader) SSLDir() string {
	r.dirMu.Lock()
	defer r.dirMu.Unlock()
	return r.dir
}

// MapsDir is the hosts' map storage directory templates should use (mapsdir).
func (r *Reloader) MapsDir() string { return r.auxDir(mapStorage) }

// FilesDir is the hosts' general file storage directory templates should use (filesdir).
func (r *Reloader) FilesDir() string { return r.auxDir(generalStorage) }

func (r *Reloader) auxDir(st storage) string {
	r.dirMu.Lock()
	defer r.dirMu.Unlock()
	return r.auxDirs[st.path]
}

// DiscoverAuxDirs asks the hosts where they store map files and general files when the
// directories were not given: the directory of the files their storages list, else the
// API's defaults (a host whose storage is empty does not say). It fails only when the hosts
// list different directories. A host that turns out to store them elsewhere later is warned
// about (its only_validate then names the missing file).
func (r *Reloader) DiscoverAuxDirs(ctx context.Context) (mapsDir, filesDir string, err error) {
	for _, d := range []struct {
		given string
		st    storage
	}{{r.cfg.MapsStorageDir, mapStorage}, {r.cfg.FilesStorageDir, generalStorage}} {
		if d.given != "" {
			continue
		}
		dirs := make([]string, len(r.hosts))
		r.each(ctx, func(ctx context.Context, i int, h *host) {
			if _, err := h.c.apiVersion(ctx); err != nil {
				return
			}
			list, err := h.c.List(ctx, d.st)
			if err != nil {
				return // an API without this storage, or a host down: not said
			}
			for _, f := range list {
				if f.File != "" {
					dirs[i] = filepath.Dir(f.File)
					return
				}
			}
		})
		found := map[string][]string{}
		for i, dir := range dirs {
			if dir != "" {
				found[dir] = append(found[dir], r.hosts[i].c.label)
			}
		}
		if len(found) > 1 {
			return "", "", fmt.Errorf("dataplane: the hosts store %ss in different directories %v: one configuration cannot name both; configure the same storage directory on every host", d.st.kind, found)
		}
		for dir := range found {
			r.dirMu.Lock()
			r.auxDirs[d.st.path] = dir
			r.dirMu.Unlock()
			r.log.Info("the hosts' "+d.st.kind+" storage directory", "dir", dir)
		}
	}
	return r.MapsDir(), r.FilesDir(), nil
}

// DiscoverSSLDir asks the hosts where they store certificates (the directory of the files
// their storage lists) and returns the directory templates should use: the one given
// (Config.SSLDir), the one the hosts list, or DefaultStorageDir when no host stores a
// certificate yet or none answers (learned later, at the first upload). It fails only when
// the hosts list different directories: one configuration cannot name both.
func (r *Reloader) DiscoverSSLDir(ctx context.Context) (string, error) {
	if r.cfg.SSLDir != "" {
		return r.cfg.SSLDir, nil
	}
	dirs := make([]string, len(r.hosts))
	errs := make([]error, len(r.hosts))
	r.each(ctx, func(ctx context.Context, i int, h *host) {
		if _, err := h.c.apiVersion(ctx); err != nil {
			errs[i] = err
			return
		}
		list, err := h.c.ListCerts(ctx)
		if err != nil {
			errs[i] = err
			return
		}
		for _, c := range list {
			if c.File != "" {
				dirs[i] = filepath.Dir(c.File)
				return
			}
		}
	})
	found := map[string][]string{}
	for i, d := range dirs {
		if d != "" {
			found[d] = append(found[d], r.hosts[i].c.label)
		}
	}
	if len(found) > 1 {
		return "", fmt.Errorf("dataplane: the hosts store certificates in different directories %v: one configuration cannot name both; configure the same storage directory (resources.ssl_certs_dir) on every host", found)
	}
	for d := range found {
		r.dirMu.Lock()
		r.dir, r.learned = d, true
		r.dirMu.Unlock()
		r.log.Info("the hosts' certificate storage directory, which templates see as ssldir", "ssl_dir", d)
		return d, nil
	}
	if err := errors.Join(errs...); err != nil {
		r.log.Warn("could not ask every host where it stores certificates; learned at the first upload", "error", err)
	}
	dir := r.SSLDir()
	r.log.Info("no host stores a certificate yet: templates see ssldir as the Data Plane API's default until a host says where it stores them (set --dataplane-ssl-dir to fix it)",
		"ssl_dir", dir)
	return dir, nil
}

// each runs fn for every host, Concurrency at a time, each under its own Timeout.
func (r *Reloader) each(ctx context.Context, fn func(ctx context.Context, i int, h *host)) {
	sem := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, h := range r.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				fn(ctx, i, h) // fails fast on the ended context
				return
			}
			defer func() { <-sem }()
			hctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			defer cancel()
			fn(hctx, i, h)
		}()
	}
	wg.Wait()
}

// outcome is one host's result of one attempt.
type outcome struct {
	unchanged bool
	err       error // nil: the host has the content
}

func (o outcome) rejected() bool {
	var rej *Rejection
	return errors.As(o.err, &rej)
}

// Reload pushes the live configuration and certificates to every host (see the package
// documentation for the outcome rule). It cancels the background retries of the previous
// Reload first. Calls are serialised.
func (r *Reloader) Reload(ctx context.Context) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	if err := r.stopRetries(); err != nil {
		return err
	}
	if r.cfg.Mode == ModeServers {
		return r.reloadServers(ctx)
	}
	want, err := readLive(r.cfg.ConfigPath, r.cfg.CertDir, r.cfg.MapsDir, r.cfg.FilesDir)
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	if err := r.tr.refresh(); err != nil {
		// The previous TLS material stays in use; the handshake tells whether it still works.
		r.log.Warn("re-read the Data Plane API TLS files", "error", err)
	}
	r.checkRuntimeSocket(want.files.Config)
	if r.cfg.Canary != nil {
		if done, err := r.canary(ctx, want); done { // canary.go
			return err
		}
	}
	results := make([]outcome, len(r.hosts))
	r.each(ctx, func(ctx context.Context, i int, h *host) {
		results[i] = r.attempt(ctx, h, want, false)
	})

	var applied, rerender int
	var rejections, errs []error
	var failing []*host
	for i, o := range results {
		switch {
		case o.err == nil:
			applied++
		case errors.Is(o.err, ErrSSLDirChanged):
			// Not retried: the new rendering replaces this content.
			rerender++
			errs = append(errs, o.err)
		case o.rejected():
			rejections = append(rejections, o.err)
			failing = append(failing, r.hosts[i])
		default:
			errs = append(errs, o.err)
			failing = append(failing, r.hosts[i])
		}
	}
	switch {
	case applied > 0:
		if len(failing) > 0 && ctx.Err() == nil {
			r.retryInBackground(ctx, failing, want)
		}
		return nil
	case len(rejections) > 0:
		var reasons []string
		for _, e := range rejections {
			reasons = append(reasons, e.Error())
		}
		for _, e := range errs {
			reasons = append(reasons, "not reached: "+e.Error())
		}
		return &reload.Failed{Output: strings.Join(reasons, "\n")}
	case rerender == len(errs):
		return fmt.Errorf("dataplane: not pushed, rendering again: %w", errors.Join(errs...))
	}
	return fmt.Errorf("dataplane: no host could be updated: %w", errors.Join(errs...))
}

// attempt updates one host, logs and reports the outcome.
func (r *Reloader) attempt(ctx context.Context, h *host, want *payload, background bool) (o outcome) {
	start := time.Now()
	ctx, span := tracing.Start(ctx, "dataplane host", attribute.String("dataplane.endpoint", h.c.label), attribute.Bool("dataplane.retry", background))
	defer func() {
		span.SetAttributes(attribute.Bool("dataplane.unchanged", o.unchanged))
		tracing.End(span, o.err)
	}()
	o = r.apply(ctx, h, want)
	log := r.log.With("endpoint", h.c.label, "took", time.Since(start).Round(time.Millisecond))
	if background {
		h.mu.Lock()
		h.retryCount++
		log = log.With("retry", h.retryCount)
		h.mu.Unlock()
	}
	switch {
	case o.unchanged:
		log.DebugContext(ctx, "host already has this configuration; nothing sent")
		return o
	case o.err == nil:
		log.InfoContext(ctx, "configuration applied through the Data Plane API")
		r.report(h, ResultSuccess)
		if r.cfg.OnConfirmed != nil {
			r.cfg.OnConfirmed(ctx, h.c.label)
		}
	case errors.Is(o.err, context.Canceled):
		// Replaced by a newer Reload, or shutting down: not a result.
		log.DebugContext(ctx, "update cancelled", "error", o.err)
		return o
	case errors.Is(o.err, ErrSSLDirChanged):
		// Not a failure of the host: the configuration is being rendered again.
		log.InfoContext(ctx, "not pushed: the configuration names another certificate directory than the host uses; rendering again", "error", o.err)
		return o
	case o.rejected():
		log.ErrorContext(ctx, "the Data Plane API refused the configuration; the host keeps its previous one", "error", o.err)
		r.report(h, ResultFailed)
	default:
		log.ErrorContext(ctx, "could not update the host through the Data Plane API", "error", o.err)
		r.report(h, ResultError)
	}
	return o
}

func (r *Reloader) report(h *host, result string) {
	if r.cfg.OnResult != nil {
		r.cfg.OnResult(h.c.label, result)
	}
}

// retryInBackground keeps trying the failing hosts with backoff until each has want, or the
// next Reload (or Close) cancels; the retries keep the values of the Reload's context (parent).
func (r *Reloader) retryInBackground(parent context.Context, hosts []*host, want *payload) {
	r.retryHosts(parent, hosts, func(ctx context.Context, h *host) error {
		return r.attempt(ctx, h, want, true).err
	})
}

// retryHosts calls try for each host, with backoff (RetryMin doubling up to RetryMax, each
// try bounded by Timeout), until it succeeds or the next Reload (or Close) cancels; the tries
// keep the values of parent, not its end.
func (r *Reloader) retryHosts(parent context.Context, hosts []*host, try func(context.Context, *host) error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cancel()
		return
	}
	r.stopBG = cancel
	for _, h := range hosts {
		h.mu.Lock()
		h.retryCount = 0
		h.mu.Unlock()
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			for delay := r.cfg.RetryMin; ; delay = min(delay*2, r.cfg.RetryMax) {
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				hctx, hcancel := context.WithTimeout(ctx, r.cfg.Timeout)
				err := try(hctx, h)
				hcancel()
				if err == nil || ctx.Err() != nil {
					return
				}
			}
		}()
	}
}

// apply brings one host to want: unchanged when it has it already.
func (r *Reloader) apply(ctx context.Context, h *host, want *payload) outcome {
	h.mu.Lock()
	has := h.has
	h.mu.Unlock()
	if has != nil && has.hash == want.hash {
		return outcome{unchanged: true}
	}
	if has == nil && r.kept(ctx, h, want) {
		h.mu.Lock()
		h.has = want
		h.mu.Unlock()
		return outcome{unchanged: true}
	}
	// Until this push is done, what the host has is not what the state file says.
	if err := r.state.set(h.c.label, hostState{}); err != nil {
		r.log.Warn("record what the host has", "endpoint", h.c.label, "error", err)
	}
	modified, err := r.push(ctx, h, want, has, true)
	var rej *Rejection
	switch {
	case err == nil:
		h.mu.Lock()
		h.has = want
		h.mu.Unlock()
		r.remember(ctx, h, want.hash)
	case !modified:
		// Refused or failed before anything changed on the host: it has what it had.
	case errors.As(err, &rej) && rej.reloaded && has != nil:
		// The API stored the configuration, the reload failed and HAProxy kept the previous
		// one: store the previous one again, without a reload, so that what the API holds
		// is what runs (and what a restart would load).
		if _, rerr := r.push(ctx, h, has, want, false); rerr != nil {
			r.log.Warn("could not restore the previous configuration in the Data Plane API after the failed reload",
				"endpoint", h.c.label, "error", rerr)
			h.mu.Lock()
			h.has = nil // unknown: the next attempt sends everything
			h.mu.Unlock()
		}
	default:
		h.mu.Lock()
		h.has = nil // partly changed: unknown
		h.mu.Unlock()
	}
	return outcome{err: err}
}

// kept reports whether the host still has want from an earlier run: the state file says it
// was given want, and its configuration version has not moved since.
func (r *Reloader) kept(ctx context.Context, h *host, want *payload) bool {
	st, ok := r.state.get(h.c.label)
	if !ok || st.Hash != want.hash {
		return false
	}
	v, err := h.c.Version(ctx)
	if err != nil || v != st.Version {
		r.log.Debug("the host's configuration moved since it was last given this one", "endpoint", h.c.label, "version", v, "recorded", st.Version, "error", err)
		return false
	}
	r.log.Info("the host still has this configuration from before the restart; nothing sent", "endpoint", h.c.label, "version", v)
	return true
}

// remember records, after a push, what the host has and its configuration version.
func (r *Reloader) remember(ctx context.Context, h *host, hash string) {
	st := hostState{Hash: hash}
	v, err := h.c.Version(ctx)
	if err != nil {
		st = hostState{} // unknown version: forget, the next start pushes once
	} else {
		st.Version = v
	}
	if err := r.state.set(h.c.label, st); err != nil {
		r.log.Warn("record what the host has", "endpoint", h.c.label, "error", err)
	}
}

// learnDir takes note of where a host stores certificates (file is a stored file's path).
// With a given directory, a host that stores them elsewhere is warned about once. Otherwise
// the first host that says fixes the directory; when it differs from what templates used,
// OnSSLDir is called so that the configuration is rendered again. A host that disagrees with
// the directory learned is warned about once.
func (r *Reloader) learnDir(h *host, file string) {
	if file == "" {
		return
	}
	d := filepath.Dir(file)
	r.dirMu.Lock()
	if r.learned {
		known := r.dir
		r.dirMu.Unlock()
		if d == known {
			return
		}
		h.mu.Lock()
		warned := h.warnedDir
		h.warnedDir = true
		h.mu.Unlock()
		if !warned {
			r.log.Warn("the host stores certificates in another directory than the templates use (ssldir); configure the same storage directory on every host, or set --dataplane-ssl-dir",
				"endpoint", h.c.label, "host_dir", d, "ssl_dir", known)
		}
		return
	}
	r.learned = true
	prev := r.dir
	if d == prev {
		r.dirMu.Unlock()
		r.log.Info("the hosts store certificates where templates expected them", "endpoint", h.c.label, "ssl_dir", d)
		return
	}
	r.dir, r.prevDir = d, prev
	r.dirMu.Unlock()
	r.log.Info("learned the hosts' certificate storage directory from the Data Plane API: templates see it as ssldir from now on (rendering again)",
		"endpoint", h.c.label, "ssl_dir", d, "previous", prev)
	if r.cfg.OnSSLDir != nil {
		r.cfg.OnSSLDir(d, prev)
	}
}

// learnStorageDir takes note of where a host stores map files or general files (file is a
// stored file's path): a host that stores them elsewhere than the templates say is warned
// about once (its validation then names the file it cannot find).
func (r *Reloader) learnStorageDir(h *host, st storage, file string) {
	if file == "" || st == certStorage {
		if file != "" {
			r.learnDir(h, file)
		}
		return
	}
	d, want := filepath.Dir(file), r.auxDir(st)
	if d == want {
		return
	}
	h.mu.Lock()
	if h.warnedAux == nil {
		h.warnedAux = map[string]bool{}
	}
	warned := h.warnedAux[st.path]
	h.warnedAux[st.path] = true
	h.mu.Unlock()
	if !warned {
		flag := "--dataplane-maps-dir"
		if st == generalStorage {
			flag = "--dataplane-files-dir"
		}
		r.log.Warn("the host stores "+st.kind+"s in another directory than the templates use; configure the same storage directory on every host, or set "+flag,
			"endpoint", h.c.label, "host_dir", d, "dir", want)
	}
}

// staleDir returns an error wrapping ErrSSLDirChanged when want was rendered for the
// directory templates used before the last change (it names that directory and not the new
// one) and this host was not stopped for this content already.
func (r *Reloader) staleDir(h *host, want *payload) error {
	r.dirMu.Lock()
	dir, prev := r.dir, r.prevDir
	r.dirMu.Unlock()
	if prev == "" || !namesDir(want.files.Config, prev) || namesDir(want.files.Config, dir) {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.staleHash == want.hash {
		return nil // pushed as it is the second time: the host says what it thinks of it
	}
	h.staleHash = want.hash
	return fmt.Errorf("%s: the configuration refers to certificates in %s, the host stores them in %s: %w", h.c.label, prev, dir, ErrSSLDirChanged)
}

// namesDir reports whether config refers to dir as a whole path or a path's leading part.
func namesDir(config []byte, dir string) bool {
	d := []byte(dir)
	for from := 0; ; {
		i := bytes.Index(config[from:], d)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(d)
		beforeOK := i == 0 || !pathByte(config[i-1])
		afterOK := end == len(config) || !pathByte(config[end]) || config[end] == '/'
		if beforeOK && afterOK {
			return true
		}
		from = i + 1
	}
}

// pathByte reports whether c can continue a path (other than a separator).
func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '~' || c == '+' || c == '@' || c == '/' || c >= 0x80
}

// runtimeSocketHint is what the logs say about a configuration without a runtime socket.
const runtimeSocketHint = "the configuration has no `stats socket` (a UNIX socket in global) the Data Plane API can use: after each reload the API then spends about 15 s reconnecting to HAProxy before it reports the reload (unless its own configuration sets master_runtime); add one, e.g. `stats socket /var/run/haproxy/admin.sock mode 600 level admin`"

// checkRuntimeSocket warns once (log and OnWarning) when config has no runtime socket the
// API can use; again only after a configuration that had one.
func (r *Reloader) checkRuntimeSocket(config []byte) {
	has := hasRuntimeSocket(config)
	r.sockMu.Lock()
	warn := !has && !r.warnedSocket
	r.warnedSocket = !has
	r.sockMu.Unlock()
	if !warn {
		return
	}
	r.log.Warn(runtimeSocketHint)
	if r.cfg.OnWarning != nil {
		r.cfg.OnWarning("NoRuntimeSocket", "Data Plane API hosts: "+runtimeSocketHint)
	}
}

// hasRuntimeSocket reports whether the global section has a `stats socket` on a UNIX socket
// (the Data Plane API's runtime client does not use TCP ones). An unreadable configuration
// is not warned about: the hosts will say what is wrong with it.
func hasRuntimeSocket(config []byte) bool {
	cfg, err := cfgparse.Parse(config)
	if err != nil {
		return true
	}
	for _, sec := range cfg.Sections {
		if sec.Kind != "global" {
			continue
		}
		for _, line := range sec.Lines {
			w, err := cfgparse.Words(line)
			if err != nil || len(w) < 3 || w[0] != "stats" || w[1] != "socket" {
				continue
			}
			addr := cfgparse.Unquote(w[2])
			if p, ok := strings.CutPrefix(addr, "unix@"); ok && p != "" {
				return true
			}
			if !strings.Contains(addr, "@") && strings.Contains(addr, "/") {
				return true
			}
		}
	}
	return false
}

// waitReload follows a reload like client.WaitReload, and says so when the API is slow to
// report it (it answers only once it has reconnected to HAProxy's runtime API).
func (r *Reloader) waitReload(ctx context.Context, c *client, id string, config []byte) error {
	start := time.Now()
	slow := time.AfterFunc(r.cfg.SlowReload, func() {
		attrs := []any{"endpoint", c.label, "reload_id", id, "waited", time.Since(start).Round(time.Second)}
		if !hasRuntimeSocket(config) {
			attrs = append(attrs, "hint", runtimeSocketHint)
		}
		r.log.Info("waiting for the Data Plane API to report the reload (it answers once it has reconnected to HAProxy's runtime API)", attrs...)
	})
	err := c.WaitReload(ctx, id)
	if !slow.Stop() {
		r.log.Info("the Data Plane API reported the reload", "endpoint", c.label, "reload_id", id,
			"took", time.Since(start).Round(time.Millisecond), "error", err)
	}
	return err
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readLive reads the live configuration, the <name>.pem files of certDir and the files of
// mapsDir and filesDir (when set), and hashes them: the hash of the rendering they were
// written from (content.Files.Hash).
func readLive(configPath, certDir, mapsDir, filesDir string) (*payload, error) {
	cfg, err := os.ReadFile(configPath)
	if err != nil {
		return nil, fmt.Errorf("read the live configuration: %w", err)
	}
	c := &payload{files: content.Files{Config: cfg}}
	for _, d := range []struct {
		dir, ext, what string
		into           *map[string][]byte
	}{{certDir, ".pem", "certificates", &c.files.Certs}, {mapsDir, "", "map files", &c.files.Maps}, {filesDir, "", "files", &c.files.Files}} {
		*d.into = map[string][]byte{}
		if d.dir == "" {
			continue
		}
		entries, err := os.ReadDir(d.dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read the live %s: %w", d.what, err)
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), d.ext)
			if !ok || e.IsDir() || strings.HasPrefix(name, ".") || name == "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d.dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("read the live %s: %w", d.what, err)
			}
			(*d.into)[name] = b
		}
	}
	c.hash = c.files.Hash()
	return c, nil
}

func short(hash string) string { return hash[:min(12, len(hash))] }
