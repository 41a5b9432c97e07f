package haproxytest

import (
	"errors"
	"fmt"
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
	if a <= 0 || b <= 0 {
		t.Fatalf("ports %d %d", a, b)
	}
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
