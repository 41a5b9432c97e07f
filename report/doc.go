// Package report is the folder of what tells operators what happened: status (metrics,
// /healthz and /readyz, Events), objstatus (status on the objects a template serves),
// admission (the validating webhook: a change checked before it is stored), redact (secrets
// kept out of every message) and httpserver (the endpoints).
package report
