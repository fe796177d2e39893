//! The history of a run: one row per epoch (`epoch`, `lr`, `loss`, metrics, `val_` columns,
//! `time_s`), written as CSV and JSON, read back for `liandan plot`.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::config::Mode;
use crate::error::{Error, Result};

/// Per-epoch values under column names, as torchkeras' `dfhistory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Column names in order; the first is `epoch`.
    pub columns: Vec<String>,
    /// One row per epoch, a value per column (NaN where an epoch has no value).
    pub rows: Vec<Vec<f64>>,
}

impl History {
    /// Appends an epoch; columns it names that are new are added (earlier rows get NaN).
    pub fn push(&mut self, row: &[(String, f64)]) {
        for (name, _) in row {
            if !self.columns.contains(name) {
                self.columns.push(name.clone());
                for r in &mut self.rows {
                    r.push(f64::NAN);
                }
            }
        }
        let mut values = vec![f64::NAN; self.columns.len()];
        for (name, v) in row {
            let i = self.columns.iter().position(|c| c == name).expect("every column was added above");
            values[i] = *v;
        }
        self.rows.push(values);
    }

    /// Number of epochs recorded.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every epoch's value of `column`, or `None` when there is no such column.
    pub fn column(&self, column: &str) -> Option<Vec<f64>> {
        let i = self.columns.iter().position(|c| c == column)?;
        Some(self.rows.iter().map(|r| r[i]).collect())
    }

    /// The last epoch's value of `column`.
    pub fn last(&self, column: &str) -> Option<f64> {
        self.column(column)?.last().copied()
    }

    /// The best value of `column` under `mode` and the (1-based) epoch it came from.
    pub fn best(&self, column: &str, mode: Mode) -> Option<(usize, f64)> {
        let values = self.column(column)?;
        let mut best: Option<(usize, f64)> = None;
        for (i, v) in values.into_iter().enumerate() {
            if best.is_none_or(|(_, b)| mode.improves(v, b)) && !v.is_nan() {
                best = Some((i + 1, v));
            }
        }
        best
    }

    /// The history as CSV: a header line, then a line per epoch.
    pub fn to_csv(&self) -> String {
        let mut out = self.columns.join(",");
        out.push('\n');
        for r in &self.rows {
            out.push_str(&r.iter().map(|v| format_value(*v)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }

    /// Writes `history.csv` and `history.json` into `dir`, each atomically.
    pub fn save(&self, dir: &Path) -> Result<(PathBuf, PathBuf)> {
        let csv = dir.join("history.csv");
        let json = dir.join("history.json");
        write_atomic(&csv, self.to_csv().as_bytes())?;
        let text = serde_json::to_string_pretty(&JsonHistory::from(self)).expect("a history serializes");
        write_atomic(&json, text.as_bytes())?;
        Ok((csv, json))
    }

    /// Reads a history written by [`History::save`], from its `.json` or its `.csv` file.
    pub fn load(path: &Path) -> Result<History> {
        let text = fs::read_to_string(path).map_err(|source| Error::Io { path: path.into(), action: "read the history", source })?;
        let bad = |detail: String| Error::State {
            op: "history",
            detail: format!("{}: {detail}; give the history.json or history.csv that training wrote", path.display()),
        };
        let history = if path.extension().is_some_and(|e| e == "json") {
            let h: JsonHistory = serde_json::from_str(&text).map_err(|e| bad(format!("not a history ({e})")))?;
            History { columns: h.columns, rows: h.rows.into_iter().map(|r| r.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect()).collect() }
        } else {
            let mut lines = text.lines().filter(|l| !l.trim().is_empty());
            let columns: Vec<String> = lines.next().ok_or_else(|| bad("the file is empty".into()))?.split(',').map(|c| c.trim().to_string()).collect();
            let mut rows = Vec::new();
            for (i, line) in lines.enumerate() {
                let row = line
                    .split(',')
                    .map(|v| v.trim().parse::<f64>())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| bad(format!("line {}: {e}", i + 2)))?;
                rows.push(row);
            }
            History { columns, rows }
        };
        if history.columns.first().map(String::as_str) != Some("epoch") {
            return Err(bad("the first column is not `epoch`".into()));
        }
        if let Some(i) = history.rows.iter().position(|r| r.len() != history.columns.len()) {
            return Err(bad(format!("row {} has {} values for {} columns", i + 1, history.rows[i].len(), history.columns.len())));
        }
        Ok(history)
    }
}

/// The JSON form: NaN is not JSON, so missing values are `null`.
#[derive(Serialize, Deserialize)]
struct JsonHistory {
    columns: Vec<String>,
    rows: Vec<Vec<Option<f64>>>,
}

impl From<&History> for JsonHistory {
    fn from(h: &History) -> Self {
        JsonHistory { columns: h.columns.clone(), rows: h.rows.iter().map(|r| r.iter().map(|v| v.is_finite().then_some(*v)).collect()).collect() }
    }
}

/// Whole numbers without a fraction (epochs), the rest as Rust prints them (shortest form that
/// reads back the same).
fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `x` to `digits` significant digits, so that it prints as people write it: a learning rate
/// decayed by 0.7 twice is `0.49`, not `0.48999999999999994`. Non-finite values pass through.
pub fn round_significant(x: f64, digits: usize) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    // Through the decimal text: the parse gives the f64 nearest the rounded decimal, whose
    // shortest form is that decimal (exponent arithmetic would leave 0.49000000000000005).
    format!("{:.*e}", digits.saturating_sub(1), x).parse().unwrap_or(x)
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsynced, renamed over it.
/// (Checkpoints go through `liandan_nn::checkpoint::save`, which does the same.)
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |action: &'static str| move |source: std::io::Error| Error::Io { path: path.to_path_buf(), action, source };
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Short and unique per process and call: a name built from the target's would pass the
    // 255-byte limit for a legal long name, and two writers in one process must not share one.
    let temp = path.with_file_name(format!(".tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut file = File::create(&temp).map_err(io("create a temporary file beside it (does the directory exist, and may we write there?)"))?;
        file.write_all(bytes).map_err(io("write"))?;
        file.sync_all().map_err(io("sync to disk"))?;
        drop(file);
        fs::rename(&temp, path).map_err(io("rename the temporary file over it"))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}
