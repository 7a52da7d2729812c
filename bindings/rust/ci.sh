#!/usr/bin/env bash
# CI of the Rust binding: rustfmt --check, clippy -D warnings, the tests and the
# doc tests, offline, against the library in the build directory.
# Usage: bindings/rust/ci.sh [BUILD_DIR]   (default: the repository's build/)
# Exits non-zero on any failure; prints SKIP and exits 0 only when cargo is absent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="$(cd "${1:-$here/../../build}" && pwd)"

if ! command -v cargo >/dev/null 2>&1; then
  echo "SKIP: rust_binding: cargo is not installed"
  exit 0
fi
if [ ! -e "$build_dir/libswacache.so" ]; then
  echo "rust_binding: $build_dir/libswacache.so is missing; build the library first" >&2
  exit 1
fi
export SWACACHE_LIB_DIR="$build_dir"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build_dir/rust-target}"
cd "$here"
set -x
cargo fmt --all --check
cargo clippy --offline -j2 --workspace --all-targets -- -D warnings
cargo test --offline -j2 --workspace
cargo test --offline -j2 --workspace --doc
# The experimental feature (the raw declarations behind SWACACHE_EXPERIMENTAL).
cargo clippy --offline -j2 --workspace --all-targets --features swacache/experimental -- -D warnings
cargo test --offline -j2 -p swacache-sys --features experimental
cargo test --offline -j2 -p swacache --features experimental --test experimental
cargo run --offline -j2 --example engine >/dev/null
