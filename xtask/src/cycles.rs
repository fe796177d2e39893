//! `cargo xtask cycles [CRATE_DIR ..]`: import circles between the files of each crate (every
//! `crates/*` and `xtask` without arguments). A file uses another when it names an item that
//! file defines: in a `use` (a `pub use` too), or inline as `crate::..`, `super::..`,
//! `self::..` or `child::..` (a module the file declares). A path is followed through the
//! re-exports it meets to the file that defines its item. A module's use of its own
//! submodules does not count: a parent that declares and re-exports its children is the shape
//! of a Rust module, and a child may use its parent's helpers. Files that use each other,
//! directly or around a circle, are one circle, printed with the uses that close it; any circle
//! is an error. Comments and `#[cfg(test)]` modules are left out (a test may use what it
//! tests).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A file's module path within its crate (`["autograd", "narrow"]`; the root is empty).
type Module = Vec<String>;

/// One source file: where it is, its code without comments and test modules, the modules it
/// declares, and the names it re-exports (`pub use a::B as C;` maps `C` to `a::B`).
struct File {
    path: PathBuf,
    code: String,
    children: BTreeSet<String>,
    reexports: HashMap<String, String>,
}

/// `cargo xtask cycles`: every crate's circles; an error when any crate has one.
pub fn run(args: &[String]) -> Result<(), String> {
    let dirs: Vec<PathBuf> = match &args[1..] {
        [] => workspace_crates()?,
        given => given.iter().map(PathBuf::from).collect(),
    };
    let mut found = 0;
    for dir in dirs {
        let circles = circles(&dir)?;
        if circles.is_empty() {
            println!("{}: no import circles", dir.display());
        }
        for circle in &circles {
            println!("{}: a circle of {} files:\n{}", dir.display(), circle.files.len(), circle);
        }
        found += circles.len();
    }
    if found > 0 {
        return Err(format!("{found} import circle(s); break each by moving what the files share into one that uses neither"));
    }
    Ok(())
}

/// The crate directories of the workspace: `crates/*` and `xtask`.
fn workspace_crates() -> Result<Vec<PathBuf>, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("xtask has no parent directory")?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map_err(|e| format!("{}: {e}", root.join("crates").display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    dirs.push(root.join("xtask"));
    Ok(dirs)
}

/// Files that use each other around a circle, and the uses between them.
pub struct Circle {
    pub files: Vec<PathBuf>,
    uses: Vec<(PathBuf, PathBuf, String)>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (from, to, path) in &self.uses {
            writeln!(f, "  {} uses {} ({path})", from.display(), to.display())?;
        }
        Ok(())
    }
}

/// The import circles of the crate in `dir` (its `src`), largest first.
pub fn circles(dir: &Path) -> Result<Vec<Circle>, String> {
    let files = read_crate(&dir.join("src"))?;
    let mut uses: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
    for (module, file) in &files {
        let found = uses.entry(module.clone()).or_default();
        for path in paths(file) {
            if let Some(target) = absolute(module, &path, file).and_then(|segments| resolve(&files, segments, 0)) {
                // A module's use of its own submodules (which it declares and often re-exports)
                // is the shape of a Rust module, not a circle.
                let descendant = target.len() > module.len() && target[..module.len()] == module[..];
                if &target != module && !descendant {
                    found.entry(target).or_insert(path);
                }
            }
        }
    }
    let mut circles: Vec<Circle> = components(&uses)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|members| {
            let inside: BTreeSet<&Module> = members.iter().collect();
            let mut edges = Vec::new();
            for from in &members {
                for (to, path) in &uses[from] {
                    if inside.contains(to) {
                        edges.push((files[from].path.clone(), files[to].path.clone(), path.clone()));
                    }
                }
            }
            Circle { files: members.iter().map(|m| files[m].path.clone()).collect(), uses: edges }
        })
        .collect();
    circles.sort_by_key(|c| std::cmp::Reverse(c.files.len()));
    Ok(circles)
}

/// Every `.rs` file under `src`, by module path.
fn read_crate(src: &Path) -> Result<BTreeMap<Module, File>, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).map_err(|e| e.to_string())?.with_extension("");
            let mut module: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.insert(module, parse(path, &text));
        }
    }
    Ok(files)
}

/// A file's code (without comments and test modules), its declared modules and re-exports.
fn parse(path: PathBuf, text: &str) -> File {
    let code = without_tests(&without_comments(text));
    let children = declarations(&code, "mod").into_iter().filter_map(|(_, name)| name.split_whitespace().next().map(str::to_string)).collect();
    let mut reexports = HashMap::new();
    for (public, tree) in declarations(&code, "use") {
        if !public {
            continue;
        }
        for path in expand(&tree) {
            let (path, alias) = match path.split_once(" as ") {
                Some((p, a)) => (p.trim().to_string(), a.trim().to_string()),
                None => (path.clone(), path.rsplit("::").next().unwrap_or_default().to_string()),
            };
            reexports.insert(alias, path);
        }
    }
    File { path, code, children, reexports }
}

