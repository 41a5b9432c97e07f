package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxResponse bounds what is read of one answer (a raw configuration can be megabytes).
const maxResponse = 64 << 20

// APIError is an answer of the Data Plane API other than the one expected.
type APIError struct {
	Endpoint string // the host's URL, without credentials
	Op       string // what was being done
	Status   int
	Message  string // the API's message (its JSON "message", or the body's first line)
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s: %s: HTTP %d %s", e.Endpoint, e.Op, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		msg += " (check the Data Plane API credentials)"
	}
	return msg
}

// Rejection means a host's API refused the configuration itself: only_validate (or the write)
// answered 400, or the reload failed. The reason is the API's.
type Rejection struct {
	Endpoint string
	Reason   string
	reloaded bool // the API stored it and the reload failed (the previous config runs)
}

func (r *Rejection) Error() string { return r.Endpoint + ": " + r.Reason }

// client talks to one Data Plane API host.
type client struct {
	label string // the URL without credentials, for logs, errors and metric labels
	base  *url.URL
	hc    *http.Client
	creds credentials
	poll  time.Duration

	mu  sync.Mutex
	api int // 2 or 3; 0 until detected
}

// newClient parses one --dataplane-url. Credentials in the URL are moved to creds (when none
// were given otherwise) and never kept in the URL.
func newClient(raw string, hc *http.Client, creds credentials, poll time.Duration) (*client, credentials, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, creds, fmt.Errorf("Data Plane API URL: %w", redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, creds, fmt.Errorf("Data Plane API URL %q: want http(s)://host:port[/v2|/v3]", u.Redacted())
	}
	if u.User != nil {
		if creds.username == "" && creds.token == "" {
			creds.username = u.User.Username()
			if p, ok := u.User.Password(); ok && creds.password == "" && creds.passwordFile == "" {
				creds.password = p
			}
		}
		u.User = nil
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	c := &client{label: u.String(), base: u, hc: hc, creds: creds, poll: poll}
	switch path.Base(u.Path) {
	case "v2":
		c.api = 2
	case "v3":
		c.api = 3
	}
	return c, creds, nil
}

// redactURLError keeps a URL parse error from echoing a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New(ue.Err.Error())
	}
	return err
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request under the API prefix. The answer is read whole.
func (c *client) do(ctx context.Context, op, method, p string, query url.Values, contentType string, body []byte) (*response, error) {
	c.mu.Lock()
	base := c.base
	c.mu.Unlock()
	return c.doAt(ctx, base, op, method, p, query, contentType, body)
}

// doAt is do under another base URL.
func (c *client) doAt(ctx context.Context, base *url.URL, op, method, p string, query url.Values, contentType string, body []byte) (*response, error) {
	u := *base
	u.Path += p
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9")
	if err := c.creds.apply(req); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: read the answer: %w", c.label, op, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: b}, nil
}

func (c *client) apiError(op string, r *response) *APIError {
	return &APIError{Endpoint: c.label, Op: op, Status: r.status, Message: apiMessage(r.body)}
}

// apiMessage extracts the API's error message: {"code": N, "message": "..."}, or the body.
func apiMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return strings.TrimSpace(e.Message)
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

// apiVersion returns 2 or 3: from the URL, or by asking /v3/info then /v2/info (and the URL
// gets the prefix that answered).
func (c *client) apiVersion(ctx context.Context) (int, error) {
	c.mu.Lock()
	api, base := c.api, c.base
	c.mu.Unlock()
	if api != 0 {
		return api, nil
	}
	for _, v := range []int{3, 2} {
		prefix := "/v" + strconv.Itoa(v)
		probe := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path + prefix}
		op := "detect the API version (GET " + prefix + "/info)"
		r, err := c.doAt(ctx, probe, op, http.MethodGet, "/info", nil, "", nil)
		if err != nil {
			return 0, err
		}
		switch r.status {
		case http.StatusOK:
			c.mu.Lock()
			c.base, c.api = probe, v
			c.mu.Unlock()
			return v, nil
		case http.StatusNotFound:
			continue
		default:
			return 0, c.apiError(op, r)
		}
	}
	return 0, fmt.Errorf("%s: detect the API version: neither /v3/info nor /v2/info answered; give the version in the URL (.../v3)", c.label)
}

// Info checks that the API answers and accepts the credentials.
func (c *client) Info(ctx context.Context) error {
	if _, err := c.apiVersion(ctx); err != nil {
		return err
	}
	r, err := c.do(ctx, "GET /info", http.MethodGet, "/info", nil, "", nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return c.apiError("GET /info", r)
	}
	return nil
}

