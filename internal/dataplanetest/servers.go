package dataplanetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The configuration's servers and backends, and the runtime servers, as the real API has them
// (dataplaneapi handlers/server.go, backend.go, runtime_server.go over client-native):
//
//	v3: /services/haproxy/configuration/backends/{parent}/servers[/{name}]
//	v2: /services/haproxy/configuration/servers[/{name}]?backend=B   (or parent_type=backend&parent_name=B)
//	    GET lists the servers (v2: {"_version": N, "data": [...]}; a backend that does not exist
//	    has none), POST creates one (409 when it exists), GET/PUT/DELETE one (404 when missing);
//	    writes take transaction_id (202) or version (202 and a Reload-Id; force_reload: 201, 200
//	    or 204); both or neither: 400
//	GET|PUT /services/haproxy/configuration/backends/{name}    (v2 GET: {"_version", "data"}); 404
//	v3: /services/haproxy/runtime/backends/{parent}/servers[/{name}]
//	v2: /services/haproxy/runtime/servers[/{name}]?backend=B
//	    GET the servers' runtime states (`show servers state`), PUT {"admin_state": "ready|maint|drain"}
//	    sets one (`set server B/S state`), with no reload and no change to the stored configuration
//
// Server lines are edited in place in the backend's section, so the rest of the file stays as
// it was (a commit then writes the whole file back as the API's parser does, see rewrite.go). The
// server model is read from and written to a server line with a table of keywords (below): the
// real API knows more, and a field the stand-in cannot write is refused with 501. Of a backend's
// model the stand-in knows the name and default_server only; other fields given to PUT are
// ignored (the lines stay as they are). A change of its own (version=) always reloads, where the
// real API applies a lone change of a server's weight, address, port or maintenance through the
// runtime API instead.

// serverParam is one keyword of the server model's table.
type serverParam struct {
	keyword string // as written in the configuration
	field   string // the JSON field
	word    string // a keyword without argument: the value it sets ("enabled"...); "" for one with a value
	millis  bool   // a time: milliseconds in the model, HAProxy units in the file
	number  bool
}

// serverParams is the stand-in's table, in the order the real API writes them (words, then
// keywords with a value).
var serverParams = []serverParam{
	{keyword: "agent-check", field: "agent-check", word: "enabled"},
	{keyword: "backup", field: "backup", word: "enabled"},
	{keyword: "no-backup", field: "backup", word: "disabled"},
	{keyword: "check", field: "check", word: "enabled"},
	{keyword: "no-check", field: "check", word: "disabled"},
	{keyword: "check-send-proxy", field: "check-send-proxy", word: "enabled"},
	{keyword: "check-ssl", field: "check-ssl", word: "enabled"},
	{keyword: "disabled", field: "maintenance", word: "enabled"},
	{keyword: "enabled", field: "maintenance", word: "disabled"},
	{keyword: "send-proxy", field: "send-proxy", word: "enabled"},
	{keyword: "no-send-proxy", field: "send-proxy", word: "disabled"},
	{keyword: "send-proxy-v2", field: "send-proxy-v2", word: "enabled"},
	{keyword: "no-send-proxy-v2", field: "send-proxy-v2", word: "disabled"},
	{keyword: "ssl", field: "ssl", word: "enabled"},
	{keyword: "no-ssl", field: "ssl", word: "disabled"},
	{keyword: "addr", field: "health_check_address"},
	{keyword: "alpn", field: "alpn"},
	{keyword: "ca-file", field: "ssl_cafile"},
	{keyword: "check-sni", field: "check-sni"},
	{keyword: "cookie", field: "cookie"},
	{keyword: "crt", field: "ssl_certificate"},
	{keyword: "downinter", field: "downinter", millis: true},
	{keyword: "fall", field: "fall", millis: true},
	{keyword: "fastinter", field: "fastinter", millis: true},
	{keyword: "init-addr", field: "init-addr"},
	{keyword: "inter", field: "inter", millis: true},
	{keyword: "maxconn", field: "maxconn", number: true},
	{keyword: "maxqueue", field: "maxqueue", number: true},
	{keyword: "observe", field: "observe"},
	{keyword: "on-marked-down", field: "on-marked-down"},
	{keyword: "port", field: "health_check_port", number: true},
	{keyword: "proto", field: "proto"},
	{keyword: "resolvers", field: "resolvers"},
	{keyword: "rise", field: "rise", millis: true},
	{keyword: "slowstart", field: "slowstart", millis: true},
	{keyword: "sni", field: "sni"},
	{keyword: "verify", field: "verify"},
	{keyword: "weight", field: "weight", number: true},
}

