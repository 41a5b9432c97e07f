// Package render turns a snapshot.Snapshot into a Bundle: haproxy.cfg rendered from the
// template set (Jinja2 or pongo2 syntax, run by package jinja), the certificate files, map
// files and other files, and their one hash.
//
// The renderer builds the template context from the snapshot (context.go), compiles template
// sets once per content (a small cache), renders within a time and an output budget, and
// turns the engine's errors into *snapshot.InputError naming the ConfigMap key, line and
// column (or, for a value from the data that would inject a line, the object it came from).
// docs/templates.md says what templates can use and how they differ from Jinja2.
//
// The folder is the render stage. Its packages, in the order a template passes through them:
//
//   - jinja/parse: template text to a tree of plain data (lexer, parser, nodes).
//   - jinja: the evaluator and the built-ins (filters, tests, methods, globals): a tree and a
//     context to text; pongo2 hosts each render.
//   - render (this package): a snapshot to its template context, the templates rendered, the
//     bundle of files made.
package render