// Version reads the configuration version.
func (c *client) Version(ctx context.Context) (int64, error) {
	const op = "read the configuration version"
	r, err := c.do(ctx, op, http.MethodGet, "/services/haproxy/configuration/version", nil, "", nil)
	if err != nil {
		return 0, err
	}
	if r.status != http.StatusOK {
		return 0, c.apiError(op, r)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(r.body)), 10, 64)
	if err != nil {
		if h := r.header.Get("Configuration-Version"); h != "" {
			if v, err2 := strconv.ParseInt(h, 10, 64); err2 == nil {
				return v, nil
			}
		}
		return 0, fmt.Errorf("%s: %s: answer %q is not a number", c.label, op, strings.TrimSpace(string(r.body)))
	}
	return v, nil
}

// RawConfig reads the configuration as the API stores it (v2 wraps it in JSON, v3 sends text).
func (c *client) RawConfig(ctx context.Context) (string, error) {
	const op = "read the raw configuration"
	api, err := c.apiVersion(ctx)
	if err != nil {
		return "", err
	}
	r, err := c.do(ctx, op, http.MethodGet, "/services/haproxy/configuration/raw", nil, "", nil)
	if err != nil {
		return "", err
	}
	if r.status != http.StatusOK {
		return "", c.apiError(op, r)
	}
	if api == 2 || strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		var v struct {
			Data string `json:"data"`
		}
		if err := json.Unmarshal(r.body, &v); err != nil {
			return "", fmt.Errorf("%s: %s: %w", c.label, op, err)
		}
		return v.Data, nil
	}
	return string(r.body), nil
}

// Validate asks the API to check cfg without storing it (only_validate). A 400 is a
// *Rejection with the API's reason.
func (c *client) Validate(ctx context.Context, cfg []byte) error {
	const op = "validate the configuration (only_validate)"
	r, err := c.do(ctx, op, http.MethodPost, "/services/haproxy/configuration/raw",
		url.Values{"only_validate": {"true"}}, "text/plain", cfg)
	if err != nil {
		return err
	}
	switch r.status {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		return nil
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return &Rejection{Endpoint: c.label, Reason: "the Data Plane API rejected the configuration: " + apiMessage(r.body)}
	}
	return c.apiError(op, r)
}

// errConflict marks a 409 on a versioned write.
var errConflict = errors.New("version conflict")

// PushConfig stores cfg at version (409 -> an *APIError wrapping errConflict). With reload,
// the API reloads HAProxy: the Reload-Id to follow is returned ("" when the API reloaded
// synchronously or did not need to). A 400 is a *Rejection.
func (c *client) PushConfig(ctx context.Context, cfg []byte, version int64, reload bool) (string, error) {
	const op = "push the configuration"
	q := url.Values{"version": {strconv.FormatInt(version, 10)}}
	if !reload {
		q.Set("skip_reload", "true")
	}
	r, err := c.do(ctx, op, http.MethodPost, "/services/haproxy/configuration/raw", q, "text/plain", cfg)
	if err != nil {
		return "", err
	}
	switch r.status {
	case http.StatusAccepted:
		return r.header.Get("Reload-Id"), nil
	case http.StatusOK, http.StatusCreated:
		return "", nil
	case http.StatusConflict:
		return "", fmt.Errorf("%w: %w", errConflict, c.apiError(op, r))
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "", &Rejection{Endpoint: c.label, Reason: "the Data Plane API rejected the configuration: " + apiMessage(r.body)}
	}
	return "", c.apiError(op, r)
}

// reloadStatus is the API's reload model.
type reloadStatus struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Response string `json:"response"`
}

// WaitReload follows a Reload-Id until the reload succeeded (nil) or failed (*Rejection with
// the reload's response), or ctx ends.
func (c *client) WaitReload(ctx context.Context, id string) error {
	op := "follow reload " + id
	for {
		r, err := c.do(ctx, op, http.MethodGet, "/services/haproxy/reloads/"+url.PathEscape(id), nil, "", nil)
		if err != nil {
			return err
		}
		if r.status != http.StatusOK {
			return c.apiError(op, r)
		}
		var st reloadStatus
		if err := json.Unmarshal(r.body, &st); err != nil {
			return fmt.Errorf("%s: %s: %w", c.label, op, err)
		}
		switch st.Status {
		case "succeeded":
			return nil
		case "failed":
			reason := strings.TrimSpace(st.Response)
			if reason == "" {
				reason = "no output"
			}
			return &Rejection{Endpoint: c.label, Reason: "HAProxy failed to reload with the new configuration (reload " + id + "): " + reason}
		case "in_progress", "":
		default:
			return fmt.Errorf("%s: %s: unknown status %q", c.label, op, st.Status)
		}
		t := time.NewTimer(c.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %s: still in progress: %w", c.label, op, ctx.Err())
		case <-t.C:
		}
	}
}

// storedFile is the API's model of a stored file (ssl_certificate, map, general_file).
type storedFile struct {
	StorageName string `json:"storage_name"`
	File        string `json:"file"`
}

// storage is one of the API's file storages.
type storage struct {
	kind string // how messages name its files: certificate, map file, file
	path string
	// ext is what the storage name adds to a file's name (".pem" for certificates).
	ext string
	// formFrom is the first API version whose replacement (PUT) takes a multipart form (field
	// file_upload) rather than text/plain; 0: none. General files: v3 (see Replace).
	formFrom int
}

