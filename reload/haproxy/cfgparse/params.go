package cfgparse

// serverKeywordArgs is the number of arguments of each server and default-server keyword of
// HAProxy 2.6 (configuration.txt section 5.2). "source" takes one, and its "usesrc" and
// "interface" options are listed as keywords of their own.
var serverKeywordArgs = map[string]int{
	"addr": 1, "agent-addr": 1, "agent-check": 0, "agent-inter": 1, "agent-port": 1,
	"agent-send": 1, "allow-0rtt": 0, "alpn": 1, "backup": 0, "ca-file": 1, "check": 0,
	"check-alpn": 1, "check-proto": 1, "check-send-proxy": 0, "check-sni": 1, "check-ssl": 0,
	"check-via-socks4": 0, "ciphers": 1, "ciphersuites": 1, "cookie": 1, "crl-file": 1,
	"crt": 1, "disabled": 0, "downinter": 1, "enabled": 0, "error-limit": 1, "fall": 1,
	"fastinter": 1, "force-sslv3": 0, "force-tlsv10": 0, "force-tlsv11": 0, "force-tlsv12": 0,
	"force-tlsv13": 0, "id": 1, "init-addr": 1, "inter": 1, "log-proto": 1, "max-reuse": 1,
	"maxconn": 1, "maxqueue": 1, "minconn": 1, "namespace": 1, "no-agent-check": 0,
	"no-backup": 0, "no-check": 0, "no-check-ssl": 0, "no-send-proxy": 0, "no-send-proxy-v2": 0,
	"no-send-proxy-v2-ssl": 0, "no-send-proxy-v2-ssl-cn": 0, "no-ssl": 0, "no-ssl-reuse": 0,
	"no-sslv3": 0, "no-tfo": 0, "no-tls-tickets": 0, "no-tlsv10": 0, "no-tlsv11": 0,
	"no-tlsv12": 0, "no-tlsv13": 0, "no-verifyhost": 0, "non-stick": 0, "npn": 1, "observe": 1,
	"on-error": 1, "on-marked-down": 1, "on-marked-up": 1, "pool-low-conn": 1,
	"pool-max-conn": 1, "pool-purge-delay": 1, "port": 1, "proto": 1, "proxy-v2-options": 1,
	"redir": 1, "resolve-net": 1, "resolve-opts": 1, "resolve-prefer": 1, "resolvers": 1,
	"rise": 1, "send-proxy": 0, "send-proxy-v2": 0, "send-proxy-v2-ssl": 0,
	"send-proxy-v2-ssl-cn": 0, "slowstart": 1, "sni": 1, "socks4": 1, "source": 1, "usesrc": 1,
	"interface": 1, "ssl": 0, "ssl-max-ver": 1, "ssl-min-ver": 1, "ssl-reuse": 0, "stick": 0,
	"tcp-ut": 1, "tfo": 0, "tls-tickets": 0, "track": 1, "verify": 1, "verifyhost": 1,
	"weight": 1, "ws": 1,
}

// Param is one server parameter: a keyword and its arguments, as written.
type Param struct {
	Keyword string
	Args    []string
}

// Settings is what a server's parameters amount to: the inherited default-server parameters,
// then its own, later ones overriding earlier ones.
type Settings struct {
	// Known is false when a parameter keyword is not one this package knows the arguments
	// of: then nothing below is reliable but Raw.
	Known    bool
	Weight   int  // the last "weight", else 1 (HAProxy's default)
	Disabled bool // the last of "disabled" and "enabled" is "disabled"
	Check    bool // the last of "check" and "no-check" is "check"
	Agent    bool // the last of "agent-check" and "no-agent-check" is "agent-check"
	// Params are every parameter but weight, disabled and enabled, in order: inherited ones
	// first. Two servers whose Params are equal are configured alike, but for their address,
	// weight and administrative state.
	Params []Param
	// Raw are the words of Inherited and then Params, for servers with unknown parameters.
	Raw []string
}

// Settings reads the server's inherited and own parameters.
func (s *Server) Settings() Settings {
	st := Settings{Known: true, Weight: 1}
	st.Raw = append(append(st.Raw, s.Inherited...), s.Params...)
	words := st.Raw
	for i := 0; i < len(words); {
		kw := Unquote(words[i])
		n, ok := serverKeywordArgs[kw]
		if !ok || i+1+n > len(words) {
			st.Known = false
			st.Params = nil
			return st
		}
		var args []string
		if n > 0 {
			args = words[i+1 : i+1+n]
		}
		i += 1 + n
		switch kw {
		case "weight":
			w, ok := atoi(args[0])
			if !ok {
				st.Known = false
				st.Params = nil
				return st
			}
			st.Weight = w
			continue
		case "disabled":
			st.Disabled = true
			continue
		case "enabled":
			st.Disabled = false
			continue
		case "check":
			st.Check = true
		case "no-check":
			st.Check = false
		case "agent-check":
			st.Agent = true
		case "no-agent-check":
			st.Agent = false
		}
		st.Params = append(st.Params, Param{Keyword: kw, Args: args})
	}
	return st
}

// SameParams reports whether two parameter lists are equal.
func SameParams(a, b []Param) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Keyword != b[i].Keyword || len(a[i].Args) != len(b[i].Args) {
			return false
		}
		for j := range a[i].Args {
			if a[i].Args[j] != b[i].Args[j] {
				return false
			}
		}
	}
	return true
}
