package templates

import (
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	main, ok := Default[DefaultKey]
	if !ok {
		t.Fatalf("Default has no %q (keys: %v)", DefaultKey, Default)
	}
	for _, want := range []string{`hard-stop-after {{ env.HARD_STOP_AFTER|default("30s", true) }}`, "option idle-close-on-response", "option redispatch", "option forwardfor", "{% include \"rules.j2\" %}"} {
		if !strings.Contains(main, want) {
			t.Errorf("%s does not contain %q", DefaultKey, want)
		}
	}
	if _, ok := Default["rules.j2"]; !ok {
		t.Error("rules.j2, included by the default template, is not embedded")
	}
	for name, text := range Default {
		if !strings.HasSuffix(name, ".j2") || strings.TrimSpace(text) == "" {
			t.Errorf("embedded %q is not a non-empty .j2 template", name)
		}
	}
}
