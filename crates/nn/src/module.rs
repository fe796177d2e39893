//! The module system: [`Module`] walks a layer's tensors under their PyTorch state-dict names,
//! [`Forward`] applies it, and [`ModuleExt`] builds everything else (parameter lists, device
//! and dtype moves, train/eval, checkpoints) on that one walk.
//!
//! Parameters are found by walking the struct, not by registering them: each layer's
//! [`Module::visit`] names its own tensors and hands a longer prefix to its children, so the
//! names come out as PyTorch's (`conv1.weight`, `layers.3.b1.running_mean`) and a checkpoint
//! moves between liandan and PyTorch unchanged.
//!
//! Prefixes: the root is visited with `""`; a child named `c` of a module visited with prefix
//! `p` is visited with `join(p, "c")`, which is `c` when `p` is empty and `p.c` otherwise.
//!
//! A layer or a model of your own is a struct plus one [`impl_module!`](crate::impl_module)
//! call listing its fields in PyTorch's order (the order of the `__init__` assignments), and a
//! [`Forward::forward_impl`]. Callers use [`Forward::forward`], which runs `forward_impl` as a
//! named layer: its row in [`summary`](crate::summary), its group in the profiler and its name
//! in anomaly reports come with it.
//!
//! ```
//! use liandan_nn::layers::{Linear, LinearConfig};
//! use liandan_nn::{impl_module, Device, Forward, ModuleExt, Result, Tensor};
//!
//! struct Mlp { fc1: Linear, fc2: Linear }
//!
//! impl_module!(Mlp { modules: [fc1, fc2] });
//!
//! impl Forward for Mlp {
//!     fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
//!         self.fc2.forward(&self.fc1.forward(x)?.relu()?)
//!     }
//! }
//!
//! # fn main() -> Result<()> {
//! let dev = Device::cpu();
//! let mlp = Mlp { fc1: LinearConfig::new(4, 8).init(&dev)?, fc2: LinearConfig::new(8, 2).init(&dev)? };
//! let names: Vec<String> = mlp.state_dict().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
//! assert_eq!(mlp.forward(&Tensor::ones(&[3, 4], liandan_nn::DType::F32, &dev)?)?.shape(), [3, 2]);
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use liandan_tensor::{DType, Device, Tensor};

use crate::checkpoint::{self, LoadReport};
use crate::error::Result;

/// Parameters (trained) or buffers (state such as running statistics), as PyTorch names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A trained tensor: it requires grad and an optimizer updates it.
    Parameter,
    /// State that is saved with the model but not trained (BatchNorm's running statistics).
    Buffer,
}

/// A layer or a model: something that owns named tensors. Written by [`impl_module!`](crate::impl_module).
pub trait Module {
    /// Calls `f` for every parameter and buffer, depth first, with its state-dict name
    /// (`prefix` + field name, dot-separated: `conv1.weight`, `layers.3.b1.running_mean`).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind));

    /// Lets `f` replace every parameter and buffer (moving devices, converting dtypes), in the
    /// order of [`Module::visit`]. Stops at the first error.
    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()>;

    /// Train or eval mode (dropout, batch norm); containers pass it to their children.
    /// Layers without such behaviour ignore it.
    fn set_training(&mut self, training: bool);
}

/// A module applied to one tensor.
///
/// Implement [`Forward::forward_impl`]; call [`Forward::forward`]. The split is what makes a
/// layer show up by itself in summaries, profiles and anomaly reports: `forward` runs
/// `forward_impl` inside [`summary::scope`](crate::summary::scope), as PyTorch's
/// `module(x)` runs `forward` inside its hooks.
pub trait Forward: Module {
    /// The layer's computation on `x`.
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor>;

    /// Applies the module to `x` as a named layer (see [`summary::scope`](crate::summary::scope)).
    /// Wrappers that are not layers of their own (`Box`, `Sequential`) override it.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::layer_scope::scope(self, || self.num_parameters(), || self.forward_impl(x))
    }

    /// `self.forward(x)?.relu()`: the same values and gradients. Layers whose kernels can
    /// apply the ReLU as they store their output ([`Conv2d`](crate::layers::Conv2d),
    /// [`BatchNorm`](crate::layers::BatchNorm)) run it as one op, a pass over the output fewer
    /// each way.
    fn forward_relu(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward(x)?.relu()?)
    }
}

