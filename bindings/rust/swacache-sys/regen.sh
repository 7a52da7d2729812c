#!/usr/bin/env bash
# Regenerates the raw declarations of include/swacache.h with Debian's `bindgen`
# command. Usage: regen.sh [OUT]   (default: src/bindings.rs next to this script)
# The test tests/bindings_fresh.rs runs this into a temporary file and compares.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
header="$here/../../../include/swacache.h"
out="${1:-$here/src/bindings.rs}"
command -v bindgen >/dev/null || { echo "regen.sh: the bindgen command is missing (apt-get install bindgen)" >&2; exit 2; }
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
  --output "$out" \
  -- -std=c99
