# devtrust: build, test, demo, install.
#   make demo   builds and shows a device key and a verified token (installs apt packages as root)
#   make check  runs the fast tier: in-process tests, after every change (seconds once built)
#   make test   runs the whole test suite (installs apt packages as root)
#   make test-long  the crash-injection loop at full size (CI runs it too)

PREFIX   ?= /usr/local
DESTDIR  ?=
SWIFT    ?= swift
# swiftc beside the swift used (SWIFT=/opt/x/bin/swift: /opt/x/bin/swiftc).
SWIFTC   ?= $(patsubst %swift,%swiftc,$(SWIFT))
BINDIR    = $(DESTDIR)$(PREFIX)/bin
MANDIR    = $(DESTDIR)$(PREFIX)/share/man/man1
# The browser extension's files (browser/), where `devtrust browser install` finds them.
BROWSERDIR = $(DESTDIR)$(PREFIX)/share/devtrust/browser
BROWSER_SOURCE ?= browser
DOCDIR     = $(DESTDIR)$(PREFIX)/share/doc/devtrust
# devtrust reads /etc/devtrust/config.json whatever PREFIX is. The package
# (PREFIX=/usr) puts the example beside it; another PREFIX puts it with the
# docs, in $(PREFIX)/share/doc/devtrust/examples (not $(PREFIX)/etc, which
# devtrust never reads), so that make install and make uninstall never touch
# /etc/devtrust, where a package's example may be.
SYSCONFDIR ?= /etc
EXAMPLEDIR  = $(if $(filter /usr,$(PREFIX)),$(DESTDIR)$(SYSCONFDIR)/devtrust,$(DOCDIR)/examples)
# Completions where each shell looks for a package's: the vendor directories
# below /usr; below another PREFIX, zsh's site-functions (in zsh's default fpath
# for /usr/local). bash-completion and fish find theirs below each directory of
# XDG_DATA_DIRS (bash-completion's default has /usr/local/share).
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
ZSH_COMPLETION_DIR  ?= $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
FISH_COMPLETION_DIR ?= $(PREFIX)/share/fish/vendor_completions.d

# What building needs, and what the tests and the demo add (independent verifiers;
# jq, groff and man for the documentation's examples and the man page).
BUILD_PACKAGES = libssl-dev libtss2-dev libcurl4-openssl-dev libqrencode4 pkg-config
CHECK_PACKAGES = chromium firefox-esr nodejs bash-completion curl dconf-cli gcc libqrencode4 openssl python3 python3-cryptography python3-jsonschema python3-json5 python3-rfc3986 python3-jwcrypto python3-jwt jose swtpm swtpm-tools tpm2-tools tpm2-openssl valgrind nghttp2-proxy zsh fish jq groff-base man-db tmux zbar-tools strace inotify-tools systemd
BENCH_PACKAGES = time
# What `make deb` adds (the package test also runs lintian, and reads
# debian/copyright with python3-debian).
DEB_PACKAGES = debhelper dpkg-dev lintian python3-debian
DEB_DIR ?= .build/deb
RELEASE_BINARY = .build/release/devtrust

# The release build is tuned for `devtrust token`, which runs once per request
# (docs/performance.md): static Swift runtime, libstdc++ and libgcc; OpenSSL's
# libcrypto linked statically too (LINK_OPENSSL=dynamic links the system's
# shared one instead, for packagers who want OpenSSL security updates to apply
# without a rebuild); lld with packed relative relocations; hot functions
# first (scripts/link-order.txt; each Swift function in a section of its own,
# Package.swift); no symbol of devtrust's own exported (the static Swift
# runtime's link arguments ask for -export-dynamic: 4,800 symbols, 440 KB of
# symbol tables that the loader and the runtime's start read, for nothing:
# no library devtrust loads calls back into it); no $$ORIGIN run path (SwiftPM's
# default: the loader looked for libc, libm and each TSS library in the
# binary's own directory and a dozen below it first, 26 failed calls a run).
LINK_OPENSSL ?= static
STATIC_LIBS   = $(CURDIR)/.build/static-libs
RELEASE_FLAGS = -c release --static-swift-stdlib --disable-local-rpath \
	-Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic \
	-Xswiftc -Xclang-linker -Xswiftc -static-libgcc -Xlinker -L$(STATIC_LIBS) \
	-Xlinker --symbol-ordering-file=$(CURDIR)/scripts/link-order.txt -Xlinker --no-warn-symbol-ordering

