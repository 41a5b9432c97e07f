package serversync

import (
	"fmt"
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cfgparse"
)

// Backend is what the sidecar manages of one backend: its servers and, when the rendering
// writes any, its own default-server parameters.
type Backend struct {
	Name string
	// DefaultServer are the parameters of the backend's own default-server lines (later ones
	// override earlier ones); nil when it has none: the host's are then left as they are.
	DefaultServer Params
	Servers       []Server
}

// Error is a rendering that cannot be written through the API's server model: Line (1-based,
// 0 when none applies) is where in the rendered configuration.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// FromConfig reads the backends to manage from a rendered configuration: the backend sections
// named in only (each must be there), or every backend section when only is empty. Listen
// sections are not backends for the API and are never managed. A server or default-server
// line the model cannot hold is an *Error naming the backend, the server and the keyword.
func FromConfig(config []byte, only []string) ([]Backend, error) {
	cfg, err := cfgparse.Parse(config)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	if cfg.Conditional {
		return nil, &Error{Msg: "conditional blocks (.if) are not supported with --dataplane-mode=servers: which server lines count would depend on the host"}
	}
	byName := map[string]int{} // the index of each backend in cfg.Sections
	var names []string
	for i, sec := range cfg.Sections {
		if sec.Kind != "backend" {
			continue
		}
		if _, dup := byName[sec.Name]; dup {
			return nil, &Error{Line: cfg.Line(i), Msg: fmt.Sprintf("backend %s is written twice", sec.Name)}
		}
		byName[sec.Name] = i
		names = append(names, sec.Name)
	}
	if len(only) > 0 {
		var missing []string
		for _, n := range only {
			if _, ok := byName[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return nil, &Error{Msg: fmt.Sprintf("the rendered configuration has no backend %s (named by --dataplane-backends)", strings.Join(missing, ", "))}
		}
		names = slices.Clone(only)
	}
	out := make([]Backend, 0, len(names))
	for _, n := range names {
		b, err := backendOf(cfg, byName[n])
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// backendOf reads one backend section, cfg's i-th.
func backendOf(cfg *cfgparse.Config, i int) (Backend, error) {
	sec := cfg.Sections[i]
	b := Backend{Name: sec.Name}
	for _, line := range sec.Lines {
		words, err := cfgparse.Words(line)
		if err != nil || len(words) == 0 || cfgparse.Unquote(words[0]) != "default-server" {
			continue
		}
		p, err := ParseParams(words[1:])
		if err != nil {
			return Backend{}, &Error{Line: cfg.Line(i), Msg: fmt.Sprintf("backend %s, default-server: %v", sec.Name, err)}
		}
		if b.DefaultServer == nil {
			b.DefaultServer = Params{}
		}
		for f, v := range p {
			b.DefaultServer[f] = v
		}
	}
	seen := map[string]bool{}
	for _, s := range sec.Servers {
		if seen[s.Name] {
			return Backend{}, &Error{Line: cfg.ServerLine(i, s), Msg: fmt.Sprintf("backend %s: server %s is written twice", sec.Name, s.Name)}
		}
		seen[s.Name] = true
		addr, port, err := SplitAddress(s.Address)
		if err == nil && (strings.ContainsAny(s.Name, " \t") || s.Name == "") {
			err = fmt.Errorf("server name %q: the API's names have no white space", s.Name)
		}
		var p Params
		if err == nil {
			p, err = ParseParams(s.Params)
		}
		if err != nil {
			return Backend{}, &Error{Line: cfg.ServerLine(i, s), Msg: fmt.Sprintf("backend %s, server %s: %v", sec.Name, s.Name, err)}
		}
		b.Servers = append(b.Servers, Server{Name: s.Name, Address: addr, Port: port, Params: p})
	}
	return b, nil
}
