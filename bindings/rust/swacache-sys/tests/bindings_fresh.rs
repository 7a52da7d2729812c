//! Regenerates the declarations from include/swacache.h with `bindgen` and fails
//! when they differ from the committed src/bindings.rs and
//! src/bindings_experimental.rs (the binding cannot drift).
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
    let tmp = |name: &str| std::env::temp_dir().join(format!("swacache-{name}-{}.rs", std::process::id()));
    let (fresh, fresh_exp) = (tmp("bindings"), tmp("bindings-experimental"));
    let status = Command::new("bash")
        .arg(here.join("regen.sh"))
        .arg(&fresh)
        .arg(&fresh_exp)
        .status()
        .expect("cannot run bash regen.sh");
    assert!(
        status.success(),
        "regen.sh failed ({status}); is the `bindgen` command installed (apt-get install bindgen)?"
    );
    for (generated, committed) in [(&fresh, "src/bindings.rs"), (&fresh_exp, "src/bindings_experimental.rs")] {
        let fresh_text = std::fs::read_to_string(generated).expect("regen.sh wrote no output");
        let _ = std::fs::remove_file(generated);
        let committed_text = std::fs::read_to_string(here.join(committed)).unwrap();
        assert!(
            tokens(&fresh_text) == tokens(&committed_text),
            "bindings/rust/swacache-sys/{committed} is stale: include/swacache.h changed. \
             Run bindings/rust/swacache-sys/regen.sh, then update the safe wrapper and commit both."
        );
    }
}

/// The experimental declarations exist only in the experimental file, so the
/// default build cannot name them.
#[test]
fn experimental_declarations_are_only_in_the_experimental_file() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let stable = std::fs::read_to_string(here.join("src/bindings.rs")).unwrap();
    let experimental = std::fs::read_to_string(here.join("src/bindings_experimental.rs")).unwrap();
    for name in ["pub fn swa_decode_graph_create", "pub fn swa_slot_set_lengths", "pub struct swa_graph_error"] {
        assert!(!stable.contains(name), "{name} is declared without the experimental feature");
        assert!(experimental.contains(name), "{name} is missing from bindings_experimental.rs");
    }
}