// modelFields are every field of the real API's server model (server_params of v2.9 and v3,
// and the server's own): a request with another field is refused (the API's schema allows no
// other properties).
var modelFields = strings.Fields(`name address port id metadata agent-addr agent-check
	agent-inter agent-port agent-send allow_0rtt alpn backup check check-send-proxy check-sni
	check-ssl check_alpn check_proto check_via_socks4 ciphers ciphersuites client_sigalgs cookie
	crl_file curves downinter error_limit fall fastinter force_sslv3 force_tlsv10 force_tlsv11
	force_tlsv12 force_tlsv13 guid hash_key health_check_address health_check_port init-addr
	inter log-bufsize log_proto maintenance max_reuse maxconn maxqueue minconn namespace
	no_sslv3 no_tlsv10 no_tlsv11 no_tlsv12 no_tlsv13 no_verifyhost npn observe on-error
	on-marked-down on-marked-up pool_conn_name pool_low_conn pool_max_conn pool_purge_delay
	proto proxy-v2-options redir resolve-net resolve-prefer resolve_opts resolvers rise
	send-proxy send-proxy-v2 send_proxy_v2_ssl send_proxy_v2_ssl_cn set-proxy-v2-tlv-fmt shard
	sigalgs slowstart sni socks4 source ssl ssl_cafile ssl_certificate ssl_max_ver ssl_min_ver
	ssl_reuse stick tcp_ut tfo tls_tickets track verify verifyhost weight ws`)

var namePattern = regexp.MustCompile(`^[^\s]+$`)

// parseServerLine reads `server NAME ADDR[:PORT] params...` into the model; keywords out of
// the table are skipped.
func parseServerLine(words []string) map[string]any {
	m := map[string]any{"name": words[1]}
	addr, port := words[2], ""
	switch {
	case strings.HasPrefix(addr, "["):
		if i := strings.Index(addr, "]"); i > 0 {
			addr, port = addr[1:i], strings.TrimPrefix(addr[i+1:], ":")
		}
	case strings.Count(addr, ":") == 1:
		addr, port, _ = strings.Cut(addr, ":")
	}
	m["address"] = addr
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		m["port"] = n
	}
	for k, v := range parseParams(words[3:]) {
		m[k] = v
	}
	return m
}

// parseParams reads server parameters (a server line's, or a default-server line's).
func parseParams(words []string) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(words); i++ {
		if strings.HasPrefix(words[i], "#") {
			break
		}
		for _, p := range serverParams {
			if p.keyword != words[i] {
				continue
			}
			if p.word != "" {
				m[p.field] = p.word
				break
			}
			if i+1 >= len(words) {
				break
			}
			i++
			v := words[i]
			switch {
			case p.millis:
				if ms, ok := millis(v); ok {
					m[p.field] = ms
				}
			case p.number:
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					m[p.field] = n
				}
			default:
				m[p.field] = v
			}
			break
		}
	}
	return m
}

