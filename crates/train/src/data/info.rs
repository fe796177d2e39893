//! What a model trained on the user's own data needs to read new inputs the same way: the
//! class names, and how images or table rows were prepared. Kept in the checkpoints' metadata.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The classes a model predicts and how its inputs were prepared, as [`ImageFolder`] and
/// [`CsvTable`] describe their data. `fit` writes it into `best.safetensors` and
/// `last.safetensors` (see [`DataInfo::to_metadata`]) when given in
/// [`FitConfig::metadata`](crate::trainer::FitConfig::metadata); PyTorch's `load_file` ignores
/// the metadata.
///
/// [`ImageFolder`]: super::ImageFolder
/// [`CsvTable`]: super::CsvTable
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataInfo {
    /// Class names in the order of the model's outputs.
    pub classes: Vec<String>,
    pub input: InputInfo,
}

/// How one input was prepared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputInfo {
    /// An image: decoded, resized and center-cropped to `height` x `width`, converted to
    /// `channels` (1 grayscale, 3 RGB), scaled to `[0, 1]`, then `(x - mean[c]) / std[c]`.
    Image { channels: usize, height: usize, width: usize, mean: Vec<f32>, std: Vec<f32> },
    /// A table row: the `features` columns in that order, each standardized as
    /// `(x - mean[i]) / std[i]`; `target` names the column of the labels.
    Table { target: String, features: Vec<String>, mean: Vec<f32>, std: Vec<f32> },
}

/// The metadata keys: the class names alone (a JSON list, easy for other tools to read), and
/// the whole [`DataInfo`].
const CLASSES_KEY: &str = "liandan.classes";
const DATA_KEY: &str = "liandan.data";

impl DataInfo {
    /// Safetensors metadata entries holding this description.
    pub fn to_metadata(&self) -> HashMap<String, String> {
        // Strings and finite numbers: serializing them cannot fail.
        let classes = serde_json::to_string(&self.classes).expect("strings serialize");
        let data = serde_json::to_string(self).expect("strings and numbers serialize");
        HashMap::from([(CLASSES_KEY.to_string(), classes), (DATA_KEY.to_string(), data)])
    }

    /// The description kept in a checkpoint's metadata; `None` for a checkpoint without one
    /// (trained on MNIST, say, or saved by PyTorch).
    pub fn from_metadata(metadata: &HashMap<String, String>) -> Result<Option<DataInfo>> {
        let Some(json) = metadata.get(DATA_KEY) else { return Ok(None) };
        let info: DataInfo = serde_json::from_str(json)
            .map_err(|e| Error::State { op: "DataInfo::from_metadata", detail: format!("the checkpoint's `{DATA_KEY}` metadata does not parse ({e})") })?;
        info.check()?;
        Ok(Some(info))
    }

    /// The checks that keep a hand-edited checkpoint from reaching a panic.
    fn check(&self) -> Result<()> {
        let bad = |detail: String| Err(Error::State { op: "DataInfo::from_metadata", detail });
        let (values, mean, std) = match &self.input {
            InputInfo::Image { channels, height, width, mean, std } => {
                if !matches!(channels, 1 | 3) || *height == 0 || *width == 0 {
                    return bad(format!("an image input of {channels} channels, {height}x{width}, cannot be read"));
                }
                (*channels, mean, std)
            }
            InputInfo::Table { features, mean, std, .. } => (features.len(), mean, std),
        };
        if self.classes.is_empty() || mean.len() != values || std.len() != values {
            return bad(format!("{} classes, {} means and {} stds for {values} input values do not fit together", self.classes.len(), mean.len(), std.len()));
        }
        if std.iter().any(|s| !(s.is_finite() && *s > 0.0)) || mean.iter().any(|m| !m.is_finite()) {
            return bad("the normalization holds a non-finite mean or a standard deviation that is not positive".into());
        }
        Ok(())
    }
}
