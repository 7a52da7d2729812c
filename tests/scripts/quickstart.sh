#!/usr/bin/env bash
# Runs a binding README's quick start as written: the fenced blocks that follow
# a `<!-- quickstart: run -->` marker are its commands, those after
# `<!-- quickstart: file NAME -->` the files it writes (NAME in the current
# folder at that point), in README order. They run in a fresh temporary folder
# outside the repository, with every SWACACHE_* variable and LD_LIBRARY_PATH
# unset; the only variables set are the README's own: LIBSWACACHE (the
# checkout) and LIBSWACACHE_BUILD (its build folder). QUICKSTART_CARGO_TARGET_DIR,
# when given, becomes CARGO_TARGET_DIR (the ctest keeps cargo's build folder in
# the build tree), and QUICKSTART_SWACACHE_CMAKE_BUILD_DIR becomes
# SWACACHE_CMAKE_BUILD_DIR (the folder where the crate's build.rs runs CMake,
# placed by the ctest for the compiler cache: bindings/CMakeLists.txt).
# Usage: quickstart.sh README REPO_ROOT BUILD_DIR [TOOL...]
#   TOOL: programs that must be on PATH, else the test prints SKIP and passes.
set -euo pipefail
readme=$1; repo=$(cd "$2" && pwd); build=$(cd "$3" && pwd); shift 3
name=$(basename "$(dirname "$readme")")
for tool in "$@"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: quickstart $name: $tool is not installed"
    exit 0
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/swacache-quickstart-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
script="$work/quickstart.sh"
awk -v out="$script" '
  /^<!-- quickstart: run -->$/ { mode = "run"; next }
  /^<!-- quickstart: file [^ ]+ -->$/ { mode = "file"; file = $4; next }
  /^```/ && mode != "" && !inside { inside = 1
    if (mode == "file") print "cat > " file " <<'"'"'QUICKSTART_EOF'"'"'" > out
    next }
  /^```$/ && inside { inside = 0
    if (mode == "file") print "QUICKSTART_EOF" > out
    mode = ""; n++; next }
  inside { print > out }
  END { if (n == 0) { print "no quickstart blocks" > "/dev/stderr"; exit 1 } }
' "$readme"
echo "== quickstart $name (from $readme):"
cat "$script"
echo "== running in $work"
mkdir "$work/home"
cd "$work/home"
for v in $(env | sed -n 's/^\(SWACACHE_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_LIBRARY_PATH CARGO_TARGET_DIR PIP_REQUIRE_VIRTUALENV VIRTUAL_ENV
[ -n "${QUICKSTART_CARGO_TARGET_DIR:-}" ] && export CARGO_TARGET_DIR="$QUICKSTART_CARGO_TARGET_DIR"
[ -n "${QUICKSTART_SWACACHE_CMAKE_BUILD_DIR:-}" ] &&
  export SWACACHE_CMAKE_BUILD_DIR="$QUICKSTART_SWACACHE_CMAKE_BUILD_DIR"
start=$(date +%s)
LIBSWACACHE="$repo" LIBSWACACHE_BUILD="$build" bash -euo pipefail -x "$script"
echo "quickstart $name: OK in $(( $(date +%s) - start )) s"
