package dataplanetest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/cli"
)

// The runtime statistics of the real API, read from HAProxy's runtime API as it reads them:
//
//	GET /services/haproxy/stats/native[?type=frontend|backend|server&name=N&parent=B]   `show stat`
//	GET /services/haproxy/runtime/info                                                    `show info typed`
//
// v3 answers one object per call ({"runtimeAPI", "stats": [...]}, {"runtimeAPI", "info": {...}});
// v2 a list of them, one per runtime socket (its multi-process model, from client-native v5).
// Each row of `show stat` becomes {"name", "type", "backend_name", "stats": {...}} with the
// fields of the API's native_stat_stats model (empty CSV fields left out; a listener row has no
// name nor type). The runtime API used is the master socket ("@1 ") when the API plays
// master_runtime (Options.MasterRuntime), else the first `stats socket` of the stored
// configuration that answers; with neither the API cannot read statistics (500).

func (s *Server) statsRoutes(mux *http.ServeMux, p string) {
	mux.HandleFunc("GET "+p+"/stats/native", s.getStats)
	mux.HandleFunc("GET "+p+"/runtime/info", s.getInfo)
}

// runtimeCommand sends cmd to the runtime API the real API would use; api names it as the
// API's runtimeAPI field does.
func (s *Server) runtimeCommand(ctx context.Context, cmd string) (out, api string, err error) {
	if s.opts.MasterRuntime {
		api = s.HAProxy.MasterSocket + "@1"
		out, err = (&cli.Client{Path: s.HAProxy.MasterSocket, Timeout: 5 * time.Second}).Command(ctx, "@1 "+cmd)
		return out, api, err
	}
	text, _, err := s.stored()
	if err != nil {
		return "", "", err
	}
	for _, path := range StatsSockets(text) {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			out, err = (&cli.Client{Path: path, Timeout: 5 * time.Second}).Command(ctx, cmd)
			return out, path, err
		}
	}
	return "", "", errNoRuntime
}

var errNoRuntime = errors.New("runtime API not configured: the configuration has no stats socket that answers, and master_runtime is off")

// answer writes v as v3 does, or in a one-element list as v2 does.
func (s *Server) answer(w http.ResponseWriter, code int, v any) {
	if s.opts.APIVersion == 2 {
		writeJSON(w, code, []any{v})
		return
	}
	writeJSON(w, code, v)
}

type nativeStats struct {
	Error      string       `json:"error,omitempty"`
	RuntimeAPI string       `json:"runtimeAPI,omitempty"`
	Stats      []nativeStat `json:"stats,omitempty"`
}

type nativeStat struct {
	BackendName string         `json:"backend_name,omitempty"`
	Name        string         `json:"name,omitempty"`
	Stats       map[string]any `json:"stats,omitempty"`
	Type        string         `json:"type,omitempty"`
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ, name, parent := q.Get("type"), q.Get("name"), q.Get("parent")
	switch {
	case typ != "" && typ != "frontend" && typ != "backend" && typ != "server":
		writeError(w, http.StatusBadRequest, "type: must be one of frontend, backend, server")
		return
	case name != "" && typ == "":
		writeError(w, http.StatusBadRequest, "Type required when filtering by name")
		return
	case name != "" && typ == "server" && parent == "":
		writeError(w, http.StatusBadRequest, "Parent backend required when filtering by server")
		return
	}
	out, api, err := s.runtimeCommand(r.Context(), "show stat")
	if errors.Is(err, errNoRuntime) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err != nil {
		s.answer(w, http.StatusInternalServerError, nativeStats{RuntimeAPI: api, Error: err.Error()})
		return
	}
	all := parseShowStat(out)
	kept := make([]nativeStat, 0, len(all))
	for _, st := range all {
		switch {
		case typ != "" && st.Type != typ:
		case name != "" && st.Name != name:
		case typ == "server" && parent != "" && st.BackendName != parent:
		default:
			kept = append(kept, st)
		}
	}
	s.answer(w, http.StatusOK, nativeStats{RuntimeAPI: api, Stats: kept})
}

// parseShowStat reads `show stat` (CSV, header "# pxname,svname,...") into the API's rows.
func parseShowStat(out string) []nativeStat {
	lines := strings.Split(strings.TrimPrefix(out, "# "), "\n")
	keys := strings.Split(lines[0], ",")
	var rows []nativeStat
	for _, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) < len(keys) {
			continue
		}
		row := nativeStat{Stats: map[string]any{}}
		ok := true
		for i, k := range keys {
			v := f[i]
			if k == "type" {
				switch v {
				case "0", "1":
					row.Name, row.Type = f[0], strings.ToLower(f[1])
				case "2":
					row.Name, row.Type, row.BackendName = f[1], "server", f[0]
				}
			}
			kind, known := statFields[k]
			if !known || v == "" {
				continue
			}
			if kind == "int" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					ok = false // the real API's decoder drops a row it cannot read
					break
				}
				row.Stats[k] = n
				continue
			}
			row.Stats[k] = v
		}
		if ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// statFields are the fields of the API's native_stat_stats model and their JSON types.