/// The `keyword ...;` declarations of `code` (`use` trees, `mod` names: the text up to the
/// `;`), each with whether it is `pub` (in any scope). A `mod name { .. }` has no `;` before its
/// brace and is not one.
fn declarations(code: &str, keyword: &str) -> Vec<(bool, String)> {
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find(keyword) {
        let at = from + found;
        from = at + keyword.len();
        let before_ok = at == 0 || !ident(bytes[at - 1]);
        let after_ok = bytes.get(from).is_some_and(|c| c.is_ascii_whitespace());
        if !(before_ok && after_ok) {
            continue;
        }
        let Some(end) = code[from..].find(';') else { break };
        let body = &code[from..from + end];
        if keyword == "mod" && body.contains('{') {
            continue;
        }
        let head = code[..at].trim_end();
        let public = head.ends_with("pub") || (head.ends_with(')') && head[..head.len() - 1].rsplit('(').nth(1).is_some_and(|p| p.trim_end().ends_with("pub")));
        out.push((public, body.trim().to_string()));
    }
    out
}

/// The code with comments (doc comments too) and the text of string and character literals
/// blanked out, so that neither a `//` nor a word in a message reads as code.
fn without_comments(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            continue;
        }
        // A raw string, r"..", r#".."#: closed by the quote and as many hashes.
        if c == 'r' && (next == Some('"') || next == Some('#')) && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                i += 2 + hashes;
                while i < chars.len() && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                    i += 1;
                }
                i += 1 + hashes;
                out.push_str("\"\"");
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        // A character literal ('x', '\n'); a lifetime ('a) has no closing quote there.
        if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The code without `#[cfg(test)] mod .. { .. }` blocks.
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = &out[at..];
        let Some(open) = after.find('{') else { break };
        let is_mod = after[..open].split_whitespace().any(|w| w == "mod");
        let mut depth = 0;
        let mut end = after.len();
        for (i, c) in after.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        // Only a test module goes; another `#[cfg(test)]` item keeps its code, marked done.
        let cut = if is_mod { end } else { "#[cfg(test)]".len() };
        out.replace_range(at..at + cut, "");
    }
    out
}

/// The paths a `use` tree names: `a::{b, c::{d, E as F}}` gives `a::b`, `a::c::d`, `a::c::E as F`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(open) = tree.find('{') else { return vec![tree.trim().to_string()] };
    let close = match tree.rfind('}') {
        Some(close) if close > open => close,
        // Not a use tree (text that only looked like one).
        _ => return Vec::new(),
    };
    let prefix = &tree[..open];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, open + 1);
    for (i, c) in tree.char_indices().take(close).skip(open + 1) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..close]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).flat_map(|p| expand(p.trim())).map(|p| format!("{prefix}{p}")).collect()
}

/// Every path a file names that may lead into its crate: each `use` (re-exports too) and each
/// inline `crate::`, `super::`, `self::` or `child::` path.
fn paths(file: &File) -> Vec<String> {
    let mut out: Vec<String> = declarations(&file.code, "use")
        .into_iter()
        .flat_map(|(_, tree)| expand(&tree))
        .map(|p| p.split(" as ").next().unwrap_or_default().trim().to_string())
        .collect();
    let bytes = file.code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut at = 0;
    while at < bytes.len() {
        if ident(bytes[at]) && (at == 0 || !ident(bytes[at - 1])) {
            let start = at;
            while at < bytes.len() && (ident(bytes[at]) || (bytes[at] == b':' && bytes.get(at + 1) == Some(&b':'))) {
                at += if bytes[at] == b':' { 2 } else { 1 };
            }
            let path = file.code[start..at].trim_end_matches(':');
            let head = path.split("::").next().unwrap_or_default();
            if path.contains("::") && (matches!(head, "crate" | "super" | "self") || file.children.contains(head)) {
                out.push(path.to_string());
            }
        } else {
            at += 1;
        }
    }
    out
}

/// `path` as written in the file of `module`, made absolute (from the crate root); `None` for
/// another crate's path.
fn absolute(module: &Module, path: &str, file: &File) -> Option<Module> {
    let mut segments: Vec<String> = path.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty() && s != "*").collect();
    let mut base: Module = match segments.first()?.as_str() {
        "crate" => {
            segments.remove(0);
            Vec::new()
        }
        "self" => {
            segments.remove(0);
            module.clone()
        }
        "super" => module.clone(),
        first if file.children.contains(first) => module.clone(),
        _ => return None,
    };
    while segments.first().map(String::as_str) == Some("super") {
        segments.remove(0);
        base.pop();
    }
    base.extend(segments);
    Some(base)
}

