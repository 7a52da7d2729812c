#!/usr/bin/env bash
# Regenerates the raw declarations of include/swacache.h with Debian's `bindgen`
# command, twice: src/bindings.rs as a program that does not define
# SWACACHE_EXPERIMENTAL sees the header (the default), and
# src/bindings_experimental.rs with it defined (the `experimental` feature).
# Usage: regen.sh [OUT [OUT_EXPERIMENTAL]]   (defaults: those two files)
# The test tests/bindings_fresh.rs runs this into temporary files and compares.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
header="$here/../../../include/swacache.h"
out="${1:-$here/src/bindings.rs}"
out_exp="${2:-$here/src/bindings_experimental.rs}"
command -v bindgen >/dev/null || { echo "regen.sh: the bindgen command is missing (apt-get install bindgen)" >&2; exit 2; }
gen() {
  local dst="$1"
  shift
  bindgen "$header" \
    --allowlist-function 'swa_.*' \
    --allowlist-type 'swa_.*' \
    --allowlist-var 'SWA_.*' \
    --default-enum-style consts \
    --no-prepend-enum-name \
    --use-core \
    --ctypes-prefix 'core::ffi' \
    --size_t-is-usize \
    --rustfmt-configuration-file "$here/../rustfmt.toml" \
    --output "$dst" \
    -- -std=c99 "$@"
}
gen "$out"
gen "$out_exp" -DSWACACHE_EXPERIMENTAL
