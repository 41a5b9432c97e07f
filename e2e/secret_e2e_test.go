package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
)

const secretPassword = "Pw-9f3c1e77d2-Secret"

// secretTransforms are template expressions that derive text from the stats password, and
// what each prints: the transformed secret no message may quote.
var secretTransforms = []struct{ name, expr, printed string }{
	{"reverse", "stats.password|reverse", reversed(secretPassword)},
	{"slice", "stats.password[:10]", secretPassword[:10]},
	{"replace", "stats.password.replace('-', '_')", strings.ReplaceAll(secretPassword, "-", "_")},
	{"upper", "stats.password|upper", strings.ToUpper(secretPassword)},
	{"concatenation", "'x' ~ stats.password ~ 'y'", "x" + secretPassword + "y"},
	{"format", "'%s_%s'|format(stats.password|lower, 1)", strings.ToLower(secretPassword) + "_1"},
	{"str.format", "'<{}>'.format(stats.password[3:]|reverse)", "<" + reversed(secretPassword[3:]) + ">"},
}

func reversed(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// withSecretLine is the example's template with a line haproxy -c rejects (an unknown
// keyword, which HAProxy's alert quotes), printed from expr, in the stats section.
func withSecretLine(expr string) func(string) string {
	return func(s string) string {
		// Indented for the YAML file's block; the ConfigMap's data is the block's text.
		return strings.Replace(s, "stats uri /\n", "stats uri /\n      {{ "+expr+" }} on\n", 1)
	}
}

// TestTransformedSecretNeverQuoted: a template line printing the stats password reversed,
// sliced, replaced, upper-cased, concatenated or formatted, which haproxy -c rejects, is
// reported (log, /readyz) with the rendered line and the template line that wrote it, and
// neither it nor HAProxy's words about it are quoted.
func TestTransformedSecretNeverQuoted(t *testing.T) {
	e := servingDemo(t, "--statistics-password", secretPassword)
	good := e.settled(t)
	orig, err := os.ReadFile(filepath.Join(e.dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range secretTransforms {
		t.Run(tc.name, func(t *testing.T) {
			e.editFile(t, "config.yaml", withSecretLine(tc.expr))
			var r readyz
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				_, r = e.readyz(t)
				return len(r.Held) > 0 && r.Held[0].Stage == "validate"
			}, "the template is held at validation")
			said := r.LastError + "\n" + r.Held[0].Reason
			if !strings.Contains(said, `(rendered line 26, from template "template" line 26: [a line holding a secret])`) ||
				!strings.Contains(said, "[withheld: the line holds a secret]") {
				t.Errorf("/readyz does not say which line, withheld:\n%s", said)
			}
			haproxytest.WaitFor(t, 5*time.Second, func() bool {
				return strings.Contains(e.logs.String(), "[a line holding a secret]")
			}, "the rejection is logged")
			for _, leak := range []string{tc.printed, strings.ToLower(tc.printed), strings.ToUpper(tc.printed), secretPassword} {
				if strings.Contains(said, leak) {
					t.Errorf("/readyz quotes %q:\n%s", leak, said)
				}
				if logs := e.logs.String(); strings.Contains(logs, leak) {
					i := strings.Index(logs, leak)
					t.Errorf("the log quotes %q: ...%s...", leak, logs[max(0, i-200):min(len(logs), i+50)])
				}
			}
			if err := os.WriteFile(filepath.Join(e.dir, "config.yaml"), orig, 0o644); err != nil {
				t.Fatal(err)
			}
			haproxytest.WaitFor(t, 10*time.Second, func() bool {
				_, r = e.readyz(t)
				return len(r.Held) == 0 && r.LastError == "" && r.LiveConfig == good.LiveConfig
			}, "the template is good again")
		})
	}
}

// TestTransformedSecretNotInEvents: the Warning Event of a template held at validation, whose
// rejected line prints the stats password reversed, says which line and quotes nothing of it.
func TestTransformedSecretNotInEvents(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--statistics-password", secretPassword)
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		_, err := os.Stat(e.cfgPath)
		return err == nil
	}, "the first configuration is written")
	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tc := secretTransforms[0]
	cm.Data["template"] = withSecretLine(tc.expr)(cm.Data["template"])
	k.ApplyConfigMap(t, cm)
	var msg string
	err = haproxytest.Poll(20*time.Second, func() bool {
		evs, err := k.Client.CoreV1().Events("lb").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=config,type=Warning"})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, "haproxy -c rejected") {
				msg = ev.Message
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no Warning Event says the template is rejected (%v); the sidecar logged:\n%s", err, e.logs.String())
	}
	for _, leak := range []string{tc.printed, secretPassword} {
		if strings.Contains(msg, leak) {
			t.Errorf("the Event quotes %q: %s", leak, msg)
		}
	}
	if want := fmt.Sprintf("from template %q line 26: [a line holding a secret]", "template"); !strings.Contains(msg, want) {
		t.Errorf("the Event does not say %q: %s", want, msg)
	}
}
