//! [`CsvTable`]: a CSV file with a header row as a dataset of standardized numeric features and
//! class labels, for the `mlp`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::info::{DataInfo, InputInfo};
use super::{out_of_range, rng, Dataset, Sample};
use crate::error::{Error, Result};

/// The rows as read: features row-major, labels, and each row's line in the file.
struct Rows {
    features: Vec<f32>,
    targets: Vec<i64>,
    lines: Vec<u64>,
}

/// A table from a CSV file (`pandas.read_csv` then a `TensorDataset`): a header row naming the
/// columns, then one sample per row. The target column's values are class labels (names or
/// numbers; the classes are its distinct values, sorted, numerically when they are all
/// numbers); the features are the other columns whose first row holds a number (other columns,
/// an id or a name, are left out and listed by [`CsvTable::skipped_columns`]). Samples are
/// `[F]`, each feature standardized as `(x - mean) / std`.
///
/// A row with the wrong number of fields, an empty or non-numeric feature, or an empty label is
/// an error naming its line.
///
/// ```no_run
/// use liandan_train::data::{CsvTable, DataLoader, Dataset};
/// use liandan_train::nn::Device;
/// # fn main() -> liandan_train::Result<()> {
/// // iris.csv: sepal_length,sepal_width,petal_length,petal_width,species
/// let table = CsvTable::open("iris.csv", "species")?;
/// let (train, val) = table.split(0.2, 1)?; // standardized with the training rows' statistics
/// println!("{:?} -> {:?}", train.features(), train.classes());
/// assert_eq!(train.get(0)?.shape, [4]);
/// let info = train.info(); // for FitConfig::metadata: classes, columns, mean and std
/// let loader = DataLoader::new(train, 16, &Device::cpu())?.shuffle(1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct CsvTable {
    path: PathBuf,
    rows: Arc<Rows>,
    /// The rows of this table (all, or one part of a split), in file order.
    index: Arc<[usize]>,
    target: String,
    features: Vec<String>,
    skipped: Vec<String>,
    classes: Vec<String>,
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl CsvTable {
    /// Every row of the CSV file at `path`, labelled by column `target`; not standardized
    /// (see [`CsvTable::split`] and [`CsvTable::standardized_with`]).
    pub fn open(path: impl AsRef<Path>, target: &str) -> Result<CsvTable> {
        read(path.as_ref(), target, None, None)
    }

    /// The rows of `path` read as the model described by `info` was trained: its feature
    /// columns (by name, in its order), its classes and standardization. The target column may
    /// be missing (to predict); its labels are then -1.
    pub fn open_like(path: impl AsRef<Path>, info: &DataInfo) -> Result<CsvTable> {
        let InputInfo::Table { target, features, mean, std } = &info.input else {
            return Err(Error::InvalidArgument { op: "CsvTable::open_like", what: "the model was trained on images, not on a table".into() });
        };
        read(path.as_ref(), target, Some(features), Some(&info.classes))?.standardized_with(Some((mean.clone(), std.clone())))
    }

    /// A training and a validation part, `val_fraction` of the rows held out (chosen by
    /// `seed`, at least one row in each part), both standardized with the training part's
    /// mean and standard deviation.
    pub fn split(self, val_fraction: f64, seed: u64) -> Result<(CsvTable, CsvTable)> {
        let n = self.index.len();
        if !(val_fraction > 0.0 && val_fraction < 1.0) || n < 2 {
            return Err(self.bad(format!("cannot hold out {val_fraction} of {n} rows for validation; give a fraction in (0, 1) and at least 2 rows")));
        }
        let held = ((n as f64 * val_fraction).round() as usize).clamp(1, n - 1);
        let order = rng::permutation(n, seed);
        let mut is_held = vec![false; n];
        order[..held].iter().for_each(|&i| is_held[i] = true);
        let part = |want: bool| -> Vec<usize> { self.index.iter().zip(&is_held).filter(|(_, h)| **h == want).map(|(i, _)| *i).collect() };
        let (train, val) = (part(false), part(true));
        let train = CsvTable { index: train.into(), ..self.clone() };
        let stats = train.own_mean_std();
        let val = CsvTable { index: val.into(), ..self };
        Ok((train.standardized_with(Some(stats.clone()))?, val.standardized_with(Some(stats))?))
    }

    /// The same rows standardized with `mean` and `std` (one per feature); `None` uses their
    /// own mean and standard deviation.
    pub fn standardized_with(mut self, stats: Option<(Vec<f32>, Vec<f32>)>) -> Result<CsvTable> {
        let (mean, std) = stats.unwrap_or_else(|| self.own_mean_std());
        let f = self.features.len();
        if mean.len() != f || std.len() != f || std.iter().any(|s| !(s.is_finite() && *s > 0.0)) || mean.iter().any(|m| !m.is_finite()) {
            return Err(self.bad(format!(
                "standardize with {} means and {} stds: give {f} finite means and {f} positive stds, one per feature",
                mean.len(),
                std.len()
            )));
        }
        (self.mean, self.std) = (mean, std);
        Ok(self)
    }

    /// Each feature's mean and (population) standard deviation over these rows; a constant
    /// feature gets std 1.
    fn own_mean_std(&self) -> (Vec<f32>, Vec<f32>) {
        let f = self.features.len();
        let n = self.index.len().max(1) as f64;
        let (mut sum, mut sq) = (vec![0.0f64; f], vec![0.0f64; f]);
        for &r in self.index.iter() {
            for (j, &v) in self.rows.features[r * f..(r + 1) * f].iter().enumerate() {
                sum[j] += f64::from(v);
                sq[j] += f64::from(v) * f64::from(v);
            }
        }
        (0..f)
            .map(|j| {
                let mean = sum[j] / n;
                let std = (sq[j] / n - mean * mean).max(0.0).sqrt();
                (mean as f32, if std > 1e-12 { std as f32 } else { 1.0 })
            })
            .unzip()
    }

    /// The feature columns, in the order of a sample's values.
    pub fn features(&self) -> &[String] {
        &self.features
    }

    /// Columns left out because their first row is not a number.
    pub fn skipped_columns(&self) -> &[String] {
        &self.skipped
    }

    /// The class names; label `i` is `classes()[i]`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Each feature's mean, subtracted before dividing by [`CsvTable::std`].
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    pub fn std(&self) -> &[f32] {
        &self.std
    }

    /// The line of the file that sample `index` comes from (the header is line 1).
    pub fn line(&self, index: usize) -> Option<u64> {
        self.index.get(index).map(|&r| self.rows.lines[r])
    }

    /// The classes, columns and standardization, for a checkpoint's metadata.
    pub fn info(&self) -> DataInfo {
        DataInfo {
            classes: self.classes.clone(),
            input: InputInfo::Table { target: self.target.clone(), features: self.features.clone(), mean: self.mean.clone(), std: self.std.clone() },
        }
    }

    fn bad(&self, detail: String) -> Error {
        Error::Data { path: self.path.clone(), detail }
    }
}