/// What [`Sequential`](crate::layers::Sequential) holds: any module with a one-tensor
/// forward that can cross threads. Implemented for every such type.
pub trait Layer: Module + Forward + Send + Sync {}

impl<T: Module + Forward + Send + Sync> Layer for T {}

/// What a tensor field listed in `impl_module!`'s `params` or `buffers` can be: a [`Tensor`],
/// or an `Option` of one (absent: no key, as PyTorch's `register_parameter(name, None)`).
pub trait TensorField {
    /// Calls `f` for the field's tensors: the field `name` of a module visited with `prefix`.
    fn visit_field(&self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &Tensor, TensorKind));

    /// The `visit_mut` twin of [`TensorField::visit_field`].
    fn visit_field_mut(&mut self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()>;
}

impl TensorField for Tensor {
    fn visit_field(&self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f(&join(prefix, name), self, kind)
    }

    fn visit_field_mut(&mut self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        f(&join(prefix, name), self, kind)
    }
}

impl<T: TensorField> TensorField for Option<T> {
    fn visit_field(&self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        if let Some(t) = self {
            t.visit_field(prefix, name, kind, f)
        }
    }

    fn visit_field_mut(&mut self, prefix: &str, name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        match self {
            Some(t) => t.visit_field_mut(prefix, name, kind, f),
            None => Ok(()),
        }
    }
}

/// A list of modules, named by index as `torch.nn.ModuleList`: `blocks.0.weight`, `blocks.1.weight`.
impl<M: Module> Module for Vec<M> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        for (i, m) in self.iter().enumerate() {
            m.visit(&join(prefix, &i.to_string()), f);
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_mut(&join(prefix, &i.to_string()), f)?;
        }
        Ok(())
    }

    fn set_training(&mut self, training: bool) {
        for m in self {
            m.set_training(training);
        }
    }
}

/// An optional child (`TransformerEncoder`'s final `norm`): absent, it has no keys.
impl<M: Module> Module for Option<M> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        if let Some(m) = self {
            m.visit(prefix, f)
        }
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        match self {
            Some(m) => m.visit_mut(prefix, f),
            None => Ok(()),
        }
    }

    fn set_training(&mut self, training: bool) {
        if let Some(m) = self {
            m.set_training(training)
        }
    }
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        (**self).visit(prefix, f)
    }

    fn visit_mut(&mut self, prefix: &str, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        (**self).visit_mut(prefix, f)
    }

    fn set_training(&mut self, training: bool) {
        (**self).set_training(training)
    }
}

/// The box is no layer of its own: what it holds is the layer summaries and profiles see.
impl<M: Forward + ?Sized> Forward for Box<M> {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward_impl(x)
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }

    fn forward_relu(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward_relu(x)
    }
}