// millis reads an HAProxy time in milliseconds.
func millis(v string) (int64, bool) {
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}} {
		if d, ok := strings.CutSuffix(v, u.suffix); ok {
			n, err := strconv.ParseInt(d, 10, 64)
			return n * u.mul, err == nil
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// formatParams writes model fields as server parameters, in the table's order. A field the real
// API has and the table does not is an error (the stand-in cannot write it).
func formatParams(m map[string]any, skip ...string) (string, error) {
	var out []string
	done := map[string]bool{}
	for _, f := range skip {
		done[f] = true
	}
	for _, p := range serverParams {
		v, ok := m[p.field]
		if !ok || done[p.field] {
			continue
		}
		switch {
		case p.word != "":
			if v == p.word {
				out = append(out, p.keyword)
				done[p.field] = true
			}
		case p.number || p.millis:
			n, ok := v.(json.Number)
			if !ok {
				return "", fmt.Errorf("%s: want a number", p.field)
			}
			out = append(out, p.keyword, n.String())
			done[p.field] = true
		default:
			s, ok := v.(string)
			if !ok || !namePattern.MatchString(s) {
				return "", fmt.Errorf("%s: want a string without white space", p.field)
			}
			out = append(out, p.keyword, s)
			done[p.field] = true
		}
	}
	for f, v := range m {
		if done[f] || v == nil || v == "" {
			continue
		}
		if p := slices.IndexFunc(serverParams, func(p serverParam) bool { return p.field == f }); p >= 0 {
			return "", fmt.Errorf("%s: %v is not a value the stand-in knows", f, v)
		}
		return "", errNotImplemented{f}
	}
	return strings.Join(out, " "), nil
}

type errNotImplemented struct{ field string }

func (e errNotImplemented) Error() string {
	return "field " + e.field + " of the server model is not implemented by the Data Plane API stand-in"
}

// decodeModel reads a request's JSON model, refusing fields the real API's model does not have.
func decodeModel(r *http.Request) (map[string]any, int, string) {
	b, err := readBody(r)
	if err != nil {
		return nil, http.StatusBadRequest, err.Error()
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, http.StatusBadRequest, "parsing body: " + err.Error()
	}
	return m, 0, ""
}

// serverLine validates a server model and writes it as a server line.
func serverLine(m map[string]any) (string, int, string) {
	for f := range m {
		if !slices.Contains(modelFields, f) {
			return "", http.StatusUnprocessableEntity, "data in body: " + f + " is not a property of server"
		}
	}
	name, _ := m["name"].(string)
	addr, _ := m["address"].(string)
	if !namePattern.MatchString(name) || !namePattern.MatchString(addr) {
		return "", http.StatusUnprocessableEntity, "data.name and data.address are required and have no white space"
	}
	if strings.Contains(addr, ":") && !strings.HasPrefix(addr, "[") && !strings.Contains(addr, "@") {
		addr = "[" + addr + "]" // as client-native's SanitizeIPv6Address
	}
	if p, ok := m["port"]; ok {
		n, ok := p.(json.Number)
		v, err := n.Int64()
		if !ok || err != nil || v < 1 || v > 65535 {
			return "", http.StatusUnprocessableEntity, "data.port must be a number from 1 to 65535"
		}
		addr += ":" + n.String()
	}
	params, err := formatParams(m, "name", "address", "port", "id", "metadata")
	if err != nil {
		if _, ok := err.(errNotImplemented); ok {
			return "", http.StatusNotImplemented, err.Error()
		}
		return "", http.StatusUnprocessableEntity, err.Error()
	}
	line := "server " + name + " " + addr
	if params != "" {
		line += " " + params
	}
	return line, 0, ""
}

// span is one section of a configuration's lines: lines[start] is its header, end is the
// first line after it.
type span struct{ start, end int }

// findBackend finds backend name in lines.
func findBackend(lines []string, name string) (span, bool) {
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "backend" || f[1] != name {
			continue
		}
		end := i + 1
		for ; end < len(lines); end++ {
			if g := strings.Fields(lines[end]); len(g) > 0 && sectionKinds[g[0]] {
				break
			}
		}
		// Trailing blank lines belong to what follows.
		for end > i+1 && strings.TrimSpace(lines[end-1]) == "" {
			end--
		}
		return span{i, end}, true
	}
	return span{}, false
}

// serverLines lists the indexes of the lines of sec whose first word is kw.
func serverLines(lines []string, sec span, kw string) []int {
	var out []int
	for i := sec.start + 1; i < sec.end; i++ {
		if f := strings.Fields(lines[i]); len(f) > 0 && f[0] == kw {
			out = append(out, i)
		}
	}
	return out
}

// indent is the indentation of the section's lines ("  " when it has none).
func indent(lines []string, sec span) string {
	for i := sec.start + 1; i < sec.end; i++ {
		if t := strings.TrimLeft(lines[i], " \t"); t != "" {
			return lines[i][:len(lines[i])-len(t)]
		}
	}
	return "  "
}

func splitLines(text string) []string { return strings.Split(strings.TrimSuffix(text, "\n"), "\n") }
func joinLines(lines []string) string { return strings.Join(lines, "\n") + "\n" }

// servers lists the servers of backend in text; ok is false when there is no such backend.
func servers(text, backend string) ([]map[string]any, bool) {
	lines := splitLines(text)
	sec, ok := findBackend(lines, backend)
	if !ok {
		return nil, false
	}
	list := []map[string]any{}
	for _, i := range serverLines(lines, sec, "server") {
		if f := strings.Fields(lines[i]); len(f) >= 3 {
			list = append(list, parseServerLine(f))
		}
	}
	return list, true
}

// findServer finds server name of backend: the line index, or -1.
func findServer(lines []string, sec span, name string) int {
	for _, i := range serverLines(lines, sec, "server") {
		if f := strings.Fields(lines[i]); len(f) >= 2 && f[1] == name {
			return i
		}
	}
	return -1
}

func (s *Server) serverRoutes(mux *http.ServeMux, p string) {
	if s.opts.APIVersion == 2 {
		q := func(r *http.Request) string {
			if b := r.URL.Query().Get("backend"); b != "" {
				return b
			}
			if r.URL.Query().Get("parent_type") == "backend" {
				return r.URL.Query().Get("parent_name")
			}
			return ""
		}
		mux.HandleFunc("GET "+p+"/configuration/servers", func(w http.ResponseWriter, r *http.Request) { s.listServers(w, r, q(r)) })
		mux.HandleFunc("POST "+p+"/configuration/servers", func(w http.ResponseWriter, r *http.Request) { s.createServer(w, r, q(r)) })
		mux.HandleFunc("GET "+p+"/configuration/servers/{name}", func(w http.ResponseWriter, r *http.Request) { s.getServer(w, r, q(r)) })
		mux.HandleFunc("PUT "+p+"/configuration/servers/{name}", func(w http.ResponseWriter, r *http.Request) { s.replaceServer(w, r, q(r)) })
		mux.HandleFunc("DELETE "+p+"/configuration/servers/{name}", func(w http.ResponseWriter, r *http.Request) { s.deleteServer(w, r, q(r)) })
		mux.HandleFunc("GET "+p+"/runtime/servers", func(w http.ResponseWriter, r *http.Request) { s.runtimeServers(w, r, q(r), "") })
		mux.HandleFunc("GET "+p+"/runtime/servers/{name}", func(w http.ResponseWriter, r *http.Request) { s.runtimeServers(w, r, q(r), r.PathValue("name")) })
		mux.HandleFunc("PUT "+p+"/runtime/servers/{name}", func(w http.ResponseWriter, r *http.Request) { s.setRuntimeServer(w, r, q(r)) })
	} else {
		b := p + "/configuration/backends/{parent}/servers"
		q := func(r *http.Request) string { return r.PathValue("parent") }
		mux.HandleFunc("GET "+b, func(w http.ResponseWriter, r *http.Request) { s.listServers(w, r, q(r)) })
		mux.HandleFunc("POST "+b, func(w http.ResponseWriter, r *http.Request) { s.createServer(w, r, q(r)) })
		mux.HandleFunc("GET "+b+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.getServer(w, r, q(r)) })
		mux.HandleFunc("PUT "+b+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.replaceServer(w, r, q(r)) })
		mux.HandleFunc("DELETE "+b+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.deleteServer(w, r, q(r)) })
		rt := p + "/runtime/backends/{parent}/servers"
		mux.HandleFunc("GET "+rt, func(w http.ResponseWriter, r *http.Request) { s.runtimeServers(w, r, q(r), "") })
		mux.HandleFunc("GET "+rt+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.runtimeServers(w, r, q(r), r.PathValue("name")) })
		mux.HandleFunc("PUT "+rt+"/{name}", func(w http.ResponseWriter, r *http.Request) { s.setRuntimeServer(w, r, q(r)) })
	}
	mux.HandleFunc("GET "+p+"/configuration/backends/{name}", s.getBackend)
	mux.HandleFunc("PUT "+p+"/configuration/backends/{name}", s.replaceBackend)
}

