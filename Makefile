# wasm-informer: one entry point for set-up, plugins, the demo and the tests.
#
#   make demo    set up a fresh machine, build every plugin, run the host with the
#                example plugins against the embedded API simulator
#   make test    set up a fresh machine, build every plugin, run every test
#
# Each target is idempotent: a second run skips what is already installed or built.

SHELL := /bin/bash
CARGO ?= cargo
DURATION ?= 60
# The host crates. Plugins are built for wasm32-wasip2 by scripts/build-plugins.sh and by
# host/guest-artifacts, not tested natively.
TEST_PACKAGES := -p wasm-informer -p kube-informer -p wasm-informer-runtime -p apisim \
	-p wasm-informer-selector -p wasm-informer-bench -p native-informer
# The crates whose API docs must build without a warning (doctests run with the tests).
DOC_PACKAGES := -p kube-informer -p wasm-informer-runtime -p wasm-informer

# The plugins config/ loads: the demo builds these and no others.
DEMO_PLUGINS := $(shell sed -n 's|^wasm *= *".*/target/plugins/\(.*\)\.wasm"|\1|p' config/plugins/*.toml)

.PHONY: setup setup-demo plugins demo-plugins build build-tests demo test run-tests test-tools docs layers c-bindings lint

setup:
	./scripts/setup.sh

# What the demo needs: the wasm target, the C compiler, the JS and Python toolchains.
setup-demo:
	./scripts/setup.sh --demo

plugins: setup-demo
	./scripts/build-plugins.sh

demo-plugins: setup-demo
	./scripts/build-plugins.sh $(DEMO_PLUGINS)

build:
	$(CARGO) build -p wasm-informer

# The demo's plugins build beside the host: they are mostly one-core work (componentize-js,
# componentize-py, clang), and the host's build leaves a core idle in its long serial stretches.
demo: setup-demo
	$(MAKE) --no-print-directory -j2 build demo-plugins
	$(CARGO) run -p wasm-informer -- run --config config --sim --duration $(DURATION) --report target/report.json

build-tests:
	$(CARGO) test --no-run $(TEST_PACKAGES)

# Everything the tests need, built side by side, then every test. wit-bindgen (for the C template
# test and the bindings check) and the conformance clients are set up beside the builds.
test: setup-demo
	$(MAKE) --no-print-directory -j2 build-tests plugins test-tools
	$(MAKE) --no-print-directory c-bindings docs layers
	$(MAKE) --no-print-directory run-tests

# The tests run with cargo-nextest where the machine has it: the tests of every binary side by
# side, each in a process of its own, as .config/nextest.toml says (most tests wait on servers,
# timers and child processes, not on the CPU). Without it, cargo test runs them binary by binary.
# The doctests run with cargo test either way (nextest does not run them).
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)
run-tests:
ifeq ($(NEXTEST),yes)
	$(CARGO) nextest run --no-fail-fast $(TEST_PACKAGES)
	$(CARGO) test --doc --no-fail-fast $(DOC_PACKAGES) -p apisim -p wasm-informer-selector
else
	@echo "make: cargo-nextest is not installed; running the tests binary by binary with cargo test"
	$(CARGO) test --no-fail-fast $(TEST_PACKAGES)
endif

test-tools:
	./scripts/setup.sh apt wit-bindgen conformance

# sdk/c/bindings is what wit-bindgen makes of wit/.
c-bindings:
	./scripts/gen-c-bindings.sh --check

# The informer knows no Wasm and the runtime no HTTP (cargo tree).
layers:
	./scripts/check-layers.sh

# Documented together so the binary's choice of Kubernetes API version (a k8s-openapi
# feature) applies to the libraries too, as it does in every build.
docs:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps $(DOC_PACKAGES)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
