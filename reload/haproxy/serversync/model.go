// Package serversync decides how to bring the servers of a remote HAProxy's backends to what a
// rendering says, in the terms of the HAProxy Data Plane API: its server model (the JSON
// server_params fields), its configuration transactions and its runtime server states. It is
// the decision of --dataplane-mode=servers: pure functions of plain values, tested from
// tables; haproxy/dataplane reads the hosts and carries the plan out.
//
//   - FromConfig reads the backends to manage from the rendered haproxy.cfg: their server
//     lines and their own default-server lines, each turned into the API's model (a keyword
//     the model has no field for is an error naming the backend, the server and the line).
//   - Decide compares them with what a host's configuration has and returns the plan: the
//     changes for one transaction (set a backend's default-server, add, replace and delete
//     servers), or, when only servers' states (the `disabled` keyword: maintenance) changed,
//     the runtime states to set with no reload.
package serversync

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// Params are server or default-server parameters as the Data Plane API's server_params model
// holds them: JSON field name -> value as canonical text. Enumerations and strings are as they
// are ("enabled", "disabled", "none"...); numbers and times are decimal integers, times in
// milliseconds (the API's unit: `inter 2s` is inter 2000); allow_0rtt is "true"; the
// proxy-v2-options list is comma-separated.
type Params map[string]string

// Equal reports whether p and o set the same fields to the same values.
func (p Params) Equal(o Params) bool { return maps.Equal(p, o) }

// Maintenance is the field of the `disabled` (and `enabled`) keyword: a server's administrative
// state, which the runtime API changes without a reload.
const Maintenance = "maintenance"

// State is the runtime administrative state a server's parameters ask for: "maint" for a
// server written `disabled`, else "ready".
func (p Params) State() string {
	if p[Maintenance] == "enabled" {
		return StateMaint
	}
	return StateReady
}

// Runtime administrative states (the API's runtime_server admin_state).
const (
	StateReady = "ready"
	StateMaint = "maint"
)

// Server is one server as the Data Plane API models it.
type Server struct {
	Name    string
	Address string
	Port    int64 // 0: none (the address has no port)
	Params  Params
}

// Equal reports whether s and o are the same server, parameters included.
func (s Server) Equal(o Server) bool {
	return s.Name == o.Name && s.Address == o.Address && s.Port == o.Port && s.Params.Equal(o.Params)
}

// equalButState reports whether s and o differ at most in their administrative state.
func (s Server) equalButState(o Server) bool {
	a, b := maps.Clone(s.Params), maps.Clone(o.Params)
	delete(a, Maintenance)
	delete(b, Maintenance)
	s.Params, o.Params = a, b
	return s.Equal(o)
}

// kind is how a keyword's value is written in the model.
type kind int

const (
	word   kind = iota // no argument: sets the field to keyword.value
	text               // one argument, as it is
	number             // one argument, a decimal integer
	millis             // one argument, a time (HAProxy units, milliseconds without one)
	list               // one argument, comma-separated
)

type keyword struct {
	field string
	kind  kind
	value string // word: what it sets
}