// readText is the configuration a read sees: the transaction's (transaction_id), else the
// stored one; and its version.
func (s *Server) readText(r *http.Request) (string, int64, int, string) {
	if id := r.URL.Query().Get("transaction_id"); id != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		t, ok := s.txns[id]
		if !ok || t.Status != "in_progress" {
			return "", 0, http.StatusBadRequest, "transaction " + id + " does not exist"
		}
		return t.text, t.Version, 0, ""
	}
	text, v, err := s.stored()
	if err != nil {
		return "", 0, http.StatusInternalServerError, err.Error()
	}
	return text, v, 0, ""
}

// answerRead answers a read: v2 wraps the model with the version.
func (s *Server) answerRead(w http.ResponseWriter, version int64, model any) {
	if s.opts.APIVersion == 2 {
		writeJSON(w, http.StatusOK, map[string]any{"_version": version, "data": model})
		return
	}
	writeJSON(w, http.StatusOK, model)
}

func (s *Server) listServers(w http.ResponseWriter, r *http.Request, backend string) {
	text, version, code, msg := s.readText(r)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	list, _ := servers(text, backend) // a backend that does not exist has no servers
	if list == nil {
		list = []map[string]any{}
	}
	s.answerRead(w, version, list)
}

func (s *Server) getServer(w http.ResponseWriter, r *http.Request, backend string) {
	text, version, code, msg := s.readText(r)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	list, _ := servers(text, backend)
	for _, m := range list {
		if m["name"] == r.PathValue("name") {
			s.answerRead(w, version, m)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("server %s does not exist in %s backend", r.PathValue("name"), backend))
}

// serverFromBody reads the server model of a request and its server line; it answers the
// request itself when the model is refused, and then returns false.
func serverFromBody(w http.ResponseWriter, r *http.Request) (map[string]any, string, bool) {
	m, code, msg := decodeModel(r)
	if code != 0 {
		writeError(w, code, msg)
		return nil, "", false
	}
	line, code, msg := serverLine(m)
	if code != 0 {
		writeError(w, code, msg)
		return nil, "", false
	}
	return m, line, true
}

func (s *Server) createServer(w http.ResponseWriter, r *http.Request, backend string) {
	m, line, ok := serverFromBody(w, r)
	if !ok {
		return
	}
	s.change(w, r, http.StatusCreated, m, func(text string) (string, int, string) {
		lines := splitLines(text)
		sec, ok := findBackend(lines, backend)
		if !ok {
			return "", http.StatusBadRequest, "parent backend " + backend + " does not exist"
		}
		if findServer(lines, sec, m["name"].(string)) >= 0 {
			return "", http.StatusConflict, fmt.Sprintf("server %s already exists in %s backend", m["name"], backend)
		}
		at := sec.end // after the last server, else at the end of the section
		if idx := serverLines(lines, sec, "server"); len(idx) > 0 {
			at = idx[len(idx)-1] + 1
		}
		return joinLines(slices.Insert(lines, at, indent(lines, sec)+line)), 0, ""
	})
}

func (s *Server) replaceServer(w http.ResponseWriter, r *http.Request, backend string) {
	m, line, ok := serverFromBody(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	s.change(w, r, http.StatusOK, m, func(text string) (string, int, string) {
		lines := splitLines(text)
		sec, i, code, msg := existingServer(lines, backend, name)
		if code != 0 {
			return "", code, msg
		}
		lines[i] = indent(lines, sec) + line
		return joinLines(lines), 0, ""
	})
}

func (s *Server) deleteServer(w http.ResponseWriter, r *http.Request, backend string) {
	name := r.PathValue("name")
	s.change(w, r, http.StatusNoContent, nil, func(text string) (string, int, string) {
		lines := splitLines(text)
		_, i, code, msg := existingServer(lines, backend, name)
		if code != 0 {
			return "", code, msg
		}
		return joinLines(slices.Delete(lines, i, i+1)), 0, ""
	})
}

// existingServer finds server name of backend in lines for an edit of it, or the status and
// message of the real API when there is no such server.
func existingServer(lines []string, backend, name string) (span, int, int, string) {
	sec, ok := findBackend(lines, backend)
	i := -1
	if ok {
		i = findServer(lines, sec, name)
	}
	if i < 0 {
		return sec, -1, http.StatusNotFound, fmt.Sprintf("server %s does not exist in %s backend", name, backend)
	}
	return sec, i, 0, ""
}

// backendModel is the stand-in's model of a backend: its name and default_server.
func backendModel(text, name string) (map[string]any, bool) {
	lines := splitLines(text)
	sec, ok := findBackend(lines, name)
	if !ok {
		return nil, false
	}
	m := map[string]any{"name": name}
	ds := map[string]any{}
	for _, i := range serverLines(lines, sec, "default-server") {
		for k, v := range parseParams(strings.Fields(lines[i])[1:]) {
			ds[k] = v
		}
	}
	if len(ds) > 0 {
		m["default_server"] = ds
	}
	return m, true
}

func (s *Server) getBackend(w http.ResponseWriter, r *http.Request) {
	text, version, code, msg := s.readText(r)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	m, ok := backendModel(text, r.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "backend "+r.PathValue("name")+" does not exist")
		return
	}
	s.answerRead(w, version, m)
}

func (s *Server) replaceBackend(w http.ResponseWriter, r *http.Request) {
	m, code, msg := decodeModel(r)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	name := r.PathValue("name")
	if n, _ := m["name"].(string); n != name {
		writeError(w, http.StatusUnprocessableEntity, "data.name must be the backend's name "+name)
		return
	}
	var line string
	if ds, ok := m["default_server"].(map[string]any); ok && len(ds) > 0 {
		for f := range ds {
			if !slices.Contains(modelFields, f) || f == "name" || f == "address" || f == "port" {
				writeError(w, http.StatusUnprocessableEntity, "data.default_server: "+f+" is not a property of default_server")
				return
			}
		}
		params, err := formatParams(ds)
		if err != nil {
			code := http.StatusUnprocessableEntity
			if _, ok := err.(errNotImplemented); ok {
				code = http.StatusNotImplemented
			}
			writeError(w, code, err.Error())
			return
		}
		line = "default-server " + params
	}
	s.change(w, r, http.StatusOK, m, func(text string) (string, int, string) {
		lines := splitLines(text)
		sec, ok := findBackend(lines, name)
		if !ok {
			return "", http.StatusNotFound, "backend " + name + " does not exist"
		}
		old := serverLines(lines, sec, "default-server")
		at := sec.start + 1
		if len(old) > 0 {
			at = old[0]
		} else if idx := serverLines(lines, sec, "server"); len(idx) > 0 {
			at = idx[0] // default-server applies to the servers below it
		} else {
			at = sec.end
		}
		ind := indent(lines, sec)
		for i := len(old) - 1; i >= 0; i-- {
			lines = slices.Delete(lines, old[i], old[i]+1)
		}
		if line != "" {
			lines = slices.Insert(lines, at, ind+line)
		}
		return joinLines(lines), 0, ""
	})
}

// runtimeServer is the API's runtime_server model.
type runtimeServer struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Address          string `json:"address"`
	Port             *int64 `json:"port,omitempty"`
	AdminState       string `json:"admin_state"`
	OperationalState string `json:"operational_state"`
}

