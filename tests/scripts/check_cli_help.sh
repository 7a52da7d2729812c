#!/usr/bin/env bash
# `swacache --help` and `swacache help` must list every subcommand and the flags
# each one reads; an unknown command given to help exits with 2.
set -euo pipefail
cli=$1
check() {
  local what=$1 out=$2
  for word in demo layout slots help --preset --slots --layers --sequences --max_prompt \
              --chunk --decode_steps --seed; do
    if ! grep -q -- "$word" <<<"$out"; then
      echo "FAIL: '$what' does not mention $word"; echo "$out"; exit 1
    fi
  done
  if grep -q "No flags matched" <<<"$out"; then echo "FAIL: '$what' fell through to absl"; exit 1; fi
}
check "swacache --help" "$("$cli" --help)"
check "swacache help" "$("$cli" help)"
check "swacache -h" "$("$cli" -h)"
# One command's help names its own flags only.
one=$("$cli" demo --help)
grep -q -- "--decode_steps" <<<"$one" || { echo "FAIL: demo --help lacks --decode_steps"; exit 1; }
if grep -q "^  layout" <<<"$one"; then echo "FAIL: demo --help lists layout"; exit 1; fi
"$cli" help layout | grep -q -- "--slots" || { echo "FAIL: help layout lacks --slots"; exit 1; }
rc=0; "$cli" help no-such-command >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: help no-such-command exited $rc, want 2"; exit 1; }
echo "OK: swacache help lists commands and flags"
