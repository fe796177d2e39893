//! Automatic mixed precision (`torch.autocast`): inside an autocast region, ops pick their own
//! precision.
//!
//! The policy, per thread, while a region of `F16` or `BF16` is open:
//! - matmul, `linear` and the convolutions cast their f32 inputs (weights and bias too) to the
//!   low type and compute in it: these are the ops a low type makes faster and smaller;
//! - reductions (`sum`, `mean`, `var`), softmax, log-softmax, logsumexp, the normalizations and
//!   the losses cast low inputs to f32 first: a sum of many f16 values overflows or loses its
//!   small terms, and an exponential leaves f16's range at 11;
//! - batch norm keeps a low input's type, with its parameters and running statistics in f32
//!   and its statistics computed in f32 (as `torch.autocast` leaves it to cuDNN's mixed
//!   kernel): one fused kernel where the device has it, else the composite in f32, rounded
//!   back;
//! - an elementwise op, `where`, `cat` or `stack` of mixed float types computes in the widest of
//!   them (PyTorch's type promotion), so a low activation meets an f32 parameter without error;
//! - everything else runs in the type it is given.
//!
//! A region may also keep small products in f32 ([`AutocastGuard::with_min_ops`], or
//! [`AutocastGuard::with_minimums`] with one minimum for matmul and `linear` and another for
//! the convolutions): a product of fewer operations than its minimum then runs as an ordinary
//! op (mixed inputs meet in the wider type, f32 ones stay f32). Such a product runs on the
//! ordinary units in f32 arithmetic whatever its storage, so a cast to the low type would only
//! add a kernel. [`AutocastGuard::new`] has no minimum, as `torch.autocast`.
//!
//! The casts are ordinary recorded ops, so gradients flow back through them and reach f32
//! parameters as f32: master weights and optimizer state stay f32. [`Tensor::backward`] runs
//! with autocast off; each backward rule computes in the types its forward saw. Outside a
//! region nothing changes: mixed dtypes stay an error, as they were.
//!
//! # The cast cache
//! A parameter used twice in one region (a weight shared between layers, a recurrent weight
//! read at every step) is cast to the low type once, as `torch.autocast`'s cache does: the
//! low-type ops keep, per thread, the cast of each leaf that requires grad, keyed by the
//! tensor and the type, and hand the same cast tensor to every later use, so the graph holds
//! one cast node whose gradient sums every use. The cache empties when the outermost region
//! closes (regions of other types nested inside it keep their own entries until then). An
//! entry is dropped and cast afresh when its parameter was given new contents in place
//! ([`Tensor::assign`], [`Tensor::cast_`], [`Tensor::move_to_`]) or when backward has freed
//! its cast's graph node, and a cast made without grad is not handed to a use that records
//! the graph. Only the low-type ops' casts are kept: activations and the f32 ops'
//! inputs change at every use.
//!
//! A training loop may fill the cache ahead of its forward ([`cast_ahead`]): the parameters
//! the previous region cast are cast again all at once, in a few kernels where the device
//! has them ([`crate::ops::CastAll`]), rather than one small kernel each at first use.
//!
//! Activations are cast at each use, with one exception: a layer norm whose output a low-type
//! op cast writes that cast itself from then on ([`crate::ops::LayerNormLow`], where the device
//! has it), and the op's cast takes it, recorded in the graph as a cast made there would be.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::backend::Storage;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::grad_mode::is_grad_enabled;
use crate::tensor::Tensor;

thread_local! {
    static AUTOCAST: Cell<Option<DType>> = const { Cell::new(None) };
    /// Guards open on this thread: the cache empties when the last one closes.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Products of fewer operations than these stay out of the low type (0: none do).
    static MIN_OPS: Cell<MinOps> = const { Cell::new(MinOps::all(0)) };
    /// Low-type ops whose inputs autocast cast (or took from the cache) on this thread, ever.
    static LOWERED: Cell<u64> = const { Cell::new(0) };
    static CAST_CACHE: RefCell<HashMap<(u64, DType), Cached>> = RefCell::new(HashMap::new());
    /// The keys of the cache when the last outermost region that cast anything closed: what
    /// [`cast_ahead`] casts.
    static LAST_CAST: RefCell<HashSet<(u64, DType)>> = RefCell::new(HashSet::new());
    /// Layer norms, by their weight's id, whose output a low-type op cast to the low type:
    /// they write that cast themselves from then on ([`layer_norm_low`]).
    static COPY_WANTED: RefCell<HashSet<(u64, DType)>> = RefCell::new(HashSet::new());
    /// Layer norms' low copies not yet taken by a cast.
    static LOW_COPIES: RefCell<Vec<LowCopy>> = const { RefCell::new(Vec::new()) };
    /// Layer norms' low copies taken by a cast on this thread, ever.
    static TAKEN: Cell<u64> = const { Cell::new(0) };
}

