# haproxy-sidecar: the commands a fresh machine needs.
GO ?= go
PATH := /usr/sbin:$(PATH)
export PATH

.PHONY: all build demo test test-short vet bench bench-churn deps version image set-version

## The version: the VERSION file (hack/version.sh), the release version's one place; the image
## is tagged with it, which is what the chart (appVersion), examples/kubernetes and the docs name.
## The commit (-dirty with uncommitted changes) is the revision, stamped into the binary and the
## image beside it: `haproxy-sidecar version` and haproxy_sidecar_build_info say both.
VERSION ?= $(shell hack/version.sh)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
IMAGE_REPOSITORY ?= haproxy-sidecar
IMAGE ?= $(IMAGE_REPOSITORY):$(VERSION)
DOCKER ?= docker
LDFLAGS := -X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=$(VERSION) \
	-X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Revision=$(REVISION)
DOCKER_BUILD := $(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/haproxy-sidecar .

version:
	@echo $(VERSION)

## image: prints the docker build command of haproxy-sidecar:VERSION (IMAGE_REPOSITORY=... for
## another name), and runs it when a docker engine answers (the image carries HAProxy: see the
## Dockerfile).
image:
	@echo '$(DOCKER_BUILD)'
	@if $(DOCKER) info >/dev/null 2>&1; then $(DOCKER_BUILD); \
	else echo "make image: no docker engine here; run the command above where there is one" >&2; fi

## set-version V=X.Y.Z: the release version in its one place (VERSION), copied to the chart
## (version, appVersion), the example Deployment's images and the docs' examples; then tag the
## commit vX.Y.Z (e2e/version_test.go checks they agree).
set-version:
	@test -n "$(V)" || { echo "usage: make set-version V=X.Y.Z" >&2; exit 2; }
	echo $(V) >VERSION
	sed -i -E 's/^(version: ).*/\1$(V)/; s/^(appVersion: ).*/\1"$(V)"/' charts/haproxy-sidecar/Chart.yaml
	sed -i -E 's#^( +image: haproxy-sidecar:).*#\1$(V)#' examples/kubernetes/deployment.yaml
	sed -i -E 's#(VERSION=)[0-9][0-9A-Za-z.+-]*#\1$(V)#g; s#(haproxy-sidecar:)[0-9][0-9A-Za-z.+-]*#\1$(V)#g' docs/kubernetes.md

deps:
	hack/install-deps.sh

## demo: run the sidecar for real on examples/local (HAProxy + backends on localhost)
demo: deps
	hack/demo.sh

## test: every test, with the race detector, after installing what they need: HAProxy 2.6 from
## Debian, 3.0, 3.2 and 3.4 LTS from Debian's newer suites (hack/haproxy-versions.sh), and a real
## kube-apiserver, etcd and kubectl built from the Go module proxy (hack/testbins.sh); all cached
## outside the clone, the first run takes several minutes. hack/test.sh runs every package
## against 3.2, then the packages that run HAProxy against 2.6, 3.0 and 3.4; then
## conformance runs the whole Gateway API suite against the HTTPRoute example (about 2 min; its
## binaries, hack/conformance-bins.sh, take about 8 minutes the first time) and fails when a
## test of a feature claimed fails.
test: deps cross
	$(GO) vet ./...
	KUBEBUILDER_ASSETS=$$(hack/testbins.sh) HELM=$$(hack/helm.sh) HAPROXY_SIDECAR_REQUIRE_TESTBINS=1 \
		GO=$(GO) hack/test.sh -race -count=1 -timeout 30m
	$(MAKE) conformance

## cross: everything builds for macOS and Windows too (render and validate are laptop and
## pre-commit checks; `run` is Linux-only in practice, but all of it must compile).
.PHONY: cross
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) build ./...

test-short:
	$(GO) test -short ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/ ./inputs/snapshot/

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

## conformance: the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance v1.6.3,
## profile GATEWAY-HTTP) against examples/templates/httproute.yaml, the sidecar writing the
## status, on this machine without a container runtime: kube-apiserver, etcd, controller-manager,
## scheduler, kwok and the suite's echo backend as processes in a network namespace of its own
## (hack/conformance.sh; about 2 min on 2 cores once its binaries are built). bin/conformance/: report.yaml, summary.txt, the
## suite's log, every piece's log (docs/ingress-gateway.md#gateway-api-conformance).
## conformance-smoke: the same harness with one test of the suite (about a minute).
.PHONY: conformance conformance-smoke
conformance: deps
	hack/conformance.sh
conformance-smoke: deps
	RUN_TEST=HTTPRouteSimpleSameNamespace OUT=bin/conformance-smoke hack/conformance.sh

## bench-routes: HTTPRoutes and Ingresses at 1,000 and 3,000 (SIZES; 10000 too) through a real
## kube-apiserver, HAProxy 3.4 and 3.2: a new route, a path change, a route deleted, a pod
## added -> served p50/p95/p99, reloads, RSS, start to every route served (docs/performance.md).
.PHONY: bench-routes
bench-routes: deps
	hack/bench-routes.sh
