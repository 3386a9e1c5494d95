# infradns: the one image every static pod of a node runs (make image).
#   /usr/bin/coredns         CoreDNS with the infradns plugins (default entrypoint)
#   /usr/bin/infradns        vr-ids, render, render-node, vrrp-scan, version
#   /usr/bin/mdns-publisher  the node's mDNS advertisements
#   /usr/sbin/keepalived, /usr/sbin/haproxy: run by their static pods, and
#   validated by CoreDNS's lbconfig plugin (keepalived -t, haproxy -c).
# Build: make image (VERSION=..., IMAGE=...). go test ./deploy/image checks that
# this file parses and copies exactly the binaries `make build` makes.

ARG VERSION=dev

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION
# Static binaries; VERSION is given because .git is not in the build context.
RUN CGO_ENABLED=0 make build VERSION="${VERSION}" BIN=bin

FROM debian:bookworm-slim
ARG VERSION
LABEL org.opencontainers.image.title="infradns" \
      org.opencontainers.image.description="Self-hosted DNS and virtual IPs for on-prem Kubernetes and OpenShift clusters: CoreDNS with the infradns plugins, mdns-publisher, keepalived and haproxy" \
      org.opencontainers.image.source="https://github.com/infradns/infradns" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="infradns"
RUN apt-get update \
 && apt-get install -y --no-install-recommends keepalived haproxy iproute2 nftables ca-certificates libcap2-bin \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/coredns /src/bin/infradns /src/bin/mdns-publisher /usr/bin/
# The DNS pod runs CoreDNS as 65532 and adds only NET_BIND_SERVICE: a
# non-root process gets no added capability at exec (no ambient set), so the
# binary carries it as a file capability, as CoreDNS's own image does.
RUN setcap cap_net_bind_service=+ep /usr/bin/coredns
# Non-root by default (the DNS pod and mdns-publisher run so); the static
# pods set runAsUser: 0 where root is needed: lbconfig (signalling and
# writing for root's daemons), keepalived (VRRP), haproxy.
USER 65532:65532
ENTRYPOINT ["/usr/bin/coredns"]
CMD ["-conf", "/etc/infradns/Corefile"]
