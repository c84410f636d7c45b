# The two commands README promises: `make run` and `make test`. Both install what is missing.
SWIFT ?= swift
# Debian packages, in groups. A group prints one line (what, and why) when it installs something.
BUILD_APT_DEPS = libsqlite3-dev libexpat1-dev libgnutls28-dev libnghttp2-dev nettle-dev pkg-config
BUILD_APT_WHY = needed to compile and link fcm-mock
TOOL_APT_DEPS = python3-venv curl
TOOL_APT_WHY = python3-venv makes the interop suite's virtual environment; curl runs the HTTPS test and the README's examples
# Only `make test` needs these: the HTTP/2 tests drive nghttp and h2load against the server.
TEST_APT_DEPS = nghttp2-client iproute2
TEST_APT_WHY = the HTTP/2 tests drive nghttp and h2load; the test of docs/v1.md's namespace route brings its loopback up with ip
# Only `make test` needs these: the browser tests drive headless Chromium and Firefox ESR.
BROWSER_APT_DEPS = chromium fonts-liberation firefox-esr libnss3-tools
BROWSER_APT_WHY = the web page test drives headless Chromium; the Web Push receiver tests drive headless Firefox ESR over the mock's autopush WebSocket, certutil imports the mock's CA into its profile for wss://
comma := ,
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BIN_DEBUG = .build/debug/fcm-mock
BIN_RELEASE = .build/release/fcm-mock
# The Swift runtime is linked statically, as in docker/Dockerfile: the binary runs on a machine
# without a Swift toolchain (it needs only the C libraries listed in the Dockerfile). bench/run.sh
# builds through `make release`, so the benchmark measures this binary and never relinks it.
RELEASE_FLAGS = -c release --static-swift-stdlib --product fcm-mock

# make install [PREFIX=/usr/local] [DESTDIR=]: copies the release build to $(DESTDIR)$(PREFIX)/bin.
PREFIX ?= /usr/local
bindir = $(DESTDIR)$(PREFIX)/bin
# The binary to copy (the install test passes the debug build so it needs no release build).
INSTALL_BIN = $(BIN_RELEASE)
# Symbols are kept: a crash backtrace then names the functions. `make install-strip` drops them.
INSTALL_STRIP =

