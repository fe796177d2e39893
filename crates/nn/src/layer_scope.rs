//! Which layer is running on this thread: the scopes that [`Forward::forward`](crate::Forward)
//! opens around every module's forward, read by the summary's recorder, the profiler's layer
//! table and anomaly reports. It knows nothing of `Module`, so the module trait can use it.

use std::cell::RefCell;

use liandan_tensor::Tensor;

use crate::error::Result;

/// One row of a [`Summary`](crate::summary::Summary): a layer call.
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

/// [`summary::scope`](crate::summary::scope), with the parameter count of `module` asked for
/// only while a summary is being taken.
pub(crate) fn scope<M: ?Sized, R: LayerOutput>(module: &M, params: impl FnOnce() -> usize, forward: impl FnOnce() -> Result<R>) -> Result<R> {
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
            named::<M, R>(params, forward)
        }
    }
}

/// [`summary::container`](crate::summary::container).
pub(crate) fn container<M: ?Sized, R>(module: &M, forward: impl FnOnce() -> Result<R>) -> Result<R> {
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
fn named<M: ?Sized, R: LayerOutput>(params: impl FnOnce() -> usize, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    // The profiler groups kernel calls by the same layers (nothing happens unless it runs).
    let _layer = liandan_tensor::profile::layer(short_type_name::<M>());
    let named = LAYERS.with(|l| {
        let mut l = l.borrow_mut();
        let path = l.as_mut()?;
        path.calls += 1;
        path.open.push(format!("{}-{}", short_type_name::<M>(), path.calls));
        Some(())
    });
    let out = scope_summary::<M, R>(params, forward);
    if named.is_some() {
        LAYERS.with(|l| l.borrow_mut().as_mut().map(|p| p.open.pop()));
    }
    out
}

/// The layers open on this thread, outermost first, numbered as [`summary`](crate::summary::summary) numbers its rows.
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

fn scope_summary<M: ?Sized, R: LayerOutput>(params: impl FnOnce() -> usize, forward: impl FnOnce() -> Result<R>) -> Result<R> {
    let slot = RECORDER.with(|r| {
        let mut r = r.borrow_mut();
        let rec = r.as_mut()?;
        let kind = short_type_name::<M>();
        let row = SummaryRow { layer: format!("{kind}-{}", rec.rows.len() + 1), depth: rec.depth, output_shape: Vec::new(), params: params() };
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

/// Runs `run` with the summary's recorder switched on and returns the rows it recorded. Taken
/// from inside another forward, the summary still sees its model as the outermost module.
pub(crate) fn record(run: impl FnOnce() -> Result<()>) -> Result<Vec<SummaryRow>> {
    struct Reset(Vec<Identity>);
    impl Drop for Reset {
        fn drop(&mut self) {
            RECORDER.with(|r| *r.borrow_mut() = None);
            OPEN.with(|o| *o.borrow_mut() = std::mem::take(&mut self.0));
        }
    }
    let _reset = Reset(OPEN.with(|o| std::mem::take(&mut *o.borrow_mut())));
    RECORDER.with(|r| *r.borrow_mut() = Some(Recorder { rows: Vec::new(), depth: 0 }));
    run()?;
    Ok(RECORDER.with(|r| r.borrow_mut().take().map(|rec| rec.rows).unwrap_or_default()))
}
