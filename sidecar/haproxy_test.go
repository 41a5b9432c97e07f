package sidecar

import "testing"

func TestDefaultDataplaneStateDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/haproxy-sidecar/dataplane"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/state/haproxy-sidecar/dataplane"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/haproxy-sidecar/dataplane"},
		{map[string]string{"HOME": "/"}, ".haproxy-sidecar-dataplane"},
		{map[string]string{}, ".haproxy-sidecar-dataplane"},
	} {
		if got := defaultDataplaneStateDir(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("defaultDataplaneStateDir(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
