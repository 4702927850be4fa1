# corequic — the two commands are `make interop` and `make test`; both set up
# what they need (pinned toolchain, wasm target) on a fresh machine.

SHELL := /bin/bash
CARGO ?= cargo
TOOLCHAIN := 1.99.0
WASM_TARGET := wasm32-unknown-unknown
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
PLUGIN_OUT := build/plugins

# Reference plugins (shipped) and test plugins (used by the test suite).
PLUGINS := padding probe bdp dummy ack-logger
TEST_PLUGINS := test-bench test-chaos test-chaos-sink test-hostile test-observer test-abi-mismatch test-liar test-tp-flood test-endless-manifest test-unlisted-routine test-field-probe test-frame-watcher test-fused-liar cq-api-probe cq-init-fails cq-tp-reject cq-bad-manifest cq-observer-probe cq-parse-only cq-writes-flow-limits cq-handshake-fault cq-handshake-timer cq-batch-observer cq-bad-batch-binding cq-fused-frames cq-bad-fused-binding cq-one-in-flight
ALL_PLUGINS := $(PLUGINS) $(TEST_PLUGINS)
# binaryen's optimizer on each core module before it becomes a component
# (Debian package binaryen, installed by `make setup`); the features are
# those rustc enables for wasm32-unknown-unknown.
WASM_OPT ?= wasm-opt
WASM_OPT_FLAGS := -Oz --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
  --enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types
WASM_OPT_OUT := $(TARGET_DIR)/wasm-opt
# Reference plugins written in C (plugins/<name>/*.c), built with clang and
# wit-bindgen's C bindings (docs/c-plugins.md).
C_PLUGINS := ack-logger-c
CLANG ?= clang-14
C_BINDINGS := $(TARGET_DIR)/c-bindings
C_FLAGS := --target=wasm32-wasi -Oz -std=c11 -Wall -Wextra -Werror -I$(C_BINDINGS)
# A reactor without start files: the host calls `init`, not `_start`; no WASI
# import may remain, since plugins import only the host interface. A 30 KiB
# stack and one 64 KiB page of initial memory, as for the Rust plugins
# (.cargo/config.toml): the whole memory stays in the pool's keep-resident
# window.
C_LINK_FLAGS := -mexec-model=reactor -nostartfiles -Wl,--no-entry -Wl,--strip-all -Wl,--gc-sections -Wl,-z,stack-size=30720 -Wl,--initial-memory=65536
# Host-side packages (everything but the wasm plugin crates).
HOST_PACKAGES := -p corequic-runtime -p corequic-mock -p corequic-sdk -p xtask -p corequic-adapter -p corequic-endpoint -p corequic-quinn -p corequic-quinn-endpoint -p corequic-quiche -p corequic-quiche-endpoint -p corequic-s2n -p corequic-s2n-endpoint -p corequic-s2n-extension -p corequic-neqo -p corequic-neqo-endpoint -p corequic-contract -p corequic-interop -p corequic-conformance -p corequic-book -p corequic-registry -p corequic-cli

.PHONY: all setup patches corequic-tool plugin-check patch-check neqo-source test-upstream plugins c-plugins wit-doc check-wit-doc fmt-check lint test bench bench-pluginop demo interop interop-build interop-test conformance conformance-claims chaos fuzz paper perf scale browser sizes docs docs-check check-registry clean

all: plugins