/// The state-dict name of child or field `name` under `prefix` (see the module docs).
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// What every [`Module`] can do, built on [`Module::visit`] and [`Module::visit_mut`].
pub trait ModuleExt: Module {
    /// The parameters (not buffers) under their state-dict names, in field order
    /// (`model.named_parameters()`).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit("", &mut |name, t, kind| {
            if kind == TensorKind::Parameter {
                out.push((name.to_string(), t.clone()));
            }
        });
        out
    }

    /// The parameters alone, in field order (`model.parameters()`), e.g. for an optimizer.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters().into_iter().map(|(_, t)| t).collect()
    }

    /// Parameters and buffers under their state-dict names, in PyTorch's order (field order),
    /// ready for [`checkpoint::save`]. The tensors are the model's own (shared storage), so
    /// [`checkpoint::load_state_dict`] writes through them into the model.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        self.visit("", &mut |name, t, _| out.push((name.to_string(), t.clone())));
        out
    }

    /// The number of parameter elements (buffers not counted), as
    /// `sum(p.numel() for p in model.parameters())`.
    fn num_parameters(&self) -> usize {
        let mut n = 0;
        self.visit("", &mut |_, t, kind| {
            if kind == TensorKind::Parameter {
                n += t.numel();
            }
        });
        n
    }

    /// Moves every parameter and buffer to `device` in place ([`Tensor::move_to_`]): the model
    /// keeps the same tensors, with their gradients, so handles taken before the move (an
    /// optimizer's parameter list) see the moved model, as after `model.to(device)` in PyTorch.
    fn to_device(&mut self, device: &Device) -> Result<()> {
        self.visit_mut("", &mut |_, t, _| {
            if t.is_leaf() {
                t.move_to_(device)?;
            } else if t.device() != device {
                *t = relabel(t, t.to_device(device)?)?;
            }
            Ok(())
        })
    }

    /// Converts every floating-point parameter and buffer to the float dtype `dtype` in place
    /// ([`Tensor::cast_`], keeping identity as [`ModuleExt::to_device`] does); integer tensors
    /// (BatchNorm's `num_batches_tracked`) keep theirs, as PyTorch's `model.to(dtype)`.
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        if !dtype.is_float() {
            return Err(liandan_tensor::Error::BadDType { op: "to_dtype", got: dtype, detail: "modules convert to floating-point dtypes only".into() }.into());
        }
        self.visit_mut("", &mut |_, t, _| {
            if !t.dtype().is_float() || t.dtype() == dtype {
                return Ok(());
            }
            if t.is_leaf() {
                t.cast_(dtype)?;
            } else {
                *t = relabel(t, t.to_dtype(dtype)?)?;
            }
            Ok(())
        })
    }

    /// Training mode (`model.train()`): dropout drops, batch norm uses and updates batch
    /// statistics.
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode (`model.eval()`): dropout is the identity, batch norm uses its running
    /// statistics.
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Clears every parameter's gradient (`model.zero_grad()`, which sets them to `None`).
    fn zero_grad(&self) {
        self.visit("", &mut |_, t, _| t.set_grad(None));
    }

    /// Writes [`ModuleExt::state_dict`] to a safetensors file PyTorch reads as its own.
    fn save(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        checkpoint::save(path, &self.state_dict(), None)
    }

    /// Loads a safetensors file into this model's tensors by state-dict name
    /// (`model.load_state_dict(load_file(path), strict)`); see [`checkpoint::load_state_dict`]
    /// for what `strict` does. Tensors are read onto the device of the model's first tensor.
    fn load(&mut self, path: impl AsRef<Path>, strict: bool) -> Result<LoadReport>
    where
        Self: Sized,
    {
        let expected = self.state_dict();
        let device = expected.first().map(|(_, t)| t.device().clone()).unwrap_or_else(Device::cpu);
        checkpoint::load_state_dict(&expected, checkpoint::load(path, &device)?, strict)
    }
}

impl<M: Module + ?Sized> ModuleExt for M {}

/// `new` as a fresh leaf taking `old`'s place: cut from the graph, requiring grad if `old` did.
/// Only for a module tensor computed by an op (a leaf moves in place and keeps its identity).
fn relabel(old: &Tensor, new: Tensor) -> Result<Tensor> {
    let new = new.detach();
    if old.requires_grad() {
        new.set_requires_grad(true)?;
    }
    Ok(new)
}

