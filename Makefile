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

.PHONY: setup plugins build demo test docs layers lint

setup:
	./scripts/setup.sh

plugins: setup
	./scripts/build-plugins.sh

build:
	$(CARGO) build -p wasm-informer

demo: plugins build
	$(CARGO) run -p wasm-informer -- run --config config --sim --duration $(DURATION) --report target/report.json

test: plugins docs layers
	$(CARGO) test --no-fail-fast $(TEST_PACKAGES)

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
