//! The check that the examples name only the crates a user's program would depend on; the
//! test files of nn and train include it.

use std::path::Path;

/// Fails at the first word of an example under the crate's `examples/` that names a
/// `liandan_*` crate outside `allowed`; `program` says what such a program is built on.
pub fn examples_name_only(allowed: &[&str], program: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let source = std::fs::read_to_string(&path).unwrap();
        for (n, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in code.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                assert!(
                    !word.starts_with("liandan_") || allowed.contains(&word),
                    "{}:{}: `{word}` is not a dependency of a program {program}: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
        checked += 1;
    }
    assert!(checked > 0, "no examples in {}", dir.display());
}