// keywords are the server and default-server keywords the Data Plane API's model has a field
// for, as client-native reads them (configuration/server.go, parseServerParams, v5 and v6),
// with the same quirks (`no-tlsv1x` sets force_tlsv1x to disabled). Others have no field:
// a server using one cannot be written through the API.
var keywords = map[string]keyword{
	"agent-check": {"agent-check", word, "enabled"}, "no-agent-check": {"agent-check", word, "disabled"},
	"allow-0rtt": {"allow_0rtt", word, "true"},
	"backup":     {"backup", word, "enabled"}, "no-backup": {"backup", word, "disabled"},
	"check": {"check", word, "enabled"}, "no-check": {"check", word, "disabled"},
	"check-send-proxy": {"check-send-proxy", word, "enabled"}, "no-check-send-proxy": {"check-send-proxy", word, "disabled"},
	"check-ssl": {"check-ssl", word, "enabled"}, "no-check-ssl": {"check-ssl", word, "disabled"},
	"check-via-socks4": {"check_via_socks4", word, "enabled"},
	"disabled":         {Maintenance, word, "enabled"}, "enabled": {Maintenance, word, "disabled"},
	"force-sslv3": {"force_sslv3", word, "enabled"}, "no-sslv3": {"no_sslv3", word, "enabled"},
	"force-tlsv10": {"force_tlsv10", word, "enabled"}, "no-tlsv10": {"force_tlsv10", word, "disabled"},
	"force-tlsv11": {"force_tlsv11", word, "enabled"}, "no-tlsv11": {"force_tlsv11", word, "disabled"},
	"force-tlsv12": {"force_tlsv12", word, "enabled"}, "no-tlsv12": {"force_tlsv12", word, "disabled"},
	"force-tlsv13": {"force_tlsv13", word, "enabled"}, "no-tlsv13": {"force_tlsv13", word, "disabled"},
	"send-proxy": {"send-proxy", word, "enabled"}, "no-send-proxy": {"send-proxy", word, "disabled"},
	"send-proxy-v2": {"send-proxy-v2", word, "enabled"}, "no-send-proxy-v2": {"send-proxy-v2", word, "disabled"},
	"send-proxy-v2-ssl": {"send_proxy_v2_ssl", word, "enabled"}, "no-send-proxy-v2-ssl": {"send_proxy_v2_ssl", word, "disabled"},
	"send-proxy-v2-ssl-cn": {"send_proxy_v2_ssl_cn", word, "enabled"}, "no-send-proxy-v2-ssl-cn": {"send_proxy_v2_ssl_cn", word, "disabled"},
	"ssl": {"ssl", word, "enabled"}, "no-ssl": {"ssl", word, "disabled"},
	"ssl-reuse": {"ssl_reuse", word, "enabled"}, "no-ssl-reuse": {"ssl_reuse", word, "disabled"},
	"tls-tickets": {"tls_tickets", word, "enabled"}, "no-tls-tickets": {"tls_tickets", word, "disabled"},
	"tfo": {"tfo", word, "enabled"}, "no-tfo": {"tfo", word, "disabled"},
	"stick": {"stick", word, "enabled"}, "non-stick": {"stick", word, "disabled"},

	"addr": {"health_check_address", text, ""}, "port": {"health_check_port", number, ""},
	"agent-addr": {"agent-addr", text, ""}, "agent-inter": {"agent-inter", millis, ""},
	"agent-port": {"agent-port", number, ""}, "agent-send": {"agent-send", text, ""},
	"alpn": {"alpn", text, ""}, "ca-file": {"ssl_cafile", text, ""},
	"check-alpn": {"check_alpn", text, ""}, "check-proto": {"check_proto", text, ""},
	"check-sni": {"check-sni", text, ""}, "ciphers": {"ciphers", text, ""},
	"ciphersuites": {"ciphersuites", text, ""}, "cookie": {"cookie", text, ""},
	"crl-file": {"crl_file", text, ""}, "crt": {"ssl_certificate", text, ""},
	"curves": {"curves", text, ""}, "error-limit": {"error_limit", number, ""},
	"fall": {"fall", millis, ""}, "rise": {"rise", millis, ""},
	"inter": {"inter", millis, ""}, "fastinter": {"fastinter", millis, ""}, "downinter": {"downinter", millis, ""},
	"init-addr": {"init-addr", text, ""}, "log-proto": {"log_proto", text, ""},
	"maxconn": {"maxconn", number, ""}, "maxqueue": {"maxqueue", number, ""}, "minconn": {"minconn", number, ""},
	"max-reuse": {"max_reuse", number, ""}, "namespace": {"namespace", text, ""}, "npn": {"npn", text, ""},
	"observe": {"observe", text, ""}, "on-error": {"on-error", text, ""},
	"on-marked-down": {"on-marked-down", text, ""}, "on-marked-up": {"on-marked-up", text, ""},
	"pool-low-conn": {"pool_low_conn", number, ""}, "pool-max-conn": {"pool_max_conn", number, ""},
	"pool-purge-delay": {"pool_purge_delay", millis, ""}, "proto": {"proto", text, ""},
	"proxy-v2-options": {"proxy-v2-options", list, ""}, "redir": {"redir", text, ""},
	"resolve-net": {"resolve-net", text, ""}, "resolve-opts": {"resolve_opts", text, ""},
	"resolve-prefer": {"resolve-prefer", text, ""}, "resolvers": {"resolvers", text, ""},
	"sigalgs": {"sigalgs", text, ""}, "slowstart": {"slowstart", millis, ""}, "sni": {"sni", text, ""},
	"socks4": {"socks4", text, ""}, "ssl-max-ver": {"ssl_max_ver", text, ""}, "ssl-min-ver": {"ssl_min_ver", text, ""},
	"tcp-ut": {"tcp_ut", millis, ""}, "track": {"track", text, ""}, "verify": {"verify", text, ""},
	"verifyhost": {"verifyhost", text, ""}, "weight": {"weight", number, ""}, "ws": {"ws", text, ""},
}

