package haproxytest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartServesTrafficAndCleansUp(t *testing.T) {
	Binary(t)
	var pgid int
	var pids []int
	t.Run("run", func(t *testing.T) {
		backend := Backend(t, "hello from backend")
		port := FreePort(t)
		cfg := WriteFile(t, "", "haproxy.cfg", HTTPConfig(port, backend, ""))
		p := Start(t, cfg)
		pgid = p.Cmd.Process.Pid

		addr := fmt.Sprintf("127.0.0.1:%d", port)
		var body string
		WaitFor(t, 5*time.Second, func() bool {
			var err error
			body, err = Get(addr)
			return err == nil
		}, "GET through haproxy")
		if body != "hello from backend" {
			t.Fatalf("body = %q", body)
		}

		out := p.ShowProc(t)
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[1] == "master" || f[1] == "worker") {
				pid, err := strconv.Atoi(f[0])
				if err != nil {
					t.Fatalf("show proc line %q: %v", line, err)
				}
				pids = append(pids, pid)
			}
		}
		if len(pids) < 2 {
			t.Fatalf("show proc lists %d processes, want master and worker:\n%s", len(pids), out)
		}
		if _, err := p.Command("@1 show info"); err != nil {
			t.Fatalf("@1 show info: %v", err)
		}
	})
	if pgid == 0 {
		return
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still exists after cleanup (kill 0: %v)", pgid, err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("haproxy process %d still exists after cleanup (kill 0: %v)", pid, err)
		}
	}
}

func TestFreePortDiffers(t *testing.T) {
	a, b := FreePort(t), FreePort(t)
	if a <= 0 || b <= 0 || a == b {
		t.Fatalf("ports %d %d", a, b)
	}
}

// A port handed to a test that still runs is never handed again, even though nothing listens
// on it yet: the e2e tests choose a port, release it, and start a process that binds it later.
func TestFreePortNotHandedTwiceWhileTheTestRuns(t *testing.T) {
	given := map[int]bool{}
	for range 3000 {
		p := FreePort(t)
		if given[p] {
			t.Fatalf("port %d handed out twice in one test", p)
		}
		given[p] = true
	}
	// The reservation is a lock on a file, which other test processes see as well.
	for p := range given {
		release, ok := reservePort(p)
		if ok {
			release()
			t.Fatalf("port %d, reserved by this test, could be reserved again", p)
		}
		break
	}
}

func TestFreePortReleasedWhenTheTestEnds(t *testing.T) {
	var port int
	t.Run("holder", func(t *testing.T) { port = FreePort(t) })
	release, ok := reservePort(port)
	if !ok {
		t.Fatalf("port %d still reserved after the test that held it ended", port)
	}
	release()
}

func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(time.Second, func() bool { n++; return n == 3 }); err != nil {
		t.Fatal(err)
	}
	if err := Poll(30*time.Millisecond, func() bool { return false }); err == nil {
		t.Fatal("Poll returned nil for a condition that never holds")
	}
}

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		out          string
		major, minor int
		full         string
	}{
		{"HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\nStatus: long-term supported branch\n", 2, 6, "2.6.12-1+deb12u4"},
		{"HAProxy version 3.0.11-9e587df 2025/06/02 - https://haproxy.org/\n", 3, 0, "3.0.11-9e587df"},
		{"HAProxy version 3.2.26-1 2026/10/14 - https://haproxy.org/\n", 3, 2, "3.2.26-1"},
	} {
		v, err := ParseVersion(tt.out)
		if err != nil || v.Major != tt.major || v.Minor != tt.minor || v.Full != tt.full {
			t.Errorf("ParseVersion(%q) = %+v, %v", tt.out, v, err)
		}
	}
	if v, err := ParseVersion("haproxy: command not found"); err == nil {
		t.Errorf("ParseVersion of garbage = %+v", v)
	}
	v := Version{Major: 3, Minor: 1}
	if !v.AtLeast(2, 7) || !v.AtLeast(3, 1) || v.AtLeast(3, 2) || v.AtLeast(4, 0) {
		t.Errorf("AtLeast wrong for %+v", v)
	}
}

// The haproxy the tests run is the version hack/test.sh asked for.
func TestInstalledVersion(t *testing.T) {
	v := InstalledVersion(t)
	t.Logf("testing against HAProxy %s (%s)", v, Binary(t))
	if want := os.Getenv(VersionEnv); want != "" && v.Branch() != want {
		t.Fatalf("HAProxy %s, want branch %s", v, want)
	}
}
