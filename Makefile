# haproxy-sidecar: the commands a fresh machine needs.
GO ?= go
PATH := /usr/sbin:$(PATH)
export PATH

.PHONY: all build demo test test-short vet bench bench-churn deps

all: build

build:
	$(GO) build -trimpath -o bin/haproxy-sidecar .

deps:
	hack/install-deps.sh

## demo: run the sidecar for real on examples/local (HAProxy + backends on localhost)
demo: deps
	hack/demo.sh

## test: every test, with the race detector, after installing what they need: HAProxy 2.6 from
## Debian, 3.0 and 3.2 LTS from Debian's newer suites (hack/haproxy-versions.sh), and a real
## kube-apiserver, etcd and kubectl built from the Go module proxy (hack/testbins.sh); all cached
## outside the clone, the first run takes several minutes. hack/test.sh runs every package
## against 3.2, then the packages that run HAProxy against 2.6 and 3.0.
test: deps cross
	$(GO) vet ./...
	KUBEBUILDER_ASSETS=$$(hack/testbins.sh) HELM=$$(hack/helm.sh) HAPROXY_SIDECAR_REQUIRE_TESTBINS=1 \
		GO=$(GO) hack/test.sh -race -count=1 -timeout 30m

## cross: everything builds for macOS and Windows too (render and validate are laptop and
## pre-commit checks; `run` is Linux-only in practice, but all of it must compile).
.PHONY: cross
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) build ./...

test-short:
	$(GO) test -short ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/ ./snapshot/

## bench-churn: pod churn through the binary, a real HAProxy and a keep-alive load: reloads,
## runtime API updates, failed requests, change -> served p50/p99 (runtime API on, then off)
bench-churn: deps
	hack/bench-churn.sh

## bench-scale: render 1,000 and 10,000 services x 10 pods with the binary, and a run on
## 10,000 x 10 that edits one pod; wall time, CPU and max RSS (see docs/performance.md).
.PHONY: bench-scale
bench-scale:
	hack/bench-scale.sh

## bench-ingress: the Ingress example at 1,000 Ingresses x 1,000 backends through the binary and
## a real HAProxy: path change -> served, reloads, sidecar RSS (see docs/performance.md).
.PHONY: bench-ingress
bench-ingress: deps
	hack/bench-ingress.sh
