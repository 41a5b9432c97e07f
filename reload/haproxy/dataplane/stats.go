package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/rollout"
)

// The API's runtime statistics: HAProxy's `show stat` (GET /services/haproxy/stats/native)
// and `show info` (GET /services/haproxy/runtime/info), read through the host's runtime API (a
// `stats socket` of the configuration, or the master socket with the API's master_runtime).
// v3 answers one object; v2 a list of them, one per runtime socket.

// nativeStats is the API's native_stats model (v2: native_stats_collection).
type nativeStats struct {
	Error string `json:"error"`
	Stats []struct {
		BackendName string `json:"backend_name"`
		Name        string `json:"name"`
		Type        string `json:"type"` // frontend, backend, server; none for a listener
		Stats       struct {
			ReqTot      int64  `json:"req_tot"`
			Stot        int64  `json:"stot"`
			Hrsp5xx     int64  `json:"hrsp_5xx"`
			Econ        int64  `json:"econ"`
			Chkfail     int64  `json:"chkfail"`
			Chkdown     int64  `json:"chkdown"`
			Status      string `json:"status"`
			CheckStatus string `json:"check_status"`
		} `json:"stats"`
	} `json:"stats"`
}

// processInfo is the API's process_info model.
type processInfo struct {
	Error string `json:"error"`
	Info  *struct {
		Pid int64 `json:"pid"`
	} `json:"info"`
}

// Sample reads the host's HAProxy counters.
func (c *client) Sample(ctx context.Context) (rollout.Sample, error) {
	if _, err := c.apiVersion(ctx); err != nil {
		return rollout.Sample{}, err
	}
	var infos []processInfo
	if err := c.getRuntime(ctx, "read HAProxy's process information", "/services/haproxy/runtime/info", &infos); err != nil {
		return rollout.Sample{}, err
	}
	s := rollout.Sample{Frontends: map[string]rollout.Counters{}, Backends: map[string]rollout.Counters{}, Servers: map[string]rollout.Counters{}}
	for _, in := range infos {
		if in.Error != "" || in.Info == nil || in.Info.Pid == 0 {
			return rollout.Sample{}, fmt.Errorf("%s: read HAProxy's process information: the API has no answer from HAProxy's runtime API: %s", c.label, in.Error)
		}
		s.PID = in.Info.Pid
	}
	var stats []nativeStats
	if err := c.getRuntime(ctx, "read HAProxy's statistics", "/services/haproxy/stats/native", &stats); err != nil {
		return rollout.Sample{}, err
	}
	for _, ns := range stats {
		if ns.Error != "" {
			return rollout.Sample{}, fmt.Errorf("%s: read HAProxy's statistics: %s", c.label, ns.Error)
		}
		for _, st := range ns.Stats {
			v := st.Stats
			n := rollout.Counters{Requests: v.ReqTot, Sessions: v.Stot, Responses5xx: v.Hrsp5xx, ConnErrors: v.Econ,
				CheckFails: v.Chkfail, CheckDowns: v.Chkdown, Status: v.Status, CheckStatus: v.CheckStatus}
			switch st.Type {
			case "frontend":
				s.Frontends[st.Name] = n
			case "backend":
				s.Backends[st.Name] = n
			case "server":
				s.Servers[st.BackendName+"/"+st.Name] = n
			}
		}
	}
	if s.PID == 0 || len(stats) == 0 {
		return rollout.Sample{}, fmt.Errorf("%s: the API reads no statistics from HAProxy (is there a `stats socket` in the configuration, or master_runtime in the API's?)", c.label)
	}
	return s, nil
}

// getRuntime GETs one of the runtime statistics and decodes it into *list: v2's list, or v3's
// object as a list of one.
func (c *client) getRuntime(ctx context.Context, op, path string, list any) error {
	r, err := c.do(ctx, op, http.MethodGet, path, nil, "", nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return c.apiError(op, r)
	}
	body := bytes.TrimSpace(r.body)
	if !bytes.HasPrefix(body, []byte("[")) {
		body = append(append([]byte("["), body...), ']')
	}
	if err := json.Unmarshal(body, list); err != nil {
		return fmt.Errorf("%s: %s: %w", c.label, op, err)
	}
	return nil
}
