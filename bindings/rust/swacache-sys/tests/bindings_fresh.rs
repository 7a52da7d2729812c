//! Regenerates the declarations from include/swacache.h with `bindgen` and fails
//! when they differ from the committed src/bindings.rs (the binding cannot drift).
use std::path::PathBuf;
use std::process::Command;

/// Layout is not part of the declarations (it depends on the rustfmt that bindgen
/// runs): whitespace and trailing commas are dropped, everything else compared.
fn tokens(text: &str) -> String {
    let packed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    packed.replace(",)", ")").replace(",}", "}").replace(",]", "]")
}

#[test]
fn committed_bindings_match_the_header() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fresh = std::env::temp_dir().join(format!("swacache-bindings-{}.rs", std::process::id()));
    let status =
        Command::new("bash").arg(here.join("regen.sh")).arg(&fresh).status().expect("cannot run bash regen.sh");
    assert!(
        status.success(),
        "regen.sh failed ({status}); is the `bindgen` command installed (apt-get install bindgen)?"
    );
    let fresh_text = std::fs::read_to_string(&fresh).expect("regen.sh wrote no output");
    let _ = std::fs::remove_file(&fresh);
    let committed = std::fs::read_to_string(here.join("src/bindings.rs")).unwrap();
    assert!(
        tokens(&fresh_text) == tokens(&committed),
        "bindings/rust/swacache-sys/src/bindings.rs is stale: include/swacache.h changed. \
         Run bindings/rust/swacache-sys/regen.sh, then update the safe wrapper and commit both."
    );
}
