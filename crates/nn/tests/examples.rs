//! The examples are what a user copies into a program that depends on liandan-nn alone: they
//! may name no other crate of the workspace (`use liandan_backend_wgpu as _;` in such a
//! program does not compile, E0432). Cargo builds them with every dependency of this crate in
//! reach, so this is checked here.

use std::path::Path;

#[test]
fn the_examples_name_only_liandan_nn() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let source = std::fs::read_to_string(&path).unwrap();
        for (n, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                assert!(
                    !word.starts_with("liandan_") || word == "liandan_nn",
                    "{}:{}: `{word}` is not a dependency of a program that depends on liandan-nn: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked > 0, "no examples in {}", dir.display());
}
