//! The [`Tensor`] type: a strided view of backend storage, plus its place in the autograd graph.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use crate::autograd::{self, GradFn, Node};
use crate::backend::{Distribution, Storage, Strided};
use crate::device::Device;
use crate::dtype::{bytes_to_f64, f64_to_bytes, DType, Element};
use crate::error::{Error, Result};
use crate::layout::{check_shape, Layout, MAX_ELEMENTS};

/// An n-dimensional array on a [`Device`], cheap to clone (clones share storage and graph).
///
/// Views (`reshape`, `permute`, `narrow`, `expand`, ...) share storage with their source. Ops
/// never write into an existing tensor; [`Tensor::assign`] swaps in new contents, which is how
/// optimizers update parameters, and [`Tensor::move_to_`] / [`Tensor::cast_`] move a leaf to
/// another device or dtype in place, which is how a module moves its parameters.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub(crate) id: u64,
    pub(crate) layout: Layout,
    pub(crate) state: RwLock<State>,
    /// Set by the user on leaves; non-leaves require grad by having a `node`.
    pub(crate) requires_grad: AtomicBool,
    pub(crate) grad: Mutex<Option<Tensor>>,
    pub(crate) node: Option<Arc<Node>>,
}

/// What an in-place move changes together, under one lock: a parameter keeps its identity (its
/// `Arc`, gradient and graph edges) when its module moves, as PyTorch's `module.to(..)` keeps
/// its Parameter objects, so handles taken before the move (an optimizer's) stay live. The
/// device is `&'static` so that [`Tensor::device`] can still hand out a reference.
pub(crate) struct State {
    pub(crate) storage: Storage,
    pub(crate) dtype: DType,
    pub(crate) device: &'static Device,
}

/// The element count of a new tensor of `shape` and `dtype`, checked before a backend is asked
/// for its memory: the shape's strides must fit (see [`check_shape`]) and its bytes the address
/// space, so that an absurd size is an error naming the bytes, not a panic in an allocator.
pub(crate) fn checked_numel(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let numel = check_shape(op, shape)?;
    let bytes = numel as u128 * dtype.size_in_bytes() as u128;
    if bytes > MAX_ELEMENTS as u128 {
        let detail = format!("a {dtype} tensor of shape {shape:?} is larger than any address space holds (isize::MAX bytes)");
        return Err(Error::OutOfMemory { op, bytes, detail });
    }
    Ok(numel)
}

/// All of a storage as one contiguous run: what an in-place move copies, so that the tensor's
/// layout (offset, strides) means the same in the new storage.
fn whole_storage(state: &State) -> Layout {
    Layout::contiguous(&[state.storage.size_in_bytes() / state.dtype.size_in_bytes()])
}

/// The storage of a [`Tensor::released`] handle: none.
#[derive(Debug)]
struct Released;

