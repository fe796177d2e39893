//! A model summary in the style of `torchkeras.summary` / `torchsummary`: every layer the
//! forward pass runs, in call order, with its output shape and its number of parameters.
//!
//! It works by running the model once on zeros of the given input shape while a per-thread
//! recorder is switched on. [`Forward::forward`] runs every module's forward in [`scope`], so
//! every layer and block, built in or your own, is a row with its layers nested beneath, as
//! torchsummary's hooks record every module. As there, the model itself and `Sequential`
//! containers get no row of their own.
//!
//! The same scopes name the running layer for the profiler (`liandan_tensor::profile::layer`)
//! and for anomaly reports ([`current_layer`]); outside a summary, profile or anomaly trace a
//! scope costs a few thread-local reads.
//!
//! ```
//! use liandan_nn::layers::{Conv2dConfig, Flatten, LinearConfig, ReLU, Sequential};
//! use liandan_nn::{summary, Device};
//! # fn main() -> liandan_nn::Result<()> {
//! let dev = Device::cpu();
//! let model = Sequential::new()
//!     .push(Conv2dConfig::new(1, 4, 3).init(&dev)?)
//!     .push(ReLU)
//!     .push(Flatten::default())
//!     .push(LinearConfig::new(4 * 26 * 26, 10).init(&dev)?);
//! let s = summary::summary(&model, &[2, 1, 28, 28], &dev)?;
//! assert_eq!(s.rows[0].layer, "Conv2d-1");
//! assert_eq!(s.rows[3].output_shape, vec![2, 10]);
//! assert_eq!(s.total_params, 40 + 27_050);
//! println!("{s}");
//! # Ok(())
//! # }
//! ```

use std::fmt;

use liandan_tensor::{autograd, DType, Device, Tensor};

use crate::error::Result;
use crate::layer_scope;
pub use crate::layer_scope::{current_layer, with_layer_path, LayerOutput, SummaryRow};
use crate::module::{Forward, Module, ModuleExt, TensorKind};

/// What [`summary`] returns; `Display` prints the table.
#[derive(Clone, Debug)]
pub struct Summary {
    pub input_shape: Vec<usize>,
    pub rows: Vec<SummaryRow>,
    /// Parameter elements of the whole model (each counted once, however the rows nest).
    pub total_params: usize,
    /// Parameter elements that require grad.
    pub trainable_params: usize,
    /// Bytes of parameters and buffers.
    pub param_bytes: usize,
    /// Bytes of the recorded layer outputs, in F32 (what a forward pass keeps for backward).
    pub activation_bytes: usize,
}

/// Runs `forward` as the layer `module`: a row in a [`summary`] being taken on this thread, a
/// layer in the profiler's per-layer table, a segment of [`current_layer`]. The name is the
/// last segment of `M`'s type name (`Conv2d`, `BasicBlock`).
///
/// [`Forward::forward`] calls it for every module; call it yourself only around a forward
/// that takes other arguments (`LSTM::forward_with_state` does). Which calls get a row, as
/// torchsummary: none for the outermost module on the thread (the model itself), and one
/// for every module running inside it. A module's forward calling another scoped method of
/// the same module (`forward` calling `forward_with_state`) is one call, one row.
pub fn scope<M: Module + ?Sized, R: LayerOutput>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    layer_scope::scope(module, || module.num_parameters(), forward)
}

/// Runs `forward` as a container of layers that gets no row itself (`Sequential`, as
/// torchsummary skips `nn.Sequential`): its children are rows, even when the container is the
/// model.
pub fn container<M: Module + ?Sized, R>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    layer_scope::container(module, forward)
}

/// Runs `model` once on zeros of `input_shape` (F32, on `device`, without building a graph) and
/// returns its layers in call order with output shapes and parameter counts.
pub fn summary<M: Module + Forward + ?Sized>(model: &M, input_shape: &[usize], device: &Device) -> Result<Summary> {
    let x = Tensor::zeros(input_shape, DType::F32, device)?;
    summary_with(model, input_shape, || model.forward(&x))
}

/// [`summary`] for a model whose forward takes something else than one F32 tensor (token ids,
/// several inputs): `run` calls the forward pass; `input_shape` is only printed. The model
/// gets no row when `run` goes through a scoped method of it ([`Forward::forward`], or a
/// forward of its own wrapped in [`scope`]); otherwise its first layer is taken for the model.
pub fn summary_with<M: Module + ?Sized>(model: &M, input_shape: &[usize], run: impl FnOnce() -> Result<Tensor>) -> Result<Summary> {
    let rows = layer_scope::record(|| autograd::no_grad(run).map(drop))?;

    let (mut total, mut trainable, mut param_bytes) = (0, 0, 0);
    model.visit("", &mut |_, t, kind| {
        param_bytes += t.numel() * t.dtype().size_in_bytes();
        if kind == TensorKind::Parameter {
            total += t.numel();
            if t.requires_grad() {
                trainable += t.numel();
            }
        }
    });
    let activation_bytes = rows.iter().map(|r| r.output_shape.iter().product::<usize>() * 4).sum();
    Ok(Summary { input_shape: input_shape.to_vec(), rows, total_params: total, trainable_params: trainable, param_bytes, activation_bytes })
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = |s: &[usize]| format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
        let names: Vec<String> = self.rows.iter().map(|r| format!("{}{}", "  ".repeat(r.depth), r.layer)).collect();
        let shapes: Vec<String> = self.rows.iter().map(|r| shape(&r.output_shape)).collect();
        let params: Vec<String> = self.rows.iter().map(|r| thousands(r.params)).collect();
        let w0 = names.iter().map(String::len).chain([12]).max().unwrap_or(12) + 2;
        let w1 = shapes.iter().map(String::len).chain([12]).max().unwrap_or(12) + 2;
        let w2 = params.iter().map(String::len).chain([7]).max().unwrap_or(7) + 2;
        let width = w0 + w1 + w2;
        let mb = |b: usize| b as f64 / (1024.0 * 1024.0);
        writeln!(f, "{}", "-".repeat(width))?;
        writeln!(f, "{:<w0$}{:>w1$}{:>w2$}", "Layer (type)", "Output Shape", "Param #")?;
        writeln!(f, "{}", "=".repeat(width))?;
        for ((n, s), p) in names.iter().zip(&shapes).zip(&params) {
            writeln!(f, "{n:<w0$}{s:>w1$}{p:>w2$}")?;
        }
        writeln!(f, "{}", "=".repeat(width))?;
        writeln!(f, "Total params: {}", thousands(self.total_params))?;
        writeln!(f, "Trainable params: {}", thousands(self.trainable_params))?;
        writeln!(f, "Non-trainable params: {}", thousands(self.total_params - self.trainable_params))?;
        writeln!(f, "{}", "-".repeat(width))?;
        writeln!(f, "Input size (MB): {:.6}", mb(self.input_shape.iter().product::<usize>() * 4))?;
        writeln!(f, "Forward/backward pass size (MB): {:.6}", mb(self.activation_bytes))?;
        writeln!(f, "Params size (MB): {:.6}", mb(self.param_bytes))?;
        writeln!(f, "{}", "-".repeat(width))
    }
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(11_173_962), "11,173,962");
    }
}
