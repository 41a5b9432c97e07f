package watcher

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Each cluster's state is its own: source_up{cluster} follows it, and the overall state is
// down while any cluster is, naming each in name order; ForgetAfter counts from when a
// cluster went away, not from its latest report.
func TestClustersState(t *testing.T) {
	c := NewClusters(&Kube{Cluster: "home"}, []*Kube{{Cluster: "west", Member: true}, {Cluster: "east", Member: true}})
	up := map[string]bool{}
	var overall error
	var overallUp bool
	c.OnCluster = func(name string, u bool) { up[name] = u }
	c.OnState = func(u bool, why error) { overallUp, overall = u, why }
	c.ForgetAfter = time.Hour

	report := func(k *Kube, u bool, why error) { k.OnState(u, why) }
	home, west, east := c.Home, c.Members[0], c.Members[1]
	report(home, true, nil)
	report(west, false, errors.New("cannot reach the API server https://west"))
	report(east, false, errors.New("cannot reach the API server https://east"))
	if up["home"] != true || up["west"] || up["east"] {
		t.Errorf("per cluster: %v", up)
	}
	if overallUp || overall == nil {
		t.Fatal("overall up while two clusters are away")
	}
	msg := overall.Error()
	if i, j := strings.Index(msg, "cluster east: cannot reach the API server https://east"), strings.Index(msg, "cluster west: cannot reach"); i < 0 || j < 0 || i > j {
		t.Errorf("overall reason %q: want east then west, each named", msg)
	}
	if strings.Contains(msg, "home") {
		t.Errorf("overall reason %q names the home cluster, which is followed", msg)
	}
	if c.forgotten("west") {
		t.Error("west forgotten before ForgetAfter")
	}
	c.mu.Lock()
	c.away["west"] = awayCluster{since: time.Now().Add(-2 * time.Hour), why: c.away["west"].why}
	c.mu.Unlock()
	report(west, false, errors.New("a new reason")) // a new reason keeps the time it went away
	if !c.forgotten("west") || c.forgotten("east") || c.forgotten("home") {
		t.Error("forgotten: want west only (away two hours)")
	}
	report(west, true, nil)
	report(east, true, nil)
	if !overallUp || overall != nil || !up["west"] || !up["east"] {
		t.Errorf("all back: overall %v %v, per cluster %v", overallUp, overall, up)
	}
	if c.forgotten("west") {
		t.Error("west forgotten once back")
	}
	c.ForgetAfter = 0
	report(west, false, errors.New("away"))
	c.mu.Lock()
	c.away["west"] = awayCluster{since: time.Now().Add(-48 * time.Hour)}
	c.mu.Unlock()
	if c.forgotten("west") {
		t.Error("ForgetAfter 0: a cluster away is kept, however long")
	}
}
