# haproxy-sidecar: a static Go binary on top of HAProxy's own image, so that `haproxy -c`
# validates with the same HAProxy that serves. Runs as the image's non-root haproxy user.
# HAProxy 3.2 LTS by default; 2.6 and 3.0 are tested too (README, "Supported HAProxy versions").
ARG HAPROXY_IMAGE=haproxy:3.2

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/haproxy-sidecar/haproxy-sidecar/sidecar.Version=${VERSION}" -o /out/haproxy-sidecar .

FROM ${HAPROXY_IMAGE}
COPY --from=build /out/haproxy-sidecar /usr/local/bin/haproxy-sidecar
USER haproxy
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/haproxy-sidecar"]
CMD ["run"]