FUZZ_SECONDS ?= 60
FUZZ_RUNS    ?= 0
FUZZ_BUILD   ?= .build/fuzz
FUZZ_TARGETS  = FlowResponse AppNativeResponse DERSignature CompactJWS TSS2KeyFile Configuration Keystore PrivateKeyFile LoopbackRequest

.PHONY: all build test test-long check check-layers demo install install-files uninstall deb clean deps-build deps-check deps-deb deps-bench static-libs bench link-order fuzz

all: build

deps-build:
	@scripts/ensure-packages.sh $(BUILD_PACKAGES)

deps-check: deps-deb
	@scripts/ensure-packages.sh $(CHECK_PACKAGES)
	@scripts/install-glewlwyd.sh

deps-deb: deps-build
	@scripts/ensure-packages.sh $(DEB_PACKAGES)

# A directory holding only the static archives, searched before the system's:
# the linker then takes libstdc++.a and libcrypto.a for -lstdc++ and -lcrypto.
static-libs:
	@rm -rf $(STATIC_LIBS) && mkdir -p $(STATIC_LIBS)
	@cxx=$$(clang -print-file-name=libstdc++.a 2>/dev/null); \
	if [ -f "$$cxx" ]; then ln -s "$$cxx" $(STATIC_LIBS)/libstdc++.a; else echo "note: no libstdc++.a, linking libstdc++ dynamically"; fi
	@if [ "$(LINK_OPENSSL)" = static ]; then \
	crypto=$$(pkg-config --variable=libdir libcrypto)/libcrypto.a; \
	if [ -f "$$crypto" ]; then ln -s "$$crypto" $(STATIC_LIBS)/libcrypto.a; else echo "note: no libcrypto.a, linking OpenSSL dynamically"; fi; fi

build: deps-build static-libs
	@# SwiftPM does not relink when only linker flags change.
	rm -f .build/release/devtrust .build/release/devtrust-bench
	$(SWIFT) build $(RELEASE_FLAGS) --product devtrust

# The release build too: the memory tests run against it as well as the debug
# build (what a key leaves in memory depends on the optimiser and the linker).
# A target that imports a module of the package it does not depend on fails
# the build (SwiftPM's check; check-layers holds each target to its own list).
IMPORT_CHECK = --explicit-target-dependency-import-check error
# Tests, the demo and the benchmarks name their own keystore, cache and
# configuration: as root, devtrust's defaults are the machine's /var/lib,
# /var/cache and /etc/devtrust. UNTOUCHED runs a command between two snapshots
# of those and of the invoking user's ~/.local/share, ~/.cache and
# ~/.config/devtrust, and fails, naming each change, when one changed.
UNTOUCHED = scripts/untouched.py
# The suites run in TEST_JOBS test processes at once (scripts/run-tests.py): most
# tests wait on servers, browsers and terminals, and one test process runs only
# as many tests at a time as the machine has cores.
TEST_JOBS ?= 4
FAST_TIER_GUARD = .build/fast_tier_guard.so
test: deps-check check-layers build
	$(UNTOUCHED) --self-test
	$(SWIFT) build --build-tests $(IMPORT_CHECK)
	$(UNTOUCHED) --label "make test" -- scripts/run-tests.py --jobs $(TEST_JOBS) --swift $(SWIFT)

