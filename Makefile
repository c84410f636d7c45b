# The two commands README promises: `make run` and `make test`. Both install what is missing.
SWIFT ?= swift
APT_DEPS = libmicrohttpd-dev libsqlite3-dev libexpat1-dev libgnutls28-dev pkg-config python3-venv curl
# Only `make test` needs these: the browser test of the web page drives headless Chromium.
TEST_APT_DEPS = chromium fonts-liberation
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN_DEBUG = .build/debug/fcm-mock
BIN_RELEASE = .build/release/fcm-mock

.PHONY: deps test-deps build release run test unit-test interop bench clean format

# $(call apt_install,PACKAGES,EXTRA_APT_FLAGS): installs those of PACKAGES that dpkg does not
# report as "install ok installed" (a removed package's leftover configuration does not count).
define apt_install
	@missing=""; for p in $(1); do [ "$$(dpkg-query -W -f='$${Status}' $$p 2>/dev/null)" = "install ok installed" ] || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(2) $$missing >/dev/null; \
	fi
endef

# Installs the Debian packages the build needs, only when one is missing.
deps:
	$(call apt_install,$(APT_DEPS),)

# Installs the test-only packages too (without recommended extras).
test-deps: deps
	$(call apt_install,$(TEST_APT_DEPS),--no-install-recommends)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# Serves on the defaults: HTTP 127.0.0.1:8080, XMPP 127.0.0.1:5235, ./data/fcm-mock.sqlite,
# the built-in default fixture. Extra flags: make run ARGS="--http-port 9000".
run: release
	$(BIN_RELEASE) serve $(ARGS)

# Every test: Swift unit and end-to-end tests, the Docker runtime-package check, then the interop
# suite with real third-party clients (pyfcm, slixmpp).
test: test-deps
	$(SWIFT) build --build-tests
	bash docker/check-runtime.sh $(BIN_DEBUG)
	$(SWIFT) test --skip-build --disable-swift-testing
	bash Tests/interop/run.sh $(BIN_DEBUG)

unit-test: deps
	$(SWIFT) test --disable-swift-testing

interop: build test-deps
	bash Tests/interop/run.sh $(BIN_DEBUG)

# Throughput, latency, start-up and memory against a minimal C server measured in the same run.
bench: deps
	bash bench/run.sh

format:
	$(SWIFT) format -i -r Sources Tests Package.swift

clean:
	rm -rf .build data