impl crate::backend::BackendStorage for Released {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn size_in_bytes(&self) -> usize {
        0
    }
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Tensor {
    pub(crate) fn from_parts(storage: Storage, layout: Layout, dtype: DType, device: &Device, node: Option<Arc<Node>>) -> Tensor {
        Tensor(Arc::new(Inner {
            id: next_id(),
            layout,
            state: RwLock::new(State { storage, dtype, device: device.interned() }),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(None),
            node,
        }))
    }

    /// A result of an op: contiguous storage of `shape`, recorded in the graph when any input
    /// requires grad and grad mode is on. `grad_fn` is only called when recording.
    pub(crate) fn from_op(storage: Storage, shape: &[usize], dtype: DType, device: &Device, inputs: &[&Tensor], grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        Tensor::view_op(storage, Layout::contiguous(shape), dtype, device, inputs, grad_fn)
    }

    /// Like [`Tensor::from_op`] with an arbitrary layout (views).
    pub(crate) fn view_op(storage: Storage, layout: Layout, dtype: DType, device: &Device, inputs: &[&Tensor], grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        let record = autograd::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
        let observing = crate::observe::active();
        let (node, name) = match (record, observing) {
            (false, false) => (None, None),
            (true, false) => (Some(Arc::new(Node::new(grad_fn(), inputs.iter().map(|t| (*t).clone()).collect()))), None),
            (record, true) => {
                let rule = grad_fn();
                let name = rule.name();
                (record.then(|| Arc::new(Node::new(rule, inputs.iter().map(|t| (*t).clone()).collect()))), Some(name))
            }
        };
        let out = Tensor::from_parts(storage, layout, dtype, device, node);
        if let Some(name) = name {
            crate::observe::notify(name, inputs, &out);
        }
        out
    }

    // ---- creation -------------------------------------------------------------------------

    /// A tensor from host values, copied to `device`. Errors if `data.len()` is not the
    /// product of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: &Device) -> Result<Tensor> {
        let want = checked_numel("from_slice", shape, T::DTYPE)?;
        if data.len() != want {
            return Err(Error::ElementCount { op: "from_slice", got: data.len(), want, shape: shape.to_vec() });
        }
        let storage = device.backend().from_host(bytemuck::cast_slice(data), T::DTYPE)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), T::DTYPE, device, None))
    }

    /// Like [`Tensor::from_slice`], taking ownership.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize], device: &Device) -> Result<Tensor> {
        Tensor::from_slice(&data, shape, device)
    }

    /// A tensor from `f64` values converted to `dtype` (handy in tests and for constants).
    pub fn from_f64s(data: &[f64], shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        let want = checked_numel("from_f64s", shape, dtype)?;
        if data.len() != want {
            return Err(Error::ElementCount { op: "from_f64s", got: data.len(), want, shape: shape.to_vec() });
        }
        let storage = device.backend().from_host(&f64_to_bytes(data, dtype), dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    /// Every element equal to `value`.
    pub fn full(shape: &[usize], value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        let storage = device.backend().full(checked_numel("full", shape, dtype)?, value, dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 0.0, dtype, device)
    }

    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(shape, 1.0, dtype, device)
    }

    /// A 0-dimensional tensor.
    pub fn scalar(value: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(&[], value, dtype, device)
    }

    /// Zeros with this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<Tensor> {
        Tensor::zeros(self.shape(), self.dtype(), self.device())
    }

    pub fn ones_like(&self) -> Result<Tensor> {
        Tensor::ones(self.shape(), self.dtype(), self.device())
    }

    /// `start, start + step, ...` up to but excluding `end`, as `torch.arange`.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType, device: &Device) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(Error::bad_shape("arange", &[], format!("start {start}, end {end} and step {step} must be finite, step non-zero")));
        }
        let n = ((end - start) / step).ceil().max(0.0);
        // Checked in f64 first: `as usize` saturates, and a saturated count must not reach a Vec.
        if n > MAX_ELEMENTS as f64 {
            return Err(Error::bad_shape("arange", &[], format!("start {start}, end {end} and step {step} give {n} elements, too many to hold")));
        }
        let n = n as usize;
        checked_numel("arange", &[n], dtype)?;
        let values: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        Tensor::from_f64s(&values, &[n], dtype, device)
    }

    /// Seeded random values; the same seed gives the same tensor on every backend.
    pub fn random(shape: &[usize], dist: Distribution, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        let numel = checked_numel("random", shape, dtype)?;
        if numel > u32::MAX as usize {
            return Err(Error::bad_shape("random", shape, "more than 2^32 elements in one random tensor"));
        }
        if let Distribution::Uniform { low, high } = dist {
            if dtype.is_float() && (low, high) != (0.0, 1.0) {
                // Scale and shift as kernels of their own: inside one kernel a GPU compiler may
                // fuse `low + (high - low) * u` into an fma, whose one rounding differs from the
                // CPU's two (seen on NVIDIA), and a seed must give the same bits everywhere.
                let work = if dtype == DType::F64 { DType::F64 } else { DType::F32 };
                let u = Tensor::random(shape, Distribution::Uniform { low: 0.0, high: 1.0 }, seed, work, device)?;
                let x = u.mul_scalar(high - low)?.add_scalar(low)?;
                return if work == dtype { Ok(x) } else { x.to_dtype(dtype) };
            }
        }
        let storage = device.backend().random(dist, numel, seed, dtype)?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None))
    }

    /// Uniform on `[low, high)`.
    pub fn rand(shape: &[usize], low: f64, high: f64, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Uniform { low, high }, seed, dtype, device)
    }

    /// Standard normal.
    pub fn randn(shape: &[usize], seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Normal { mean: 0.0, std: 1.0 }, seed, dtype, device)
    }

    /// 1 with probability `p`, else 0.
    pub fn bernoulli(shape: &[usize], p: f64, seed: u64, dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::random(shape, Distribution::Bernoulli { p }, seed, dtype, device)
    }

    // ---- accessors ------------------------------------------------------------------------

    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
    }

    /// Size of one dimension (negative counts from the end).
    pub fn dim(&self, dim: impl crate::Dim) -> Result<usize> {
        let d = dim.resolve("dim", self.rank())?;
        Ok(self.shape()[d])
    }

    pub fn rank(&self) -> usize {
        self.0.layout.rank()
    }

    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    pub fn dtype(&self) -> DType {
        self.state().dtype
    }

    pub fn device(&self) -> &'static Device {
        self.state().device
    }

    /// The in-place state, read-locked; never held across another call on this tensor (a
    /// second read behind a waiting writer would deadlock).
    fn state(&self) -> RwLockReadGuard<'_, State> {
        self.0.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// A stable identity for this tensor (views get their own).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The buffer this tensor views, shared with its views and clones. A backend downcasts it
    /// ([`crate::BackendStorage::as_any`]) and reads it through [`Tensor::layout`]: how
    /// `liandan-backend-cpu` lends a tensor to `ndarray` without copying.
    pub fn storage(&self) -> Storage {
        self.state().storage.clone()
    }

    /// A tensor viewing `storage` through `layout`, outside the autograd graph: how a backend
    /// hands a buffer it built (from an `ndarray` array, say) to the user without copying.
    /// `storage` must come from `device`'s backend (kernels treat foreign storage as a broken
    /// invariant). Errors if `layout` reaches past the end of `storage`.
    pub fn from_storage(storage: Storage, layout: Layout, dtype: DType, device: &Device) -> Result<Tensor> {
        checked_numel("from_storage", layout.shape(), dtype)?;
        let elements = storage.size_in_bytes() / dtype.size_in_bytes();
        // In u128, so that absurd strides are this error rather than an overflow.
        let last: u128 = layout.shape().iter().zip(layout.strides()).map(|(&d, &s)| d.saturating_sub(1) as u128 * s as u128).sum();
        if layout.numel() > 0 && layout.offset() as u128 + last >= elements as u128 {
            let detail =
                format!("the layout (strides {:?}, offset {}) reaches past a buffer of {elements} {dtype} elements", layout.strides(), layout.offset());
            return Err(Error::bad_shape("from_storage", layout.shape(), detail));
        }
        Ok(Tensor::from_parts(storage, layout, dtype, device, None))
    }

    /// Runs `f` with a [`Strided`] view of this tensor (storage and dtype read together, so a
    /// concurrent [`Tensor::cast_`] cannot pair one with the other).
    pub(crate) fn with_strided<R>(&self, f: impl FnOnce(Strided) -> R) -> R {
        let (storage, dtype) = {
            let s = self.state();
            (s.storage.clone(), s.dtype)
        };
        f(Strided { storage: &*storage, layout: &self.0.layout, dtype })
    }

    // ---- host read-back -------------------------------------------------------------------

    /// Copies the elements to the host in row-major order. `T` must match the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch { op: "to_vec", lhs: self.dtype(), rhs: T::DTYPE });
        }
        let bytes = self.with_strided(|s| self.device().backend().to_host(s))?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Copies the elements to the host as `f64`, whatever the dtype.
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let bytes = self.with_strided(|s| self.device().backend().to_host(s))?;
        Ok(bytes_to_f64(&bytes, self.dtype()))
    }

    /// The value of a one-element tensor. `T` must match the dtype.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::bad_shape("item", self.shape(), "only a tensor with exactly one element has an item"));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The value of a one-element tensor as `f64`, whatever the dtype.
    pub fn item_f64(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::bad_shape("item", self.shape(), "only a tensor with exactly one element has an item"));
        }
        Ok(self.to_vec_f64()?[0])
    }

    // ---- devices and in-place assignment --------------------------------------------------

    /// This tensor on `device` (the same tensor if already there). Gradients flow back.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device() == device {
            return Ok(self.clone());
        }
        let bytes = self.with_strided(|s| self.device().backend().to_host(s))?;
        let storage = device.backend().from_host(&bytes, self.dtype())?;
        let src_device = self.device().clone();
        Ok(Tensor::from_op(storage, self.shape(), self.dtype(), device, &[self], || GradFn::ToDevice { from: src_device }))
    }

    /// Replaces this tensor's contents with `value`'s (same shape, dtype and device), without
    /// touching the graph: how optimizers update parameters and batch norm its running stats.
    /// Views taken earlier keep the old contents.
    pub fn assign(&self, value: &Tensor) -> Result<()> {
        if value.shape() != self.shape() {
            return Err(Error::shape("assign", self.shape(), value.shape(), "must have the same shape"));
        }
        if value.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch { op: "assign", lhs: self.dtype(), rhs: value.dtype() });
        }
        crate::ops::check_same_device("assign", self, value)?;
        if !self.is_contiguous() || self.0.layout.offset() != 0 {
            return Err(Error::bad_shape("assign", self.shape(), "only a tensor that owns contiguous storage can be assigned to"));
        }
        let value = value.contiguous()?;
        let new = if value.0.layout.offset() == 0 { value.storage() } else { value.with_strided(|s| self.device().backend().copy(s))? };
        self.replace_storage(new);
        Ok(())
    }

    /// Moves this leaf to `device` in place: the same tensor (its id, `requires_grad` flag,
    /// every clone of its handle) holds its storage on `device` afterwards, and its gradient
    /// moves with it. This is what `Module::to_device` does to each parameter, so an optimizer
    /// built before the move still trains, as after `module.to(device)` in PyTorch. Views taken
    /// earlier keep the old storage. A result of a recorded op cannot move in place (its graph
    /// points at the old device): use [`Tensor::to_device`].
    pub fn move_to_(&self, device: &Device) -> Result<()> {
        self.check_in_place("move_to_")?;
        let grad = self.grad().map(|g| autograd::no_grad(|| g.to_device(device))).transpose()?;
        {
            let mut state = self.0.state.write().unwrap_or_else(|e| e.into_inner());
            if state.device == device {
                return Ok(());
            }
            let layout = whole_storage(&state);
            let bytes = state.device.backend().to_host(Strided { storage: &*state.storage, layout: &layout, dtype: state.dtype })?;
            state.storage = device.backend().from_host(&bytes, state.dtype)?;
            state.device = device.interned();
        }
        self.set_grad(grad);
        Ok(())
    }

    /// Converts this leaf to `dtype` in place, as [`Tensor::move_to_`] moves it: the same
    /// tensor holds the converted values afterwards, and so does its gradient. A tensor that
    /// requires grad must stay floating-point.
    pub fn cast_(&self, dtype: DType) -> Result<()> {
        self.check_in_place("cast_")?;
        if self.requires_grad() && !dtype.is_float() {
            return Err(Error::dtype("cast_", dtype, "a tensor that requires grad must stay floating-point"));
        }
        let grad = self.grad().map(|g| autograd::no_grad(|| g.to_dtype(dtype))).transpose()?;
        {
            let mut state = self.0.state.write().unwrap_or_else(|e| e.into_inner());
            if state.dtype == dtype {
                return Ok(());
            }
            let layout = whole_storage(&state);
            state.storage = state.device.backend().cast(Strided { storage: &*state.storage, layout: &layout, dtype: state.dtype }, dtype)?;
            state.dtype = dtype;
        }
        self.set_grad(grad);
        Ok(())
    }

    fn check_in_place(&self, op: &'static str) -> Result<()> {
        if self.0.node.is_some() {
            return Err(Error::Autograd(format!("{op}: only a leaf tensor can change device or dtype in place; this one was computed by an op")));
        }
        Ok(())
    }

    /// Swaps in `storage` (this tensor's shape and dtype, on its device, as the caller has
    /// checked): [`Tensor::assign`]'s last step, and how fused update ops land.
    pub(crate) fn replace_storage(&self, storage: Storage) {
        self.0.state.write().unwrap_or_else(|e| e.into_inner()).storage = storage;
    }

    /// The same tensor for the autograd graph (id, shape, dtype, device, node, `requires_grad`)
    /// without its storage: what a recorded op keeps of an input its backward rule never reads,
    /// so that the buffer goes back to the allocator as soon as no one else holds it. A kernel
    /// handed one fails loudly (a rule that reads an input it declared unread is a bug).
    pub(crate) fn released(&self) -> Tensor {
        let (dtype, device) = (self.dtype(), self.device().interned());
        Tensor(Arc::new(Inner {
            id: self.0.id,
            layout: self.0.layout.clone(),
            state: RwLock::new(State { storage: Arc::new(Released), dtype, device }),
            requires_grad: AtomicBool::new(self.0.requires_grad.load(Ordering::Relaxed)),
            grad: Mutex::new(None),
            node: self.0.node.clone(),
        }))
    }

    pub(crate) fn is_released(&self) -> bool {
        self.state().storage.as_any().is::<Released>()
    }

    /// A tensor sharing this one's storage, cut from the graph.
    pub fn detach(&self) -> Tensor {
        Tensor::from_parts(self.storage(), self.0.layout.clone(), self.dtype(), self.device(), None)
    }

    // ---- autograd state -------------------------------------------------------------------

    /// True for a leaf marked with [`Tensor::set_requires_grad`] or any result computed from one.
    pub fn requires_grad(&self) -> bool {
        self.0.node.is_some() || self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// Marks a leaf as a parameter whose gradient [`Tensor::backward`] accumulates.
    pub fn set_requires_grad(&self, on: bool) -> Result<()> {
        if self.0.node.is_some() {
            return Err(Error::Autograd("set_requires_grad: only leaf tensors can change this; call `detach()` first".into()));
        }
        if on && !self.dtype().is_float() {
            return Err(Error::dtype("set_requires_grad", self.dtype(), "only floating-point tensors have gradients"));
        }
        self.0.requires_grad.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Builder form of [`Tensor::set_requires_grad`].
    pub fn requires_grad_(self, on: bool) -> Result<Tensor> {
        self.set_requires_grad(on)?;
        Ok(self)
    }

    /// True when this tensor was not produced by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.0.node.is_none()
    }

    /// The accumulated gradient of a leaf, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sets or clears the accumulated gradient (`zero_grad` sets `None`, as PyTorch does by default).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.0.grad.lock().unwrap_or_else(|e| e.into_inner()) = grad;
    }

    pub(crate) fn node(&self) -> Option<&Arc<Node>> {
        self.0.node.as_ref()
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor{{shape: {:?}, dtype: {}, device: {}", self.shape(), self.dtype(), self.device())?;
        if self.requires_grad() {
            write!(f, ", requires_grad")?;
        }
        if self.numel() <= 16 {
            if let Ok(v) = self.to_vec_f64() {
                write!(f, ", data: {v:?}")?;
            }
        }
        write!(f, "}}")
    }
}
