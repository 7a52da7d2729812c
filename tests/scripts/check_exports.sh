#!/usr/bin/env bash
# The shared library must export nothing but swa_* functions.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$')
bad=$(printf '%s\n' "$syms" | grep -v '^swa_' || true)
if [ -n "$bad" ]; then
  echo "non-swa_ symbols exported by $lib:"; printf '%s\n' "$bad" | head -20; exit 1
fi
count=$(printf '%s\n' "$syms" | grep -c '^swa_')
[ "$count" -ge 10 ] || { echo "only $count swa_ symbols exported"; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/{print $2}')
[ "$soname" = "libswacache.so.0" ] || { echo "SONAME is '$soname', expected libswacache.so.0"; exit 1; }
echo "OK: $count swa_* symbols, SONAME $soname"