// runtimeStates reads `show servers state BACKEND` as client-native does: field 3 the name, 4
// the address, 5 the operational state, 6 the administrative state (bits: 0x01, 0x02 or 0x20
// maint, 0x08 or 0x10 drain), 18 the port.
func (s *Server) runtimeStates(r *http.Request, backend string) ([]runtimeServer, int, string) {
	out, _, err := s.runtimeCommand(r.Context(), "show servers state "+backend)
	if err != nil {
		return nil, http.StatusInternalServerError, err.Error()
	}
	if strings.Contains(out, "Can't find backend") {
		return nil, http.StatusNotFound, "backend " + backend + " not found"
	}
	list := []runtimeServer{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 19 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rs := runtimeServer{ID: f[2], Name: f[3], Address: f[4]}
		if p, err := strconv.ParseInt(f[18], 10, 64); err == nil {
			rs.Port = &p
		}
		adm, _ := strconv.ParseUint(f[6], 16, 64)
		switch {
		case adm&(0x01|0x02|0x20) != 0:
			rs.AdminState = "maint"
		case adm&(0x08|0x10) != 0:
			rs.AdminState = "drain"
		default:
			rs.AdminState = "ready"
		}
		rs.OperationalState = map[string]string{"0": "down", "1": "up", "2": "up", "3": "stopping"}[f[5]]
		list = append(list, rs)
	}
	return list, 0, ""
}