## setup: install the pinned toolchain and the wasm target (idempotent).
setup:
	@command -v rustup >/dev/null || { \
	  echo "installing rustup"; \
	  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none; }
	@rustup toolchain list | grep -q "^$(TOOLCHAIN)" || \
	  rustup toolchain install $(TOOLCHAIN) --profile minimal -c rustfmt -c clippy
	@rustup target list --installed --toolchain $(TOOLCHAIN) | grep -q $(WASM_TARGET) || \
	  rustup target add --toolchain $(TOOLCHAIN) $(WASM_TARGET)
	@rustup component list --installed --toolchain $(TOOLCHAIN) | grep -q clippy || \
	  rustup component add --toolchain $(TOOLCHAIN) rustfmt clippy
	@# quiche's BoringSSL build needs cmake and libclang (bindgen); C plugins
	@# need clang and lld for wasm32 and wasi-libc (malloc, memcpy); neqo's NSS
	@# build needs ninja and a python3 venv (gyp-next).
	@if ! command -v cmake >/dev/null || ! command -v $(CLANG) >/dev/null || ! command -v $(WASM_OPT) >/dev/null || ! command -v ninja >/dev/null || { command -v dpkg >/dev/null && ! dpkg -s libclang-dev lld-14 wasi-libc libclang-rt-14-dev-wasm32 python3-venv >/dev/null 2>&1; }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing cmake, libclang-dev (quiche's BoringSSL build), clang-14, lld-14, wasi-libc (C plugins), binaryen (wasm-opt), ninja-build, python3-venv (neqo's NSS)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake libclang-dev clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32 binaryen ninja-build python3-venv >/dev/null; \
	  else echo "warning: quiche needs cmake and libclang-dev, C plugins clang-14, lld-14, wasi-libc and libclang-rt-14-dev-wasm32, size optimization binaryen, neqo ninja-build and python3-venv (apt-get install …)" >&2; fi; \
	fi

## patches: pristine pinned upstream crates + our hook patches, in build/patched
## (the workspace's [patch.crates-io] points there, so this runs before any
## cargo). Every hosts/<host>/patches/<crate>/ is a series, applied to the
## crate's pin, which is written once: Cargo.toml's [workspace.dependencies].
PATCHED := build/patched
S2N_UPSTREAM := build/s2n-upstream
NEQO_UPSTREAM := build/neqo-upstream
PATCH_SERIES := $(sort $(wildcard hosts/*/patches/*/))
pin = $(shell sed -n 's/^$(1) = {[^}]*version = "=\([^"]*\)".*/\1/p' Cargo.toml)
# A host whose crates are not on crates.io names their folder in
# hosts/<host>/patches/source (neqo: made by `make neqo-source`).
source_of = $(shell cat $(dir $(1:/=))source 2>/dev/null)
patches: neqo-source
	@$(foreach d,$(PATCH_SERIES),tools/patch-crate.sh $(notdir $(d:/=)) "$(call pin,$(notdir $(d:/=)))" $(d:/=) $(PATCHED) $(call source_of,$(d)) &&) true

## patch-check: build/patched is exactly pin + series for every crate, each
## series has its pin and [patch.crates-io] entry, hosts.toml agrees
## (`xtask patch edit|save HOST` is the workflow: hosts/README.md).
patch-check: setup patches
	$(CARGO) run -q -p xtask -- patch check

## neqo-source: neqo 0.13.4, NSS 3.112.5 and NSPR from Debian's firefox-esr
## source package (checksum-verified), NSS built static, and the neqo
## endpoint's certificate database, in build/neqo (tools/neqo-source.sh;
## NEQO_SRC=DIR uses a Firefox source tree instead). Run by `make patches`;
## a second run does nothing.
neqo-source: setup
	@tools/neqo-source.sh build/neqo