/// A layer norm's output cast to a low type by the layer norm's own kernel, waiting for the
/// low-type op that casts that output. The output is held so that its id stays its own, and
/// its storage so that new contents given in place are seen.
struct LowCopy {
    output: Tensor,
    storage: Storage,
    weight: u64,
    copy: Tensor,
}

/// Copies a region may hold untaken at once (a layer norm's output is cast at its next op).
const LOW_COPIES_HELD: usize = 4;

/// One parameter's cast to a low type. The parameter is held so that its id stays its own,
/// and the storage it was cast from so that an in-place update is seen (a new storage).
/// `ahead`: made by [`cast_ahead`] and not yet used, so not yet in the graph.
struct Cached {
    source: Tensor,
    storage: Storage,
    cast: Tensor,
    ahead: bool,
}

impl Cached {
    fn is_current(&self) -> bool {
        let live = |t: &Tensor| t.node().is_some_and(|n| n.inputs().is_some());
        Arc::ptr_eq(&self.source.storage(), &self.storage) && (self.ahead || !is_grad_enabled() || live(&self.cast))
    }

    /// The cast for a use: one made ahead is recorded now, at its first use, so that backward
    /// reaches its node right after its last consumer's and frees it as early as a cast made
    /// here would be (recorded ahead of the whole forward, every such cast lived to the end
    /// of backward).
    fn take_use(&mut self) -> Tensor {
        if self.ahead {
            let from = self.source.dtype();
            self.cast = self.cast.recorded(&[&self.source], || crate::autograd::GradFn::Cast { from });
            self.ahead = false;
        }
        self.cast.clone()
    }
}

/// The low float type of the open autocast region on this thread, if any.
pub fn autocast_dtype() -> Option<DType> {
    AUTOCAST.with(|a| a.get())
}

/// The smallest products an autocast region computes in its low type, in operations (two a
/// multiply-add); 0 lowers every one (see [`AutocastGuard::with_minimums`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinOps {
    /// For `matmul` and `linear`.
    pub matmul: u64,
    /// For the convolutions.
    pub conv: u64,
}

impl MinOps {
    /// The same minimum for every product.
    pub const fn all(ops: u64) -> MinOps {
        MinOps { matmul: ops, conv: ops }
    }
}

/// The kinds of product [`MinOps`] tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Product {
    Matmul,
    Conv,
}

/// The open region's minimum sizes of a low-type product (all 0 when every product is
/// lowered, or no region is open).
pub fn autocast_min_ops() -> MinOps {
    MIN_OPS.with(|m| m.get())
}

/// How many ops autocast has run in a low type on this thread so far, casting their inputs
/// (a running count: compare two reads). A forward pass that leaves it unchanged computed
/// nothing in f16 or bf16 that it did not already hold in them, so its f32 parameters'
/// gradients come from f32 ops alone (the trainer's loss scaler then has nothing to do).
pub fn autocast_lowered() -> u64 {
    LOWERED.with(|n| n.get())
}

/// An open autocast region; the previous setting comes back when it is dropped.
pub struct AutocastGuard {
    prev: Option<DType>,
    prev_min_ops: MinOps,
}

impl AutocastGuard {
    /// Opens a region computing in `dtype`: `F16` or `BF16`; `F32` closes any open region
    /// (full precision, as `torch.autocast(enabled=False)`). Other types are an error.
    pub fn new(dtype: DType) -> Result<AutocastGuard> {
        let low = match dtype {
            DType::F16 | DType::BF16 => Some(dtype),
            DType::F32 => None,
            other => return Err(Error::dtype("autocast", other, "autocast computes in f16 or bf16 (or f32, which turns it off)")),
        };
        Ok(AutocastGuard::set(low, MinOps::all(0)))
    }

