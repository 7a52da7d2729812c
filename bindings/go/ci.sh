#!/usr/bin/env bash
# CI for the Go binding: gofmt, go vet and go test -race against the
# library in the repository's build directory, without installing it.
#   bash bindings/go/ci.sh [BUILD_DIR]      (default: <repo>/build)
# Exits 0 with a SKIP line only when no `go` is on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"

if ! command -v go >/dev/null 2>&1; then
  echo "SKIP: go binding: no 'go' on PATH (Debian: apt-get install golang-go)"
  exit 0
fi
if [ ! -e "$build/libswacache.so" ]; then
  echo "go binding: $build/libswacache.so is missing; build the library first" >&2
  exit 1
fi

# pkg-config prefers <name>-uninstalled.pc over <name>.pc: CMake writes
# build/swacache-uninstalled.pc, which points the package's
# `#cgo pkg-config: swacache` at include/ and at the .so in build/ (with an rpath).
if [ ! -e "$build/swacache-uninstalled.pc" ]; then
  echo "go binding: $build/swacache-uninstalled.pc is missing; reconfigure the build" >&2
  exit 1
fi
export PKG_CONFIG_PATH="$build${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_ENABLED=1
# No network: the module uses the standard library only.
export GOPROXY=off GOTOOLCHAIN=local
# The build cache lives outside the clone (Go's own default place), so a later
# CI run on the same machine reuses the race-instrumented standard library.
export GOCACHE="${GOCACHE:-$HOME/.cache/go-build}" GOPATH="${GOPATH:-$build/go-path}"

cd "$here"
echo "== gofmt"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2
  echo "$unformatted" >&2
  exit 1
fi
echo "== go vet"
go vet ./...
echo "== go vet (-tags swacache_nopkgconfig, CGO_CFLAGS/CGO_LDFLAGS)"
CGO_CFLAGS="-I$repo/include" CGO_LDFLAGS="-L$build -Wl,-rpath,$build -lswacache" \
  go vet -tags swacache_nopkgconfig ./...
echo "== go test -race"
go test -race -count=1 ./...
echo "== go vet and go test -tags swacache_experimental (the experimental C API)"
go vet -tags swacache_experimental ./...
go test -tags swacache_experimental -count=1 -run 'Experimental|Coverage' ./swacache/
echo "== go run ./examples/engine"
go run ./examples/engine
echo "go binding: OK"
