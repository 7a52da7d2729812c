#!/usr/bin/env bash
# swacache refuses bad command lines (exit 2 or absl's 1, a message naming the
# option, no crash, no layout printed), and `swacache layout` prints the exact
# byte figures of docs/layout.md, computed here independently for each preset.
set -euo pipefail
cli=$1
fails=0
# refuse WANT_IN_MESSAGE ARGS...: non-zero exit below 128 (no signal), the
# message names the option, nothing on stdout.
refuse() {
  local want=$1; shift
  local out err rc=0
  out=$(timeout 60 "$cli" "$@" 2>/tmp/swacache_cli_args.$$) || rc=$?
  err=$(cat /tmp/swacache_cli_args.$$)
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAIL: swacache $* exited $rc, want a refusal"; fails=$((fails + 1)); return
  fi
  if ! grep -qF -- "$want" <<<"$err"; then
    echo "FAIL: swacache $*: message '$err' does not name '$want'"; fails=$((fails + 1)); return
  fi
  if [ -n "$out" ]; then
    echo "FAIL: swacache $* printed on stdout: $out"; fails=$((fails + 1))
  fi
}
refuse slots layout --slots=-1
refuse slots layout --slots=1e9
refuse slots layout --slots=12abc
refuse slots layout --slots=
refuse slots layout --slots
refuse slots layout --slots=99999999999999999999
refuse "--slots = 0" layout --slots=0
refuse "--slots = 4000000" layout --slots=4000000
refuse "--slots = 4294967295" slots --slots=4294967295
refuse "--slots is given more than once" layout --slots=2 --slots=3
refuse "--slots is given more than once" layout --slots 2 -slots=3
refuse "--preset is given more than once" layout --preset=gpt-oss --preset=gpt-oss
refuse "unknown preset 'nope'" layout --preset=nope
refuse "unknown preset ''" layout --preset=
refuse "unknown preset 'gpt-oss '" slots "--preset=gpt-oss "
refuse "unexpected argument 'extra'" layout extra
refuse "unexpected argument '--slots=3'" layout -- --slots=3
refuse "--layers is not an option of 'layout'" layout --layers=3
refuse "--slots is not an option of 'demo'" demo --slots=3
refuse "--chunk = 0" demo --chunk=0
refuse "--chunk = 3000000000" demo --chunk=3000000000
refuse "--sequences = 0" demo --sequences=0
refuse "--sequences = 4294967295" demo --sequences=4294967295
refuse "--max_prompt = 0" demo --max_prompt=0
refuse "--max_prompt = 3000000000" demo --max_prompt=3000000000
refuse "--decode_steps = 4000000000" demo --decode_steps=4000000000
refuse "--layers = 0" demo --layers=0
refuse "--layers = 41" demo --layers=41
refuse "--layers = 19" demo --preset=gpt-oss --layers=19
refuse seed demo --seed=-5
refuse "unknown command 'lay'" lay
rm -f /tmp/swacache_cli_args.$$

# layout PRESET SLOTS SLOT STORED COMPRESS SAVED: the "bytes:" line must be
# exactly these figures (pool = SLOTS * SLOT).
layout() {
  local preset=$1 slots=$2 slot=$3 stored=$4 compress=$5 saved=$6
  local want="bytes: slot $slot, stored $stored, compress $compress, compress saved $saved, pool $((slots * slot))"
  local got
  got=$("$cli" layout --preset="$preset" --slots="$slots" | grep '^bytes:') || true
  if [ "$got" != "$want" ]; then
    echo "FAIL: layout --preset=$preset --slots=$slots: '$got', want '$want'"
    fails=$((fails + 1))
  fi
}
pad() { echo $(( ($1 + 31) / 32 * 32 )); }  # alignment 32
# deepseek-v4: W 128, N 5 -> R 134; MXFP8 D 512 shared: 512 + 512/32 bytes a
# token; 40 rings; the 20 stored layers have opaque entries: 4 + 5 rows of 4096 B.
R=$((128 + 5 + 1)); ring=$(pad $((R * (512 + 512 / 32))))
comp=$(pad $(((4 + 5) * 2 * 512 * 4)))
layout deepseek-v4 4 $((40 * ring + 20 * comp)) $((20 * ring)) $((20 * comp)) 0
layout deepseek-v4 1 $((40 * ring + 20 * comp)) $((20 * ring)) $((20 * comp)) 0
# deepseek-v4-flash: 44 rings (43 stored); CSA (even 2..42, 21 layers): 2*4 + 5
# rows of 2 * 2*512 FP32 values, indexer rows of 2 * 2*128; HCA (odd 3..41, 20
# layers): 128 + 5 rows of 2 * 512 FP32 values. All stored, all saved.
csa=$(( $(pad $(((2 * 4 + 5) * 2 * 1024 * 4))) + $(pad $(((2 * 4 + 5) * 2 * 256 * 4))) ))
hca=$(pad $(((128 + 5) * 2 * 512 * 4)))
csa_raw=$(((2 * 4 + 5) * (2 * 1024 * 4 + 2 * 256 * 4))); hca_raw=$(((128 + 5) * 2 * 512 * 4))
layout deepseek-v4-flash 3 $((44 * ring + 21 * csa + 20 * hca)) $((43 * ring)) \
  $((21 * csa + 20 * hca)) $((21 * csa_raw + 20 * hca_raw))
# gpt-oss: N 0 -> R 129; BF16 D 64, 8 KV heads, separate K and V: 16 * 128 B a token.
ring=$(pad $(((128 + 1) * 16 * 64 * 2)))
layout gpt-oss 8 $((18 * ring)) $((18 * ring)) 0 0
layout gpt-oss 64 $((18 * ring)) $((18 * ring)) 0 0

if [ "$fails" -ne 0 ]; then echo "$fails failures"; exit 1; fi
echo "OK: swacache refuses bad command lines and prints exact layouts"