## test-upstream: the patched stacks' own test suites (no plugins loaded).
test-upstream: setup patches
	$(CARGO) test -q --target-dir $(TARGET_DIR) --manifest-path $(PATCHED)/quinn-proto/Cargo.toml
	$(CARGO) test -q --lib --target-dir $(TARGET_DIR) --manifest-path $(PATCHED)/quiche/Cargo.toml
	@# s2n-quic's event snapshots are found relative to its monorepo layout
	@# (quic/<crate>), so its crates are tested from copies laid out that way.
	rm -rf $(S2N_UPSTREAM) && mkdir -p $(S2N_UPSTREAM)/quic
	cp -r $(PATCHED)/s2n-quic-core $(S2N_UPSTREAM)/quic/s2n-quic-core
	cp -r $(PATCHED)/s2n-quic-transport $(S2N_UPSTREAM)/quic/s2n-quic-transport
	@# The copy is one folder deeper: its path to the extension crate is too.
	sed -i 's|path = "../../../hosts/|path = "../../../../hosts/|' $(S2N_UPSTREAM)/quic/s2n-quic-transport/Cargo.toml
	printf '[workspace]\nresolver = "2"\nmembers = ["quic/s2n-quic-core", "quic/s2n-quic-transport"]\n\n[patch.crates-io]\ns2n-quic-core = { path = "quic/s2n-quic-core" }\n' > $(S2N_UPSTREAM)/Cargo.toml
	cd $(S2N_UPSTREAM) && $(CARGO) test -q --lib --target-dir $(abspath $(TARGET_DIR)) -p s2n-quic-transport --features s2n-quic-core/testing
	cd $(S2N_UPSTREAM) && $(CARGO) test -q --lib --target-dir $(abspath $(TARGET_DIR)) -p s2n-quic-core --features testing recovery::
	@# neqo's unit tests and all but three of its test files use its
	@# test-fixture crate, which Firefox does not vendor (hosts/neqo/README.md);
	@# those three run, from a workspace that gives neqo-transport the
	@# indexmap `std` feature its consumers provide.
	rm -rf $(NEQO_UPSTREAM) && mkdir -p $(NEQO_UPSTREAM)/src
	cp -r $(PATCHED)/neqo-common $(PATCHED)/neqo-crypto $(PATCHED)/neqo-transport $(NEQO_UPSTREAM)/
	printf '[package]\nname = "neqo-upstream-tests"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\nindexmap = { version = "2", features = ["std"] }\nneqo-transport = { path = "neqo-transport" }\n\n[workspace]\nresolver = "2"\nmembers = [".", "neqo-common", "neqo-crypto", "neqo-transport"]\n' > $(NEQO_UPSTREAM)/Cargo.toml
	: > $(NEQO_UPSTREAM)/src/lib.rs
	cd $(NEQO_UPSTREAM) && $(CARGO) test -q --target-dir $(abspath $(TARGET_DIR)) --workspace --test log --test selfencrypt --test stats