func (s *Server) runtimeServers(w http.ResponseWriter, r *http.Request, backend, name string) {
	list, code, msg := s.runtimeStates(r, backend)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	if name == "" {
		writeJSON(w, http.StatusOK, list)
		return
	}
	for _, rs := range list {
		if rs.Name == name {
			writeJSON(w, http.StatusOK, rs)
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("Runtime server %s not found in backend %s", name, backend))
}

func (s *Server) setRuntimeServer(w http.ResponseWriter, r *http.Request, backend string) {
	var body runtimeServer
	b, err := readBody(r)
	if err == nil {
		err = json.Unmarshal(b, &body)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "parsing body: "+err.Error())
		return
	}
	if body.AdminState != "" && !slices.Contains([]string{"ready", "maint", "drain"}, body.AdminState) {
		writeError(w, http.StatusUnprocessableEntity, "data.admin_state should be one of [ready maint drain]")
		return
	}
	name := r.PathValue("name")
	list, code, msg := s.runtimeStates(r, backend)
	if code != 0 {
		writeError(w, code, msg)
		return
	}
	i := slices.IndexFunc(list, func(rs runtimeServer) bool { return rs.Name == name })
	if i < 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Runtime server %s not found in backend %s", name, backend))
		return
	}
	if body.AdminState != "" && body.AdminState != list[i].AdminState {
		out, _, err := s.runtimeCommand(r.Context(), fmt.Sprintf("set server %s/%s state %s", backend, name, body.AdminState))
		if err == nil && strings.TrimSpace(out) != "" {
			err = fmt.Errorf("%s", strings.TrimSpace(out))
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	s.runtimeServers(w, r, backend, name)
}