/// Implements [`Module`] for a struct by listing its fields in PyTorch's order, in up to four
/// sections, each optional, in this order:
///
/// - `params: [..]`: tensors it owns directly (its `nn.Parameter`s), each a `Tensor` or an
///   `Option<Tensor>` (any [`TensorField`]);
/// - `buffers: [..]`: state saved but not trained (`running_mean`), the same types;
/// - `modules: [..]`: child modules, each visited under its field name: layers, `Vec`s of
///   them (`layers.0.*`, as `nn.ModuleList`), `Option`s of them, `Sequential`s;
/// - `mode: field`: a `bool` field that [`Module::set_training`] sets (dropout, batch norm).
///
/// `set_training` reaches every child. The order is PyTorch's state-dict order too: a module's
/// own parameters, then its own buffers, then its children. Two short forms: `Type { a, b }`
/// lists children only, and `Type { inner: field }` makes a wrapper whose one field's tensors
/// keep their own names (a newtype around a `Sequential`). Generic types take their
/// parameters first: `impl_module!(impl[const D: usize] BatchNorm<D> { .. })`.
///
/// ```
/// use liandan_nn::layers::{BatchNorm1d, BatchNorm1dConfig, Dropout, Linear, LinearConfig};
/// use liandan_nn::{impl_module, DType, Device, ModuleExt, Tensor};
///
/// struct Head { scale: Tensor, shift: Option<Tensor>, seen: Tensor, fc: Linear, norm: Option<BatchNorm1d>, drop: Dropout, training: bool }
/// impl_module!(Head { params: [scale, shift], buffers: [seen], modules: [fc, norm, drop], mode: training });
///
/// struct Pair { a: Linear, b: Linear }
/// impl_module!(Pair { a, b });
/// # fn main() -> liandan_nn::Result<()> {
/// let dev = Device::cpu();
/// let ones = |n| Tensor::ones(&[n], DType::F32, &dev);
/// let mut head = Head {
///     scale: ones(2)?, shift: None, seen: ones(1)?, fc: LinearConfig::new(2, 2).init(&dev)?,
///     norm: Some(BatchNorm1dConfig::new(2).init(&dev)?), drop: Dropout::new(0.1), training: true,
/// };
/// let names: Vec<String> = head.state_dict().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["scale", "seen", "fc.weight", "fc.bias", "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var", "norm.num_batches_tracked"]);
/// head.eval();
/// assert!(!head.training && !head.drop.training);
/// # Ok(())
/// # }
/// ```
#[macro_export]
macro_rules! impl_module {
    (impl [$($gen:tt)*] $ty:ty { $($body:tt)* }) => {
        $crate::impl_module!(@impl [$($gen)*] $ty { $($body)* });
    };
    ($ty:ty { $($body:tt)* }) => {
        $crate::impl_module!(@impl [] $ty { $($body)* });
    };
    (@impl [$($gen:tt)*] $ty:ty { $($module:ident),* $(,)? }) => {
        $crate::impl_module!(@impl [$($gen)*] $ty { modules: [$($module),*] });
    };
    (@impl [$($gen:tt)*] $ty:ty { inner: $inner:tt $(,)? }) => {
        impl<$($gen)*> $crate::Module for $ty {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &$crate::Tensor, $crate::TensorKind)) {
                $crate::Module::visit(&self.$inner, prefix, f)
            }

            fn visit_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &mut $crate::Tensor, $crate::TensorKind) -> $crate::error::Result<()>,
            ) -> $crate::error::Result<()> {
                $crate::Module::visit_mut(&mut self.$inner, prefix, f)
            }

            fn set_training(&mut self, training: bool) {
                $crate::Module::set_training(&mut self.$inner, training)
            }
        }
    };
    (
        @impl [$($gen:tt)*] $ty:ty {
            $(params: [$($param:ident),* $(,)?] $(,)?)?
            $(buffers: [$($buffer:ident),* $(,)?] $(,)?)?
            $(modules: [$($module:ident),* $(,)?] $(,)?)?
            $(mode: $mode:ident $(,)?)?
        }
    ) => {
        impl<$($gen)*> $crate::Module for $ty {
            #[allow(unused_variables)]
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &$crate::Tensor, $crate::TensorKind)) {
                $($( $crate::module::TensorField::visit_field(&self.$param, prefix, stringify!($param), $crate::TensorKind::Parameter, f); )*)?
                $($( $crate::module::TensorField::visit_field(&self.$buffer, prefix, stringify!($buffer), $crate::TensorKind::Buffer, f); )*)?
                $($( $crate::Module::visit(&self.$module, &$crate::join(prefix, stringify!($module)), f); )*)?
            }

            #[allow(unused_variables)]
            fn visit_mut(
                &mut self,
                prefix: &str,
                f: &mut dyn FnMut(&str, &mut $crate::Tensor, $crate::TensorKind) -> $crate::error::Result<()>,
            ) -> $crate::error::Result<()> {
                $($( $crate::module::TensorField::visit_field_mut(&mut self.$param, prefix, stringify!($param), $crate::TensorKind::Parameter, f)?; )*)?
                $($( $crate::module::TensorField::visit_field_mut(&mut self.$buffer, prefix, stringify!($buffer), $crate::TensorKind::Buffer, f)?; )*)?
                $($( $crate::Module::visit_mut(&mut self.$module, &$crate::join(prefix, stringify!($module)), f)?; )*)?
                Ok(())
            }

            #[allow(unused_variables)]
            fn set_training(&mut self, training: bool) {
                $( self.$mode = training; )?
                $($( $crate::Module::set_training(&mut self.$module, training); )*)?
            }
        }
    };
}
