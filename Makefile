# linux-mktme: Debian's Linux 6.1 with Intel MKTME, as installable packages.
#
#   make deb      build linux-image and linux-headers .debs into out/
#   make check    every test: host-side checks, the packages, the test VM
#   make check-debug  the API, mm and stress tests on a KASAN/UBSAN kernel
#   make check-keyutils  keyutils' upstream test suite in the VM
#   make clean    remove build/ and out/ (caches outside the clone stay)
#
# PROFILE=ci (default, a small guest kernel) or PROFILE=debian (Debian's
# own configuration; a big build).

PROFILE ?= ci
export PROFILE

SHELL := /bin/bash
OUT := out
# Everything a package build reads; a change to any of it rebuilds.
DEB_INPUTS := $(shell find patches config-fragments profiles scripts man \
	-type f 2>/dev/null) $(wildcard debian/control debian/rules \
	debian/changelog debian/copyright debian/source/* debian/*.in) \
	/usr/src/linux-source-6.1.tar.xz
DEB_STAMP := $(OUT)/.built-$(PROFILE)

.PHONY: all deb deps check check-debug check-keyutils check-host check-packages clean config-check

all: deb

# Install the build dependencies (as root), or name them and stop.
deps:
	@scripts/install-deps build

deb: $(DEB_STAMP)

/usr/src/linux-source-6.1.tar.xz:
	@scripts/install-deps build

$(DEB_STAMP): $(DEB_INPUTS)
	@scripts/install-deps build
	@scripts/make-deb $(OUT)
	@touch $@

# Only resolves the configuration of a profile (seconds): every fragment
# option must survive. CI runs it for PROFILE=debian.
config-check:
	@scripts/install-deps build
	@scripts/prepare-tree
	@scripts/make-config $(PROFILE)

check:
	@scripts/install-deps check
	@tests/run-all

# Not part of "check": a second kernel build and three VM boots.
check-debug:
	@scripts/install-deps check
	@PROFILE=ci tests/run-debug

check-keyutils: $(DEB_STAMP)
	@scripts/install-deps check
	@PROFILE=ci tests/suites/keyutils.sh

include vm/vm.mk

clean:
	rm -rf build out debian/.debhelper debian/files debian/*.substvars \
		debian/debhelper-build-stamp debian/linux-image-* debian/linux-headers-*