    /// As [`AutocastGuard::new`], with matmul, `linear` and the convolutions of fewer than
    /// `min_ops` operations (two per multiply-add) left in the types they are given: a model
    /// of small layers then pays no casts where the low type would save nothing.
    ///
    /// ```
    /// use liandan_tensor::{AutocastGuard, Device, DType, Tensor};
    /// # use liandan_backend_cpu as _;
    /// let dev = Device::cpu();
    /// let x = Tensor::ones(&[64, 32], DType::F32, &dev)?;
    /// let (narrow, wide) = (Tensor::ones(&[32, 16], DType::F32, &dev)?, Tensor::ones(&[32, 1024], DType::F32, &dev)?);
    /// let _region = AutocastGuard::with_min_ops(DType::F16, 1 << 20)?;
    /// assert_eq!(x.matmul(&narrow)?.dtype(), DType::F32); // 2 * 64 * 32 * 16 operations
    /// assert_eq!(x.matmul(&wide)?.dtype(), DType::F16); // 2 * 64 * 32 * 1024
    /// # Ok::<(), liandan_tensor::Error>(())
    /// ```
    pub fn with_min_ops(dtype: DType, min_ops: u64) -> Result<AutocastGuard> {
        AutocastGuard::with_minimums(dtype, MinOps::all(min_ops))
    }

    /// As [`AutocastGuard::with_min_ops`], with a minimum for matmul and `linear` and another
    /// for the convolutions: a kind of product whose low-type kernels cost more around them
    /// (bf16 products scan their operands first on some devices) can start later.
    ///
    /// ```
    /// use liandan_tensor::{AutocastGuard, Device, DType, MinOps, Tensor};
    /// # use liandan_backend_cpu as _;
    /// let dev = Device::cpu();
    /// let x = Tensor::ones(&[64, 32], DType::F32, &dev)?;
    /// let w = Tensor::ones(&[32, 1024], DType::F32, &dev)?;
    /// let _region = AutocastGuard::with_minimums(DType::BF16, MinOps { matmul: 1 << 24, conv: 1 << 20 })?;
    /// assert_eq!(x.matmul(&w)?.dtype(), DType::F32); // 2^22 operations
    /// # Ok::<(), liandan_tensor::Error>(())
    /// ```
    pub fn with_minimums(dtype: DType, min_ops: MinOps) -> Result<AutocastGuard> {
        let guard = AutocastGuard::new(dtype)?;
        MIN_OPS.with(|m| m.set(min_ops));
        Ok(guard)
    }

    /// A region with autocast off, whatever is open around it.
    pub(crate) fn off() -> AutocastGuard {
        AutocastGuard::set(None, MinOps::all(0))
    }

    fn set(low: Option<DType>, min_ops: MinOps) -> AutocastGuard {
        DEPTH.with(|d| d.set(d.get() + 1));
        let prev_min_ops = MIN_OPS.with(|m| m.replace(min_ops));
        AutocastGuard { prev: AUTOCAST.with(|a| a.replace(low)), prev_min_ops }
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.with(|a| a.set(self.prev));
        MIN_OPS.with(|m| m.set(self.prev_min_ops));
        let depth = DEPTH.with(|d| {
            d.set(d.get().saturating_sub(1));
            d.get()
        });
        if depth == 0 {
            // Taken out first: dropping a cast frees graph nodes, which must not find the cache borrowed.
            let casts = CAST_CACHE.with(|c| std::mem::take(&mut *c.borrow_mut()));
            // A region that cast nothing (backward's, which turns autocast off) leaves the list.
            if !casts.is_empty() {
                LAST_CAST.with(|l| *l.borrow_mut() = casts.keys().copied().collect());
            }
            drop(casts);
            let untaken = LOW_COPIES.with(|c| std::mem::take(&mut *c.borrow_mut()));
            unwant(&untaken);
            drop(untaken);
        }
    }
}

