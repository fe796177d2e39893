//! The autotune's memory: the cut chosen for each shape, per cache directory, and the file
//! per adapter that keeps them between processes (the format is in the parent's docs).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use liandan_tensor::{ConvGeometry, DType};

use crate::plan::{Load, Pass};

/// The header's first words; the format's version follows.
const HEADER: &str = "# liandan autotune 1";

/// A product the autotune cuts, as its cut is looked up on every call: the operands' sizes
/// and loaders of a matmul, the geometry and the largest product of a convolution pass. Its
/// `Display` is its line's key in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    Matmul { dtype: DType, batch: usize, m: usize, k: usize, n: usize, a: Load, b: Load },
    Conv { pass: Pass, dtype: DType, geom: ConvGeometry, n: usize, k: usize },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Matmul { dtype, batch, m, k, n, a, b } => write!(f, "matmul {dtype} b={batch} m={m} k={k} n={n} a={a:?} b={b:?}"),
            Shape::Conv { pass, dtype, geom, n, k } => write!(f, "conv {pass:?} {dtype} {geom:?} n={n} k={k}"),
        }
    }
}

/// One shape's measured cut, and the rule's with its time (what the choice gained).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Choice {
    pub(super) tile: usize,
    pub(super) splits: usize,
    pub(super) micros: f64,
    pub(super) rule: Option<(usize, usize, f64)>,
}

/// One adapter's measured cuts, per cache directory (the empty path: in memory only).
#[derive(Default)]
pub(crate) struct Table {
    pub(super) dirs: HashMap<PathBuf, Cuts>,
    /// A save failed once (reported once; later saves are still tried, silently).
    pub(super) warned: bool,
}

/// The cuts of one directory: its file's lines, read once, and the cut each shape met so far
/// takes (so that a call finds its shape without formatting a key).
#[derive(Default)]
pub(super) struct Cuts {
    pub(super) lines: HashMap<String, Choice>,
    pub(super) chosen: HashMap<Shape, (usize, usize)>,
}

/// This adapter's file in `dir`: its name and a hash of its full identity, so that two GPUs
/// (or two drivers) keep apart.
pub(super) fn file_in(dir: &Path, identity: &str) -> PathBuf {
    let slug: String = identity.chars().take(40).map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    // FNV-1a: a stable hash (std's differs between Rust releases), here only to name a file.
    let hash = identity.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    dir.join(format!("{}-{hash:016x}.txt", slug.trim_matches('-')))
}

fn header(identity: &str) -> String {
    format!("{HEADER} {}\t{identity}", env!("CARGO_PKG_VERSION"))
}

/// The cuts a file holds, or none where it is missing, from another format, build or adapter,
/// or unreadable (it is measured again and rewritten).
pub(super) fn read(path: &Path, identity: &str) -> HashMap<String, Choice> {
    let Ok(text) = std::fs::read_to_string(path) else { return HashMap::new() };
    let mut lines = text.lines();
    if lines.next() != Some(header(identity).as_str()) {
        return HashMap::new();
    }
    let mut cuts = HashMap::new();
    for line in lines {
        let Some((key, value)) = line.split_once('\t') else { return HashMap::new() };
        let words: Vec<&str> = value.split(' ').collect();
        let cut = |w: &[&str]| -> Option<(usize, usize, f64)> { Some((w[0].parse().ok()?, w[1].parse().ok()?, w[2].parse().ok()?)) };
        let parsed = match words.len() {
            3 => cut(&words).map(|(tile, splits, micros)| Choice { tile, splits, micros, rule: None }),
            6 => cut(&words).zip(cut(&words[3..])).map(|((tile, splits, micros), rule)| Choice { tile, splits, micros, rule: Some(rule) }),
            _ => None,
        };
        match parsed {
            Some(c) if c.splits >= 1 => cuts.insert(key.to_string(), c),
            _ => return HashMap::new(),
        };
    }
    cuts
}

/// Writes `cuts` to `path` atomically: a temporary file beside it, synced, then renamed.
pub(super) fn write(path: &Path, identity: &str, cuts: &HashMap<String, Choice>) -> std::io::Result<()> {
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir)?;
    let mut keys: Vec<&String> = cuts.keys().collect();
    keys.sort();
    let mut text = header(identity) + "\n";
    for key in keys {
        let c = cuts[key];
        text += &format!("{key}\t{} {} {:.1}", c.tile, c.splits, c.micros);
        if let Some((tile, splits, micros)) = c.rule {
            text += &format!(" {tile} {splits} {micros:.1}");
        }
        text += "\n";
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
