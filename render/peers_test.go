package render

import (
	"context"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestPeersValue pins what templates see as `peers`: the replicas sorted by name, which one is
// this one, and an empty list when --peers is off.
func TestPeersValue(t *testing.T) {
	tpl := `peers mypeers
{%- for p in peers.all %}
  peer {{ p.name }} {{ p.ip }}:{{ p.port }}{% if p.local %} # local{% endif %}{% if not p.ready %} # not ready{% endif %}
{%- endfor %}
localpeer {{ peers.local }} {{ peers.port }} {{ peers.enabled }}`
	s := testSnapshot(map[string]string{"template": tpl}, "template")
	s.Peers = snapshot.Peers{Enabled: true, Local: "lb-b", Port: 10000, All: []snapshot.Peer{
		{Name: "lb-a", IP: "10.0.0.1", Port: 10000, Ready: true},
		{Name: "lb-b", IP: "10.0.0.2", Port: 10000, Ready: true, Local: true},
		{Name: "lb-c", IP: "10.0.0.3", Port: 10000},
	}}
	b, err := New(Options{}).Render(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := "peers mypeers\n  peer lb-a 10.0.0.1:10000\n  peer lb-b 10.0.0.2:10000 # local\n  peer lb-c 10.0.0.3:10000 # not ready\nlocalpeer lb-b 10000 True\n"
	if string(b.Config) != want {
		t.Errorf("got\n%s\nwant\n%s", b.Config, want)
	}
	off := testSnapshot(map[string]string{"template": `{% if peers.all %}peers{% else %}none{% endif %} [{{ peers.local }}] {{ peers.enabled }}`}, "template")
	b, err = New(Options{}).Render(context.Background(), off)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b.Config); got != "none [] False\n" {
		t.Errorf("off: got %q", got)
	}
}