// fieldKinds is the kind of each model field, for reading the API's JSON.
var fieldKinds = func() map[string]kind {
	m := map[string]kind{}
	for _, k := range keywords {
		m[k.field] = k.kind
	}
	m["allow_0rtt"] = word // a JSON boolean
	return m
}()

// ParseParams reads server parameters written as HAProxy's words (after the address of a
// server line, or after default-server), up to a comment. Later keywords override earlier
// ones, as in HAProxy. A keyword the model has no field for, or a value it cannot hold, is an
// error naming it.
func ParseParams(words []string) (Params, error) {
	p := Params{}
	for i := 0; i < len(words); i++ {
		if strings.HasPrefix(words[i], "#") {
			break
		}
		kw := cfgparse.Unquote(words[i])
		k, ok := keywords[kw]
		if !ok {
			return nil, fmt.Errorf("%q has no field in the Data Plane API's server model", kw)
		}
		if k.kind == word {
			p[k.field] = k.value
			continue
		}
		if i+1 >= len(words) || strings.HasPrefix(words[i+1], "#") {
			return nil, fmt.Errorf("%q needs a value", kw)
		}
		i++
		v := cfgparse.Unquote(words[i])
		switch k.kind {
		case number:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || strings.Trim(v, "0123456789") != "" {
				return nil, fmt.Errorf("%s %q: want a whole number", kw, v)
			}
			v = strconv.FormatInt(n, 10)
		case millis:
			ms, err := parseMillis(v)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", kw, v, err)
			}
			v = strconv.FormatInt(ms, 10)
		}
		p[k.field] = v
	}
	return p, nil
}

// parseMillis reads an HAProxy time (us, ms, s, m, h, d; milliseconds without a unit) in
// milliseconds, as the API stores it.
func parseMillis(v string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"us", 0}, {"ms", 1}, {"s", 1000}, {"m", 60_000}, {"h", 3_600_000}, {"d", 86_400_000}}
	mul, digits := int64(1), v
	for _, u := range units {
		if d, ok := strings.CutSuffix(v, u.suffix); ok {
			mul, digits = u.mul, d
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("want a time such as 2s or 500ms")
	}
	if mul == 0 {
		return n / 1000, nil
	}
	return n * mul, nil
}

