//! Convolution one image at a time ([`FusedOp::Conv2d`] and its two gradients, f32 and f64):
//! each image's columns are built in a buffer of the thread's own and multiplied at once, so
//! no batch-sized column buffer is ever allocated, and the weight gradient accumulates into one
//! block per thread rather than one per image summed afterwards. Images run in parallel, each
//! product on one thread, when there is an image for every thread; one after another, each
//! product threaded, otherwise. Halves are left to the composite.
//!
//! Dimension letters as in `liandan_tensor`'s `conv_fused`: N batch, C channels, O output
//! channels, G groups, Cg = C/G, Og = O/G, K = Cg * kh * kw (a group's column rows),
//! L = out_h * out_w.

use std::sync::OnceLock;

use liandan_tensor::backend::Window2d;
use liandan_tensor::{ConvGeometry, DType, FusedOp, Result, Strided};
use rayon::prelude::*;

use crate::fused::slices;
use crate::matmul::{product, Engine, Gemm, Operand};
use crate::storage::{alloc, CpuElement, CpuStorage, Real};
use crate::window::{col2im_add, im2col_into, Geo};

/// The kernel for a convolution op, or `None` for halves (and every other op).
pub(crate) fn fused(op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<CpuStorage>>> {
    let run = |f32_kernel: fn(&[Strided], ConvGeometry) -> Result<CpuStorage>, f64_kernel: fn(&[Strided], ConvGeometry) -> Result<CpuStorage>, g| {
        Some(match inputs.first()?.dtype {
            DType::F32 => f32_kernel(inputs, g),
            DType::F64 => f64_kernel(inputs, g),
            _ => return None,
        })
    };
    let out = match *op {
        FusedOp::Conv2d(g) => run(forward::<f32>, forward::<f64>, g),
        FusedOp::Conv2dBackwardInput(g) => run(backward_input::<f32>, backward_input::<f64>, g),
        FusedOp::Conv2dBackwardWeight(g) => run(backward_weight::<f32>, backward_weight::<f64>, g),
        _ => None,
    }?;
    Some(out.map(|s| vec![s]))
}

/// The element types with a gemm: f32 and f64.
trait Elem: Real<Acc = Self> + Gemm + CpuElement {}
impl<T: Real<Acc = T> + Gemm + CpuElement> Elem for T {}

/// The engine of the one-thread products of images run in parallel, read once from
/// `LIANDAN_CPU_CONV_GEMM` (`gemm`, the default, or `matrixmultiply`), kept to measure the two
/// against each other. matrixmultiply called from rayon's workers was 4x slower than the
/// composite on the loaded 2-core machine (`liandan profile --model mnist_cnn --steps 3
/// --device cpu`: 10.7 s against 8.0 s composite and 1.9 s on `gemm`, docs/BENCHMARKS.md).
fn per_image_engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    *ENGINE.get_or_init(|| match std::env::var("LIANDAN_CPU_CONV_GEMM").as_deref() {
        Ok("matrixmultiply") => Engine::MatrixMultiply,
        _ => Engine::Gemm,
    })
}

/// The sizes one image's work needs, and the geometry of one group's planes.
#[derive(Clone, Copy)]
struct Plan {
    geo: Geo,
    g: ConvGeometry,
    /// Cg, Og, K, L.
    cg: usize,
    og: usize,
    k: usize,
    l: usize,
}

impl Plan {
    fn new(op: &'static str, g: ConvGeometry) -> Result<Plan> {
        let (cg, og) = (g.c / g.groups, g.o / g.groups);
        let w = Window2d { n: 1, c: cg, h: g.h, w: g.w, kernel: g.kernel, stride: g.stride, padding: g.padding, dilation: g.dilation };
        let geo = Geo::new(op, &w)?;
        Ok(Plan { geo, g, cg, og, k: cg * geo.taps(), l: geo.l() })
    }

    /// Elements of one image of the input, of the output.
    fn image_in(&self) -> usize {
        self.g.c * self.geo.hw()
    }

    fn image_out(&self) -> usize {
        self.g.o * self.l
    }

    /// Whether images run in parallel (each product on one thread).
    fn per_image_threads(&self) -> bool {
        self.g.n > 1 && self.g.n >= rayon::current_num_threads()
    }

    /// Images per thread and the threads: the batch cut into one run of images per thread
    /// when images run in parallel, one run otherwise.
    fn split(&self) -> (usize, usize) {
        if self.per_image_threads() {
            let per = self.g.n.div_ceil(rayon::current_num_threads());
            (per, self.g.n.div_ceil(per))
        } else {
            (self.g.n.max(1), 1)
        }
    }

    /// A column buffer for one group of one image (empty when the columns are the input).
    fn cols<T: Elem>(&self, op: &'static str) -> Result<Vec<T>> {
        alloc(op, if self.geo.is_identity() { 0 } else { self.k * self.l }, T::zero())
    }

    /// The engine and threading of one product.
    fn engine(&self) -> (Engine, bool) {
        if self.per_image_threads() {
            (per_image_engine(), false)
        } else {
            (crate::matmul::engine(), true)
        }
    }
}

/// A row-major `[rows, cols]` operand, or its transpose when `transposed`.
fn mat<T>(data: &[T], cols: usize, transposed: bool) -> Operand<'_, T> {
    Operand { data, strides: if transposed { [1, cols] } else { [cols, 1] } }
}

