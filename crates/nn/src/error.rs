//! The one error type of `liandan-nn`.
//!
//! Policy: `Result` everywhere. Everything that comes from outside the program (a checkpoint
//! file, its header, its tensor names and dtypes) is checked and answered with an [`Error`]
//! whose message names the file, says what is wrong and what to do; no byte of a file can
//! make this crate panic. Panics are kept for broken internal invariants only. Tensor errors
//! are wrapped, not re-worded: liandan-tensor's messages already name the op and the shapes.

use std::path::PathBuf;

/// Errors raised by modules and by checkpoint I/O.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a file operation; `action` says which one.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io { path: PathBuf, action: &'static str, source: std::io::Error },

    /// The file is not a well-formed safetensors file: truncated, corrupt, or something else
    /// altogether. `detail` says what was found and what to check.
    #[error("{}: not a valid safetensors file: {detail}", path.display())]
    Format { path: PathBuf, detail: String },

    /// A tensor in the file has a dtype liandan cannot hold (FP8, FP4, complex, u64, ...).
    #[error(
        "{}: tensor `{name}` has dtype {dtype}, which liandan cannot load (it holds F32, F16, BF16, \
         F64, I64, U8 and BOOL, and widens I8, I16, I32, U16 and U32 to I64); convert it before \
         saving, e.g. `t.to(torch.float32)` in PyTorch",
        path.display()
    )]
    UnsupportedDType { path: PathBuf, name: String, dtype: String },

    /// `save` was asked for something no safetensors file can hold (a duplicate or reserved
    /// name, a header over the format's size limit).
    #[error("{}: cannot save: {detail}", path.display())]
    InvalidSave { path: PathBuf, detail: String },

    /// The checkpoint's tensors do not match the model's (strict loading). Nothing was
    /// assigned. The message lists every missing key, unexpected key and size mismatch.
    #[error("{}", state_dict_message(missing, unexpected, mismatched))]
    StateDict { missing: Vec<String>, unexpected: Vec<String>, mismatched: Vec<SizeMismatch> },

    /// The same key appears twice among the tensors handed to `load_state_dict`, so which one
    /// to load is ambiguous.
    #[error("load_state_dict: key `{key}` appears more than once among the loaded tensors; each key must be unique")]
    DuplicateKey { key: String },

    /// `zoo::build` was asked for a model the zoo does not have.
    #[error("the model zoo has no model named `{name}`; the models are: {known}")]
    UnknownModel { name: String, known: String },

    /// A zoo model was asked for samples of a shape it cannot take.
    #[error("`{model}` takes samples of shape {expected:?}, not {found:?}")]
    InputShape { model: String, expected: Vec<usize>, found: Vec<usize> },

    /// `zoo::build_with` was asked for sizes the model cannot take (no classes, input
    /// features for a model whose input is an image, a class count for the VAE).
    #[error("{model}: {detail}")]
    ZooConfig { model: String, detail: String },

    /// A zoo model's loss was asked for without the targets it is trained on.
    #[error("{model} loss: `{model}` is trained on {what}; pass them as `y`")]
    MissingTargets { model: String, what: &'static str },

    /// A model could not be exported (an op without an ONNX mapping, a forward pass that
    /// draws random numbers, a bad option); `detail` names the op, its layer and what to do.
    #[error("ONNX export: {0}")]
    Export(String),

    /// A tensor operation failed while handling one named tensor (`context` names it).
    #[error("{context}: {source}")]
    TensorIn { context: String, source: Box<liandan_tensor::Error> },

    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] liandan_tensor::Error),

    /// An error of a crate built on this one, carried unchanged (its message, its `source`)
    /// so that `?` works in a function returning this crate's [`Result`]: liandan-train
    /// converts its errors into this, so `fn main() -> liandan_nn::Result<()>` may call an
    /// optimizer. `downcast_ref::<liandan_train::Error>()` gets the original back.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// A key whose tensor has one shape in the model and another in the checkpoint: a detail of
/// [`Error::StateDict`] and of `checkpoint::LoadReport`, so it lives here, below both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeMismatch {
    pub key: String,
    /// The shape in the model.
    pub expected: Vec<usize>,
    /// The shape in the checkpoint.
    pub found: Vec<usize>,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// PyTorch's wording, so that someone who knows `load_state_dict`'s error reads this one at a
/// glance; groups that are empty are left out, as PyTorch does.
fn state_dict_message(missing: &[String], unexpected: &[String], mismatched: &[SizeMismatch]) -> String {
    let quoted = |keys: &[String]| keys.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
    let mut msg = String::from("Error(s) in loading state_dict:");
    if !missing.is_empty() {
        msg += &format!("\n\tMissing key(s) in state_dict: {}.", quoted(missing));
    }
    if !unexpected.is_empty() {
        msg += &format!("\n\tUnexpected key(s) in state_dict: {}.", quoted(unexpected));
    }
    for m in mismatched {
        msg += &format!(
            "\n\tsize mismatch for {}: copying a param with shape {:?} from checkpoint, the shape in current model is {:?}.",
            m.key, m.found, m.expected
        );
    }
    msg += "\nNothing was loaded. Load with strict = false to take the tensors that match and get this list back as a report.";
    msg
}
