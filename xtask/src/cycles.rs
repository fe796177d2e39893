//! `cargo xtask cycles [CRATE_DIR ..]`: import circles between the files of each crate (every
//! `crates/*` and `xtask` without arguments). A file uses another when it names an item that
//! file defines: in a `use` (a `pub use` too), or inline as `crate::..`, `super::..`,
//! `self::..` or `child::..` (a module the file declares). A path is followed through the
//! re-exports it meets to the file that defines its item. A module's use of its own
//! submodules does not count: a parent that declares and re-exports its children is the shape
//! of a Rust module, and a child may use its parent's helpers. Files that use each other,
//! directly or around a circle, are one circle, printed with the uses that close it; any circle
//! is an error. Files are read with `syn`; `#[cfg(test)]` items are left out (a test may use
//! what it tests).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use proc_macro2::TokenTree;
use syn::visit::{self, Visit};

/// A file's module path within its crate (`["autograd", "narrow"]`; the root is empty).
type Module = Vec<String>;

/// One source file: where it is, the paths it names that may lead into its crate, the modules
/// it declares, and the names it re-exports (`pub use a::B as C;` maps `C` to `a::B`).
struct File {
    path: PathBuf,
    paths: Vec<String>,
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
        for path in &file.paths {
            if let Some(target) = absolute(module, path, file).and_then(|segments| resolve(&files, segments, 0)) {
                // A module's use of its own submodules (which it declares and often re-exports)
                // is the shape of a Rust module, not a circle.
                let descendant = target.len() > module.len() && target[..module.len()] == module[..];
                if &target != module && !descendant {
                    found.entry(target).or_insert_with(|| path.clone());
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
            files.insert(module, parse(path, &text)?);
        }
    }
    Ok(files)
}

/// A file's paths into its crate, declared modules and re-exports, read with `syn`.
fn parse(path: PathBuf, text: &str) -> Result<File, String> {
    let tree = syn::parse_file(text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = Reader::default();
    reader.visit_file(&tree);
    let Reader { paths, children, reexports } = reader;
    Ok(File { path, paths, children, reexports })
}

/// Walks a file's syntax tree, test code (`#[cfg(test)]` items) left out: a test may use what
/// it tests.
#[derive(Default)]
struct Reader {
    /// Every `use` path and every inline path of two names or more.
    paths: Vec<String>,
    children: BTreeSet<String>,
    reexports: HashMap<String, String>,
}

impl<'a> Visit<'a> for Reader {
    fn visit_item(&mut self, item: &'a syn::Item) {
        let attrs = match item {
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => return visit::visit_item(self, item),
        };
        if !attrs.iter().any(is_cfg_test) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'a syn::ItemMod) {
        if item.content.is_none() {
            self.children.insert(item.ident.to_string());
        }
        visit::visit_item_mod(self, item);
    }

    fn visit_item_use(&mut self, item: &'a syn::ItemUse) {
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        for (path, alias) in expand(&item.tree) {
            if public && alias != "*" {
                self.reexports.insert(alias, path.clone());
            }
            self.paths.push(path);
        }
    }

    fn visit_path(&mut self, path: &'a syn::Path) {
        if path.segments.len() > 1 && path.leading_colon.is_none() {
            let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.paths.push(names.join("::"));
        }
        visit::visit_path(self, path);
    }

    /// A macro's arguments are tokens, not syntax: its `a::b` runs of names are its paths.
    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        let mut run: Vec<String> = Vec::new();
        let mut tokens: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
        tokens.reverse();
        let mut colons = 0;
        while let Some(token) = tokens.pop() {
            match token {
                TokenTree::Ident(name) if run.is_empty() || colons == 2 => {
                    run.push(name.to_string());
                    colons = 0;
                    continue;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() && colons < 2 => {
                    colons += 1;
                    continue;
                }
                TokenTree::Group(group) => tokens.extend(group.stream().into_iter().collect::<Vec<_>>().into_iter().rev()),
                _ => {}
            }
            if run.len() > 1 {
                self.paths.push(run.join("::"));
            }
            run.clear();
            colons = 0;
        }
        if run.len() > 1 {
            self.paths.push(run.join("::"));
        }
    }
}

/// `#[cfg(test)]`.
fn is_cfg_test(attr: &syn::Attribute) -> bool {
    attr.path().is_ident("cfg") && attr.meta.require_list().is_ok_and(|list| list.tokens.to_string() == "test")
}

/// The paths a `use` tree names, each with the name it binds: `a::{b, c::{d, E as F}}` gives
/// `a::b` (`b`), `a::c::d` (`d`) and `a::c::E` (`F`).
fn expand(tree: &syn::UseTree) -> Vec<(String, String)> {
    match tree {
        syn::UseTree::Path(p) => {
            let head = p.ident.to_string();
            expand(&p.tree).into_iter().map(|(path, alias)| (format!("{head}::{path}"), alias)).collect()
        }
        syn::UseTree::Name(n) => vec![(n.ident.to_string(), n.ident.to_string())],
        syn::UseTree::Rename(r) => vec![(r.ident.to_string(), r.rename.to_string())],
        syn::UseTree::Glob(_) => vec![("*".to_string(), "*".to_string())],
        syn::UseTree::Group(g) => g.items.iter().flat_map(expand).collect(),
    }
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
    use super::{circles, components, parse, workspace_crates};
    use std::collections::BTreeMap;

    /// No crate of the workspace has an import circle.
    #[test]
    fn the_workspace_has_no_import_circles() {
        for dir in workspace_crates().unwrap() {
            let found = circles(&dir).unwrap();
            let shown: Vec<String> = found.iter().map(|c| c.to_string()).collect();
            assert!(found.is_empty(), "{}: import circles:\n{}", dir.display(), shown.join("\n"));
        }
    }

    #[test]
    fn a_files_paths_are_its_uses_and_inline_paths_but_not_its_tests() {
        let code = "//! A.\nmod c;\npub use crate::{a::B, c::{d, E as F}};\nfn g() { super::h(); c::i(); let _ = \"crate::j\"; format!(\"{}\", crate::k::L); }\n#[cfg(test)]\nmod tests {\n    use crate::m;\n}\n";
        let file = parse("a.rs".into(), code).unwrap();
        assert_eq!(file.paths, ["crate::a::B", "crate::c::d", "crate::c::E", "super::h", "c::i", "crate::k::L"]);
        assert_eq!(file.reexports["F"], "crate::c::E");
        assert!(file.children.contains("c"));
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
