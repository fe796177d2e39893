//! Matching loaded tensors to a model's parameters and buffers by state-dict key.

use std::collections::{HashMap, HashSet};

use liandan_tensor::Tensor;

use super::StateDict;
use crate::error::{Error, Result, SizeMismatch};

/// What [`load_state_dict`] did: the keys it assigned and the ones it could not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Model keys that were assigned from the checkpoint, in model order.
    pub loaded: Vec<String>,
    /// Model keys the checkpoint lacks, in model order.
    pub missing: Vec<String>,
    /// Checkpoint keys the model lacks, in checkpoint order.
    pub unexpected: Vec<String>,
    /// Keys in both whose shapes differ, in model order; these were not assigned.
    pub mismatched: Vec<SizeMismatch>,
}

impl LoadReport {
    /// True when every model key was loaded and the checkpoint held nothing else.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.mismatched.is_empty()
    }
}

/// Loads `loaded` (a checkpoint's tensors, e.g. from [`load`](super::load)) into `expected`
/// (the model's parameters and buffers under their PyTorch state-dict names), as PyTorch's
/// `model.load_state_dict(state_dict, strict)`.
///
/// Each expected key found with the same shape is converted to the model tensor's dtype, moved
/// to its device and written with [`Tensor::assign`], so references to the model's tensors see
/// the new values. A key may appear more than once in `expected` (tied weights); each entry is
/// assigned.
///
/// With `strict`, any missing key, unexpected key or size mismatch is an
/// [`Error::StateDict`] listing all of them, and nothing is assigned: everything is checked
/// and converted before the first assignment. Without `strict`, the matching keys are
/// assigned and the rest are listed in the returned [`LoadReport`]. (PyTorch still raises on a
/// size mismatch when `strict=False`; here it is reported instead, so that a caller can, say,
/// swap a classifier head. Check [`LoadReport::mismatched`] if that matters.)
pub fn load_state_dict(expected: &[(String, Tensor)], loaded: StateDict, strict: bool) -> Result<LoadReport> {
    let mut by_key: HashMap<&str, &Tensor> = HashMap::with_capacity(loaded.len());
    for (key, t) in &loaded {
        if by_key.insert(key.as_str(), t).is_some() {
            return Err(Error::DuplicateKey { key: key.clone() });
        }
    }

    let mut report = LoadReport::default();
    let mut matched = Vec::new();
    for (key, model_t) in expected {
        match by_key.get(key.as_str()) {
            None => report.missing.push(key.clone()),
            Some(file_t) if file_t.shape() != model_t.shape() => {
                report.mismatched.push(SizeMismatch { key: key.clone(), expected: model_t.shape().to_vec(), found: file_t.shape().to_vec() })
            }
            Some(file_t) => matched.push((key, model_t, *file_t)),
        }
    }
    let wanted: HashSet<&str> = expected.iter().map(|(k, _)| k.as_str()).collect();
    report.unexpected = loaded.iter().filter(|(k, _)| !wanted.contains(k.as_str())).map(|(k, _)| k.clone()).collect();

    if strict && !report.is_complete() {
        let LoadReport { missing, unexpected, mismatched, .. } = report;
        return Err(Error::StateDict { missing, unexpected, mismatched });
    }

    // Convert everything, and check every target can be assigned, before assigning anything:
    // a failure here leaves the model as it was.
    let mut ready = Vec::with_capacity(matched.len());
    for (key, model_t, file_t) in matched {
        let context = || format!("load_state_dict: `{key}`");
        if !model_t.is_contiguous() || model_t.layout().offset() != 0 {
            return Err(Error::TensorIn {
                context: context(),
                source: Box::new(liandan_tensor::Error::BadShape {
                    op: "assign",
                    shape: model_t.shape().to_vec(),
                    detail: "the model's tensor is a view; only a tensor that owns contiguous storage can be loaded into".into(),
                }),
            });
        }
        let value = file_t
            .to_dtype(model_t.dtype())
            .and_then(|t| t.to_device(model_t.device()))
            .map_err(|source| Error::TensorIn { context: context(), source: Box::new(source) })?;
        ready.push((key, model_t, value));
    }
    for (key, model_t, value) in ready {
        model_t.assign(&value).map_err(|source| Error::TensorIn { context: format!("load_state_dict: `{key}`"), source: Box::new(source) })?;
        report.loaded.push(key.clone());
    }
    Ok(report)
}
