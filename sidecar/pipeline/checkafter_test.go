package pipeline

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/validate"
)

// afterChecker is haproxy -c as the rig's checker (it refuses "invalid"), noting how many
// runtime API commands HAProxy had been sent when each check ran.
type afterChecker struct {
	cli *cli
	mu  sync.Mutex
	at  []int
}

func (c *afterChecker) Check(_ context.Context, path string) error {
	c.mu.Lock()
	c.at = append(c.at, len(c.cli.commands()))
	c.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.Contains(string(b), "invalid") {
		return &validate.CheckError{Output: "[ALERT] 'invalid' is not a keyword", Line: 1}
	}
	return nil
}

func (c *afterChecker) checks() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.at...)
}

// TestOperatorChangeCheckedAfterItGoesLive: with CheckAfter, a services edit the runtime API
// can make goes live through it first and is checked right after, and its version becomes the
// last good one once checked; one that haproxy -c refuses is taken back at once, held at its
// last good version by the next sync (which names it), while a pod change goes live beside it;
// fixing it brings it in. A changed template set is still checked first.
func TestOperatorChangeCheckedAfterItGoesLive(t *testing.T) {
	c := startCluster()
	chk := &afterChecker{}
	r := newQRigWith(t, c, "", tmplRenderer{}, func(cfg *Config) { cfg.CheckAfter = true; cfg.Checker = chk })
	chk.cli = r.cli
	r.sync(t, apply.Applied)
	before, first := len(chk.checks()), r.p.q.Good["service/web"].Hash

	// Service web now selects the api pods: its servers change, which the runtime API makes.
	c.edit(func(c *cluster) { c.services["web"] = service("api") })
	if res := r.sync(t, apply.Applied); res.Reloaded {
		t.Fatal("a server change reloaded")
	}
	checks := chk.checks()
	if len(checks) != before+1 || checks[before] == 0 {
		t.Fatalf("checks at %v runtime commands (before this change: %d checks): want one, after the runtime API's commands", checks, before)
	}
	good := r.p.q.Good["service/web"].Hash
	if good == first || !strings.Contains(r.live(t), "backend web\n    server api-1") {
		t.Fatalf("the checked change is not the last good one (or not live):\n%s", r.live(t))
	}

	// A bad edit: it goes live at runtime (a comment changes no server), haproxy -c refuses it
	// right after, HAProxy is taken back to the last good configuration.
	c.edit(func(c *cluster) { c.services["web"] = service("api", `, "poison": "# invalid"`) })
	res := r.sync(t, apply.Rejected)
	if !strings.Contains(res.Err.Error(), "is not a keyword") {
		t.Errorf("rejection %v does not give haproxy -c's reason", res.Err)
	}
	if r.p.q.Good["service/web"].Hash != good {
		t.Fatal("the refused version was accepted as the last good one")
	}
	if runs, live := r.p.HAProxy().Runs, r.p.HAProxy().Good.Hash(); runs != live || strings.Contains(r.live(t), "invalid") {
		t.Fatalf("HAProxy runs %s, the last good is %s; live:\n%s", runs, live, r.live(t))
	}
	// The next sync holds it (naming it) and a new pod goes live beside it.
	c.edit(func(c *cluster) { c.pods["api-2"] = "10.0.1.2" })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "service/web:true" {
		t.Fatalf("held %q, want service/web at its last good version", got)
	}
	if h := r.p.q.Held["service/web"]; h.Ref.Key != "web" || !strings.Contains(h.Err.Error(), "is not a keyword") {
		t.Errorf("hold %+v does not name the key and haproxy -c's reason", h)
	}
	if live := r.live(t); strings.Contains(live, "invalid") || !strings.Contains(live, "server api-2") {
		t.Fatalf("live:\n%s", live)
	}
	// Fixed: it goes live, at runtime again.
	c.edit(func(c *cluster) { c.services["web"] = service("api", `, "poison": "# fine"`) })
	r.sync(t, apply.Applied)
	if got := r.held(); got != "" || !strings.Contains(r.live(t), "# fine") {
		t.Fatalf("held %q; live:\n%s", got, r.live(t))
	}

	// A template set is checked before it goes live.
	n := len(chk.checks())
	c.edit(func(c *cluster) { c.template = "frontend fe\n    bind :80\n    # invalid\n" })
	r.sync(t, apply.Unchanged) // held: the last good template set renders what runs
	if got := r.held(); got != "templates:true" {
		t.Fatalf("held %q, want the template set", got)
	}
	if strings.Contains(r.live(t), "# invalid") || len(chk.checks()) == n {
		t.Fatalf("the template set was not checked first:\n%s", r.live(t))
	}
	var ce *validate.CheckError
	if !errors.As(r.p.q.Held["templates"].Err, &ce) {
		t.Errorf("the template set's hold: %v", r.p.q.Held["templates"].Err)
	}
}

// TestGoodInputsPublishedForTheWebhook: the last good inputs are published for GoodInputs
// after a change went live when the admission webhook reads them (PublishGoodInputs), and no
// copy is made when nothing does.
func TestGoodInputsPublishedForTheWebhook(t *testing.T) {
	for _, publish := range []bool{true, false} {
		c := startCluster()
		r := newQRigWith(t, c, "", tmplRenderer{}, func(cfg *Config) { cfg.PublishGoodInputs = publish })
		r.sync(t, apply.Applied)
		good := r.p.GoodInputs().Good
		if r.p.q.Good["service/web"].Hash == "" {
			t.Fatal("service/web is not among the last good inputs after the first sync")
		}
		if publish && good["service/web"].Hash != r.p.q.Good["service/web"].Hash {
			t.Errorf("published: service/web at %q, want the last good %q", good["service/web"].Hash, r.p.q.Good["service/web"].Hash)
		}
		if !publish && len(good) != 0 {
			t.Errorf("not published, yet GoodInputs answers %d inputs", len(good))
		}
	}
}