/// Runs `f` in an autocast region of `dtype` (see [`AutocastGuard::new`]).
///
/// ```
/// use liandan_tensor::{autocast, Device, DType, Tensor};
/// # use liandan_backend_cpu as _;
/// let dev = Device::cpu();
/// let w = Tensor::randn(&[3, 2], 0, DType::F32, &dev)?.requires_grad_(true)?;
/// let x = Tensor::ones(&[4, 3], DType::F32, &dev)?;
/// let loss = autocast(DType::F16, || {
///     let y = x.matmul(&w)?; // computed in f16
///     assert_eq!(y.dtype(), DType::F16);
///     y.sum_all() // summed in f32
/// })?;
/// assert_eq!(loss.dtype(), DType::F32);
/// loss.backward()?;
/// assert_eq!(w.grad().unwrap().dtype(), DType::F32); // the master weight's gradient
/// # Ok::<(), liandan_tensor::Error>(())
/// ```
pub fn autocast<R, E: From<Error>>(dtype: DType, f: impl FnOnce() -> std::result::Result<R, E>) -> std::result::Result<R, E> {
    let _guard = AutocastGuard::new(dtype)?;
    f()
}

/// `t` in the region's low type when it is a float of another type (f64 stays f64); a
/// parameter's cast comes from the cache (see the module doc).
fn to_low(t: &Tensor, low: DType) -> Result<Tensor> {
    if !needs_low(t, low) {
        return Ok(t.clone());
    }
    if !(t.is_leaf() && t.requires_grad()) {
        if let Some(copy) = take_low_copy(t, low) {
            return Ok(copy);
        }
        want_low_copy(t, low);
        return t.to_dtype(low);
    }
    let key = (t.id(), low);
    let hit = CAST_CACHE.with(|c| c.borrow_mut().get_mut(&key).filter(|e| e.is_current()).map(Cached::take_use));
    if let Some(cast) = hit {
        return Ok(cast);
    }
    let cast = t.to_dtype(low)?;
    let entry = Cached { source: t.clone(), storage: t.storage(), cast: cast.clone(), ahead: false };
    let stale = CAST_CACHE.with(|c| c.borrow_mut().insert(key, entry));
    drop(stale);
    Ok(cast)
}

/// Fills the open region's cast cache with the casts of those of `params` that the last
/// region closed on this thread cast to this region's type (and that the cache lacks): all of
/// them in a few kernels where the device has [`crate::ops::CastAll`]'s, else nothing is done
/// and each is cast at its first use, as without this call. A training loop calls it at the
/// top of its forward, inside the region, with the parameters it trains; the first step has
/// no last region and casts as it goes. Each cast joins the graph at its first use, as
/// [`Tensor::to_dtype`]'s would, so gradients and the memory backward frees are the same
/// either way.
pub fn cast_ahead(params: &[Tensor]) -> Result<()> {
    let Some(low) = autocast_dtype() else { return Ok(()) };
    if crate::observe::active() {
        return Ok(());
    }
    let wanted: Vec<&Tensor> = LAST_CAST.with(|last| {
        let last = last.borrow();
        params.iter().filter(|t| last.contains(&(t.id(), low)) && needs_low(t, low) && t.is_leaf() && t.requires_grad() && !is_cached(t, low)).collect()
    });
    let Some(first) = wanted.first() else { return Ok(()) };
    if wanted.len() < 2 || wanted.iter().any(|t| t.device() != first.device()) {
        return Ok(());
    }
    let Some(casts) = crate::fused::run(&crate::ops::CastAll(low), &wanted) else { return Ok(()) };
    for (t, cast) in wanted.into_iter().zip(casts?) {
        let entry = Cached { source: t.clone(), storage: t.storage(), cast, ahead: true };
        let stale = CAST_CACHE.with(|c| c.borrow_mut().insert((t.id(), low), entry));
        drop(stale);
    }
    Ok(())
}

// # Layer norms' low copies
//
// A layer norm computes in f32 under autocast, and a pre-norm block's next op, a product,
// casts its output to the low type at once: a kernel that reads the output again. A layer
// norm whose output was so cast writes that cast too from then on, from its own kernel
// ([`crate::ops::LayerNormLow`], where the device has it), and the product's cast takes it.
// The cast is recorded in the graph as ever, so gradients are unchanged. A copy that no cast
// took by the region's end stops its layer norm making more.

