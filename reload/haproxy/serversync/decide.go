package serversync

import "slices"

// HostBackend is what a host's configuration has of one managed backend, as its Data Plane
// API reports it.
type HostBackend struct {
	DefaultServer Params // the backend's default_server (empty or nil: none)
	Servers       []Server
}

// Host is what a host's configuration has of the managed backends, by name; a backend the host
// does not have is absent.
type Host map[string]HostBackend

// Action is one change of a transaction.
type Action int

const (
	// SetDefaultServer replaces the backend's default_server with Op.DefaultServer.
	SetDefaultServer Action = iota
	// DeleteServer deletes the server named Op.Server.Name.
	DeleteServer
	// ReplaceServer replaces the server named Op.Server.Name with Op.Server.
	ReplaceServer
	// AddServer creates Op.Server.
	AddServer
)

func (a Action) String() string {
	return [...]string{"set default-server", "delete server", "replace server", "add server"}[a]
}

// Op is one change of a transaction.
type Op struct {
	Action        Action
	Backend       string
	Server        Server
	DefaultServer Params
}

// StateChange sets a server's runtime administrative state (StateReady or StateMaint), with no
// reload and no change to the stored configuration.
type StateChange struct {
	Backend, Server, State string
}

// Plan is how to bring a host to the rendering.
type Plan struct {
	// Missing are the managed backends the host does not have: the sidecar does not create
	// backends (someone else configures the host), so nothing is done for them.
	Missing []string
	// Ops are the changes of one transaction (one reload), in order: default-server first,
	// then deletions, replacements and additions, backend by backend.
	Ops []Op
	// States are set through the runtime server endpoints when there are no Ops: the only
	// changes are servers' states.
	States []StateChange
}

// Empty reports whether the plan changes nothing (Missing aside).
func (p Plan) Empty() bool { return len(p.Ops) == 0 && len(p.States) == 0 }

// Decide compares the rendering's backends (want) with what the host's configuration has and
// returns the plan. previous is what the last sync of this host brought it to (nil when not
// known: at start, after a failure).
//
// Servers are compared whole, by name: one the host lacks is added, one the rendering lacks is
// deleted, one that differs is replaced. The backend's default_server is set when the rendering
// writes default-server lines and the host's differs; otherwise it is left alone.
//
// A server that differs only in its state (the `disabled` keyword) needs no transaction: its
// state is set at runtime (States), and the stored configuration keeps the old state until a
// transaction writes the server again (the next one that has anything to do replaces such
// servers too, so that a reload does not bring the old states back). When states are all that
// changed, a state is set only where the rendering changed it since previous (or, without
// previous, where the stored configuration differs): a state set by hand at runtime stays
// until the rendering changes that server's state.
func Decide(want []Backend, has Host, previous []Backend) Plan {
	var plan Plan
	prevState := map[[2]string]string{}
	for _, b := range previous {
		for _, s := range b.Servers {
			prevState[[2]string{b.Name, s.Name}] = s.Params.State()
		}
	}
	var stale []Op // replacements of servers whose stored state only is out of date
	for _, b := range want {
		h, ok := has[b.Name]
		if !ok {
			plan.Missing = append(plan.Missing, b.Name)
			continue
		}
		if b.DefaultServer != nil && !b.DefaultServer.Equal(nonNil(h.DefaultServer)) {
			plan.Ops = append(plan.Ops, Op{Action: SetDefaultServer, Backend: b.Name, DefaultServer: b.DefaultServer})
		}
		stored := map[string]Server{}
		for _, s := range h.Servers {
			stored[s.Name] = s
		}
		wanted := map[string]bool{}
		for _, s := range b.Servers {
			wanted[s.Name] = true
		}
		for _, s := range h.Servers {
			if !wanted[s.Name] {
				plan.Ops = append(plan.Ops, Op{Action: DeleteServer, Backend: b.Name, Server: Server{Name: s.Name}})
			}
		}
		var adds []Op
		for _, s := range b.Servers {
			old, ok := stored[s.Name]
			switch {
			case !ok:
				adds = append(adds, Op{Action: AddServer, Backend: b.Name, Server: s})
			case s.Equal(old):
				if p, known := prevState[[2]string{b.Name, s.Name}]; known && p != s.Params.State() {
					plan.States = append(plan.States, StateChange{b.Name, s.Name, s.Params.State()})
				}
			case s.equalButState(old):
				stale = append(stale, Op{Action: ReplaceServer, Backend: b.Name, Server: s})
				p, known := prevState[[2]string{b.Name, s.Name}]
				if !known {
					p = old.Params.State()
				}
				if p != s.Params.State() {
					plan.States = append(plan.States, StateChange{b.Name, s.Name, s.Params.State()})
				}
			default:
				plan.Ops = append(plan.Ops, Op{Action: ReplaceServer, Backend: b.Name, Server: s})
			}
		}
		plan.Ops = append(plan.Ops, adds...)
	}
	if len(plan.Ops) > 0 {
		// A transaction (and its reload) happens anyway: it writes the states too, and the
		// reload applies them.
		plan.Ops = append(plan.Ops, stale...)
		slices.SortStableFunc(plan.Ops, func(a, b Op) int {
			if d := backendRank(want, a.Backend) - backendRank(want, b.Backend); d != 0 {
				return d
			}
			return int(a.Action) - int(b.Action)
		})
		plan.States = nil
	}
	return plan
}

// backendRank is the position of backend name in want.
func backendRank(want []Backend, name string) int {
	return slices.IndexFunc(want, func(b Backend) bool { return b.Name == name })
}

func nonNil(p Params) Params {
	if p == nil {
		return Params{}
	}
	return p
}
