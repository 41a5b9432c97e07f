// Package inputs is the second stage's folder: what the sources (package watcher) deliver, as
// plain data, and which version of each operator input a rendering takes. Its packages, in the
// order data passes through them:
//
//   - watchspec: what --watch asks for (the resources a template serves, and their indexes).
//   - record: the compact read-only values objects become in the template context.
//   - snapshot: the objects a source has seen, read into operator inputs one by one, and
//     assembled into the template context.
//   - quarantine: which version of each input goes into a rendering, and the search for the
//     inputs at fault when one is refused.
//   - content: the files a rendering makes: their one hash and the one set of name rules.
//   - envrecord: what renderings take from the process environment, as a record without
//     secrets (salted hashes), kept by a running sidecar and compared by diff --live.
//
// Nothing here talks to Kubernetes or HAProxy; the rendering (package render) and what makes
// it live (folder reload) read these values, the sources (package watcher) fill them.
package inputs