# The crash-injection loop at full size (make test runs a quarter of it), against
# the debug build; .ci/run runs it after make test.
test-long: deps-check
	$(SWIFT) build --build-tests $(IMPORT_CHECK)
	DEVTRUST_CRASH_LOOP=full $(UNTOUCHED) --label "make test-long" -- $(SWIFT) test --skip-build --filter CrashSafetyTests

# The fast tier: the suites of Tests/fast-tier.txt, in the test process alone
# (a guard preloaded refuses starting a process, a socket and a sleep).
check: deps-build check-layers
	$(SWIFT) build --build-tests $(IMPORT_CHECK)
	@mkdir -p .build && clang -O1 -shared -fPIC -o $(FAST_TIER_GUARD) Tests/Interop/fast_tier_guard.c
	@$(SWIFTC) --version 2>&1 | cmp -s - .build/fast_tier_probe.toolchain && [ .build/fast_tier_probe -nt Tests/Interop/fast_tier_probe.swift ] \
		|| { $(SWIFTC) -o .build/fast_tier_probe Tests/Interop/fast_tier_probe.swift && $(SWIFTC) --version > .build/fast_tier_probe.toolchain 2>&1; }
	@cc -O1 -o .build/fast_tier_probe_c Tests/Interop/fast_tier_probe_c.c -lpthread
	scripts/run-tests.py --tier fast --jobs 2 --swift $(SWIFT)

# The modules of `devtrust token` below HTTP, and every target's dependencies
# exactly its imports (scripts/check-layers.py).
check-layers:
	scripts/check-layers.py --self-test
	SWIFT=$(SWIFT) scripts/check-layers.py

demo: deps-check build
	@$(UNTOUCHED) --label "make demo" -- scripts/demo.sh $(RELEASE_BINARY)

deps-bench: deps-check
	@scripts/ensure-packages.sh $(BENCH_PACKAGES)

# Ratios against the reference tools in one run; fails when a goal in
# scripts/bench-thresholds.json is missed (docs/performance.md).
bench: deps-bench build
	$(SWIFT) build $(RELEASE_FLAGS) --product devtrust-bench
	$(UNTOUCHED) --label "make bench" -- scripts/bench.py --binary $(RELEASE_BINARY) --bench .build/release/devtrust-bench --thresholds scripts/bench-thresholds.json

# libFuzzer over the parsers (Fuzz/README.md): each target for FUZZ_SECONDS,
# or FUZZ_RUNS executions when that comes first.
fuzz: deps-build
	FUZZ_BUILD=$(FUZZ_BUILD) scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_RUNS) $(FUZZ_TARGETS)

# Regenerates scripts/link-order.txt from callgrind runs of the release binary.
link-order: deps-bench build
	$(UNTOUCHED) --label "make link-order" -- scripts/update-link-order.py $(RELEASE_BINARY)

# The binary, the man page, the shell completions (written by the binary), the
# browser extension, the example configuration and the docs: the package's
# files too (debian/rules installs them with install-files). The browsers'
# host manifests are no files of either: `sudo devtrust browser install
# --system` writes them (the package's postinst runs it; docs/deployment.md).
install: build
	@$(MAKE) --no-print-directory install-files

