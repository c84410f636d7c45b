# The two commands README promises: `make run` and `make test`. Both install what is missing.
SWIFT ?= swift
# Debian packages, in groups. A group prints one line (what, and why) when it installs something.
BUILD_APT_DEPS = libmicrohttpd-dev libsqlite3-dev libexpat1-dev libgnutls28-dev pkg-config
BUILD_APT_WHY = needed to compile and link fcm-mock
TOOL_APT_DEPS = python3-venv curl
TOOL_APT_WHY = python3-venv makes the interop suite's virtual environment; curl runs the HTTPS test and the README's examples
# Only `make test` needs these: the browser test of the web page drives headless Chromium.
BROWSER_APT_DEPS = chromium fonts-liberation
BROWSER_APT_WHY = the web page test drives headless Chromium
comma := ,
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN_DEBUG = .build/debug/fcm-mock
BIN_RELEASE = .build/release/fcm-mock

.PHONY: deps test-deps build release run test unit-test interop bench clean format

# Another apt-get running (an unattended upgrade, a second checkout's make) is waited for, not an error.
APT_LOCK_WAIT = -o DPkg::Lock::Timeout=300

# $(call apt_install,PACKAGES,WHAT,WHY,EXTRA_APT_FLAGS): installs those of PACKAGES that dpkg does
# not report as "install ok installed" (a removed package's leftover configuration does not count),
# saying so in one line. apt-get's output goes to a log that is shown (its tail) only on failure.
define apt_install
	@missing=""; for p in $(1); do [ "$$(dpkg-query -W -f='$${Status}' $$p 2>/dev/null)" = "install ok installed" ] || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing $(2) ($${missing# }): $(3)"; \
	  command -v apt-get >/dev/null || { echo "make: apt-get not found; install$$missing by hand, then run make again" >&2; exit 1; }; \
	  log=$$(mktemp); \
	  if ! { $(SUDO) apt-get $(APT_LOCK_WAIT) update -qq \
	         && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get $(APT_LOCK_WAIT) install -y -qq $(4) $$missing; } >"$$log" 2>&1; then \
	    tail -n 30 "$$log" >&2; rm -f "$$log"; \
	    echo "make: could not install$$missing (the end of apt-get's output is above)" >&2; exit 1; \
	  fi; \
	  rm -f "$$log"; \
	fi
endef

# Installs the Debian packages the build (and the README's examples) need, only when one is missing.
deps:
	$(call apt_install,$(BUILD_APT_DEPS),build dependencies,$(BUILD_APT_WHY),)
	$(call apt_install,$(TOOL_APT_DEPS),tools,$(TOOL_APT_WHY),)

# Installs the test-only packages too (without recommended extras).
test-deps: deps
	$(call apt_install,$(BROWSER_APT_DEPS),the browser test's packages,$(BROWSER_APT_WHY) (about 360 MB$(comma) once),--no-install-recommends)

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
