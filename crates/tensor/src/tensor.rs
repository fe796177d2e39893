//! The [`Tensor`] type: a strided view of backend storage, plus its place in the autograd graph.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use std::any::Any;

use crate::backend::{HostRead, Storage, Strided};
use crate::device::Device;
use crate::dtype::{bytes_to_f64, DType, Element};
use crate::error::{Error, Result};
use crate::grad_mode::no_grad;
use crate::layout::{check_shape, Layout, MAX_ELEMENTS};

/// An n-dimensional array on a [`Device`], cheap to clone (clones share storage and graph).
///
/// Views (`reshape`, `permute`, `narrow`, `expand`, ...) share storage with their source. Ops
/// never write into an existing tensor; [`Tensor::assign`] swaps in new contents, which is how
/// optimizers update parameters, and [`Tensor::move_to_`] / [`Tensor::cast_`] move a leaf to
/// another device or dtype in place, which is how a module moves its parameters.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<Inner>);

/// A copy to the host under way ([`Tensor::read_later`]).
pub struct LaterRead {
    read: Box<dyn HostRead>,
    dtype: DType,
}

impl LaterRead {
    /// Waits for the elements, as `f64` whatever the dtype, in row-major order.
    pub fn to_vec_f64(self) -> Result<Vec<f64>> {
        Ok(bytes_to_f64(&self.read.wait()?, self.dtype))
    }
}

impl std::fmt::Debug for LaterRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LaterRead({})", self.dtype)
    }
}

pub(crate) struct Inner {
    pub(crate) id: u64,
    pub(crate) layout: Layout,
    pub(crate) state: RwLock<State>,
    /// Set by the user on leaves; non-leaves require grad by having a `node`.
    pub(crate) requires_grad: AtomicBool,
    pub(crate) grad: Mutex<Option<Tensor>>,
    pub(crate) node: Option<Arc<Node>>,
    /// A leaf's post-accumulate-grad hooks (see `autograd::hooks`).
    pub(crate) hooks: Mutex<Vec<std::sync::Weak<GradHook>>>,
}

/// A post-accumulate-grad hook (`Tensor::register_post_accumulate_grad_hook`): called with the
/// leaf, whose `.grad()` holds the gradient accumulated so far (this backward's part included).
/// An error stops the backward pass with it.
pub type GradHook = dyn Fn(&Tensor) -> Result<()> + Send + Sync;

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

/// A recorded op's backward rule, as the graph holds it: `autograd`'s rules implement it (this
/// file defines the graph's shape, `autograd` what runs on it).
pub(crate) trait BackwardRule: Any + Send + Sync {
    /// The op's name, for errors and reports.
    fn name(&self) -> String;
    /// Whether the rule reads the values of input `i`, given which inputs require grad.
    fn reads_input(&self, i: usize, wants: &[bool]) -> bool;
    /// Whether the rule reads the op's own output, which must then stay alive while the graph does.
    fn reads_output(&self) -> bool;
    /// One gradient per input (`None` where none is needed) from `g`, the gradient of the op's
    /// output `out`, and its inputs.
    fn backward(&self, g: &Tensor, inputs: &[Tensor], out: &Tensor) -> Result<Vec<Option<Tensor>>>;
}

/// A node's rule and the inputs it needs.
type Recorded = (Arc<dyn BackwardRule>, Vec<Tensor>);

/// One recorded op in the graph: its rule and the inputs the rule needs.
pub(crate) struct Node {
    /// `None` once backward has freed it.
    state: Mutex<Option<Recorded>>,
}

impl Node {
    /// Records `rule` over `inputs`, keeping of each input only what backward will use: an
    /// input whose values the rule never reads (and whose own rule does not read its output)
    /// is kept as a [`Tensor::released`] handle, so its buffer is freed as soon as the forward
    /// drops it, not when backward reaches it.
    pub(crate) fn new(rule: Arc<dyn BackwardRule>, inputs: Vec<Tensor>) -> Node {
        let wants: smallvec::SmallVec<[bool; 4]> = inputs.iter().map(Tensor::requires_grad).collect();
        let inputs = inputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| match rule.reads_input(i, &wants) || !t.can_release() {
                true => t,
                false => t.released(),
            })
            .collect();
        Node { state: Mutex::new(Some((rule, inputs))) }
    }

    /// Whether this node's rule reads its op's output (false once backward has freed it).
    fn reads_output(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|(f, _)| f.reads_output())
    }

    /// The inputs, while the node has not been freed.
    pub(crate) fn inputs(&self) -> Option<smallvec::SmallVec<[Tensor; 4]>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(_, i)| i.iter().cloned().collect())
    }

    /// The rule and its inputs, left in place (`None` once freed).
    pub(crate) fn peek(&self) -> Option<Recorded> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The rule and its inputs, taken out (the node is freed) or, with `retain`, cloned.
    pub(crate) fn take(&self, retain: bool) -> Option<Recorded> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if retain {
            state.clone()
        } else {
            state.take()
        }
    }
}