.PHONY: deps test-deps build release run install install-strip uninstall test test-steps unit-test interop docker-test \
        bench bench-webpush soak bench-bounded clean format

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
	$(call apt_install,$(TEST_APT_DEPS),the HTTP/2 test clients,$(TEST_APT_WHY),--no-install-recommends)
	$(call apt_install,$(BROWSER_APT_DEPS),the browser test's packages,$(BROWSER_APT_WHY) (about 660 MB$(comma) once),--no-install-recommends)

build: deps
	$(SWIFT) build

# The portable binary, .build/release/fcm-mock. Fails if it still links a Swift runtime library.
release: deps
	$(SWIFT) build $(RELEASE_FLAGS)
	@if readelf -d $(BIN_RELEASE) | grep -E 'NEEDED.*\[(libswift|libFoundation|lib_Foundation|libdispatch|libBlocksRuntime)'; then \
	  echo "make: $(BIN_RELEASE) links the Swift runtime libraries above dynamically" >&2; exit 1; fi

# Serves on the defaults: HTTP 127.0.0.1:8080, XMPP 127.0.0.1:5235, ./data/fcm-mock.sqlite,
# the built-in default fixture. Extra flags: make run ARGS="--http-port 9000".
run: release
	$(BIN_RELEASE) serve $(ARGS)

# Builds the release binary as the user running make, then copies it; uses sudo for the copy only
# when the directory is not writable. Packagers: make install DESTDIR=/tmp/stage PREFIX=/usr
install: $(if $(filter $(BIN_RELEASE),$(INSTALL_BIN)),release)
	@[ -x '$(INSTALL_BIN)' ] || { echo "make: no executable at $(INSTALL_BIN)" >&2; exit 1; }
	@dir='$(bindir)'; sudo=; \
	if ! { mkdir -p "$$dir" 2>/dev/null && [ -w "$$dir" ]; }; then \
	  [ "$$(id -u)" != 0 ] || { echo "make: cannot write to $$dir" >&2; exit 1; }; \
	  sudo=sudo; echo "make: $$dir is not writable by uid $$(id -u): copying with sudo"; \
	fi; \
	$$sudo install -d "$$dir" && $$sudo install -m 0755 $(INSTALL_STRIP) '$(INSTALL_BIN)' "$$dir/fcm-mock" \
	  && echo "installed $$dir/fcm-mock"

# The same without symbols (about 40% smaller; crash backtraces then show addresses only).
install-strip:
	$(MAKE) install INSTALL_STRIP=-s

uninstall:
	@f='$(bindir)/fcm-mock'; \
	if [ ! -e "$$f" ] && [ ! -L "$$f" ]; then echo "make: $$f is not installed"; exit 0; fi; \
	sudo=; [ -w "$$(dirname "$$f")" ] || [ "$$(id -u)" = 0 ] || sudo=sudo; \
	$$sudo rm -f "$$f" && echo "removed $$f"

# Every test: Swift unit and end-to-end tests, the Docker checks, `make install`, then the
# interop suite with real third-party clients (pyfcm, slixmpp) and the web page in headless
# Chromium, then the Python client and pytest plugin (clients/python), then the image with
# podman (docker-test). Tests/summarize.sh prints a line per suite, failures in full and the
# runners' closing lines, and keeps every line (one per test) in .build/test-logs/STEP.log;
# pytest runs with -v (-vv against the scripts' -q) so that log has a line per test too.
# The last line is the verdict, `N passed, N failed`: the tests the steps counted (XCTest's and
# pytest's), printed also when a step fails (make stops at that step).
test: test-deps
	@bash Tests/summarize.sh --reset
	@$(MAKE) --no-print-directory test-steps; status=$$?; bash Tests/summarize.sh --verdict; exit $$status

test-steps:
	bash Tests/summarize.sh build $(SWIFT) build --build-tests
	bash docker/check-runtime.sh $(BIN_DEBUG)
	bash docker/check-dockerfile.sh $(BIN_DEBUG)
	bash Tests/install/run.sh $(BIN_DEBUG)
	bash Tests/summarize.sh swift-test $(SWIFT) test --skip-build --disable-swift-testing
	PYTEST_ADDOPTS=-vv bash Tests/summarize.sh interop bash Tests/interop/run.sh $(BIN_DEBUG)
	PYTEST_ADDOPTS=-vv bash Tests/summarize.sh client bash clients/python/run-tests.sh $(BIN_DEBUG)
	$(MAKE) --no-print-directory docker-test

# The image built from docker/Dockerfile with podman and run for real: health, sends with curl and
# the Python client, uid, SIGTERM, a restart on the same volume, testcontainers (installs podman,
# runc and debootstrap when missing; the base image is made once and kept).
docker-test: release
	bash docker/podman-test.sh $(BIN_RELEASE)

unit-test: deps
	$(SWIFT) test --disable-swift-testing

interop: build test-deps
	bash Tests/interop/run.sh $(BIN_DEBUG)

# Throughput, latency, start-up and memory against a minimal C server measured in the same run.
bench: deps
	bash bench/run.sh

# The soak: 1,200 sends/s with XMPP, v1, event streams, long polls, devices toggled and a
# reset half-way, on a file store, for SOAK_SECONDS (default 600); RSS, descriptors and threads
# every 10 s. `make soak SOAK_ARGS=--reset-load` times a reset under load on a preloaded store.
soak: release
	FCM_MOCK_BIN=$(BIN_RELEASE) python3 bench/soak.py $(SOAK_ARGS)

# The Web Push phase of `make bench` alone: pushes per second with decryption over HTTP/1.1 and
# HTTP/2, CPU per push against an FCM send's.
bench-webpush: release
	FCM_MOCK_BIN=$(BIN_RELEASE) bash bench/run.sh --webpush

# Bounded storage (--max-messages): RSS and store size stay flat once the limit is reached.
bench-bounded: release
	FCM_MOCK_BIN=$(BIN_RELEASE) python3 bench/bounded.py

format:
	$(SWIFT) format -i -r Sources Tests Package.swift

clean:
	rm -rf .build data