var statFields = func() map[string]string {
	m := map[string]string{}
	for _, k := range strings.Fields(`act agent_code agent_duration agent_fall agent_health agent_rise bck bin bout
		check_code check_duration check_fall check_health check_rise chkdown chkfail cli_abrt comp_byp comp_in comp_out
		comp_rsp conn_rate conn_rate_max conn_tot ctime dcon downtime dreq dresp dses econ ereq eresp hrsp_1xx hrsp_2xx
		hrsp_3xx hrsp_4xx hrsp_5xx hrsp_other iid intercepted lastchg lastsess lbtot pid qcur qlimit qmax qtime rate
		rate_lim rate_max req_rate req_rate_max req_tot rtime scur sid slim smax srv_abrt stot throttle ttime weight
		wredis wretr`) {
		m[k] = "int"
	}
	for _, k := range strings.Fields(`addr agent_desc agent_status algo check_desc check_status cookie hanafail
		last_agt last_chk mode status tracked`) {
		m[k] = "string"
	}
	return m
}()

type processInfo struct {
	Error      string         `json:"error,omitempty"`
	Info       map[string]any `json:"info,omitempty"`
	RuntimeAPI string         `json:"runtimeAPI,omitempty"`
}

func (s *Server) getInfo(w http.ResponseWriter, r *http.Request) {
	out, api, err := s.runtimeCommand(r.Context(), "show info typed")
	if errors.Is(err, errNoRuntime) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err != nil {
		// The real API answers 200 with the error in the model.
		s.answer(w, http.StatusOK, processInfo{RuntimeAPI: api, Error: err.Error()})
		return
	}
	s.answer(w, http.StatusOK, processInfo{RuntimeAPI: api, Info: parseShowInfo(out)})
}

// parseShowInfo reads `show info typed` ("6.Pid.1:SGP:u32:1234") into the API's
// process_info_item: the fields below, by HAProxy's name for them.
func parseShowInfo(out string) map[string]any {
	info := map[string]any{}
	for _, line := range strings.Split(out, "\n") {
		head, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		parts := strings.SplitN(head, ".", 3)
		f := strings.SplitN(rest, ":", 3)
		if len(parts) < 2 || len(f) < 3 {
			continue
		}
		key, known := infoFields[parts[1]]
		if !known {
			continue
		}
		v := strings.TrimSpace(f[2])
		switch key {
		case "version", "node":
			info[key] = v
		case "release_date":
			info[key] = strings.ReplaceAll(v, "/", "-")
		default:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				info[key] = n
			}
		}
	}
	return info
}

// infoFields maps HAProxy's `show info` names to the API's process_info_item fields.
var infoFields = map[string]string{
	"Version": "version", "Release_date": "release_date", "Nbthread": "nbthread", "Nbproc": "processes",
	"Process_num": "process_num", "Pid": "pid", "Uptime_sec": "uptime", "Memmax_MB": "mem_max_mb",
	"PoolAlloc_MB": "pool_alloc_mb", "PoolUsed_MB": "pool_used_mb", "PoolFailed": "pool_failed",
	"Ulimit-n": "ulimit_n", "Maxsock": "max_sock", "Maxconn": "max_conn", "Hard_maxconn": "hard_max_conn",
	"CurrConns": "curr_conns", "CumConns": "cum_conns", "CumReq": "cum_req", "MaxSslConns": "max_ssl_conns",
	"CurrSslConns": "curr_ssl_conns", "CumSslConns": "cum_ssl_conns", "Maxpipes": "max_pipes",
	"PipesUsed": "pipes_used", "PipesFree": "pipes_free", "ConnRate": "conn_rate", "ConnRateLimit": "conn_rate_limit",
	"MaxConnRate": "max_conn_rate", "SessRate": "sess_rate", "SessRateLimit": "sess_rate_limit",
	"MaxSessRate": "max_sess_rate", "SslRate": "ssl_rate", "SslRateLimit": "ssl_rate_limit", "MaxSslRate": "max_ssl_rate",
	"Tasks": "tasks", "Run_queue": "run_queue", "Idle_pct": "idle_pct", "node": "node", "Stopping": "stopping",
	"Jobs": "jobs", "Unstoppable": "unstoppable", "Listeners": "listeners", "ActivePeers": "active_peers",
	"ConnectedPeers": "connected_peers", "DroppedLogs": "dropped_logs", "BusyPolling": "busy_polling",
	"FailedResolutions": "failed_resolutions", "TotalBytesOut": "total_bytes_out", "BytesOutRate": "bytes_out_rate",
}