impl Drop for Node {
    /// Frees a chain of nodes iteratively: the default recursive drop (node -> its inputs ->
    /// their nodes -> ...) overflows the stack on a deep graph that is dropped without backward,
    /// such as a long RNN evaluated with grad on.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let mut stack: Vec<Tensor> = state.map(|(_, inputs)| inputs).unwrap_or_default();
        while let Some(t) = stack.pop() {
            // Only a tensor this chain owns outright can be taken apart; a shared one stays alive.
            let Ok(inner) = Arc::try_unwrap(t.0) else { continue };
            let Some(node) = inner.node else { continue };
            let Ok(mut node) = Arc::try_unwrap(node) else { continue };
            if let Some((_, inputs)) = node.state.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
                stack.extend(inputs);
            }
        }
    }
}

/// All of a storage as one contiguous run: what an in-place move copies, so that the tensor's
/// layout (offset, strides) means the same in the new storage.
fn whole_storage(state: &State) -> Layout {
    Layout::contiguous(&[state.storage.size_in_bytes() / state.dtype.size_in_bytes()])
}

/// The storage of a [`Tensor::released`] handle: none.
#[derive(Debug)]
struct Released;

/// One [`Released`] storage that every released handle shares, rather than one allocation each.
fn released_storage() -> Storage {
    static RELEASED: std::sync::LazyLock<Storage> = std::sync::LazyLock::new(|| Arc::new(Released));
    RELEASED.clone()
}

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
            hooks: Mutex::default(),
        }))
    }

    // ---- accessors ------------------------------------------------------------------------

    pub fn shape(&self) -> &[usize] {
        self.0.layout.shape()
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

    /// Starts copying the elements to the host, to be taken later with
    /// [`LaterRead::to_vec_f64`], which waits only for the work that made them and not for
    /// what is recorded in between: a value read one step late costs a GPU-bound loop no wait.
    pub fn read_later(&self) -> Result<LaterRead> {
        let read = self.with_strided(|s| self.device().backend().to_host_later(s))?;
        Ok(LaterRead { read, dtype: self.dtype() })
    }

    /// [`Tensor::read_later`] for a value taken a few steps on: the copy does not end the
    /// device's batch of work (see [`crate::Backend::to_host_later_in_batch`]).
    pub fn read_later_in_batch(&self) -> Result<LaterRead> {
        let read = self.with_strided(|s| self.device().backend().to_host_later_in_batch(s))?;
        Ok(LaterRead { read, dtype: self.dtype() })
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

    /// Moves this leaf to `device` in place: the same tensor (its id, `requires_grad` flag,
    /// every clone of its handle) holds its storage on `device` afterwards, and its gradient
    /// moves with it. This is what `Module::to_device` does to each parameter, so an optimizer
    /// built before the move still trains, as after `module.to(device)` in PyTorch. Views taken
    /// earlier keep the old storage. A result of a recorded op cannot move in place (its graph
    /// points at the old device): use [`Tensor::to_device`].
    pub fn move_to_(&self, device: &Device) -> Result<()> {
        self.check_in_place("move_to_")?;
        let grad = self.grad().map(|g| no_grad(|| g.to_device(device))).transpose()?;
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
        let grad = self.grad().map(|g| no_grad(|| g.to_dtype(dtype))).transpose()?;
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
            state: RwLock::new(State { storage: released_storage(), dtype, device }),
            requires_grad: AtomicBool::new(self.0.requires_grad.load(Ordering::Relaxed)),
            grad: Mutex::new(None),
            node: self.0.node.clone(),
            hooks: Mutex::default(),
        }))
    }

    pub(crate) fn is_released(&self) -> bool {
        self.state().storage.as_any().is::<Released>()
    }

    /// [`Tensor::detach`] that observers do not see: the autograd engine's own handles on the
    /// values it passes between rules, which are no op of the user's.
    pub(crate) fn detach_unobserved(&self) -> Tensor {
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

    /// Whether the graph may keep this tensor without its storage: not a leaf that collects a
    /// gradient (its `.grad` is set on this very handle), not already released, and not the
    /// output of a rule that reads it.
    fn can_release(&self) -> bool {
        match self.node() {
            Some(node) => !node.reads_output() && !self.is_released(),
            None => !self.0.requires_grad.load(Ordering::Relaxed) && !self.is_released(),
        }
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
