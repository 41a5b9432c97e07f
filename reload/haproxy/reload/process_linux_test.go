//go:build linux

package reload

import "testing"

func TestStartedOn(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{"/usr/sbin/haproxy\x00-W\x00-S\x00/run/m.sock,level,admin\x00-f\x00/etc/haproxy/haproxy.cfg\x00", true},
		{"haproxy\x00-f\x00/etc/haproxy/haproxy.cfg\x00", true},
		{"haproxy\x00-f\x00/other/haproxy.cfg\x00", false},
		{"/bin/sh\x00-c\x00haproxy -f /etc/haproxy/haproxy.cfg\x00", false},
		{"haproxy\x00-f\x00", false},
	} {
		if got := startedOn([]byte(tc.cmdline), "/etc/haproxy/haproxy.cfg"); got != tc.want {
			t.Errorf("startedOn(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}
