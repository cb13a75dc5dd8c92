#!/bin/sh
# Finishes the server image, run as root inside the new root filesystem: by
# scripts/test-images in a chroot after debootstrap, and by the Dockerfile.
#
# It removes what the tests never use, because on the vfs storage driver every
# container start copies the whole image: each megabyte dropped here is paid
# back on every container of every test run.
set -eu

# The PostgreSQL cluster the package created at install time: tests start
# their own, initialised at container start.
rm -rf /var/lib/postgresql/15/main /etc/postgresql/15/main

# PostgreSQL's JIT pulls in LLVM (~120 MB). Without the provider library the
# server just runs without JIT (it checks that the file exists), which is
# what short test queries want anyway.
rm -f /usr/lib/postgresql/15/lib/llvmjit.so /usr/lib/postgresql/15/lib/llvmjit_types.bc
rm -rf /usr/lib/postgresql/15/lib/bitcode
rm -f /usr/lib/x86_64-linux-gnu/libLLVM* /usr/lib/aarch64-linux-gnu/libLLVM*
rm -f /usr/lib/x86_64-linux-gnu/libz3.so* /usr/lib/aarch64-linux-gnu/libz3.so*

# Documentation, manuals, translations, package caches and lists.
rm -rf /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
	/usr/share/postgresql/15/man /usr/share/lintian /usr/share/common-licenses \
	/var/cache/apt/* /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/*.log
