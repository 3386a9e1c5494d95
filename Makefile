# infradns — see README.md. Every target works on a fresh Debian machine with Go.
SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := bin

# make run: the example cluster on 127.0.0.1:1053. Names outside the cluster go
# to RUN_UPSTREAM (a resolv.conf-style file or addresses).
RUN_PORT     ?= 1053
RUN_UPSTREAM ?= /etc/resolv.conf

.PHONY: all build image image-oci release run test unit e2e deps bench bench-scale bench-scale-lb verify lint fmt clean

all: build

# Static binaries (no cgo): they run in the image and on any node as they are.
# The Dockerfile copies exactly these; deploy/image's test checks that.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/coredns ./coredns
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/infradns ./cmd/infradns
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mdns-publisher ./cmd/mdns-publisher

# make image: the one image every static pod runs (Dockerfile). Needs podman
# or docker; without one the Dockerfile is still checked by go test ./deploy/...
IMAGE            ?= infradns:$(VERSION)
CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

image:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: no podman or docker here (set CONTAINER_ENGINE=...); the Dockerfile is checked by 'go test ./deploy/...'" >&2; exit 1; }
	@$(CONTAINER_ENGINE) info >/dev/null 2>&1 || { echo "make image: $(CONTAINER_ENGINE) is installed but its engine does not answer ($(CONTAINER_ENGINE) info fails); the Dockerfile is checked by 'go test ./deploy/...'" >&2; exit 1; }
	$(CONTAINER_ENGINE) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# make image-oci: the same image without a container engine or a registry,
# from Debian's archive (mmdebstrap; the Debian layer is cached), as an OCI
# archive: ctr -n k8s.io images import $(BIN)/infradns-image.oci.tar
image-oci: build
	$(GO) run ./hack/image-oci -version $(VERSION) -name $(IMAGE) -bin $(BIN) -o $(BIN)/infradns-image.oci.tar

# make release VERSION=vX.Y.Z: dist/VERSION/ with make build's static
# binaries for every RELEASE_ARCHES (linux_ARCH/), one multi-arch OCI image
# archive (an image index over one image per architecture, each on that
# architecture's Debian packages: mmdebstrap, cached, foreign ones under
# qemu-user-static), an SPDX SBOM and SHA256SUMS. Every time stamp is
# SOURCE_DATE_EPOCH (default: the commit's time), so a commit gives the same
# digests. See "Releases" in docs/operator-guide.md.
RELEASE_ARCHES ?= amd64 arm64 ppc64le s390x
DIST           ?= dist

release:
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "make release VERSION=vX.Y.Z (got '$(VERSION)')" >&2; exit 1;; esac
	rm -rf $(DIST)/$(VERSION)
	set -e; for a in $(RELEASE_ARCHES); do \
	  GOOS=linux GOARCH=$$a $(MAKE) --no-print-directory build VERSION=$(VERSION) BIN=$(DIST)/$(VERSION)/linux_$$a; \
	done
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)} \
	  $(GO) run ./hack/release -version $(VERSION) -name $(IMAGE) -dir $(DIST)/$(VERSION) -arches "$(RELEASE_ARCHES)"
	cd $(DIST)/$(VERSION) && sha256sum -c --quiet SHA256SUMS && ls -l *.tar *.json SHA256SUMS

run: build
	@echo "Serving ocp4.example.com on 127.0.0.1:$(RUN_PORT). Try, in another shell:"
	@echo "  dig @127.0.0.1 -p $(RUN_PORT) api-int.ocp4.example.com A"
	@echo "  dig @127.0.0.1 -p $(RUN_PORT) api.ocp4.example.com AAAA"
	@echo "  dig @127.0.0.1 -p $(RUN_PORT) console-openshift-console.apps.ocp4.example.com A"
	@echo "  dig @127.0.0.1 -p $(RUN_PORT) nosuchhost.ocp4.example.com A      (NXDOMAIN)"
	@echo "  make verify                                                    (all checks)"
	INFRADNS_UPSTREAM=$(RUN_UPSTREAM) $(BIN)/coredns -conf corefile.example -dns.port $(RUN_PORT)

deps:
	hack/install-deps.sh

# Everything: unit tests with the race detector, then the multi-node lab.
test: deps build unit e2e

unit:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

e2e: build
	@# Real kube-apiserver, etcd, kubelet, kubeadm, kubectl, controller-manager
	@# and scheduler from the module proxy, cached (cold 7-25 min, warm: nothing).
	GO=$(GO) test/kubeapi/build.sh
	@# -p 1: the scale smoke test (test/e2e/scale) loads an apiserver; it must
	@# not run beside the lab's failover timings. -parallel 4: the four tests
	@# that mark themselves parallel (kube-apiserver outages, mdnsnodes against
	@# the API, the real kubelet, the VRRP stability window, whose load is part
	@# of the test) run together once the timed ones are done; kubeadm runs
	@# alone (next to it the API tests' < 1 s figures failed).
	$(GO) test -tags e2e -count=1 -p 1 -parallel 4 -timeout 30m -v ./test/e2e/...

# Starts the example server on a free port, runs the dig verification, stops it.
verify: build deps
	hack/verify-local.sh

bench: build deps
	hack/bench.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) $(DIST)

# The scale benchmark against the real kube-apiserver (~30 min): following
# Nodes (TestScaleBench: SCALE_NODES="500 2000 5000", SCALE_BINS="before=/path/coredns
# current=bin/coredns", SCALE_SECONDS=20), then the LoadBalancer Services
# (TestScaleBenchLB, below). Writes docs/scale-benchmarks.md.
bench-scale: build
	GO=$(GO) test/kubeapi/build.sh
	$(GO) test -tags scale -count=1 -timeout 120m -run TestScaleBench -v ./test/e2e/scale/

# The LoadBalancer-Services part alone (~8 min): SCALE_LB_NODES=5000,
# SCALE_LB_SERVICES=1000, SCALE_LB_RATE=10 (Services created per second),
# SCALE_LB_SECONDS=60 (each heartbeat window). Rewrites its own section of
# docs/scale-benchmarks.md and keeps the rest.
bench-scale-lb: build
	GO=$(GO) test/kubeapi/build.sh
	$(GO) test -tags scale -count=1 -timeout 60m -run 'TestScaleBenchLB$$' -v ./test/e2e/scale/