/// The low type a layer norm of `x` (f32) with `weight` writes a copy of its output in, where
/// its output was cast to the open region's type before (see above).
pub(crate) fn layer_norm_low(x: &Tensor, weight: Option<&Tensor>) -> Option<DType> {
    let low = autocast_dtype()?;
    let weight = weight?;
    if x.dtype() != DType::F32 || crate::observe::active() {
        return None;
    }
    COPY_WANTED.with(|w| w.borrow().contains(&(weight.id(), low))).then_some(low)
}

/// Holds `copy`, a layer norm's `output` cast by its own kernel, for the cast that comes.
pub(crate) fn keep_low_copy(output: &Tensor, weight: &Tensor, copy: Tensor) {
    let entry = LowCopy { output: output.clone(), storage: output.storage(), weight: weight.id(), copy };
    let dropped = LOW_COPIES.with(|c| {
        let mut c = c.borrow_mut();
        c.push(entry);
        let over = c.len().saturating_sub(LOW_COPIES_HELD);
        c.drain(..over).collect::<Vec<_>>()
    });
    unwant(&dropped);
}

/// The held copy of `t` in `low`, recorded as `t`'s cast, if any.
fn take_low_copy(t: &Tensor, low: DType) -> Option<Tensor> {
    let entry = LOW_COPIES.with(|c| {
        let mut c = c.borrow_mut();
        let at = c.iter().position(|e| e.output.id() == t.id() && e.copy.dtype() == low && Arc::ptr_eq(&e.storage, &t.storage()))?;
        Some(c.swap_remove(at))
    })?;
    TAKEN.with(|n| n.set(n.get() + 1));
    let from = t.dtype();
    Some(entry.copy.recorded(&[t], || crate::autograd::GradFn::Cast { from }))
}

/// How many layer norms' low copies casts have taken on this thread so far (a running count).
#[cfg(feature = "conformance")]
pub(crate) fn low_copies_taken() -> u64 {
    TAKEN.with(|n| n.get())
}

/// Notes a cast of `t` to `low` where `t` is a layer norm's output: that layer norm writes
/// the cast itself from now on.
fn want_low_copy(t: &Tensor, low: DType) {
    let Some((rule, inputs)) = t.node().and_then(|n| n.peek()) else { return };
    let is_layer_norm = (&*rule as &dyn std::any::Any)
        .downcast_ref::<crate::autograd::GradFn>()
        .is_some_and(|r| matches!(r, crate::autograd::GradFn::LayerNorm { options, .. } if options.weight));
    if let (true, Some(weight)) = (is_layer_norm && t.dtype() == DType::F32, inputs.get(1)) {
        COPY_WANTED.with(|w| w.borrow_mut().insert((weight.id(), low)));
    }
}

/// Stops the layer norms of `untaken` copies making more.
fn unwant(untaken: &[LowCopy]) {
    if untaken.is_empty() {
        return;
    }
    COPY_WANTED.with(|w| {
        let mut w = w.borrow_mut();
        for e in untaken {
            w.remove(&(e.weight, e.copy.dtype()));
        }
    });
}

/// Whether the cache holds a current cast of `t` to `low`.
pub(crate) fn is_cached(t: &Tensor, low: DType) -> bool {
    CAST_CACHE.with(|c| c.borrow().get(&(t.id(), low)).is_some_and(Cached::is_current))
}

fn needs_low(t: &Tensor, low: DType) -> bool {
    t.dtype().is_float() && t.dtype() != DType::F64 && t.dtype() != low
}

/// Whether a product of `kind` and `ops` operations stays out of the region's type (see
/// [`AutocastGuard::with_minimums`]).
fn below_min(kind: Product, ops: u64) -> bool {
    let min = autocast_min_ops();
    ops < match kind {
        Product::Matmul => min.matmul,
        Product::Conv => min.conv,
    }
}

