//! Links libswacache. In this order:
//!
//! 1. `SWACACHE_LIB_DIR` set: the shared library in that folder. A folder that
//!    holds no libswacache is a build error naming it (never a fallback).
//! 2. The `bundled` feature (on by default): builds a static libswacache from
//!    the libswacache checkout around this crate with the `cmake` command
//!    (CPU backend, Release, no tests, benchmarks or tool) into `OUT_DIR`, and
//!    links it together with the system libraries it needs (Abseil, hiredis,
//!    libstdc++, named by the build's `swacache-uninstalled.pc`), so that a
//!    dependent binary runs with no `LD_LIBRARY_PATH`. `SWACACHE_CMAKE_BUILD_DIR`
//!    names another CMake build folder than `OUT_DIR/libswacache` (the
//!    quick-start ctest puts it where the compiler cache hits the main tree's
//!    objects).
//! 3. Otherwise: `pkg-config swacache` (an installed `swacache.pc`).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &Path) -> bool {
    ["libswacache.so", "libswacache.dylib", "libswacache.a", "swacache.lib"].iter().any(|name| dir.join(name).exists())
}

/// Emits the cargo directives for linker flags from pkg-config or a .pc file:
/// `-L` folders, `-l` libraries (`kind` for libswacache itself, dynamic for the
/// rest), library files named by path; other flags (`-Wl,...`) are skipped.
/// Returns the first `-L` folder.
fn emit_link_flags(flags: &str, swacache_kind: &str) -> Option<String> {
    let mut first_dir = None;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            first_dir.get_or_insert_with(|| dir.to_string());
        } else if let Some(name) = flag.strip_prefix("-l") {
            if name == "swacache" {
                println!("cargo:rustc-link-lib={swacache_kind}=swacache");
            } else {
                println!("cargo:rustc-link-lib=dylib={name}");
            }
        } else if flag.starts_with('/') {
            let path = Path::new(flag);
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default();
            let stem = file.strip_prefix("lib").and_then(|f| f.split(".so").next()).unwrap_or_default();
            if let (Some(dir), false) = (path.parent(), stem.is_empty()) {
                println!("cargo:rustc-link-search=native={}", dir.display());
                println!("cargo:rustc-link-lib=dylib={stem}");
            }
        }
    }
    first_dir
}

fn from_lib_dir(dir: PathBuf) {
    if !has_library(&dir) {
        panic!(
            "swacache-sys: SWACACHE_LIB_DIR={} holds no libswacache (libswacache.so); \
             point it at the folder that does (e.g. a CMake build folder or <prefix>/lib), or unset it",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=swacache");
    // Dependents read it as DEP_SWACACHE_LIB_DIR (e.g. to set an rpath).
    println!("cargo:lib_dir={}", dir.display());
}

fn from_pkg_config() {
    let output = Command::new("pkg-config").args(["--libs", "swacache"]).output().unwrap_or_else(|e| {
        panic!(
            "swacache-sys: the `bundled` feature is off and pkg-config cannot run ({e}): install pkg-config \
             (Debian: apt-get install pkg-config) and libswacache, set SWACACHE_LIB_DIR, or enable `bundled`"
        )
    });
    if !output.status.success() {
        panic!(
            "swacache-sys: the `bundled` feature is off and `pkg-config --libs swacache` failed: {}\n\
             Install libswacache (cmake --install build --prefix P) and add P/lib/pkgconfig to \
             PKG_CONFIG_PATH, set SWACACHE_LIB_DIR, or enable the `bundled` feature.",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let flags = String::from_utf8_lossy(&output.stdout).to_string();
    let dir = emit_link_flags(&flags, "dylib");
    if let Some(dir) = dir {
        println!("cargo:lib_dir={dir}");
    }
}

fn run(cmd: &mut Command, what: &str) {
    let shown = format!("{cmd:?}");
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "swacache-sys (bundled): cannot run {what} ({e}). Building libswacache needs CMake 3.25+ \
             (Debian: apt-get install cmake), or set SWACACHE_LIB_DIR to a built library"
        )
    });
    if !status.success() {
        panic!(
            "swacache-sys (bundled): {shown} failed ({status}); its output is above. Building libswacache \
             needs a C++20 compiler (Debian: apt-get install g++), Abseil (libabsl-dev) and, for the \
             Redis store, hiredis (libhiredis-dev, optional)"
        );
    }
}

fn bundled() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("../../..");
    if !root.join("include/swacache.h").exists() || !root.join("CMakeLists.txt").exists() {
        panic!(
            "swacache-sys (bundled): the libswacache sources are not at {} (the crate builds them from the \
             checkout it lives in); use the crate from a checkout, or turn off default features and set \
             SWACACHE_LIB_DIR or install swacache.pc",
            root.display()
        );
    }
    let root = root.canonicalize().expect("the checkout exists");
    for part in ["CMakeLists.txt", "include", "src", "kernels", "cmake"] {
        println!("cargo:rerun-if-changed={}", root.join(part).display());
    }
    let out = match env::var_os("SWACACHE_CMAKE_BUILD_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it")).join("libswacache"),
    };
    let cmake = env::var_os("CMAKE").unwrap_or_else(|| "cmake".into());
    let mut configure = Command::new(&cmake);
    configure.arg("-S").arg(&root).arg("-B").arg(&out).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DSWACACHE_CUDA=OFF",
        "-DSWACACHE_TESTS=OFF",
        "-DSWACACHE_BENCH=OFF",
        "-DSWACACHE_CLI=OFF",
        "-DSWACACHE_STATIC=ON",
    ]);
    let fresh = !out.join("CMakeCache.txt").exists();
    if fresh && Command::new("ninja").arg("--version").output().map(|o| o.status.success()).unwrap_or(false) {
        configure.args(["-G", "Ninja"]);
    }
    run(&mut configure, "cmake");
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".to_string());
    run(
        Command::new(&cmake).arg("--build").arg(&out).args(["--target", "swacache_static", "--parallel", &jobs]),
        "cmake --build",
    );
    let pc = out.join("swacache-uninstalled.pc");
    let text = std::fs::read_to_string(&pc)
        .unwrap_or_else(|e| panic!("swacache-sys (bundled): cannot read {} ({e})", pc.display()));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=swacache");
    let private = text.lines().find_map(|line| line.strip_prefix("Libs.private:")).unwrap_or_default();
    if !private.contains("-labsl_") {
        // CMake found Abseil's CMake package but not its pkg-config files,
        // so the static link list is incomplete: fail here, not in the linker.
        panic!(
            "swacache-sys (bundled): {} lists no Abseil libraries (Libs.private: {}): the static link needs \
             Abseil's pkg-config files and the pkg-config command (Debian: apt-get install pkg-config libabsl-dev)",
            pc.display(),
            private.trim()
        );
    }
    emit_link_flags(private, "static");
    println!("cargo:lib_dir={}", out.display());
}

fn main() {
    println!("cargo:rerun-if-env-changed=SWACACHE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=CMAKE");
    println!("cargo:rerun-if-env-changed=SWACACHE_CMAKE_BUILD_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(dir) = env::var_os("SWACACHE_LIB_DIR") {
        from_lib_dir(PathBuf::from(dir));
    } else if env::var_os("CARGO_FEATURE_BUNDLED").is_some() {
        bundled();
    } else {
        from_pkg_config();
    }
}
