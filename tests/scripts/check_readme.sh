#!/usr/bin/env bash
# The README's C example must compile as strict C99 against the library and run.
set -euo pipefail
readme=$1; include=$2; libdir=$3; work=$4
mkdir -p "$work"
awk '/^```c$/{f=1;next} /^```$/{f=0} f' "$readme" > "$work/readme_example.c"
cc -std=c99 -Wall -Wextra -Werror -pedantic -I"$include" "$work/readme_example.c" \
   -L"$libdir" -lswacache -o "$work/readme_example"
LD_LIBRARY_PATH="$libdir" "$work/readme_example"