/// `y[n] = W cols(x[n])` per group.
fn forward<T: Elem>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    let p = Plan::new("conv2d", g)?;
    let v = slices::<T>("conv2d", inputs)?;
    let (x, w) = (&*v[0], &*v[1]);
    let mut y = alloc("conv2d", g.n * p.image_out(), T::zero())?;
    let (engine, threaded) = p.engine();
    let image = |cols: &mut Vec<T>, n: usize, y: &mut [T]| {
        let x = &x[n * p.image_in()..][..p.image_in()];
        for grp in 0..g.groups {
            let cols = group_columns(&p, x, grp, cols);
            let (w, y) = (&w[grp * p.og * p.k..][..p.og * p.k], &mut y[grp * p.og * p.l..][..p.og * p.l]);
            product(engine, threaded, false, [p.og, p.k, p.l], mat(w, p.k, false), mat(cols, p.l, false), y);
        }
    };
    each_image(&p, "conv2d", &mut y, p.image_out(), image)?;
    Ok(T::wrap(y.into()))
}

/// `dx[n] = col2im(W^T dy[n])` per group.
fn backward_input<T: Elem>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_input";
    let p = Plan::new(OP, g)?;
    let v = slices::<T>(OP, inputs)?;
    let (dy, w) = (&*v[0], &*v[1]);
    let mut dx = alloc(OP, g.n * p.image_in(), T::zero())?;
    let (engine, threaded) = p.engine();
    let image = |cols: &mut Vec<T>, n: usize, dx: &mut [T]| {
        let dy = &dy[n * p.image_out()..][..p.image_out()];
        for grp in 0..g.groups {
            let (w, dy) = (&w[grp * p.og * p.k..][..p.og * p.k], &dy[grp * p.og * p.l..][..p.og * p.l]);
            let dx = &mut dx[grp * p.cg * p.geo.hw()..][..p.cg * p.geo.hw()];
            if p.geo.is_identity() {
                product(engine, threaded, false, [p.k, p.og, p.l], mat(w, p.k, true), mat(dy, p.l, false), dx);
            } else {
                product(engine, threaded, false, [p.k, p.og, p.l], mat(w, p.k, true), mat(dy, p.l, false), cols);
                col2im_add(cols, &p.geo, dx);
            }
        }
    };
    each_image(&p, OP, &mut dx, p.image_in(), image)?;
    Ok(T::wrap(dx.into()))
}

/// `dW = sum_n dy[n] cols(x[n])^T` per group: each thread adds its images into its own `dW`,
/// and those few blocks are summed at the end.
fn backward_weight<T: Elem>(inputs: &[Strided], g: ConvGeometry) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_weight";
    let p = Plan::new(OP, g)?;
    let v = slices::<T>(OP, inputs)?;
    let (dy, x) = (&*v[0], &*v[1]);
    let size = g.o * p.k;
    let (engine, threaded) = p.engine();
    // Adds image `n`'s share into `dw`.
    let image = |cols: &mut Vec<T>, n: usize, dw: &mut [T]| {
        let (x, dy) = (&x[n * p.image_in()..][..p.image_in()], &dy[n * p.image_out()..][..p.image_out()]);
        for grp in 0..g.groups {
            let cols = group_columns(&p, x, grp, cols);
            let (dy, dw) = (&dy[grp * p.og * p.l..][..p.og * p.l], &mut dw[grp * p.og * p.k..][..p.og * p.k]);
            product(engine, threaded, true, [p.og, p.l, p.k], mat(dy, p.l, false), mat(cols, p.l, true), dw);
        }
    };
    let (per, threads) = p.split();
    let mut parts = (0..threads).map(|_| Ok((alloc(OP, size, T::zero())?, p.cols::<T>(OP)?))).collect::<Result<Vec<_>>>()?;
    let run = |t: usize, (dw, cols): &mut (Vec<T>, Vec<T>)| (t * per..g.n.min((t + 1) * per)).for_each(|n| image(cols, n, dw));
    if threads > 1 {
        parts.par_iter_mut().enumerate().for_each(|(t, part)| run(t, part));
    } else {
        parts.iter_mut().enumerate().for_each(|(t, part)| run(t, part));
    }
    let mut parts = parts.into_iter().map(|(dw, _)| dw);
    let mut dw = parts.next().map_or_else(|| alloc(OP, size, T::zero()), Ok)?;
    for part in parts {
        dw.iter_mut().zip(part).for_each(|(a, b)| *a = *a + b);
    }
    Ok(T::wrap(dw.into()))
}

/// Runs `image(cols, n, out[n])` for every image `n` of `out` (chunks of `chunk`), with a
/// column buffer per thread: images in parallel or one after another, as the plan says.
fn each_image<T: Elem>(p: &Plan, op: &'static str, out: &mut [T], chunk: usize, image: impl Fn(&mut Vec<T>, usize, &mut [T]) + Sync) -> Result<()> {
    if chunk == 0 {
        return Ok(());
    }
    let (per, threads) = p.split();
    let mut bufs = (0..threads).map(|_| p.cols::<T>(op)).collect::<Result<Vec<_>>>()?;
    let run = |t: usize, out: &mut [T], cols: &mut Vec<T>| out.chunks_mut(chunk).enumerate().for_each(|(i, out)| image(cols, t * per + i, out));
    if threads > 1 {
        out.par_chunks_mut(per * chunk).zip(bufs.par_iter_mut()).enumerate().for_each(|(t, (out, cols))| run(t, out, cols));
    } else {
        run(0, out, &mut bufs[0]);
    }
    Ok(())
}

/// The columns of group `grp` of one image's input `x`: the input itself when the window is
/// the identity (a 1x1, stride-1 convolution), else its im2col in `cols`.
fn group_columns<'a, T: Real>(p: &Plan, x: &'a [T], grp: usize, cols: &'a mut [T]) -> &'a [T] {
    let x = &x[grp * p.cg * p.geo.hw()..][..p.cg * p.geo.hw()];
    if p.geo.is_identity() {
        x
    } else {
        im2col_into(x, &p.geo, cols);
        cols
    }
}
