//! Every integration test and bench says which features it needs (Cargo.toml), so
//! that `cargo clippy --all-targets --no-default-features --features client` (or
//! `server`) skips what it cannot build instead of failing: a new file without its
//! `[[test]]` / `[[bench]]` entry fails here, in the default `cargo test`; so does a
//! file in tests/integrations/ that its main.rs does not declare (it would never run).

use std::path::Path;

/// The `name = "..."` of every `[[kind]]` section of Cargo.toml that has a
/// `required-features` line.
fn declared(manifest: &str, kind: &str) -> Vec<String> {
    manifest
        .split("\n[")
        .filter(|section| section.starts_with(&format!("[{kind}]]")))
        .filter(|section| section.contains("\nrequired-features = "))
        .filter_map(|section| {
            let line = section.lines().find(|l| l.starts_with("name = "))?;
            Some(
                line.trim_start_matches("name = ")
                    .trim_matches('"')
                    .to_string(),
            )
        })
        .collect()
}

/// The `.rs` files directly in `dir`, without the extension.
fn sources(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("readable directory")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_test_and_bench_declares_its_required_features() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    for (kind, dir) in [("test", "tests"), ("bench", "benches")] {
        let declared = declared(&manifest, kind);
        let missing: Vec<String> = sources(&root.join(dir))
            .into_iter()
            .filter(|name| !declared.contains(name))
            .collect();
        assert!(
            missing.is_empty(),
            "{dir}/ files without a [[{kind}]] entry with required-features in Cargo.toml: \
             {missing:?} (see the comment above the [[test]] entries)"
        );
    }
}

#[test]
fn every_integration_module_is_declared() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integrations");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("tests/integrations/main.rs");
    let missing: Vec<String> = sources(&dir)
        .into_iter()
        .filter(|name| name != "main" && !main.contains(&format!("\nmod {name};")))
        .collect();
    assert!(
        missing.is_empty(),
        "tests/integrations/ files that main.rs does not declare (`mod name;`): {missing:?}"
    );
}