## plugins: build every plugin for wasm32 and turn it into a component.
plugins: setup patches corequic-tool
	$(CARGO) build --profile plugin --target $(WASM_TARGET) $(foreach p,$(ALL_PLUGINS),-p plugin-$(p))
	@mkdir -p $(PLUGIN_OUT) $(WASM_OPT_OUT)
	@command -v $(WASM_OPT) >/dev/null || echo "warning: $(WASM_OPT) not found (apt-get install binaryen): plugins are not size-optimized" >&2
	@for p in $(ALL_PLUGINS); do \
	  core=$(TARGET_DIR)/$(WASM_TARGET)/plugin/plugin_$$(echo $$p | tr - _).wasm; \
	  if command -v $(WASM_OPT) >/dev/null; then \
	    $(WASM_OPT) $(WASM_OPT_FLAGS) $$core -o $(WASM_OPT_OUT)/$$p.wasm || exit 1; core=$(WASM_OPT_OUT)/$$p.wasm; \
	  fi; \
	  $(CARGO) run -q -p xtask -- componentize $$core $(PLUGIN_OUT)/$$p.wasm || exit 1; \
	  case " $(NO_EMBED) " in *" $$p "*) ;; *) $(COREQUIC) embed-manifest $(PLUGIN_OUT)/$$p.wasm $(PLUGIN_OUT)/$$p.wasm || exit 1;; esac; \
	done
	@# A core module that is not a component: the conformance kit's
	@# loading.a-core-module-is-refused.
	@cp $(TARGET_DIR)/$(WASM_TARGET)/plugin/plugin_padding.wasm $(PLUGIN_OUT)/cq-core-module.wasm
	@# A plugin whose embedded manifest is another plugin's (api-probe with
	@# padding's section): loading.an-embedded-manifest-that-lies-is-refused.
	@$(COREQUIC) embed-manifest --section-of $(PLUGIN_OUT)/padding.wasm $(PLUGIN_OUT)/cq-api-probe.wasm $(PLUGIN_OUT)/cq-embedded-liar.wasm
	@# The reference plugins as built against earlier ABI versions, which
	@# hosts run unchanged: 0.1.0 through their compatibility layer, 0.2.0
	@# as an earlier release of their own line (plugins/prebuilt/README.md).
	@for v in 0.1.0 0.2.0; do for f in plugins/prebuilt/$$v/*.wasm; do cp $$f $(PLUGIN_OUT)/abi-$$v-$$(basename $$f) || exit 1; done; done
	@$(MAKE) --no-print-directory c-plugins
	@echo "plugins in $(PLUGIN_OUT)/"

## corequic-tool: the `corequic` command (tools/corequic): inspect, check and
## embed-manifest, which writes each plugin's manifest into its
## core-quic:manifest section (spec CQ-LOAD-22).
COREQUIC := $(TARGET_DIR)/debug/corequic
# Plugins that carry no embedded manifest: one whose manifest never
# returns, one whose manifest traps (it binds a routine it does not export),
# one that targets another ABI version (the kit's refusal cases),
# and the chaos plugin, whose manifest depends on the seed the chaos
# harness writes into each copy.
NO_EMBED := test-endless-manifest test-unlisted-routine test-abi-mismatch test-chaos
corequic-tool: setup patches
	$(CARGO) build -q -p corequic-cli

## c-plugins: the C plugins, against the C bindings generated from wit/.
c-plugins: setup patches corequic-tool
	@$(CARGO) run -q -p xtask -- c-bindings wit $(C_BINDINGS)
	@mkdir -p $(TARGET_DIR)/c-plugins $(PLUGIN_OUT)
	@for p in $(C_PLUGINS); do \
	  $(CLANG) $(C_FLAGS) $(C_LINK_FLAGS) plugins/$$p/*.c $(C_BINDINGS)/plugin.c \
	    $(C_BINDINGS)/plugin_component_type.o -o $(TARGET_DIR)/c-plugins/$$p.wasm || exit 1; \
	  $(CARGO) run -q -p xtask -- componentize $(TARGET_DIR)/c-plugins/$$p.wasm $(PLUGIN_OUT)/$$p.wasm || exit 1; \
	  $(COREQUIC) embed-manifest $(PLUGIN_OUT)/$$p.wasm $(PLUGIN_OUT)/$$p.wasm || exit 1; \
	done

## docs: the book (mdBook, pinned in tools/book) in $(BOOK_OUT)/html: the
## spec, the guides, every README, a requirements index and a status page.
BOOK_OUT := $(TARGET_DIR)/book
docs: setup patches
	$(CARGO) run -q -p corequic-book -- build --root . --out $(BOOK_OUT)

## docs-check: every link and anchor of the book, and its front and status
## pages rendered in headless chromium (screenshots in $(BOOK_OUT)/shots).
docs-check: docs browser
	$(CARGO) run -q -p corequic-book -- check --book $(BOOK_OUT) --chromium $(CHROMIUM)

## wit-doc: regenerate docs/wit-reference.md from wit/.
wit-doc: setup patches
	$(CARGO) run -q -p xtask -- wit-doc wit docs/wit-reference.md

check-wit-doc: setup patches
	$(CARGO) run -q -p xtask -- wit-doc --check wit docs/wit-reference.md

## check-registry: the codepoint registry (spec/registry.toml) agrees with
## the constants of the plugins, the runtime and the runner; the semver gate:
## wit/ equals the frozen copy (releases/) of the version it declares, or is
## a change of the newest release that its new version allows (CQ-VER-3).
check-registry: setup patches
	$(CARGO) run -q -p xtask -- registry --check spec/registry.toml
	$(CARGO) run -q -p xtask -- releases --check wit releases

## fmt-check: the workspace's members only: `--all` would also take in the
## path dependencies, neqo's patched crates among them, which are upstream's
## code and layout.
fmt-check: setup patches
	$(CARGO) fmt -- --check

lint: setup patches
	$(CARGO) clippy $(HOST_PACKAGES) --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) $(foreach p,$(ALL_PLUGINS),-p plugin-$(p)) -- -D warnings

## test: build everything and run every test.
test: plugins patch-check check-wit-doc check-registry fmt-check lint test-upstream
	$(CARGO) test $(HOST_PACKAGES)
	$(MAKE) --no-print-directory interop-test
	$(MAKE) --no-print-directory plugin-check
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory chaos SEEDS=$(TEST_CHAOS_SEEDS) ALSO_SEEDS=$(CHAOS_REGRESSION_SEEDS)
	$(MAKE) --no-print-directory docs-check

## bench: criterion benchmarks of the runtime through the mock host, the
## floor under a call (wasmtime's own core and component calls), and the
## endpoints' log book (what keeping a plugin's log record costs).
bench: plugins
	$(CARGO) bench -p corequic-runtime --bench runtime --bench floor
	$(CARGO) bench -p corequic-endpoint --bench log_book

## bench-pluginop: pluginop's criterion benches and ours back to back, with
## the ratios (PLUGINOP=a checkout of github.com/core-quic/pluginop).
bench-pluginop: plugins
	@test -n "$(PLUGINOP)" || { echo "usage: make bench-pluginop PLUGINOP=DIR" >&2; exit 2; }
	tools/bench-pluginop.sh $(PLUGINOP) $(TARGET_DIR)/pluginop-ratios.md

## sizes: the reference plugins' core modules before and after wasm-opt,
## and their components.
sizes: plugins
	@printf '%-12s %12s %12s %12s\n' plugin core wasm-opt component
	@for p in $(PLUGINS); do \
	  core=$(TARGET_DIR)/$(WASM_TARGET)/plugin/plugin_$$(echo $$p | tr - _).wasm; \
	  printf '%-12s %12s %12s %12s\n' $$p $$(stat -c %s $$core) \
	    $$(stat -c %s $(WASM_OPT_OUT)/$$p.wasm 2>/dev/null || echo -) $$(stat -c %s $(PLUGIN_OUT)/$$p.wasm); \
	done
	@for p in $(C_PLUGINS); do \
	  printf '%-12s %12s %12s %12s\n' $$p $$(stat -c %s $(TARGET_DIR)/c-plugins/$$p.wasm) - $$(stat -c %s $(PLUGIN_OUT)/$$p.wasm); \
	done

## Interop runner (interop-runner/README.md): the hosts of hosts.toml whose
## package is in this workspace get their endpoint built.
INTEROP_HOSTS_FILE := interop-runner/hosts.toml
ENDPOINT_PACKAGES = $(foreach p,$(shell sed -n 's/^package *= *"\(.*\)"/\1/p' $(INTEROP_HOSTS_FILE)),$(if $(shell grep -ls '^name = "$(p)"' hosts/*/endpoint/Cargo.toml),$(p)))
INTEROP_OUT := $(TARGET_DIR)/interop
CHROMIUM ?= chromium

