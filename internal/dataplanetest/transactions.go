package dataplanetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Configuration transactions, as the real API has them (dataplaneapi handlers/transaction.go
// over client-native configuration/transaction.go, v2.9 and v3.x alike):
//
//	POST   /services/haproxy/transactions?version=N   201 {"_version": N, "id", "status": "in_progress"};
//	                                                  409 when N is not the configuration's version
//	GET    /services/haproxy/transactions[?status=]   the transactions
//	GET    /services/haproxy/transactions/{id}        200; 404
//	PUT    /services/haproxy/transactions/{id}        commit: 202 and a Reload-Id (200 with force_reload);
//	                                                  406 when outdated or failed; 409 when the configuration
//	                                                  moved since it started (it becomes outdated); 400 when
//	                                                  haproxy -c refuses the result (it becomes failed)
//	DELETE /services/haproxy/transactions/{id}        204; 404
//
// A commit writes the configuration at version+1 as the API's parser writes it back (rewrite),
// and makes the other transactions started at that version or before outdated. The changes
// inside a transaction do not move the version.

// transaction is one configuration transaction.
type transaction struct {
	ID      string `json:"id"`
	Version int64  `json:"_version"`
	Status  string `json:"status"`
	text    string // the configuration as the transaction changed it (no API comments)
}

func (s *Server) transactionRoutes(mux *http.ServeMux, p string) {
	mux.HandleFunc("POST "+p+"/transactions", s.startTransaction)
	mux.HandleFunc("GET "+p+"/transactions", s.listTransactions)
	mux.HandleFunc("GET "+p+"/transactions/{id}", s.getTransaction)
	mux.HandleFunc("PUT "+p+"/transactions/{id}", s.commitTransaction)
	mux.HandleFunc("DELETE "+p+"/transactions/{id}", s.deleteTransaction)
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (s *Server) startTransaction(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query().Get("version")
	version, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("version in query is required and must be an integer (got %q)", v))
		return
	}
	text, cur, err := s.stored()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if version != cur {
		writeError(w, http.StatusConflict, fmt.Sprintf("version in configuration file is %d, given version is %d", cur, version))
		return
	}
	t := &transaction{ID: newID(), Version: version, Status: "in_progress", text: apiComment.ReplaceAllString(text, "")}
	s.mu.Lock()
	if s.txns == nil {
		s.txns = map[string]*transaction{}
	}
	s.txns[t.ID] = t
	model := *t
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, model)
}

func (s *Server) listTransactions(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	s.mu.Lock()
	list := []transaction{}
	for _, t := range s.txns {
		if status == "" || t.Status == status {
			list = append(list, *t)
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getTransaction(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t, ok := s.txns[r.PathValue("id")]
	var model transaction
	if ok {
		model = *t
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "transaction "+r.PathValue("id")+" does not exist")
		return
	}
	writeJSON(w, http.StatusOK, model)
}

func (s *Server) deleteTransaction(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	_, ok := s.txns[r.PathValue("id")]
	delete(s.txns, r.PathValue("id"))
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "transaction "+r.PathValue("id")+" does not exist")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) commitTransaction(w http.ResponseWriter, r *http.Request) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// One commit at a time, as the real API's commit mutex.
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	id := r.PathValue("id")
	s.mu.Lock()
	t, ok := s.txns[id]
	switch {
	case !ok:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "transaction "+id+" does not exist")
		return
	case t.Status == "outdated" || t.Status == "failed":
		s.mu.Unlock()
		writeError(w, http.StatusNotAcceptable, fmt.Sprintf("transaction %s is %s and cannot be committed", id, t.Status))
		return
	case t.Status != "in_progress":
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "transaction "+id+" does not exist")
		return
	}
	if s.conflicts > 0 {
		s.conflicts--
		s.version++ // another client wrote just before
	}
	if t.Version != s.version {
		t.Status = "outdated"
		cur := s.version
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("version mismatch, transaction version: %d, configured version: %d", t.Version, cur))
		return
	}
	text := rewrite(t.text)
	s.mu.Unlock()

	if msg, ok := s.validate(r.Context(), text); !ok {
		s.mu.Lock()
		t.Status = "failed"
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "err transactionId="+id+" \n"+msg)
		return
	}
	s.mu.Lock()
	if t.Version != s.version { // a raw write in between
		t.Status = "outdated"
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("version mismatch, transaction version: %d, configured version: %d", t.Version, s.version))
		return
	}
	s.version++
	err = s.writeConfig(text, s.version)
	t.Status = "success"
	for _, o := range s.txns {
		if o.Status == "in_progress" && o.Version <= t.Version {
			o.Status = "outdated"
		}
	}
	model := *t
	version := s.version
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Configuration-Version", strconv.FormatInt(version, 10))
	p.skipReload = false // a commit always reloads
	s.afterWrite(w, p, http.StatusOK, "", model)
}

// change applies edit to the configuration for a write of the configuration API: inside the
// transaction of transaction_id (202, nothing stored until the commit), or, with version, as a
// change of its own (409 on a stale version, 400 when haproxy -c refuses the result; then 202
// and a Reload-Id, or okCode after a synchronous reload with force_reload). edit returns the
// new text, or the status and message of a refusal. answer is the body of a success.
func (s *Server) change(w http.ResponseWriter, r *http.Request, okCode int, answer any, edit func(text string) (string, int, string)) {
	p, err := parseWriteParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	txn := r.URL.Query().Get("transaction_id")
	switch {
	case txn != "" && p.hasVersion:
		writeError(w, http.StatusBadRequest, "both version and transaction specified, specify only one")
		return
	case txn == "" && !p.hasVersion:
		writeError(w, http.StatusBadRequest, "version or transaction not specified, specify only one")
		return
	case txn != "" && p.forceReload:
		writeError(w, http.StatusBadRequest, "Both force_reload and transaction specified, specify only one")
		return
	}
	if txn != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		t, ok := s.txns[txn]
		if !ok || t.Status != "in_progress" {
			writeError(w, http.StatusBadRequest, "transaction "+txn+" does not exist")
			return
		}
		text, code, msg := edit(t.text)
		if code != 0 {
			writeError(w, code, msg)
			return
		}
		t.text = text
		writeJSON(w, http.StatusAccepted, answer)
		return
	}
	stored, cur, err := s.stored()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if p.version != cur {
		writeError(w, http.StatusConflict, fmt.Sprintf("version in configuration file is %d, given version is %d", cur, p.version))
		return
	}
	text, code, msg := edit(apiComment.ReplaceAllString(stored, ""))
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	text = rewrite(text)
	if msg, ok := s.validate(r.Context(), text); !ok {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if !s.storeVersioned(w, text, true, p.version, "version in configuration file is %d, given version is %d") {
		return
	}
	p.skipReload = false
	s.afterWrite(w, p, okCode, "", answer)
}

// readBody reads a JSON request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil, fmt.Errorf("the body is empty")
	}
	return b, nil
}