/// The file that defines what `segments` names: the longest module prefix, followed through
/// that file's re-export of the next name, if it has one.
fn resolve(files: &BTreeMap<Module, File>, segments: Module, depth: usize) -> Option<Module> {
    for n in (0..=segments.len()).rev() {
        let prefix = &segments[..n];
        let Some(file) = files.get(prefix) else { continue };
        if let (Some(next), true) = (segments.get(n), depth < 8) {
            if let Some(target) = file.reexports.get(next) {
                if let Some(mut followed) = absolute(&prefix.to_vec(), target, file) {
                    followed.extend(segments[n + 1..].iter().cloned());
                    return resolve(files, followed, depth + 1).or_else(|| Some(prefix.to_vec()));
                }
            }
        }
        return Some(prefix.to_vec());
    }
    None
}

/// The strongly connected components of the use graph (Tarjan's algorithm, iteratively).
fn components(uses: &BTreeMap<Module, BTreeMap<Module, String>>) -> Vec<Vec<Module>> {
    let nodes: Vec<&Module> = uses.keys().collect();
    let at: HashMap<&Module, usize> = nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let edges: Vec<Vec<usize>> = nodes.iter().map(|m| uses[*m].keys().filter_map(|t| at.get(t).copied()).collect()).collect();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; nodes.len()], vec![0; nodes.len()], vec![false; nodes.len()]);
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..nodes.len() {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, the next of its edges to visit)
        let mut work = vec![(root, 0)];
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if *e == 0 && index[v] == usize::MAX {
                (index[v], low[v]) = (next, next);
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*e) {
                *e += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                component.sort();
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{circles, components, expand, without_tests, workspace_crates};
    use std::collections::BTreeMap;

    /// The crates of the workspace have no import circles, but two that `cargo xtask cycles`
    /// still lists: the wgpu backend's, broken apart with its routing, and liandan-nn's
    /// `module.rs` and `summary.rs` (the `Forward` trait and the layer scopes use each other).
    #[test]
    fn the_workspace_has_no_import_circles() {
        let pending = |d: &std::path::PathBuf| d.ends_with("backend-wgpu") || d.ends_with("nn");
        for dir in workspace_crates().unwrap().into_iter().filter(|d| !pending(d)) {
            let found = circles(&dir).unwrap();
            let shown: Vec<String> = found.iter().map(|c| c.to_string()).collect();
            assert!(found.is_empty(), "{}: import circles:\n{}", dir.display(), shown.join("\n"));
        }
    }

    #[test]
    fn use_trees_expand_to_paths() {
        assert_eq!(expand("crate::{a::B, c::{d, E as F}}"), ["crate::a::B", "crate::c::d", "crate::c::E as F"]);
        assert_eq!(expand("super::x"), ["super::x"]);
    }

    #[test]
    fn test_modules_are_left_out() {
        let code = "fn a() {}\n#[cfg(test)]\nmod tests {\n    use crate::b;\n    fn t() { {} }\n}\nfn c() {}";
        assert_eq!(without_tests(code).split_whitespace().collect::<Vec<_>>(), ["fn", "a()", "{}", "fn", "c()", "{}"]);
    }

    #[test]
    fn a_circle_is_one_component() {
        let m = |s: &str| vec![s.to_string()];
        let mut uses: BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>> = BTreeMap::new();
        uses.entry(m("a")).or_default().insert(m("b"), String::new());
        uses.entry(m("b")).or_default().insert(m("c"), String::new());
        uses.entry(m("c")).or_default().insert(m("a"), String::new());
        uses.entry(m("d")).or_default().insert(m("a"), String::new());
        let big: Vec<Vec<Vec<String>>> = components(&uses).into_iter().filter(|c| c.len() > 1).collect();
        assert_eq!(big, [vec![m("a"), m("b"), m("c")]]);
    }

    /// A crate laid out on disk: a parent that re-exports its children while they use its own
    /// items is no circle, but two files that use each other are, and one that moves what they
    /// share into a third breaks it.
    #[test]
    fn a_crate_on_disk_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join("src").join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("lib.rs", "//! Root.\nmod ops;\nmod tensor;\npub use tensor::Tensor;\n");
        write("tensor.rs", "//! The type.\npub struct Tensor;\nimpl Tensor { fn f(&self) { crate::ops::check(self) } }\n");
        write("ops/mod.rs", "//! Ops.\nmod relu;\npub use relu::relu;\npub(crate) fn check(t: &crate::Tensor) {}\n");
        // \"use crate::tensor\" in a message is no use.
        write("ops/relu.rs", "//! ReLU.\nuse super::check;\npub fn relu(t: &crate::Tensor) { check(t); let _ = \"use crate::tensor;\"; }\n");
        let found = circles(dir.path()).unwrap();
        assert_eq!(found.len(), 1, "tensor and ops use each other");
        assert_eq!(found[0].files.len(), 2, "{}", found[0]);
        write("tensor.rs", "//! The type.\npub struct Tensor;\n");
        assert!(circles(dir.path()).unwrap().is_empty());
    }
}