## interop-build: plugins, every endpoint binary and the runner (debug).
interop-build: plugins
	$(CARGO) build --bins $(foreach p,$(ENDPOINT_PACKAGES),-p $(p)) -p corequic-interop -p corequic-conformance

## plugin-check: `corequic check` says that every host of the matrix would
## load every reference plugin (through each endpoint's --capabilities).
plugin-check: interop-build
	@for h in $$(sed -n 's/^name *= *"\(.*\)"/\1/p' $(INTEROP_HOSTS_FILE)); do \
	  for p in $(PLUGINS) $(C_PLUGINS); do \
	    $(COREQUIC) check $(PLUGIN_OUT)/$$p.wasm --host $$h --bin-dir $(TARGET_DIR)/debug --hosts-file $(INTEROP_HOSTS_FILE) || exit 1; \
	  done; \
	done

## interop: the default matrix (every pair of hosts x every test case).
interop: interop-build
	rm -rf $(INTEROP_OUT)/default
	$(TARGET_DIR)/debug/interop-runner --matrix default --bin-dir $(TARGET_DIR)/debug --out $(INTEROP_OUT)/default

## paper: the paper's scenarios (padding 30 runs, BDP at 500 ms RTT, DUMMY +
## padding) with release endpoints; long.
paper: plugins
	$(CARGO) build --release --bins $(foreach p,$(ENDPOINT_PACKAGES),-p $(p)) -p corequic-interop
	rm -rf $(INTEROP_OUT)/paper
	$(TARGET_DIR)/release/interop-runner --matrix paper --bin-dir $(TARGET_DIR)/release --out $(INTEROP_OUT)/paper