var (
	certStorage    = storage{kind: "certificate", path: "/services/haproxy/storage/ssl_certificates", ext: ".pem"}
	mapStorage     = storage{kind: "map file", path: "/services/haproxy/storage/maps"}
	generalStorage = storage{kind: "file", path: "/services/haproxy/storage/general", formFrom: 3}
)

// name is the file name (a certificate's without .pem) of a storage name; ok is false for a
// stored file this package did not name (a certificate not ending in .pem).
func (st storage) name(storageName string) (string, bool) {
	if st.ext == "" {
		return storageName, true
	}
	return strings.CutSuffix(storageName, st.ext)
}

// List lists a storage.
func (c *client) List(ctx context.Context, st storage) ([]storedFile, error) {
	op := "list the " + st.kind + " storage"
	r, err := c.do(ctx, op, http.MethodGet, st.path, nil, "", nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, c.apiError(op, r)
	}
	var list []storedFile
	if err := json.Unmarshal(r.body, &list); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	return list, nil
}

// ListCerts lists the certificate storage.
func (c *client) ListCerts(ctx context.Context) ([]storedFile, error) {
	return c.List(ctx, certStorage)
}

// storageOK reports whether a storage write succeeded; the API reloads later with the
// configuration (skip_reload is always set), so a Reload-Id it may still send is not followed.
func storageOK(status int) bool {
	return status == http.StatusOK || status == http.StatusCreated || status == http.StatusAccepted || status == http.StatusNoContent
}

// form is data as a multipart form with the file in field file_upload.
func form(name string, data []byte) (body []byte, contentType string, err error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, err := mw.CreateFormFile("file_upload", name)
	if err == nil {
		_, err = fw.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	return b.Bytes(), mw.FormDataContentType(), err
}

// Upload creates a file in a storage (multipart field file_upload) without reloading; the
// answer names the stored file's path.
func (c *client) Upload(ctx context.Context, st storage, storageName string, data []byte) (storedFile, error) {
	op := "upload " + st.kind + " " + storageName
	body, ct, err := form(storageName, data)
	if err != nil {
		return storedFile{}, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	r, err := c.do(ctx, op, http.MethodPost, st.path, url.Values{"skip_reload": {"true"}}, ct, body)
	if err != nil {
		return storedFile{}, err
	}
	if !storageOK(r.status) {
		return storedFile{}, c.apiError(op, r)
	}
	var sf storedFile
	_ = json.Unmarshal(r.body, &sf) // informative only
	return sf, nil
}

// UploadCert creates a certificate file without reloading.
func (c *client) UploadCert(ctx context.Context, name string, data []byte) (storedFile, error) {
	return c.Upload(ctx, certStorage, name, data)
}

// Replace replaces a stored file without reloading. General files go as a multipart form to
// a v3 API and as text/plain to a v2 one; an API that answers 415 (Unsupported Media Type)
// to one is sent the other (the v3.0 releases before 3.0.6 took text/plain).
func (c *client) Replace(ctx context.Context, st storage, storageName string, data []byte) error {
	op := "replace " + st.kind + " " + storageName
	api, err := c.apiVersion(ctx)
	if err != nil {
		return err
	}
	useForm := st.formFrom > 0 && api >= st.formFrom
	for attempt := 0; ; attempt++ {
		body, ct := data, "text/plain"
		if useForm {
			if body, ct, err = form(storageName, data); err != nil {
				return fmt.Errorf("%s: %s: %w", c.label, op, err)
			}
		}
		r, err := c.do(ctx, op, http.MethodPut, st.path+"/"+url.PathEscape(storageName), url.Values{"skip_reload": {"true"}}, ct, body)
		if err != nil {
			return err
		}
		if r.status == http.StatusUnsupportedMediaType && st.formFrom > 0 && attempt == 0 {
			useForm = !useForm
			continue
		}
		if !storageOK(r.status) {
			return c.apiError(op, r)
		}
		return nil
	}
}

// ReplaceCert replaces a certificate file without reloading.
func (c *client) ReplaceCert(ctx context.Context, name string, data []byte) error {
	return c.Replace(ctx, certStorage, name, data)
}

// Delete deletes a stored file without reloading (one already gone is no error). The API
// refuses (409) to delete a map or general file the stored configuration still names.
func (c *client) Delete(ctx context.Context, st storage, storageName string) error {
	op := "delete " + st.kind + " " + storageName
	r, err := c.do(ctx, op, http.MethodDelete, st.path+"/"+url.PathEscape(storageName), url.Values{"skip_reload": {"true"}}, "", nil)
	if err != nil {
		return err
	}
	if !storageOK(r.status) && r.status != http.StatusNotFound {
		return c.apiError(op, r)
	}
	return nil
}

// DeleteCert deletes a certificate file without reloading.
func (c *client) DeleteCert(ctx context.Context, name string) error {
	return c.Delete(ctx, certStorage, name)
}