INSTALL_BINARY ?= $(RELEASE_BINARY)
install-files:
	install -d $(BINDIR) $(MANDIR) $(DOCDIR) $(EXAMPLEDIR) \
		$(DESTDIR)$(BASH_COMPLETION_DIR) $(DESTDIR)$(ZSH_COMPLETION_DIR) $(DESTDIR)$(FISH_COMPLETION_DIR)
	install -m 0755 $(INSTALL_BINARY) $(BINDIR)/devtrust
	install -m 0644 docs/devtrust.1 $(MANDIR)/devtrust.1
	$(INSTALL_BINARY) completion bash > $(DESTDIR)$(BASH_COMPLETION_DIR)/devtrust
	$(INSTALL_BINARY) completion zsh > $(DESTDIR)$(ZSH_COMPLETION_DIR)/_devtrust
	$(INSTALL_BINARY) completion fish > $(DESTDIR)$(FISH_COMPLETION_DIR)/devtrust.fish
	chmod 0644 $(DESTDIR)$(BASH_COMPLETION_DIR)/devtrust $(DESTDIR)$(ZSH_COMPLETION_DIR)/_devtrust $(DESTDIR)$(FISH_COMPLETION_DIR)/devtrust.fish
	install -m 0644 docs/config.json.example $(EXAMPLEDIR)/config.json.example
	install -m 0644 README.md debian/copyright $(DOCDIR)/
	@# browser/ (when the checkout has it), readable by every user's browser; any failed step fails the install.
	@set -e; if [ -d "$(BROWSER_SOURCE)" ]; then \
		install -d -m 0755 "$(BROWSERDIR)"; \
		cp -R "$(BROWSER_SOURCE)/." "$(BROWSERDIR)/"; \
		find "$(BROWSERDIR)" -type d -exec chmod 0755 {} +; \
		find "$(BROWSERDIR)" -type f -exec chmod 0644 {} +; \
		echo "installed the browser extension in $(BROWSERDIR)"; \
	fi

# What install put in place; the browsers' host manifests when they name
# this PREFIX's binary (a package's, naming /usr/bin/devtrust, stay); and the
# directories install made that are left empty, but for the FHS's own below
# PREFIX (bin, share, share/man, share/man/man1). An administrator's
# /etc/devtrust/config.json stays.
HOST_MANIFESTS = $(DESTDIR)/etc/chromium/native-messaging-hosts/dev.devtrust.host.json \
	$(DESTDIR)/usr/lib/mozilla/native-messaging-hosts/dev.devtrust.host.json
uninstall:
	@for manifest in $(HOST_MANIFESTS); do \
		if grep -qsF '"path": "$(PREFIX)/bin/devtrust"' "$$manifest"; then \
			rm -f "$$manifest" && echo "removed $$manifest (it named $(PREFIX)/bin/devtrust)"; \
			rmdir --ignore-fail-on-non-empty "$${manifest%/*}"; \
		fi; \
	done
	rm -f $(BINDIR)/devtrust $(MANDIR)/devtrust.1 \
		$(DESTDIR)$(BASH_COMPLETION_DIR)/devtrust $(DESTDIR)$(ZSH_COMPLETION_DIR)/_devtrust $(DESTDIR)$(FISH_COMPLETION_DIR)/devtrust.fish \
		$(EXAMPLEDIR)/config.json.example $(DOCDIR)/README.md $(DOCDIR)/copyright
	rm -rf $(BROWSERDIR)
	@for directory in $(DESTDIR)$(PREFIX)/share/devtrust $(EXAMPLEDIR) $(DOCDIR) $(DESTDIR)$(PREFIX)/share/doc \
		$(DESTDIR)$(BASH_COMPLETION_DIR) $(DESTDIR)$(PREFIX)/share/bash-completion \
		$(DESTDIR)$(ZSH_COMPLETION_DIR) $(DESTDIR)$(PREFIX)/share/zsh \
		$(DESTDIR)$(FISH_COMPLETION_DIR) $(DESTDIR)$(PREFIX)/share/fish; do \
		if [ -d "$$directory" ]; then rmdir --ignore-fail-on-non-empty "$$directory"; fi; \
	done

# devtrust_VERSION_ARCH.deb in $(DEB_DIR), built with debhelper from the
# release binary (scripts/build-deb.sh; docs/deployment.md); its path is the
# last line printed.
deb: deps-deb build
	@scripts/build-deb.sh $(RELEASE_BINARY) $(DEB_DIR)

clean:
	$(SWIFT) package clean
	rm -rf .demo
