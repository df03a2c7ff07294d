# devtrust: build, test, demo, install.
#   make demo   builds and shows a device key and a verified token (installs apt packages as root)
#   make test   runs the whole test suite (installs apt packages as root)

PREFIX   ?= /usr/local
DESTDIR  ?=
SWIFT    ?= swift
BINDIR    = $(DESTDIR)$(PREFIX)/bin
MANDIR    = $(DESTDIR)$(PREFIX)/share/man/man1

# What building needs, and what the tests and the demo add (independent verifiers).
BUILD_PACKAGES = libssl-dev libtss2-dev libcurl4-openssl-dev libqrencode4 pkg-config
CHECK_PACKAGES = curl dconf-cli libqrencode4 openssl python3 python3-cryptography python3-jsonschema jose swtpm swtpm-tools tpm2-tools tpm2-openssl
RELEASE_BINARY = .build/release/devtrust

.PHONY: all build test demo install clean deps-build deps-check

all: build

deps-build:
	@scripts/ensure-packages.sh $(BUILD_PACKAGES)

deps-check: deps-build
	@scripts/ensure-packages.sh $(CHECK_PACKAGES)
	@scripts/install-glewlwyd.sh

build: deps-build
	$(SWIFT) build -c release --static-swift-stdlib

test: deps-check
	$(SWIFT) build --build-tests
	$(SWIFT) test

demo: deps-check build
	@scripts/demo.sh $(RELEASE_BINARY)

install: build
	install -d $(BINDIR) $(MANDIR)
	install -m 0755 $(RELEASE_BINARY) $(BINDIR)/devtrust
	install -m 0644 docs/devtrust.1 $(MANDIR)/devtrust.1

clean:
	$(SWIFT) package clean
	rm -rf .demo