impl Dataset for CsvTable {
    fn len(&self) -> usize {
        self.index.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let &r = self.index.get(index).ok_or_else(|| out_of_range("CsvTable::get", index, self.index.len()))?;
        let f = self.features.len();
        let input = self.rows.features[r * f..(r + 1) * f].iter().zip(self.mean.iter().zip(&self.std)).map(|(&x, (&m, &s))| (x - m) / s).collect();
        Ok(Sample { input, shape: vec![f], target: self.rows.targets[r] })
    }
}

/// Reads `path`: the features named in `features` (else the numeric columns), labels from
/// `target` as indices into `classes` (else the sorted distinct labels).
fn read(path: &Path, target: &str, features: Option<&[String]>, classes: Option<&[String]>) -> Result<CsvTable> {
    let bad = |detail: String| Error::Data { path: path.to_path_buf(), detail };
    let at = |line: Option<u64>, what: String| bad(format!("line {}: {what}", line.map_or("?".into(), |l| l.to_string())));
    let csv_error = |e: csv::Error| match e.kind() {
        csv::ErrorKind::Io(_) => bad(format!("cannot read the file ({e})")),
        csv::ErrorKind::UnequalLengths { pos, expected_len, len } => {
            at(pos.as_ref().map(|p| p.line()), format!("{len} fields, but the header row names {expected_len} columns; every row needs a value per column"))
        }
        _ => at(e.position().map(|p| p.line()), format!("not readable as CSV ({e})")),
    };
    let mut reader = csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_path(path).map_err(csv_error)?;
    let header: Vec<String> = reader.headers().map_err(csv_error)?.iter().map(str::to_string).collect();
    if header.iter().all(|h| h.is_empty()) {
        return Err(bad("the file is empty; a table needs a header row naming its columns, then one row per sample".into()));
    }
    if header.iter().all(|h| h.parse::<f64>().is_ok()) {
        return Err(bad("the first line holds numbers, not column names; a header row is required (e.g. `height,weight,label`)".into()));
    }
    if let Some(dup) = header.iter().enumerate().find(|(i, h)| header[..*i].contains(h)).map(|(_, h)| h) {
        return Err(bad(format!("the header row names column `{dup}` twice; column names must be unique")));
    }
    let target_col = header.iter().position(|h| h == target);
    if target_col.is_none() && classes.is_none() {
        return Err(bad(format!("no column `{target}` to take the labels from; the columns are {}", header.join(", "))));
    }
    let records: Vec<csv::StringRecord> = reader.records().collect::<std::result::Result<_, _>>().map_err(csv_error)?;
    let Some(first) = records.first() else {
        return Err(bad("the file has a header row but no rows of data".into()));
    };
    let feature_cols: Vec<usize> = match features {
        Some(names) => names
            .iter()
            .map(|n| {
                header
                    .iter()
                    .position(|h| h == n)
                    .ok_or_else(|| bad(format!("no column `{n}`, which the model was trained on; the columns are {}", header.join(", "))))
            })
            .collect::<Result<_>>()?,
        None => (0..header.len()).filter(|&c| Some(c) != target_col && number(&first[c]).is_some()).collect(),
    };
    if feature_cols.is_empty() {
        return Err(bad(format!("no numeric columns besides the target `{target}` (a feature column is one whose first row holds a number)")));
    }
    let mut rows = Rows { features: Vec::with_capacity(records.len() * feature_cols.len()), targets: Vec::new(), lines: Vec::new() };
    let mut labels: Vec<&str> = Vec::with_capacity(records.len());
    for rec in &records {
        let line = rec.position().map(|p| p.line());
        for &c in &feature_cols {
            let v = &rec[c];
            let x = number(v).ok_or_else(|| match v {
                "" => at(line, format!("column `{}` is empty; fill in the missing value or drop the row", header[c])),
                _ => at(line, format!("column `{}` holds `{v}`, not a finite number", header[c])),
            })?;
            rows.features.push(x);
        }
        let label = target_col.map_or("", |c| &rec[c]);
        if target_col.is_some() && label.is_empty() {
            return Err(at(line, format!("the label (column `{target}`) is empty")));
        }
        labels.push(label);
        rows.lines.push(line.unwrap_or(0));
    }
    let classes: Vec<String> = match classes {
        Some(c) => c.to_vec(),
        None => sorted_classes(&labels),
    };
    for (label, &line) in labels.iter().zip(&rows.lines) {
        rows.targets.push(match (target_col, classes.iter().position(|c| c == label)) {
            (None, _) => -1,
            (Some(_), Some(k)) => k as i64,
            (Some(_), None) => return Err(at(Some(line), format!("label `{label}` is not one of the model's classes ({})", classes.join(", ")))),
        });
    }
    let skipped = (0..header.len()).filter(|c| Some(*c) != target_col && !feature_cols.contains(c)).map(|c| header[c].clone()).collect();
    let f = feature_cols.len();
    let n = records.len();
    Ok(CsvTable {
        path: path.to_path_buf(),
        rows: Arc::new(rows),
        index: (0..n).collect::<Vec<_>>().into(),
        target: target.to_string(),
        features: feature_cols.iter().map(|&c| header[c].clone()).collect(),
        skipped,
        classes,
        mean: vec![0.0; f],
        std: vec![1.0; f],
    })
}

/// A number that is finite as an f32, or `None`.
fn number(s: &str) -> Option<f32> {
    s.parse::<f64>().ok().map(|x| x as f32).filter(|x| x.is_finite())
}

/// The distinct labels, sorted: by value when every one is a number (`2` before `10`), else
/// by name.
fn sorted_classes(labels: &[&str]) -> Vec<String> {
    let mut classes: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
    classes.sort();
    classes.dedup();
    if classes.iter().all(|c| c.parse::<f64>().is_ok()) {
        classes.sort_by(|a, b| a.parse::<f64>().unwrap_or(0.0).total_cmp(&b.parse::<f64>().unwrap_or(0.0)));
    }
    classes
}
