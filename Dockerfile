# haproxy-sidecar: a static Go binary on top of HAProxy's own image, so that `haproxy -c`
# validates with the same HAProxy that serves (the Helm chart and examples/kubernetes run both
# containers from this image). Runs as the image's non-root haproxy user.
# HAProxy 3.2 LTS, pinned to a release (tested: docs/haproxy-versions.md; 2.6 and
# 3.0 are tested too): --build-arg HAPROXY_IMAGE=haproxy:3.0.x for another one.
ARG HAPROXY_IMAGE=haproxy:3.2.26

# The Go of go.mod's go line, pinned to the release (e2e/dockerfile_test.go checks both pins).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# make image passes both (hack/version.sh: the VERSION file, which the image's tag is too; the
# commit); without them the VERSION file.
ARG VERSION=""
ARG REVISION=""
RUN v="${VERSION:-$(cat VERSION 2>/dev/null || echo 0.0.0-dev)}" && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=${v} -X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Revision=${REVISION:-unknown}" \
      -o /out/haproxy-sidecar .

FROM ${HAPROXY_IMAGE}
ARG VERSION=""
ARG REVISION=""
LABEL org.opencontainers.image.title="haproxy-sidecar" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/haproxy-sidecar /usr/local/bin/haproxy-sidecar
USER haproxy
# The entrypoint is the sidecar, which stops on SIGTERM: HAProxy's image says SIGUSR1 (its soft
# stop), which the sidecar takes too. The chart's HAProxy container runs HAProxy under a shell
# that turns the stop signal, whichever it is, into SIGUSR1 for the master: a soft stop
# (docs/kubernetes.md#draining).
STOPSIGNAL SIGTERM
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/haproxy-sidecar"]
CMD ["run"]
