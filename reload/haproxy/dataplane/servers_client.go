package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// The configuration API's backends and servers, its transactions and the runtime server
// endpoints, for --dataplane-mode=servers. Paths differ between the versions:
//
//	v3: /services/haproxy/configuration/backends/{backend}/servers[/{name}]
//	    /services/haproxy/runtime/backends/{backend}/servers/{name}
//	v2: /services/haproxy/configuration/servers[/{name}]?backend={backend}
//	    /services/haproxy/runtime/servers/{name}?backend={backend}
//
// and v2 wraps what it reads in {"_version": N, "data": ...}.

// serversPath is the path (and query) of a backend's servers, or of one server when name is set.
func (c *client) serversPath(api int, backend, name string) (string, url.Values) {
	if api == 2 {
		p := "/services/haproxy/configuration/servers"
		if name != "" {
			p += "/" + url.PathEscape(name)
		}
		return p, url.Values{"backend": {backend}}
	}
	p := "/services/haproxy/configuration/backends/" + url.PathEscape(backend) + "/servers"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p, url.Values{}
}

// decodeRead reads an answer of the configuration API into v: v2's {"_version", "data"}
// unwrapped. Numbers stay json.Number.
func decodeRead(api int, body []byte, v any) error {
	if api == 2 {
		var w struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &w); err != nil {
			return err
		}
		body = w.Data
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	return d.Decode(v)
}

// inTxn is the query of a write inside transaction txn (or a read of it).
func inTxn(q url.Values, txn string) url.Values {
	if txn != "" {
		q.Set("transaction_id", txn)
	}
	return q
}

// Backend reads a backend's model; found is false when the host has no such backend.
func (c *client) Backend(ctx context.Context, name string) (model map[string]any, found bool, err error) {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return nil, false, err
	}
	op := "read backend " + name
	r, err := c.do(ctx, op, http.MethodGet, "/services/haproxy/configuration/backends/"+url.PathEscape(name), nil, "", nil)
	if err != nil {
		return nil, false, err
	}
	switch r.status {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return nil, false, c.apiError(op, r)
	}
	if err := decodeRead(api, r.body, &model); err != nil {
		return nil, false, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	return model, true, nil
}

// Servers lists a backend's servers as the configuration has them.
func (c *client) Servers(ctx context.Context, backend string) ([]map[string]any, error) {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return nil, err
	}
	op := "list the servers of backend " + backend
	p, q := c.serversPath(api, backend, "")
	r, err := c.do(ctx, op, http.MethodGet, p, q, "", nil)
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, c.apiError(op, r)
	}
	var list []map[string]any
	if err := decodeRead(api, r.body, &list); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	return list, nil
}

// StartTransaction starts a configuration transaction at version: its id. A 409 (the version
// moved) wraps errConflict.
func (c *client) StartTransaction(ctx context.Context, version int64) (string, error) {
	const op = "start a configuration transaction"
	r, err := c.do(ctx, op, http.MethodPost, "/services/haproxy/transactions", url.Values{"version": {strconv.FormatInt(version, 10)}}, "", nil)
	if err != nil {
		return "", err
	}
	switch r.status {
	case http.StatusOK, http.StatusCreated:
	case http.StatusConflict:
		return "", fmt.Errorf("%w: %w", errConflict, c.apiError(op, r))
	default:
		return "", c.apiError(op, r)
	}
	var t struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body, &t); err != nil || t.ID == "" {
		return "", fmt.Errorf("%s: %s: no transaction id in %q", c.label, op, r.body)
	}
	return t.ID, nil
}

// CommitTransaction commits transaction id: the Reload-Id to follow ("" when the API reloaded
// synchronously). The configuration moved since the transaction started (409), or the
// transaction was made outdated by another commit (406): errConflict. A 400 (haproxy -c refused
// the result) is a *Rejection.
func (c *client) CommitTransaction(ctx context.Context, id string) (string, error) {
	op := "commit transaction " + id
	r, err := c.do(ctx, op, http.MethodPut, "/services/haproxy/transactions/"+url.PathEscape(id), nil, "", nil)
	if err != nil {
		return "", err
	}
	switch r.status {
	case http.StatusAccepted:
		return r.header.Get("Reload-Id"), nil
	case http.StatusOK, http.StatusCreated:
		return "", nil
	case http.StatusConflict, http.StatusNotAcceptable:
		return "", fmt.Errorf("%w: %w", errConflict, c.apiError(op, r))
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "", &Rejection{Endpoint: c.label, Reason: "the Data Plane API rejected the servers' change: " + apiMessage(r.body)}
	}
	return "", c.apiError(op, r)
}

