package watcher

import (
	"cmp"
	"maps"
	"slices"
)

// Choices are what a File's reads remember to choose among the definitions of an object
// defined in more than one place, kept beyond the process: a restarted sidecar, or a diff
// --live against a running one, gives them back (File.Remembered) so that the definition in
// use stays in use and a newcomer stays held, whatever the files' names. The sidecar keeps
// them in its state directory (ChoicesFile), written when they change (File.OnChoices).
type Choices struct {
	// Kept is, for each object defined more than once, the file whose definition is in use.
	Kept []KeptDefinition `json:"kept,omitempty"`
	// Files are the files read (relative to Dir), sorted: a file that is not among them is a
	// newcomer, whose definitions give way to those of the files that are.
	Files []string `json:"files"`
}

// KeptDefinition is the file (relative to Dir) whose definition of an object is in use.
type KeptDefinition struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	File      string `json:"file"`
}

// ChoicesFile is the name of the file in the sidecar's state directory that keeps the file
// source's Choices, for a restarted sidecar and for diff --live.
const ChoicesFile = "duplicates.json"

// choicesOf are the Choices of a read that kept kept and found files.
func choicesOf(kept map[objectKey]string, files map[string]*fileEntry) Choices {
	c := Choices{Files: slices.Sorted(maps.Keys(files))}
	for k, rel := range kept {
		c.Kept = append(c.Kept, KeptDefinition{Kind: k.kind, Namespace: k.namespace, Name: k.name, File: rel})
	}
	slices.SortFunc(c.Kept, func(a, b KeptDefinition) int {
		return cmpKeys(objectKey{a.Kind, a.Namespace, a.Name}, objectKey{b.Kind, b.Namespace, b.Name})
	})
	return c
}

func cmpKeys(a, b objectKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
}

// equal says whether c and d are the same choices.
func (c *Choices) equal(d Choices) bool {
	return c != nil && slices.Equal(c.Kept, d.Kept) && slices.Equal(c.Files, d.Files)
}

// kept is c.Kept as a File keeps it.
func (c *Choices) kept() map[objectKey]string {
	if c == nil || len(c.Kept) == 0 {
		return nil
	}
	out := make(map[objectKey]string, len(c.Kept))
	for _, k := range c.Kept {
		out[objectKey{k.Kind, k.Namespace, k.Name}] = k.File
	}
	return out
}
