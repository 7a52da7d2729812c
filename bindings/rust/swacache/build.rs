//! Lets tests, examples and doc tests find libswacache at run time: swacache-sys
//! (`links = "swacache"`) reports the directory it linked as DEP_SWACACHE_LIB_DIR.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SWACACHE_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_SWACACHE_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        println!("cargo:lib_dir={dir}");
    }
}