// SplitAddress splits a server line's address into the model's address and port as the API
// does (client-native's ParseAddress): "10.0.0.1:80", "[2001:db8::1]:80" and "host:80" have a
// port; an address without one gets 0. A port that is not a plain number (a range, an offset
// such as +1000, a variable) is an error: the model holds a number.
func SplitAddress(a string) (string, int64, error) {
	host, port := a, ""
	switch {
	case strings.HasPrefix(a, "["):
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("address %q: unclosed [", a)
		}
		host, port = a[1:end], a[end+1:]
		if port != "" {
			p, ok := strings.CutPrefix(port, ":")
			if !ok {
				return "", 0, fmt.Errorf("address %q: want [IPv6]:port", a)
			}
			port = p
		}
	case strings.Count(a, ":") == 1:
		host, port, _ = strings.Cut(a, ":")
	case strings.Count(a, ":") > 1:
		// An IPv6 address without brackets: the API takes the last part for the port when
		// it is a number.
		i := strings.LastIndexByte(a, ':')
		if _, err := strconv.ParseUint(a[i+1:], 10, 16); err == nil {
			host, port = a[:i], a[i+1:]
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("address %q: no host", a)
	}
	if port == "" {
		return host, 0, nil
	}
	n, err := strconv.ParseInt(port, 10, 64)
	if err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
		return "", 0, fmt.Errorf("address %q: the port must be a number from 1 to 65535 (the API's model has no ranges, offsets or variables)", a)
	}
	return host, n, nil
}

// JSON is p as the API's JSON fields.
func (p Params) JSON() map[string]any {
	out := make(map[string]any, len(p))
	for f, v := range p {
		switch fieldKinds[f] {
		case number, millis:
			n, _ := strconv.ParseInt(v, 10, 64)
			out[f] = n
		case list:
			out[f] = strings.Split(v, ",")
		default:
			if f == "allow_0rtt" {
				out[f] = v == "true"
				continue
			}
			out[f] = v
		}
	}
	return out
}

// JSON is s as the API's server model.
func (s Server) JSON() map[string]any {
	out := s.Params.JSON()
	out["name"], out["address"] = s.Name, s.Address
	if s.Port != 0 {
		out["port"] = s.Port
	}
	return out
}

// ParamsFromJSON reads the fields of the API's server_params model that Params knows; others
// (which no server line the sidecar writes can set) are left out. m is decoded with
// json.Decoder.UseNumber, or holds float64 numbers.
func ParamsFromJSON(m map[string]any) Params {
	p := Params{}
	for f, v := range m {
		k, ok := fieldKinds[f]
		if !ok {
			continue
		}
		switch v := v.(type) {
		case string:
			if v != "" {
				p[f] = v
			}
		case bool:
			if v {
				p[f] = "true"
			}
		case json.Number:
			if n, err := v.Int64(); err == nil {
				p[f] = strconv.FormatInt(n, 10)
			}
		case float64:
			p[f] = strconv.FormatInt(int64(v), 10)
		case []any:
			if k != list {
				continue
			}
			var parts []string
			for _, e := range v {
				if s, ok := e.(string); ok {
					parts = append(parts, s)
				}
			}
			if len(parts) > 0 {
				p[f] = strings.Join(parts, ",")
			}
		}
	}
	return p
}

// ServerFromJSON reads the API's server model.
func ServerFromJSON(m map[string]any) (Server, error) {
	s := Server{Params: ParamsFromJSON(m)}
	s.Name, _ = m["name"].(string)
	s.Address, _ = m["address"].(string)
	if s.Name == "" {
		return Server{}, fmt.Errorf("a server without a name")
	}
	switch p := m["port"].(type) {
	case json.Number:
		s.Port, _ = p.Int64()
	case float64:
		s.Port = int64(p)
	}
	return s, nil
}

// Line writes s as a server line (for messages and logs).
func (s Server) Line() string {
	addr := s.Address
	if strings.Contains(addr, ":") {
		addr = "[" + addr + "]"
	}
	if s.Port != 0 {
		addr += ":" + strconv.FormatInt(s.Port, 10)
	}
	fields := slices.Sorted(maps.Keys(s.Params))
	var b strings.Builder
	b.WriteString("server " + s.Name + " " + addr)
	for _, f := range fields {
		b.WriteString(" " + f + "=" + s.Params[f])
	}
	return b.String()
}
