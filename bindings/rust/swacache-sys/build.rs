//! Finds libswacache: `SWACACHE_LIB_DIR`, then `pkg-config swacache` (the
//! command), then the repository's `build/` directory, in that order.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &Path) -> bool {
    ["libswacache.so", "libswacache.dylib", "libswacache.a", "swacache.lib"].iter().any(|name| dir.join(name).exists())
}

fn from_pkg_config() -> Result<PathBuf, String> {
    let output = Command::new("pkg-config")
        .args(["--variable=libdir", "swacache"])
        .output()
        .map_err(|e| format!("cannot run pkg-config: {e}"))?;
    if !output.status.success() {
        return Err(format!("pkg-config swacache failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if has_library(&dir) {
        Ok(dir)
    } else {
        Err(format!("pkg-config names {} but it holds no libswacache", dir.display()))
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=SWACACHE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let mut tried = Vec::new();
    let mut found = None;

    match env::var_os("SWACACHE_LIB_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if has_library(&dir) {
                found = Some(dir);
            } else {
                tried.push(format!("SWACACHE_LIB_DIR={} holds no libswacache", dir.display()));
            }
        }
        None => tried.push("SWACACHE_LIB_DIR is not set".to_string()),
    }
    if found.is_none() {
        match from_pkg_config() {
            Ok(dir) => found = Some(dir),
            Err(why) => tried.push(why),
        }
    }
    if found.is_none() {
        let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let dir = manifest.join("../../../build");
        if has_library(&dir) {
            found = Some(dir.canonicalize().unwrap_or(dir));
        } else {
            tried.push(format!(
                "the repository's build directory {} holds no libswacache (build it with `ninja -C build swacache`)",
                dir.display()
            ));
        }
    }

    let Some(dir) = found else {
        panic!(
            "swacache-sys: cannot find libswacache. Tried, in order:\n  1. {}\n  2. {}\n  3. {}\n\
             Set SWACACHE_LIB_DIR to the directory holding libswacache.so, install swacache.pc \
             for pkg-config, or build the library into the repository's build/.",
            tried[0], tried[1], tried[2]
        );
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=swacache");
    // Dependents read it as DEP_SWACACHE_LIB_DIR (e.g. to set an rpath).
    println!("cargo:lib_dir={}", dir.display());
}