/// For the low-type ops (a product of `kind` and `ops` operations): the inputs cast to the
/// region's type, or `None` when no region is open or nothing needs a cast (then the op runs
/// as called). Below the region's minimum the inputs are only promoted (see [`promoted`]).
pub(crate) fn lowered<const K: usize>(inputs: [Option<&Tensor>; K], kind: Product, ops: u64) -> Result<Option<[Option<Tensor>; K]>> {
    let Some(low) = autocast_dtype() else { return Ok(None) };
    if below_min(kind, ops) {
        let given: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
        let Some(mut p) = promoted(&given)?.map(Vec::into_iter) else { return Ok(None) };
        return Ok(Some(inputs.map(|t| t.map(|_| p.next().expect("one promoted tensor per input")))));
    }
    if !inputs.iter().flatten().any(|t| needs_low(t, low)) {
        return Ok(None);
    }
    let mut out: [Option<Tensor>; K] = std::array::from_fn(|_| None);
    for (o, t) in out.iter_mut().zip(inputs) {
        *o = t.map(|t| to_low(t, low)).transpose()?;
    }
    LOWERED.with(|n| n.set(n.get() + 1));
    Ok(Some(out))
}

/// Whether a matmul of `ops` operations over `inputs` would cast any of them under the open
/// region (for fused kernels that run only where the composite casts nothing).
pub(crate) fn casts(inputs: &[&Tensor], ops: u64) -> bool {
    let Some(low) = autocast_dtype() else { return false };
    if below_min(Product::Matmul, ops) {
        let mut floats = inputs.iter().map(|t| t.dtype()).filter(|d| d.is_float());
        let first = floats.next();
        return floats.any(|d| Some(d) != first);
    }
    inputs.iter().any(|t| needs_low(t, low))
}

/// The operations of a product `[.., M, K] @ [.., K, N]` (two per multiply-add), from the
/// operands' sizes as given (a 1-D operand a vector), for [`lowered`]; a batch broadcast from
/// either side counts in full.
pub(crate) fn matmul_ops(a: &Tensor, b: &Tensor) -> u64 {
    let (sa, sb) = (a.shape(), b.shape());
    let m = if sa.len() >= 2 { sa[sa.len() - 2] } else { 1 };
    let n = if sb.len() >= 2 { sb[sb.len() - 1] } else { 1 };
    2 * (a.numel() as u64).saturating_mul(n as u64).max((b.numel() as u64).saturating_mul(m as u64))
}

/// For the f32 ops: the inputs with low floats cast to f32, or `None` when no region is open
/// or none is low.
pub(crate) fn widened<const K: usize>(inputs: [&Tensor; K]) -> Result<Option<[Tensor; K]>> {
    let is_low = |t: &Tensor| matches!(t.dtype(), DType::F16 | DType::BF16);
    if autocast_dtype().is_none() || !inputs.iter().any(|t| is_low(t)) {
        return Ok(None);
    }
    let mut out: [Option<Tensor>; K] = std::array::from_fn(|_| None);
    for (o, t) in out.iter_mut().zip(inputs) {
        *o = Some(if is_low(t) { t.to_dtype(DType::F32)? } else { t.clone() });
    }
    Ok(Some(out.map(|t| t.expect("every slot was filled"))))
}

/// The type two floats meet in: the wider one; f16 and bf16 (neither holds the other) meet in f32.
fn wider(a: DType, b: DType) -> DType {
    let rank = |d: DType| match d {
        DType::F64 => 3,
        DType::F32 => 2,
        _ => 1,
    };
    match rank(a).cmp(&rank(b)) {
        std::cmp::Ordering::Greater => a,
        std::cmp::Ordering::Less => b,
        std::cmp::Ordering::Equal if a == b => a,
        std::cmp::Ordering::Equal => DType::F32,
    }
}

/// For ops that combine values (elementwise, `where`, `cat`): floats of mixed types cast to the
/// widest of them, or `None` when no region is open or the types agree already.
pub(crate) fn promoted(inputs: &[&Tensor]) -> Result<Option<Vec<Tensor>>> {
    if autocast_dtype().is_none() {
        return Ok(None);
    }
    let floats: Vec<DType> = inputs.iter().map(|t| t.dtype()).filter(|d| d.is_float()).collect();
    let Some(&first) = floats.first() else { return Ok(None) };
    if floats.iter().all(|&d| d == first) {
        return Ok(None);
    }
    let to = floats.iter().fold(first, |acc, &d| wider(acc, d));
    inputs.iter().map(|t| if t.dtype().is_float() { t.to_dtype(to) } else { Ok((*t).clone()) }).collect::<Result<_>>().map(Some)
}
