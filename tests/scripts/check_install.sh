#!/usr/bin/env bash
# Install the built tree into a scratch prefix, then build a tiny consumer
# against it twice: with find_package(swacache) and with pkg-config.
set -euo pipefail
build=$1; work=$2; cmake=${3:-cmake}
src=$(cd "$(dirname "$0")/../install_consumer" && pwd)
rm -rf "$work"; mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >/dev/null
# 1. CMake package
"$cmake" -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
"$cmake" --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"
# 2. pkg-config
pcdir=$(dirname "$(find "$work/prefix" -name swacache.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs swacache)
libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir swacache)
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/consumer.c" $flags -o "$work/consumer-pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc"
echo "OK: installed tree consumed through CMake and pkg-config"