// DeleteTransaction drops transaction id (one already gone is no error).
func (c *client) DeleteTransaction(ctx context.Context, id string) error {
	op := "delete transaction " + id
	r, err := c.do(ctx, op, http.MethodDelete, "/services/haproxy/transactions/"+url.PathEscape(id), nil, "", nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusNoContent && r.status != http.StatusOK && r.status != http.StatusNotFound {
		return c.apiError(op, r)
	}
	return nil
}

// txnWrite sends one change inside transaction txn. A 400 or 422 (the API refuses the model)
// is a *Rejection; a 409 (the object exists already: someone else wrote) wraps errConflict.
func (c *client) txnWrite(ctx context.Context, op, method, p string, q url.Values, model any) error {
	var body []byte
	ct := ""
	if model != nil {
		b, err := json.Marshal(model)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.label, op, err)
		}
		body, ct = b, "application/json"
	}
	r, err := c.do(ctx, op, method, p, q, ct, body)
	if err != nil {
		return err
	}
	switch r.status {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNoContent:
		return nil
	case http.StatusConflict, http.StatusNotFound:
		return fmt.Errorf("%w: %w", errConflict, c.apiError(op, r))
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return &Rejection{Endpoint: c.label, Reason: "the Data Plane API rejected the change (" + op + "): " + apiMessage(r.body)}
	}
	return c.apiError(op, r)
}

// CreateServer adds a server to a backend inside transaction txn.
func (c *client) CreateServer(ctx context.Context, txn, backend string, model map[string]any) error {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return err
	}
	p, q := c.serversPath(api, backend, "")
	return c.txnWrite(ctx, fmt.Sprintf("add server %s/%v", backend, model["name"]), http.MethodPost, p, inTxn(q, txn), model)
}

// ReplaceServer replaces a server of a backend inside transaction txn.
func (c *client) ReplaceServer(ctx context.Context, txn, backend string, model map[string]any) error {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return err
	}
	name, _ := model["name"].(string)
	p, q := c.serversPath(api, backend, name)
	return c.txnWrite(ctx, "replace server "+backend+"/"+name, http.MethodPut, p, inTxn(q, txn), model)
}

// DeleteServer deletes a server of a backend inside transaction txn.
func (c *client) DeleteServer(ctx context.Context, txn, backend, name string) error {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return err
	}
	p, q := c.serversPath(api, backend, name)
	return c.txnWrite(ctx, "delete server "+backend+"/"+name, http.MethodDelete, p, inTxn(q, txn), nil)
}

// ReplaceBackend replaces a backend's model inside transaction txn.
func (c *client) ReplaceBackend(ctx context.Context, txn, name string, model map[string]any) error {
	return c.txnWrite(ctx, "set the default-server of backend "+name, http.MethodPut,
		"/services/haproxy/configuration/backends/"+url.PathEscape(name), inTxn(url.Values{}, txn), model)
}

// SetServerState sets a server's runtime administrative state (ready, maint, drain), with no
// reload.
func (c *client) SetServerState(ctx context.Context, backend, name, state string) error {
	api, err := c.apiVersion(ctx)
	if err != nil {
		return err
	}
	p := "/services/haproxy/runtime/backends/" + url.PathEscape(backend) + "/servers/" + url.PathEscape(name)
	q := url.Values{}
	if api == 2 {
		p, q = "/services/haproxy/runtime/servers/"+url.PathEscape(name), url.Values{"backend": {backend}}
	}
	op := "set the runtime state of server " + backend + "/" + name + " to " + state
	body, _ := json.Marshal(map[string]string{"admin_state": state})
	r, err := c.do(ctx, op, http.MethodPut, p, q, "application/json", body)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return c.apiError(op, r)
	}
	return nil
}
