// Package envrecord is what a sidecar's renderings take from its process environment, kept as
// a record that holds no secret: the variables templates may read (--env-allow, --env-secret)
// and the statistics password, each as a salted hash of its value, never the value. A running
// sidecar keeps it in its state directory (File); diff --live compares it with the environment
// it renders with (Differences), so that a prediction made with other values says so instead
// of announcing a reload that would not happen.
package envrecord

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
)

// File is the name of the record in the sidecar's state directory.
const File = "environment.json"

// StatisticsPassword is the name the statistics password is reported under: its environment
// variable (the flag --statistics-password).
const StatisticsPassword = "STATISTICS_PASSWORD"

// Environment is what renderings see of the process environment.
type Environment struct {
	// Allow and Secret are --env-allow and --env-secret as given: which variables templates
	// may read.
	Allow, Secret string
	// Variables are the values of the variables templates may read, by name.
	Variables map[string]string
	// Secrets are the names of the Variables whose values are secret (--env-secret).
	Secrets map[string]bool
	// StatisticsPassword is stats.password; "" when unset.
	StatisticsPassword string
}

// Record is an Environment with each value replaced by a salted hash: what can be written down
// and compared without holding a secret.
type Record struct {
	Salt   string `json:"salt"` // drawn for each record
	Allow  string `json:"allow,omitempty"`
	Secret string `json:"secret,omitempty"`
	// Variables are the hashes of Environment.Variables, by name.
	Variables map[string]string `json:"variables"`
	// Secrets are the names of the Variables whose values are secret, sorted.
	Secrets []string `json:"secrets,omitempty"`
	// StatisticsPassword is the hash of the password; "" when it is unset.
	StatisticsPassword string `json:"statisticsPassword,omitempty"`
}

// New records env with salt (random, new for each record: two records of one value do not
// match, and a hash of a weak password is not a lookup away).
func New(env Environment, salt string) Record {
	r := Record{Salt: salt, Allow: env.Allow, Secret: env.Secret, Variables: make(map[string]string, len(env.Variables))}
	for name, v := range env.Variables {
		r.Variables[name] = r.hash(name, v)
		if env.Secrets[name] {
			r.Secrets = append(r.Secrets, name)
		}
	}
	slices.Sort(r.Secrets)
	if env.StatisticsPassword != "" {
		r.StatisticsPassword = r.hash(StatisticsPassword, env.StatisticsPassword)
	}
	return r
}

func (r Record) hash(name, value string) string {
	h := sha256.New()
	h.Write([]byte(r.Salt))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(value))
	return hex.EncodeToString(h.Sum(nil))
}

// Difference is one value renderings see otherwise in env than in the record.
type Difference struct {
	Name string `json:"name"` // the variable (StatisticsPassword for the password)
	// Change is Missing (set in the record, not in env), Added (set in env only) or Other (set
	// in both, another value).
	Change string `json:"change"`
	// Secret: the value is secret on one side at least (the password, --env-secret's).
	Secret bool `json:"secret,omitempty"`
}

// The changes of a Difference.
const (
	Missing = "missing"
	Added   = "added"
	Other   = "other"
)

func (d Difference) String() string {
	switch d.Change {
	case Missing:
		return d.Name + " is set for the running sidecar, not here"
	case Added:
		return d.Name + " is set here, not for the running sidecar"
	}
	return d.Name + " has another value here"
}

// Differences are the values renderings see otherwise with env than with the environment
// recorded, by name (the statistics password last); none when they see the same.
func (r Record) Differences(env Environment) []Difference {
	var out []Difference
	names := map[string]string{} // the variables set on either side
	maps.Copy(names, r.Variables)
	maps.Copy(names, env.Variables)
	for _, name := range slices.Sorted(maps.Keys(names)) {
		recorded, was := r.Variables[name]
		v, is := env.Variables[name]
		if d, ok := r.compare(name, recorded, was, v, is); ok {
			d.Secret = slices.Contains(r.Secrets, name) || env.Secrets[name]
			out = append(out, d)
		}
	}
	if d, ok := r.compare(StatisticsPassword, r.StatisticsPassword, r.StatisticsPassword != "", env.StatisticsPassword, env.StatisticsPassword != ""); ok {
		d.Secret = true
		out = append(out, d)
	}
	return out
}

// compare is the difference, if any, between a value recorded (its hash; was: set) and one
// seen now (is: set).
func (r Record) compare(name, recorded string, was bool, value string, is bool) (Difference, bool) {
	switch {
	case was && !is:
		return Difference{Name: name, Change: Missing}, true
	case is && !was:
		return Difference{Name: name, Change: Added}, true
	case was && r.hash(name, value) != recorded:
		return Difference{Name: name, Change: Other}, true
	}
	return Difference{}, false
}

// Same says whether env is what r records: the same values and the same flags.
func (r Record) Same(env Environment) bool {
	return r.Allow == env.Allow && r.Secret == env.Secret && len(r.Differences(env)) == 0
}

// Flags are the flags that say which variables templates may read, as a hint to give diff the
// same ("" when neither is given).
func (e Environment) Flags() string {
	var f []string
	if e.Allow != "" {
		f = append(f, "--env-allow "+e.Allow)
	}
	if e.Secret != "" {
		f = append(f, "--env-secret "+e.Secret)
	}
	return strings.Join(f, " ")
}

// Flags are the recorded environment's (Environment.Flags).
func (r Record) Flags() string { return Environment{Allow: r.Allow, Secret: r.Secret}.Flags() }
