# Sperli. `make run` runs the sum example on this machine; `make test` runs
# the tests (what CI runs).
GO       ?= go
BIN      := bin
SPERLI   := $(BIN)/sperli
FUZZTIME ?= 10s
PROPERTY_RUNS ?= 300
PROPERTY_SEED ?= 1

.PHONY: all build build-go run test test-hosts test-scale test-slurm sim race fuzz golden bench bench-coll bench-recovery trace-picture verify clean

all: build

CC       ?= cc
LIBDIR   := libsperli/c/$(shell uname -s | tr '[:upper:]' '[:lower:]')

# The binary and the sum example's Go and C ranks (docs/c.md); the C rank
# needs cgo and a C compiler, `make run` only the binary.
build: build-go
	sh scripts/libsperli/build.sh
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror -I $(LIBDIR) -o $(BIN)/csum scripts/examples/csum.c $(LIBDIR)/libsperli.a -lpthread

# The binary and the Go ranks are static (no cgo): a rank process then
# maps no C library and starts with less work, which counts when a
# thousand of them start on one machine (docs/scale.md).
build-go:
	CGO_ENABLED=0 $(GO) build -o $(SPERLI) ./cmd/sperli
	CGO_ENABLED=0 $(GO) build -o $(BIN)/gosum ./scripts/examples/gosum

run: build-go
	$(SPERLI) run -n 3 scripts/examples/sum.star

# The simulation of 1,000 slots (runtime/sim_test.go) is built without
# the race detector (7 GB under it): its own line.
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...
	$(GO) test -count=1 -timeout 10m -run '^TestSimulation$$' -v ./runtime/
	cd tests/k8s && $(GO) vet ./... && $(GO) test -count=1 ./...

# The ssh tests across four test hosts (network namespaces, each with sshd
# on port 62222; docs/hosts.md). They need root, openssh-server and
# iproute2; without them they fail and say why, never pass unrun.
test-hosts:
	$(GO) vet -tags hosts ./tests/hosts/
	$(GO) test -tags hosts -count=1 -timeout 10m ./tests/hosts/

# Jobs of 256, 512 and 1,024 real rank processes on this machine (SPEC §18): the
# result, links and descriptors per rank within their bounds; the wall
# time and peak memory are logged (go test -v).
test-scale:
	$(GO) vet -tags scale ./tests/scale/
	$(GO) test -tags scale -count=1 -v -timeout 20m ./tests/scale/

# The simulation of SPEC §18 at SIM_SIZES slots in one process, on a
# virtual clock (runtime/sim_test.go, docs/scale.md): figures per size.
# 4,000 slots take 4.3 GB and 48 s; SIM_SIZES=10000 takes 12 GB and 2.5 min.
SIM_SIZES ?= 1000,2000,4000
sim:
	SPERLI_SIM=$(SIM_SIZES) $(GO) test -count=1 -timeout 60m -run '^TestSimulation$$' -v ./runtime/

# Ranks under a real Slurm cluster (slurmctld, three slurmd in network
# namespaces, munged; docs/hosts.md). They need root, slurm-wlm, munge,
# iproute2 and util-linux; without them they fail and say why.
test-slurm:
	$(GO) vet -tags slurm ./tests/slurm/
	$(GO) test -tags slurm -count=1 -timeout 10m ./tests/slurm/

race:
	$(GO) test -race ./runtime/ ./starlib/

golden:
	$(GO) test ./tests/golden/ -update

# Each fuzz target for FUZZTIME, then libsperli's random-API fuzzer of the
# C layer for as long with a seed from the clock (make test runs it 3 s,
# seed 1).
fuzz:
	@set -e; for pkg in ./wire ./pki ./hosts ./ckpt ./starlib; do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done
	@echo "recovery property: random programs under random losses"
	PROPERTY_RUNS=$(PROPERTY_RUNS) PROPERTY_SEED=$(PROPERTY_SEED) $(GO) test -count=1 -timeout 60m -run '^TestRecoveryProperty$$' ./tests/elastic/
	@echo "work queue property: random losses under the queue's oracle"
	WQ_PROPERTY_RUNS=$(PROPERTY_RUNS) PROPERTY_SEED=$(PROPERTY_SEED) $(GO) test -count=1 -timeout 60m -run '^TestWorkQueueProperty$$' ./tests/elastic/
	@echo "fuzz libsperli (C layer)"
	LIBSPERLI_FUZZTIME=$(FUZZTIME) $(GO) test -count=1 -run '^TestFuzzLibsperli$$' -v ./tests/clib/

bench: build-go
	$(SPERLI) bench --plot docs/bench.svg
	$(GO) test -run '^$$' -bench 'RoundTrip|Rate' -benchtime 2s ./runtime/

# Collectives beside Open MPI 4.1 at 2–32 ranks; writes docs/collectives.svg
# (docs/benchmarks.md, "Collectives beside Open MPI").
bench-coll:
	sh scripts/bench/collectives.sh

verify:
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) mod tidy -diff

clean:
	rm -rf $(BIN)

# The trace picture of docs/starlark.md §7 (docs/trace-stencil.svg).
trace-picture: build-go
	sh scripts/trace-picture.sh

# In-place recovery beside the launcher restart, and loss detection
# (docs/benchmarks.md).
bench-recovery: build-go
	sh scripts/bench/recovery.sh
