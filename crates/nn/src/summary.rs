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

use std::cell::RefCell;
use std::fmt;

use liandan_tensor::{autograd, DType, Device, Tensor};

use crate::error::Result;
use crate::module::{Forward, Module, ModuleExt, TensorKind};

/// One row of a [`Summary`]: a layer call.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// The layer's type and its call number among all rows, as torchkeras writes it: `Conv2d-1`.
    pub layer: String,
    /// How many enclosing recorded layers this call ran inside (0 for a top-level layer).
    pub depth: usize,
    /// The shape of the layer's output (the first output for layers that return several).
    pub output_shape: Vec<usize>,
    /// Parameter elements owned by the layer, its sub-layers included.
    pub params: usize,
}

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

struct Recorder {
    rows: Vec<SummaryRow>,
    depth: usize,
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// What a layer's forward returns; its summary row shows the shape of the first tensor.
pub trait LayerOutput {
    fn first_tensor(&self) -> &Tensor;
}

impl LayerOutput for Tensor {
    fn first_tensor(&self) -> &Tensor {
        self
    }
}

/// An output with states or weights beside it (`LSTM::forward_with_state`).
impl<B> LayerOutput for (Tensor, B) {
    fn first_tensor(&self) -> &Tensor {
        &self.0
    }
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
    let id = identity(module);
    let role = OPEN.with(|o| match o.borrow().last() {
        None => Role::Model,
        Some(top) if *top == id => Role::Again,
        Some(_) => Role::Layer,
    });
    match role {
        Role::Again => forward(),
        Role::Model => {
            let _open = Open::push(id);
            forward()
        }
        Role::Layer => {
            let _open = Open::push(id);
            named(module, forward)
        }
    }
}

/// Runs `forward` as a container of layers that gets no row itself (`Sequential`, as
/// torchsummary skips `nn.Sequential`): its children are rows, even when the container is the
/// model.
pub fn container<M: Module + ?Sized, R>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    let id = identity(module);
    if OPEN.with(|o| o.borrow().last() == Some(&id)) {
        return forward();
    }
    let _open = Open::push(id);
    forward()
}

enum Role {
    /// The outermost module on the thread: the model, which gets no row.
    Model,
    /// The module already running (a forward calling its own scoped method).
    Again,
    /// A module inside the model.
    Layer,
}

/// A module by address and type: two modules have different ones while both exist (a struct
/// and its first field share an address but not a type).
type Identity = (usize, &'static str);

fn identity<M: ?Sized>(module: &M) -> Identity {
    (module as *const M as *const () as usize, std::any::type_name::<M>())
}

thread_local! {
    /// The modules whose forward is running on this thread, outermost first.
    static OPEN: RefCell<Vec<Identity>> = const { RefCell::new(Vec::new()) };
}

/// Closes the module it opened when dropped, so an error or a panic leaves the stack as it was.
struct Open;

impl Open {
    fn push(id: Identity) -> Open {
        OPEN.with(|o| o.borrow_mut().push(id));
        Open
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        OPEN.with(|o| o.borrow_mut().pop());
    }
}

/// Runs `forward` under the layer's name: profiler layer, layer path, summary row.
fn named<M: Module + ?Sized, R: LayerOutput>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    // The profiler groups kernel calls by the same layers (nothing happens unless it runs).
    let _layer = liandan_tensor::profile::layer(short_type_name::<M>());
    let named = LAYERS.with(|l| {
        let mut l = l.borrow_mut();
        let path = l.as_mut()?;
        path.calls += 1;
        path.open.push(format!("{}-{}", short_type_name::<M>(), path.calls));
        Some(())
    });
    let out = scope_summary(module, forward);
    if named.is_some() {
        LAYERS.with(|l| l.borrow_mut().as_mut().map(|p| p.open.pop()));
    }
    out
}

/// The layers open on this thread, outermost first, numbered as [`summary`] numbers its rows.
struct LayerPath {
    calls: usize,
    open: Vec<String>,
}

thread_local! {
    static LAYERS: RefCell<Option<LayerPath>> = const { RefCell::new(None) };
}

/// Runs `f` keeping track of the layer that is running, for [`current_layer`] (anomaly
/// detection names the layer of a failing op with it).
pub fn with_layer_path<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(Option<LayerPath>);
    impl Drop for Reset {
        fn drop(&mut self) {
            LAYERS.with(|l| *l.borrow_mut() = self.0.take());
        }
    }
    let _reset = Reset(LAYERS.with(|l| l.borrow_mut().replace(LayerPath { calls: 0, open: Vec::new() })));
    f()
}

/// Inside [`with_layer_path`], the running layer's path, as `BasicBlock-4 > Conv2d-5` (the
/// names of `liandan summary`'s rows); `None` outside any layer or outside `with_layer_path`.
pub fn current_layer() -> Option<String> {
    LAYERS.with(|l| l.borrow().as_ref().filter(|p| !p.open.is_empty()).map(|p| p.open.join(" > ")))
}

fn scope_summary<M: Module + ?Sized, R: LayerOutput>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    let slot = RECORDER.with(|r| {
        let mut r = r.borrow_mut();
        let rec = r.as_mut()?;
        let kind = short_type_name::<M>();
        let row = SummaryRow { layer: format!("{kind}-{}", rec.rows.len() + 1), depth: rec.depth, output_shape: Vec::new(), params: module.num_parameters() };
        rec.rows.push(row);
        rec.depth += 1;
        Some(rec.rows.len() - 1)
    });
    let out = forward();
    if let Some(i) = slot {
        RECORDER.with(|r| {
            if let Some(rec) = r.borrow_mut().as_mut() {
                rec.depth -= 1;
                if let Ok(t) = &out {
                    rec.rows[i].output_shape = t.first_tensor().shape().to_vec();
                }
            }
        });
    }
    out
}

fn short_type_name<M: ?Sized>() -> &'static str {
    let full = std::any::type_name::<M>();
    // Drop generic arguments, then the module path.
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
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
    struct Reset(Vec<Identity>);
    impl Drop for Reset {
        fn drop(&mut self) {
            RECORDER.with(|r| *r.borrow_mut() = None);
            OPEN.with(|o| *o.borrow_mut() = std::mem::take(&mut self.0));
        }
    }
    // Taken from inside another forward, the summary still sees `model` as the outermost module.
    let reset = Reset(OPEN.with(|o| std::mem::take(&mut *o.borrow_mut())));
    RECORDER.with(|r| *r.borrow_mut() = Some(Recorder { rows: Vec::new(), depth: 0 }));
    autograd::no_grad(run)?;
    let rows = RECORDER.with(|r| r.borrow_mut().take().map(|rec| rec.rows).unwrap_or_default());
    drop(reset);

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