## perf: bulk goodput with probe, BDP, DUMMY and ack-logger on both sides
## against none, every server x client pair, on loopback and through the
## emulator at 1 Gbit/s (release builds; docs/measurements.md). Long.
## PERF_HOSTS=a,b and PERF_LINKS=loopback|1gbit narrow it to the pairs of
## those hosts and that link, e.g. to give a few cells the ~130 runs per
## mode that a ±3-point interval needs. PERF_SIZE=BYTES sets the download
## of every link (default: 200 MB over loopback, 50 MB through the link).
PERF_RUNS ?= 10
PERF_SIZE ?=
PERF_HOSTS ?=
PERF_LINKS ?=
perf: plugins
	$(CARGO) build --release --bins $(foreach p,$(ENDPOINT_PACKAGES),-p $(p)) -p corequic-interop
	$(TARGET_DIR)/release/interop-runner perf --bin-dir $(TARGET_DIR)/release \
	  $(if $(PERF_HOSTS),--hosts $(PERF_HOSTS)) $(if $(PERF_LINKS),--links $(PERF_LINKS)) \
	  --runs $(PERF_RUNS) $(if $(PERF_SIZE),--size $(PERF_SIZE)) --out $(INTEROP_OUT)/perf --markdown $(INTEROP_OUT)/perf/table.md

## scale: one quinn server holding 1, 100 and 1,000 connections with and
## without the four non-padding reference plugins, on fresh and on reused
## pool slots: handshake rate and memory
## per connection (docs/measurements.md).
scale: plugins
	$(CARGO) bench -p corequic-quinn --bench scale

## browser: Debian's chromium for the report's render test.
browser:
	@command -v $(CHROMIUM) >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium (the interop report's render test)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "error: the interop report test needs chromium (apt-get install chromium)" >&2; exit 1; fi; }

## interop-test: the reduced matrix, gated by interop-runner/required.txt,
## then its report rendered in headless chromium.
interop-test: interop-build browser
	rm -rf $(INTEROP_OUT)/reduced
	$(TARGET_DIR)/debug/interop-runner --matrix reduced --bin-dir $(TARGET_DIR)/debug \
	  --out $(INTEROP_OUT)/reduced --required interop-runner/required.txt
	$(TARGET_DIR)/debug/interop-runner check-report $(INTEROP_OUT)/reduced --chromium $(CHROMIUM)

## Conformance kit (conformance/README.md): every host of hosts.toml whose
## endpoint is built, certified against the spec; the claims must match the
## committed ones in docs/conformance/.
CONFORMANCE_OUT := $(TARGET_DIR)/conformance
CLAIMS_DIR := docs/conformance
conformance: interop-build
	$(TARGET_DIR)/debug/conformance all --bin-dir $(TARGET_DIR)/debug --out $(CONFORMANCE_OUT) --claims $(CLAIMS_DIR)

## conformance-claims: certify every host and rewrite the committed claims.
conformance-claims: interop-build
	$(TARGET_DIR)/debug/conformance all --bin-dir $(TARGET_DIR)/debug --out $(CONFORMANCE_OUT) --claims $(CLAIMS_DIR) --write-claims

## chaos: the seeded chaos plugin on every host, in both roles and across
## host pairs (conformance/README.md); `make test` runs the first
## $(TEST_CHAOS_SEEDS) seeds and the seeds of the defects it found
## (docs/chaos.md). A failing seed prints its reproduction.
SEEDS ?= 90
FIRST_SEED ?= 0
ALSO_SEEDS ?=
TEST_CHAOS_SEEDS := 36
CHAOS_REGRESSION_SEEDS := 47,48,58,71,78,338,456,654,744,819,845,1137,1703,2018,3686,4904,5294,5696,5750,5788,9016,10232,37399
CHAOS_OUT := $(TARGET_DIR)/chaos
chaos: interop-build
	rm -rf $(CHAOS_OUT)
	$(TARGET_DIR)/debug/conformance chaos --bin-dir $(TARGET_DIR)/debug --out $(CHAOS_OUT) \
	  --seeds $(SEEDS) --first-seed $(FIRST_SEED) --also "$(ALSO_SEEDS)"

## fuzz: the runtime's in-process fuzzer of the host-call surface against the
## mock host, for CASES new inputs (`make test` runs 32); COREQUIC_FUZZ_CORPUS_OUT=DIR
## keeps an input per new outcome (hosts/runtime/tests/fuzz_host_calls.rs).
CASES ?= 1000
fuzz: plugins
	COREQUIC_FUZZ_CASES=$(CASES) $(CARGO) test $(HOST_PACKAGES) --test fuzz_host_calls

## demo: all five plugins on one in-memory connection through the mock host.
demo: plugins
	$(CARGO) run -q --release -p corequic-mock --example demo -- $(PLUGIN_OUT)

clean:
	rm -rf build
	$(CARGO) clean
