//! Batched matrix product on the `gemm` crate (AVX-512 and AVX2 kernels chosen at run time)
//! or `matrixmultiply`, by a fixed rule per shape or timed per shape on this CPU ([`Engine`]).
//! Both take any strides, so transposed and batch-broadcast views are read in place. A threaded
//! product of a million multiply-adds or more runs as one one-thread piece per thread
//! ([`gemm_pieces`]).

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use liandan_tensor::{Error, Layout, Result, Strided};
use rayon::prelude::*;

use crate::pool;
pub(crate) use crate::settings::Engine;
use crate::storage::{alloc, backend_error, bad_dtype, collect_n, cpu, dtype_mismatch, reserve, slice, CpuStorage, Held, Real};
use crate::strided::map1;

/// The engine `LIANDAN_CPU_GEMM` chooses ([`crate::settings::GEMM`]).
pub(crate) fn engine() -> Result<Engine> {
    Ok(crate::settings::options()?.gemm)
}

/// One way to compute a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    /// `gemm` into the row-major block.
    Gemm,
    /// `gemm` into a column-major scratch block, then transposed into place.
    GemmColumnMajor,
    /// `matrixmultiply` into the row-major block.
    MatrixMultiply,
}

const WAYS: [Way; 3] = [Way::Gemm, Way::GemmColumnMajor, Way::MatrixMultiply];

/// Multiply-adds under which a product is not worth timing: it runs on `gemm` as it comes.
const TUNE_MIN_WORK: usize = 1 << 16;

/// Timed runs each way gets before the fastest is kept (its best run counts, so one run
/// slowed by another process does not decide), after one untimed run that warms the caches
/// and faults in the pages, so the way timed first is not the one that pays for them.
const TRIALS: u32 = 2;

/// What decides a product's speed: its sizes, which operands are row-major, and whether it
/// accumulates or runs threaded.
#[derive(Clone, Copy, Hash, PartialEq, Eq, Debug)]
struct ShapeKey {
    element: std::any::TypeId,
    mkn: [usize; 3],
    /// Whether a's and b's columns are adjacent in memory.
    dense_rows: [bool; 2],
    accumulate: bool,
    threaded: bool,
}

/// The trials of one shape so far, or the way it settled on.
#[derive(Clone, Copy, Debug, Default)]
struct Trials {
    warmed: bool,
    runs: [u32; 3],
    best: [Option<std::time::Duration>; 3],
    chosen: Option<Way>,
}

impl Trials {
    /// The way the next call takes, and whether it is to be timed.
    fn next(&self) -> (Way, bool) {
        if let Some(way) = self.chosen {
            return (way, false);
        }
        if !self.warmed {
            return (Way::Gemm, true);
        }
        let i = (0..WAYS.len()).min_by_key(|&i| self.runs[i]).expect("three ways");
        (WAYS[i], true)
    }

    /// Counts a timed run, and settles once every way has had its trials.
    fn record(&mut self, way: Way, took: std::time::Duration) {
        if !self.warmed {
            self.warmed = true;
            return;
        }
        let i = WAYS.iter().position(|&w| w == way).expect("a listed way");
        self.runs[i] += 1;
        self.best[i] = Some(self.best[i].map_or(took, |b| b.min(took)));
        if self.chosen.is_none() && self.runs.iter().all(|&r| r >= TRIALS) {
            let fastest = (0..WAYS.len()).min_by_key(|&i| self.best[i].unwrap_or(std::time::Duration::MAX)).expect("three ways");
            self.chosen = Some(WAYS[fastest]);
        }
    }
}

/// Every tuned shape of this process.
fn tuning() -> &'static std::sync::Mutex<std::collections::HashMap<ShapeKey, Trials>> {
    static TUNING: OnceLock<std::sync::Mutex<std::collections::HashMap<ShapeKey, Trials>>> = OnceLock::new();
    TUNING.get_or_init(Default::default)
}

pub(crate) fn matmul(a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    let dims = match (la.shape(), lb.shape()) {
        (&[batch, m, k], &[batch2, k2, n]) if batch == batch2 && k == k2 => [batch, m, k, n],
        _ => {
            return Err(Error::ShapeMismatch {
                op: "matmul",
                lhs: la.shape().to_vec(),
                rhs: lb.shape().to_vec(),
                detail: "must be [B, M, K] and [B, K, N]".into(),
            })
        }
    };
    use CpuStorage as S;
    Ok(match (a, b) {
        (S::F32(x), S::F32(y)) => S::F32(gemm_batched(slice(x), la, slice(y), lb, dims)?.into()),
        (S::F64(x), S::F64(y)) => S::F64(gemm_batched(slice(x), la, slice(y), lb, dims)?.into()),
        (S::F16(x), S::F16(y)) => S::F16(via_f32(slice(x), la, slice(y), lb, dims)?.into()),
        (S::BF16(x), S::BF16(y)) => S::BF16(via_f32(slice(x), la, slice(y), lb, dims)?.into()),
        _ if a.dtype() != b.dtype() => return Err(dtype_mismatch("matmul", a, b)),
        _ => return Err(bad_dtype("matmul", a.dtype(), "matmul takes floats; cast first")),
    })
}

/// Half-precision products run in f32 (no half gemm is fast on a CPU) and round once at the end.
fn via_f32<T: Real<Acc = f32>>(x: &[T], la: &Layout, y: &[T], lb: &Layout, dims: [usize; 4]) -> Result<Vec<T>> {
    let wide = in_f32(x, la, y, lb, dims)?;
    let _wide = Held::new(wide.len() * 4);
    let out = collect_n("matmul", wide.len(), wide.iter().map(|&w| T::narrow(w)));
    pool::give(wide);
    out
}

/// The product of half-precision operands in f32, unrounded.
fn in_f32<T: Real<Acc = f32>>(x: &[T], la: &Layout, y: &[T], lb: &Layout, dims: [usize; 4]) -> Result<Vec<f32>> {
    let (x, lx) = widen(x, la)?;
    let _x = Held::new(x.len() * 4);
    let (y, ly) = widen(y, lb)?;
    let _y = Held::new(y.len() * 4);
    let wide = gemm_batched(&x, &lx, &y, &ly, dims)?;
    // Counted while the copies are held, so the peak sees all three.
    let _wide = Held::new(wide.len() * 4);
    [x, y].into_iter().for_each(pool::give);
    Ok(wide)
}

/// `ops::MatmulWide`: f16 or bf16 `a [M, K]` times `b [K, N]` (any strides), the f32 sums
/// left unrounded (the half products' own way, without their last rounding).
pub(crate) fn matmul_wide(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let ([m, k], [k2, n], a, b) = match inputs {
        [a, b] => match (a.layout.shape(), b.layout.shape()) {
            (&[m, k], &[k2, n]) if k == k2 => ([m, k], [k2, n], a, b),
            (sa, sb) => return Err(Error::ShapeMismatch { op: "matmul_wide", lhs: sa.to_vec(), rhs: sb.to_vec(), detail: "must be [M, K] and [K, N]".into() }),
        },
        _ => return Err(Error::BadShape { op: "matmul_wide", shape: vec![inputs.len()], detail: "takes two operands".into() }),
    };
    let three = |v: &Strided, [r, c]: [usize; 2]| {
        let t = v.layout.strides();
        Layout::new(vec![1, r, c], vec![r * c, t[0], t[1]], v.layout.offset())
    };
    let (la, lb) = (three(a, [m, k]), three(b, [k2, n]));
    use CpuStorage as S;
    let wide = match (cpu(a.storage), cpu(b.storage)) {
        (S::F16(x), S::F16(y)) => in_f32(slice(x), &la, slice(y), &lb, [1, m, k, n])?,
        (S::BF16(x), S::BF16(y)) => in_f32(slice(x), &la, slice(y), &lb, [1, m, k, n])?,
        (x, y) if x.dtype() != y.dtype() => return Err(dtype_mismatch("matmul_wide", x, y)),
        (x, _) => return Err(bad_dtype("matmul_wide", x.dtype(), "f16 or bf16 operands")),
    };
    Ok(vec![S::F32(wide.into())])
}

/// `ops::MatmulBias`: `x [M, K]` times `w [N, K]` transposed, plus `bias [N]` on every row:
/// the product, then the bias added to it in place (the composite's add read the product and
/// wrote a fresh tensor, a pass as long as a short-K product itself: the LSTM's input
/// projection). Halves add to the rounded product and round again, as the composite.
/// `None` where the composite runs: other shapes, mixed types, a bias with a stride.
pub(crate) fn matmul_bias(inputs: &[Strided]) -> Option<Result<Vec<CpuStorage>>> {
    let [x, w, b] = inputs else { return None };
    let (&[m, k], &[n, k2], &[nb]) = (x.layout.shape(), w.layout.shape(), b.layout.shape()) else { return None };
    if k != k2 || nb != n || !b.layout.is_contiguous() || [w.dtype, b.dtype] != [x.dtype; 2] {
        return None;
    }
    let (xs, ws) = (x.layout.strides(), w.layout.strides());
    let la = Layout::new(vec![1, m, k], vec![m * k, xs[0], xs[1]], x.layout.offset());
    let lw = Layout::new(vec![1, k, n], vec![n * k, ws[1], ws[0]], w.layout.offset());
    let at = b.layout.offset()..b.layout.offset() + n;
    use CpuStorage as S;
    Some((|| {
        let y = match (cpu(x.storage), cpu(w.storage), cpu(b.storage)) {
            (S::F32(xv), S::F32(wv), S::F32(bv)) => {
                let mut y = gemm_batched(slice(xv), &la, slice(wv), &lw, [1, m, k, n])?;
                let bias = bias_of(slice(bv), &at)?;
                by_rows(&mut y, n, |row| crate::vmath::add_in_place(row, bias));
                S::F32(y.into())
            }
            (S::F64(xv), S::F64(wv), S::F64(bv)) => {
                S::F64(plus_rows(gemm_batched(slice(xv), &la, slice(wv), &lw, [1, m, k, n])?, bias_of(slice(bv), &at)?).into())
            }
            (S::F16(xv), S::F16(wv), S::F16(bv)) => S::F16(plus_rows(via_f32(slice(xv), &la, slice(wv), &lw, [1, m, k, n])?, bias_of(slice(bv), &at)?).into()),
            (S::BF16(xv), S::BF16(wv), S::BF16(bv)) => {
                S::BF16(plus_rows(via_f32(slice(xv), &la, slice(wv), &lw, [1, m, k, n])?, bias_of(slice(bv), &at)?).into())
            }
            (x, _, _) => return Err(bad_dtype("matmul_bias", x.dtype(), "floating-point dtypes only")),
        };
        Ok(vec![y])
    })())
}

/// The bias's `n` values at `at` in its buffer.
fn bias_of<'a, T>(v: &'a [T], at: &std::ops::Range<usize>) -> Result<&'a [T]> {
    v.get(at.clone()).ok_or_else(|| backend_error("matmul_bias", "the bias reaches past its buffer"))
}

/// `y`'s rows of `n` each given to `f`, in parallel where they are many.
fn by_rows<T: Send>(y: &mut [T], n: usize, f: impl Fn(&mut [T]) + Sync) {
    if n == 0 {
        return;
    }
    if crate::strided::parallel(y.len()) {
        let rows = (crate::strided::CHUNK / n).max(1);
        y.par_chunks_mut(rows * n).for_each(|c| c.chunks_mut(n).for_each(&f));
    } else {
        y.chunks_mut(n).for_each(f);
    }
}

/// `y` with `bias` added to each of its rows, in `T`'s own arithmetic.
fn plus_rows<T: Real>(mut y: Vec<T>, bias: &[T]) -> Vec<T> {
    by_rows(&mut y, bias.len(), |row| row.iter_mut().zip(bias).for_each(|(y, &b)| *y = *y + b));
    y
}

/// The view as contiguous f32, keeping a broadcast batch axis broadcast rather than copied.
fn widen<T: Real<Acc = f32>>(v: &[T], l: &Layout) -> Result<(Vec<f32>, Layout)> {
    let (shape, strides) = (l.shape(), l.strides());
    let (rows, cols) = (shape[1], shape[2]);
    if shape[0] > 1 && strides[0] == 0 {
        let first = Layout::new(vec![rows, cols], &strides[1..], l.offset());
        Ok((map1(v, &first, T::widen)?, Layout::new(shape, vec![0, cols, 1], 0)))
    } else {
        Ok((map1(v, l, T::widen)?, Layout::contiguous(shape)))
    }
}

/// `C = A B` with every matrix given by pointer and strides, on either engine.
pub(crate) trait Gemm: Copy + Default + std::ops::AddAssign + Send + Sync + 'static {
    /// # Safety
    /// The pointers and strides must describe matrices inside live allocations, and `c` must
    /// not overlap `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn matrixmultiply(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        c: *mut Self,
        rsc: isize,
        beta: Self,
    );
    const ONE: Self;
}

/// f32 and f64 run `matrixmultiply`'s `sgemm` and `dgemm`, whose signatures differ only in type.
macro_rules! gemm {
    ($t:ty, $gemm:path) => {
        impl Gemm for $t {
            unsafe fn matrixmultiply(
                m: usize,
                k: usize,
                n: usize,
                a: *const $t,
                rsa: isize,
                csa: isize,
                b: *const $t,
                rsb: isize,
                csb: isize,
                c: *mut $t,
                rsc: isize,
                beta: $t,
            ) {
                $gemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, 1);
            }
            const ONE: $t = 1.0;
        }
    };
}

gemm!(f32, matrixmultiply::sgemm);
gemm!(f64, matrixmultiply::dgemm);

/// Rows of a product at or under which [`Engine::Gemm`] computes a wide product against a
/// transposed rhs column-major and then transposes it.
const SKINNY_ROWS: usize = 64;

/// Columns from which such a product is wide enough for that.
const WIDE_COLS: usize = 128;

/// Rows from which [`Engine::Gemm`] computes a product of a column-major (transposed) lhs
/// against at most [`TALL_MAX_COLS`] columns column-major, then transposes it.
const TALL_ROWS: usize = 4096;
const TALL_MAX_COLS: usize = 512;

/// Columns under which, and rows from which, [`Engine::Gemm`] computes a product of a
/// column-major (transposed) lhs column-major, then transposes it.
const NARROW_COLS: usize = 48;
const NARROW_MIN_ROWS: usize = 256;

/// Rows, depth and columns from which [`Engine::Gemm`] copies a dense column-major
/// (transposed) rhs row-major before the product: on an AMD EPYC `gemm` ran `[1024, 1024] x
/// [1024, 512]` (mlp's first layer, `x W^T`) 1.2x, `[512, 1024] x [1024, 512]` and a
/// convolution's weight gradient `cols dy^T`, `[576, 1024] x [1024, 64]`, 1.3x faster from the
/// copy, which costs one pass over the rhs against `m` multiply-adds per element; at a depth of
/// 28 to 192 both ran alike.
const COPY_RHS_MIN_ROWS: usize = 256;
const COPY_RHS_MIN_DEPTH: usize = 256;
const COPY_RHS_MIN_COLS: usize = 64;

/// One `[m, k] x [k, n]` product: `a` and `b` by pointer and (row, column) strides, into the
/// row-major `[m, n]` block at `c`, whose rows are `ldc` apart.
#[derive(Clone, Copy)]
struct Raw<T> {
    mkn: [usize; 3],
    a: *const T,
    sa: [isize; 2],
    b: *const T,
    sb: [isize; 2],
    c: *mut T,
    ldc: usize,
}

// SAFETY: a `Raw` is handed to other threads only as pieces of one product (`gemm_pieces`),
// which read `a` and `b` and write disjoint blocks of `c`, all alive until the pieces return.
unsafe impl<T> Send for Raw<T> {}
unsafe impl<T> Sync for Raw<T> {}

/// Multiply-adds from which a threaded product is cut into pieces, one a thread.
const PIECES_MIN_WORK: usize = 1 << 20;

/// Rows or columns a piece gets at least (a multiple of 16, as every piece's start is).
const PIECE_MIN: usize = 64;

/// A threaded product cut along the longer of its rows and columns into one piece per thread,
/// each a one-thread product, where it is large enough: `gemm`'s own threading spreads a
/// product of a few rows, or of a few columns, over few of many threads (16 threads of a Xeon:
/// `[128, 1152] x [1152, 512]` 577 us threaded by `gemm`,
/// 205 in pieces along its columns; `[256, 9216] x [9216, 64]` 656 against 293 along its rows;
/// 1024^3 2,580 against 1,810). Returns whether it ran the product.
///
/// # Safety
/// As [`Gemm::matrixmultiply`].
unsafe fn gemm_pieces<T: Gemm>(engine: Engine, accumulate: bool, p: Raw<T>) -> bool {
    let [m, k, n] = p.mkn;
    let threads = rayon::current_num_threads();
    if threads < 2 || m * k * n < PIECES_MIN_WORK {
        return false;
    }
    let (along_columns, len) = if n >= m { (true, n) } else { (false, m) };
    // A few rows against a wide transposed rhs keep pieces wide enough to be made column-major
    // as the whole would be (`gemm_one`: mnist_cnn's products at batch 16, its fc1 `[16, 9216]
    // x [9216, 128]^T` among them, took 1.65x as long on 2 threads with that product in two
    // row-major pieces of 64 columns).
    let column_major = m <= SKINNY_ROWS && n >= WIDE_COLS && p.sb[0] == 1 && p.sb[1] != 1;
    let least = if along_columns && column_major { WIDE_COLS.max(PIECE_MIN) } else { PIECE_MIN };
    let piece = len.div_ceil(threads).next_multiple_of(16).max(least);
    if piece >= len {
        return false;
    }
    // The whole `Raw` goes to the threads (a closure would take its pointers one by one).
    let whole = &p;
    (0..len.div_ceil(piece)).into_par_iter().for_each(|j| {
        let p = *whole;
        let (start, end) = (j * piece, len.min((j + 1) * piece));
        // SAFETY: each piece is a block of the caller's product: columns start..end of `b`
        // and `c`, or rows start..end of `a` and `c`, disjoint from every other piece's.
        unsafe {
            let sub = if along_columns {
                Raw { mkn: [m, k, end - start], b: p.b.offset(start as isize * p.sb[1]), c: p.c.add(start), ..p }
            } else {
                Raw { mkn: [end - start, k, n], a: p.a.offset(start as isize * p.sa[0]), c: p.c.add(start * p.ldc), ..p }
            };
            gemm_one(engine, false, accumulate, sub);
        }
    });
    true
}

/// The product `p`, added to what its block holds when `accumulate`.
///
/// # Safety
/// As [`Gemm::matrixmultiply`].
unsafe fn gemm_one<T: Gemm>(engine: Engine, threaded: bool, accumulate: bool, p: Raw<T>) {
    if engine == Engine::Gemm && gemm_row_major_rhs(threaded, accumulate, p) {
        return;
    }
    if threaded && engine != Engine::MatrixMultiply && gemm_pieces(engine, accumulate, p) {
        return;
    }
    let ([m, k, n], [rsa, csa], [rsb, csb]) = (p.mkn, p.sa, p.sb);
    let way = match engine {
        Engine::MatrixMultiply => Way::MatrixMultiply,
        // A few rows against a wide column-major (transposed) rhs, as a Linear layer's
        // `x W^T`, the LSTM's gate products at small batches and a convolution's weight
        // gradient (one thread): on an AMD EPYC `gemm` runs
        // these 1.1-2.9x faster into a column-major block than into a row-major one,
        // transpose included ([16, 256] x [256, 1024]^T 151 us row-major, 87 column-major,
        // PyTorch 115), and faster than `matrixmultiply`; on an Intel Xeon it is on par with
        // `matrixmultiply` at 16 rows (113 against 136) and 1.1-1.5x slower at 64. At 256 rows
        // the row-major product is the faster.
        Engine::Gemm if n >= WIDE_COLS && rsb == 1 && csb != 1 && m <= SKINNY_ROWS => Way::GemmColumnMajor,
        // A tall transposed lhs, as a convolution's input gradient `W^T dy` (3x3, from 456
        // input channels): on an Intel Xeon `gemm` runs these 1.2-2x faster into a column-major block
        // (`[4608, 512] x [512, 128]` 4.3 ms against 8.3 on one thread), not below 4,096 rows
        // (`[2304, 1024] x [1024, 128]` 4.5 against 4.8).
        Engine::Gemm if m >= TALL_ROWS && n <= TALL_MAX_COLS && rsa == 1 && csa != 1 => Way::GemmColumnMajor,
        // Fewer columns than `gemm`'s microkernel has rows, from a column-major lhs, as the
        // LSTM's input weight gradient `dG^T x` over 28 inputs: a row-major result is made as
        // its transpose, whose 28 rows fill a little over half of each microkernel tile.
        Engine::Gemm if n < NARROW_COLS && m >= NARROW_MIN_ROWS && rsa == 1 && csa != 1 => Way::GemmColumnMajor,
        Engine::Gemm => Way::Gemm,
        Engine::Tuned if m * k * n < TUNE_MIN_WORK => Way::Gemm,
        Engine::Tuned => {
            let key = ShapeKey { element: std::any::TypeId::of::<T>(), mkn: p.mkn, dense_rows: [csa == 1, csb == 1], accumulate, threaded };
            let lock = || tuning().lock().unwrap_or_else(|e| e.into_inner());
            let (way, timed) = lock().entry(key).or_default().next();
            if !timed {
                return run_way(way, threaded, accumulate, p);
            }
            let start = std::time::Instant::now();
            run_way(way, threaded, accumulate, p);
            lock().entry(key).or_default().record(way, start.elapsed());
            return;
        }
    };
    run_way(way, threaded, accumulate, p)
}

/// The product `p` from a row-major copy of its rhs, where that is dense column-major and the
/// product large enough ([`COPY_RHS_MIN_ROWS`], [`COPY_RHS_MIN_DEPTH`],
/// [`COPY_RHS_MIN_COLS`]). Returns whether it ran the product.
///
/// # Safety
/// As [`Gemm::matrixmultiply`].
unsafe fn gemm_row_major_rhs<T: Gemm>(threaded: bool, accumulate: bool, p: Raw<T>) -> bool {
    let [m, k, n] = p.mkn;
    if m < COPY_RHS_MIN_ROWS || k < COPY_RHS_MIN_DEPTH || n < COPY_RHS_MIN_COLS || p.sb != [1, k as isize] {
        return false;
    }
    // A copy the host cannot give leaves the product to the view.
    let Ok(mut rhs) = crate::storage::scratch_overwritten("matmul", k * n, T::default()) else { return false };
    // SAFETY: the rhs is the dense `[n, k]` block at `b` (its strides checked above), which the
    // caller keeps valid for reads; `rhs` holds `[k, n]` and is no part of it.
    unsafe {
        transpose_into(std::slice::from_raw_parts(p.b, n * k), [n, k], rhs.as_mut_ptr(), n, false);
        gemm_one(Engine::Gemm, threaded, accumulate, Raw { b: rhs.as_ptr(), sb: [n as isize, 1], ..p });
    }
    true
}

/// The product `p` one way.
///
/// # Safety
/// As [`Gemm::matrixmultiply`].
unsafe fn run_way<T: Gemm>(way: Way, threaded: bool, accumulate: bool, p: Raw<T>) {
    let Raw { mkn: [m, k, n], a, sa: [rsa, csa], b, sb: [rsb, csb], c, ldc } = p;
    let keep = if accumulate { T::ONE } else { T::default() };
    // gemm itself declines threads below its own work threshold; a pool of one thread would
    // only add a hand-off to it.
    let par = if threaded && rayon::current_num_threads() > 1 { gemm::Parallelism::Rayon(0) } else { gemm::Parallelism::None };
    match way {
        Way::MatrixMultiply => T::matrixmultiply(m, k, n, a, rsa, csa, b, rsb, csb, c, ldc as isize, keep),
        Way::GemmColumnMajor => {
            let mut t: Vec<T> = pool::take(m * n).unwrap_or_else(|| Vec::with_capacity(m * n));
            let _held = Held::new(m * n * std::mem::size_of::<T>());
            // dst column-major (column stride m, row stride 1), never read.
            gemm::gemm(m, n, k, t.as_mut_ptr(), m as isize, 1, false, a, csa, rsa, b, csb, rsb, T::default(), T::ONE, false, false, false, par);
            // SAFETY: the product wrote all m * n elements.
            t.set_len(m * n);
            // `c` is the caller's row-major m x n block (initialized where accumulating), apart
            // from `t`.
            transpose_into(&t, [n, m], c, ldc, accumulate);
            pool::give(t);
        }
        // dst = keep * dst + 1 * a b; with `read_dst` false the block is never read.
        Way::Gemm => gemm::gemm(m, n, k, c, 1, ldc as isize, accumulate, a, csa, rsa, b, csb, rsb, keep, T::ONE, false, false, false, par),
    }
}

/// `dst = src^T` (or `dst += src^T` when `accumulate`) for a row-major `[rows, cols]` `src`
/// and a row-major `[cols, rows]` block at `dst` whose rows are `ld` apart. f32 goes through
/// 8 x 8 tiles in AVX registers where the CPU has them (the element loop ran at about one
/// element a nanosecond); the rest, and the tiles' edges, through [`transpose_span`].
///
/// # Safety
/// `dst` must be valid for writes of that block (and reads when `accumulate`, then
/// initialized) and overlap no part of `src`.
pub(crate) unsafe fn transpose_into<T: Gemm>(src: &[T], [rows, cols]: [usize; 2], dst: *mut T, ld: usize, accumulate: bool) {
    assert!(src.len() >= rows * cols, "transpose_into: the source holds fewer than {rows} x {cols} elements");
    #[cfg(target_arch = "x86_64")]
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && std::arch::is_x86_feature_detected!("avx") {
        let (src32, dst32) = (src.as_ptr() as *const f32, dst as *mut f32);
        let (rows8, cols8) = (rows / 8 * 8, cols / 8 * 8);
        // Eight rows of `dst` at a time, written along their length: `ld` is often a power of
        // two, and tiles across all of `dst`'s rows at once fell into one cache set.
        for c0 in (0..cols8).step_by(8) {
            for r0 in (0..rows8).step_by(8) {
                transpose_8x8_avx(src32.add(r0 * cols + c0), cols, dst32.add(c0 * ld + r0), ld, accumulate);
            }
        }
        // The columns past the last whole tile, then the rows past it.
        transpose_span(src, cols, 0..rows8, cols8..cols, dst, ld, accumulate);
        transpose_span(src, cols, rows8..rows, 0..cols, dst, ld, accumulate);
        return;
    }
    transpose_span(src, cols, 0..rows, 0..cols, dst, ld, accumulate);
}

/// [`transpose_into`] of the rows `rs` and columns `cs` of `src` (`cols` wide), an element at a
/// time in runs along `dst`'s rows, 16 source rows at a time, so neither side is walked with a
/// long stride through memory.
///
/// # Safety
/// As [`transpose_into`].
unsafe fn transpose_span<T: Gemm>(src: &[T], cols: usize, rs: std::ops::Range<usize>, cs: std::ops::Range<usize>, dst: *mut T, ld: usize, accumulate: bool) {
    const RUN: usize = 16;
    for r0 in rs.clone().step_by(RUN) {
        let run = RUN.min(rs.end - r0);
        for col in cs.clone() {
            let out = dst.add(col * ld + r0);
            for i in 0..run {
                let v = src[(r0 + i) * cols + col];
                if accumulate {
                    *out.add(i) += v;
                } else {
                    out.add(i).write(v);
                }
            }
        }
    }
}

/// One 8 x 8 tile of [`transpose_into`]: `dst[j * ld + i] (+)= src[i * cols + j]`.
///
/// # Safety
/// The CPU must have AVX; both tiles must lie inside their allocations, `dst`'s initialized
/// when `accumulate`, and apart from each other.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_8x8_avx(src: *const f32, cols: usize, dst: *mut f32, ld: usize, accumulate: bool) {
    use std::arch::x86_64::*;
    let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * cols)));
    // Pairs of rows interleaved, then quads, then the 128-bit halves swapped into place.
    let t = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let u = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    for j in 0..4 {
        for (half, column) in [(_mm256_permute2f128_ps::<0x20>(u[j], u[j + 4]), j), (_mm256_permute2f128_ps::<0x31>(u[j], u[j + 4]), j + 4)] {
            let p = dst.add(column * ld);
            let v = if accumulate { _mm256_add_ps(_mm256_loadu_ps(p), half) } else { half };
            _mm256_storeu_ps(p, v);
        }
    }
}

/// One matrix operand: its elements and its (row, column) strides from the slice's start.
pub(crate) struct Operand<'a, T> {
    pub data: &'a [T],
    pub strides: [usize; 2],
}

impl<T> Operand<'_, T> {
    /// Whether every element of a `[rows, cols]` matrix with these strides lies in the slice.
    fn holds(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.strides[0] + (cols - 1) * self.strides[1] < self.data.len()
    }
}

/// `c = a b`, or `c += a b` when `accumulate`, for an `[m, k]` `a`, a `[k, n]` `b` and the
/// row-major `[m, n]` block `c`; threaded inside the product when `threaded`.
///
/// # Panics
/// If an operand's strides reach past its slice: callers build them from shapes they checked,
/// so that is a broken invariant.
#[allow(clippy::too_many_arguments)]
pub(crate) fn product<T: Gemm>(engine: Engine, threaded: bool, accumulate: bool, [m, k, n]: [usize; 3], a: Operand<T>, b: Operand<T>, c: &mut [T]) {
    product_strided(engine, threaded, accumulate, [m, k, n], a, b, c, n)
}

/// [`product`] into a `c` whose rows are `ldc` apart (`ldc >= n`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn product_strided<T: Gemm>(
    engine: Engine,
    threaded: bool,
    accumulate: bool,
    [m, k, n]: [usize; 3],
    a: Operand<T>,
    b: Operand<T>,
    c: &mut [T],
    ldc: usize,
) {
    let c_holds = m == 0 || n == 0 || (ldc >= n && c.len() >= (m - 1) * ldc + n);
    assert!(a.holds(m, k) && b.holds(k, n) && c_holds, "a product's operands do not hold [{m}, {k}] x [{k}, {n}]");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.chunks_mut(ldc).take(m).for_each(|row| row[..n].fill(T::default()));
        }
        return;
    }
    let s = |o: &Operand<T>| [o.strides[0] as isize, o.strides[1] as isize];
    // SAFETY: the assert above keeps every element read or written inside its slice, and `c`
    // is borrowed mutably, so it overlaps neither operand.
    unsafe {
        gemm_one(engine, threaded, accumulate, Raw { mkn: [m, k, n], a: a.data.as_ptr(), sa: s(&a), b: b.data.as_ptr(), sb: s(&b), c: c.as_mut_ptr(), ldc })
    }
}

fn gemm_batched<T: Gemm>(x: &[T], la: &Layout, y: &[T], lb: &Layout, dims: [usize; 4]) -> Result<Vec<T>> {
    gemm_batched_on(engine()?, x, la, y, lb, dims)
}

fn gemm_batched_on<T: Gemm>(engine: Engine, x: &[T], la: &Layout, y: &[T], lb: &Layout, [batch, m, k, n]: [usize; 4]) -> Result<Vec<T>> {
    if batch * m * n == 0 || k == 0 {
        return alloc("matmul", batch * m * n, T::default());
    }
    // The gemm reads through raw pointers: a layout that leaves its buffer must fail here.
    if la.max_extent() > x.len() || lb.max_extent() > y.len() {
        return Err(backend_error("matmul", "a view reaches past the end of its buffer"));
    }
    let stride = |l: &Layout, d: usize| l.strides()[d] as isize;
    let (sa, sb) = ([stride(la, 1), stride(la, 2)], [stride(lb, 1), stride(lb, 2)]);
    // The products write every element without reading it (beta 0, `read_dst` false), so
    // they fill fresh memory: no zeroing pass on one thread first.
    let mut out = reserve("matmul", batch * m * n)?;
    let blocks = &mut out.spare_capacity_mut()[..batch * m * n];
    let one = |bi: usize, c: &mut [MaybeUninit<T>], threaded: bool| {
        // SAFETY: every element the gemm reads is within `max_extent`, checked above, and `c`
        // is a fresh `m * n` block of `out`.
        unsafe {
            let a = x.as_ptr().add(la.offset() + bi * la.strides()[0]);
            let b = y.as_ptr().add(lb.offset() + bi * lb.strides()[0]);
            gemm_one(engine, threaded, false, Raw { mkn: [m, k, n], a, sa, b, sb, c: c.as_mut_ptr().cast(), ldc: n });
        }
    };
    // Threads over the batch when it has a product for every thread (one thread-pool wake-up,
    // no split of a small product), inside each product otherwise.
    let threads = rayon::current_num_threads();
    if threads > 1 && batch > 1 && batch >= threads {
        // One-threaded products side by side, on the engine of every other product: the
        // convolution's per-image products ran 5x faster on `gemm` than on matrixmultiply
        // from rayon's workers (crates/backend-cpu/src/conv.rs says where that was measured).
        let one = |bi: usize, c: &mut [MaybeUninit<T>]| {
            // SAFETY: as above.
            unsafe {
                let a = x.as_ptr().add(la.offset() + bi * la.strides()[0]);
                let b = y.as_ptr().add(lb.offset() + bi * lb.strides()[0]);
                gemm_one(engine, false, false, Raw { mkn: [m, k, n], a, sa, b, sb, c: c.as_mut_ptr().cast(), ldc: n });
            }
        };
        blocks.par_chunks_mut(m * n).enumerate().for_each(|(bi, c)| one(bi, c));
    } else {
        blocks.chunks_mut(m * n).enumerate().for_each(|(bi, c)| one(bi, c, true));
    }
    // SAFETY: the products above wrote all `batch` blocks of `m * n`.
    unsafe { out.set_len(batch * m * n) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `transpose_into` against the definition, for tiles with and without edges, into a block
    /// with rows wider than the result, written and added to, in f32 (tiles) and f64.
    #[test]
    fn transposes_match_the_definition() {
        fn check<T: Gemm + PartialEq + std::fmt::Debug + From<u16>>() {
            for (rows, cols) in [(1, 1), (7, 9), (8, 8), (9, 17), (13, 24), (16, 64), (1024, 64), (64, 1000)] {
                let src: Vec<T> = (0..rows * cols).map(|i| T::from((i % 1009) as u16)).collect();
                let ld = rows + 3;
                for accumulate in [false, true] {
                    let base: Vec<T> = (0..cols * ld).map(|i| T::from((i % 7) as u16)).collect();
                    let mut got = base.clone();
                    // SAFETY: `got` holds the [cols, ld] block, initialized, apart from `src`.
                    unsafe { transpose_into(&src, [rows, cols], got.as_mut_ptr(), ld, accumulate) };
                    let mut want = base.clone();
                    for r in 0..rows {
                        for c in 0..cols {
                            let v = src[r * cols + c];
                            if accumulate {
                                want[c * ld + r] += v;
                            } else {
                                want[c * ld + r] = v;
                            }
                        }
                    }
                    assert_eq!(got, want, "[{rows}, {cols}], accumulate {accumulate}");
                }
            }
        }
        check::<f32>();
        check::<f64>();
    }

    fn naive(x: &[f32], la: &Layout, y: &[f32], lb: &Layout) -> Vec<f32> {
        let (b, m, k, n) = (la.shape()[0], la.shape()[1], la.shape()[2], lb.shape()[2]);
        let mut out = vec![0.0; b * m * n];
        for bi in 0..b {
            for i in 0..m {
                for j in 0..n {
                    out[(bi * m + i) * n + j] = (0..k).map(|p| x[la.index_of(&[bi, i, p])] * y[lb.index_of(&[bi, p, j])]).sum();
                }
            }
        }
        out
    }

    #[test]
    fn transposed_and_broadcast_views_match_a_naive_loop() {
        let (b, m, k, n) = (3, 5, 7, 4);
        let x: Vec<f32> = (0..b * m * k + 3).map(|i| ((i * 37 % 11) as f32 - 5.0) / 3.0).collect();
        let y: Vec<f32> = (0..k * n).map(|i| ((i * 17 % 13) as f32 - 6.0) / 4.0).collect();
        // lhs stored as [B, K, M] from offset 3 and transposed; rhs one [N, K] matrix, transposed
        // and broadcast over the batch.
        let la = Layout::new(vec![b, m, k], vec![m * k, 1, m], 3);
        let lb = Layout::new(vec![b, k, n], vec![0, 1, k], 0);
        let want = naive(&x, &la, &y, &lb);
        for engine in [Engine::Tuned, Engine::Gemm, Engine::MatrixMultiply] {
            let got = gemm_batched_on(engine, &x, &la, &y, &lb, [b, m, k, n]).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-4 + 1e-5 * w.abs(), "{engine:?}: {g} vs {w}");
            }
        }
        // One product alone runs threaded inside the gemm, not split over the batch.
        let (la1, lb1) = (Layout::new(vec![1, m, k], vec![m * k, 1, m], 3), Layout::new(vec![1, k, n], vec![0, 1, k], 0));
        for engine in [Engine::Gemm, Engine::MatrixMultiply] {
            let got = gemm_batched_on(engine, &x, &la1, &y, &lb1, [1, m, k, n]).unwrap();
            for (g, w) in got.iter().zip(&want[..m * n]) {
                assert!((g - w).abs() <= 1e-4 + 1e-5 * w.abs(), "{engine:?}: {g} vs {w}");
            }
        }
        let xh: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
        let yh: Vec<half::f16> = y.iter().map(|&v| half::f16::from_f32(v)).collect();
        let got = via_f32(&xh, &la, &yh, &lb, [b, m, k, n]).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g.to_f32() - w).abs() <= 1e-2 + 1e-2 * w.abs(), "{g} vs {w}");
        }
    }

    #[test]
    fn product_writes_or_accumulates_on_both_engines() {
        // The second shape is few rows against a wide transposed rhs: made column-major, then
        // transposed (`gemm_one`).
        // The third is big enough to be tuned: its calls go through every way in turn, then
        // the fastest.
        for (m, k, n) in [(4, 6, 5), (3, 9, WIDE_COLS + 3), (5, 120, WIDE_COLS + 2)] {
            writes_or_accumulates(m, k, n);
        }
    }

    /// A tall column-major lhs goes through a column-major block and a transpose (`gemm_one`),
    /// written and added to, on one thread and threaded.
    #[test]
    fn tall_transposed_products_write_or_accumulate() {
        let (m, k, n) = (TALL_ROWS + 5, 6, 9);
        // lhs stored as [K, M] and read transposed, as a convolution's input gradient reads W.
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 9) as f32 - 4.0) / 2.0).collect();
        let y: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0).collect();
        let want = naive(&x, &Layout::new(vec![1, m, k], vec![0, 1, m], 0), &y, &Layout::contiguous(&[1, k, n]));
        let a = || Operand { data: &x[..], strides: [1, m] };
        let b = || Operand { data: &y[..], strides: [n, 1] };
        let mut c = vec![1.0f32; m * n];
        product(Engine::Gemm, false, true, [m, k, n], a(), b(), &mut c);
        product(Engine::Gemm, true, true, [m, k, n], a(), b(), &mut c);
        for (g, w) in c.iter().zip(&want) {
            assert!((g - (1.0 + 2.0 * w)).abs() <= 1e-4 + 1e-5 * w.abs(), "accumulating: {g} vs 1 + 2 * {w}");
        }
        product(Engine::Gemm, true, false, [m, k, n], a(), b(), &mut c);
        for (g, w) in c.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 + 1e-5 * w.abs(), "writing: {g} vs {w}");
        }
    }

    /// Threaded products of a million multiply-adds or more run in pieces, one a thread
    /// (`gemm_pieces`): along the columns (the first shape's pieces of 160 columns are few rows
    /// against a wide transposed rhs, made column-major and transposed into rows 600 apart),
    /// along the rows, and a last piece shorter than the others.
    #[test]
    fn threaded_products_in_pieces_write_or_accumulate() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().expect("a thread pool");
        pool.install(|| {
            for (m, k, n) in [(40, 100, 600), (300, 100, 40), (70, 200, 90)] {
                assert!(m * k * n >= PIECES_MIN_WORK);
                writes_or_accumulates(m, k, n);
            }
        });
    }

    #[test]
    fn tuning_times_every_way_then_keeps_the_fastest() {
        let ms = std::time::Duration::from_millis;
        let mut t = Trials::default();
        let mut seen = Vec::new();
        for took in [1, 5, 3, 9, 4, 7, 8] {
            let (way, timed) = t.next();
            assert!(timed && t.chosen.is_none());
            seen.push(way);
            t.record(way, ms(took));
        }
        // A warm-up call not counted (its 1 ms would have won), then each way twice, round
        // robin; the best run of each decides.
        assert_eq!(seen, [[Way::Gemm].as_slice(), &WAYS, &WAYS].concat());
        assert_eq!(t.chosen, Some(Way::GemmColumnMajor));
        assert_eq!(t.next(), (Way::GemmColumnMajor, false));
    }

    fn writes_or_accumulates(m: usize, k: usize, n: usize) {
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 9) as f32 - 4.0) / 2.0).collect();
        // rhs stored as [N, K] and read transposed, as the convolution reads its columns.
        let y: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0).collect();
        let want = naive(&x, &Layout::contiguous(&[1, m, k]), &y, &Layout::new(vec![1, k, n], vec![0, 1, k], 0));
        // Repeated, so a tuned shape runs every way and then the one it keeps.
        for engine in [Engine::Tuned, Engine::Gemm, Engine::MatrixMultiply] {
            for _ in 0..2 * (1 + WAYS.len() as u32 * TRIALS) {
                let mut c = vec![1.0f32; m * n];
                let a = || Operand { data: &x[..], strides: [k, 1] };
                let b = || Operand { data: &y[..], strides: [1, k] };
                product(engine, false, true, [m, k, n], a(), b(), &mut c);
                product(engine, true, true, [m, k, n], a(), b(), &mut c);
                for (g, w) in c.iter().zip(&want) {
                    assert!((g - (1.0 + 2.0 * w)).abs() <= 1e-4 + 1e-5 * w.abs(), "{engine:?} accumulating: {g} vs 1 + 2 * {w}");
                }
                product(engine, true, false, [m, k, n], a(), b(), &mut c);
                for (g, w) in c.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-4 + 1e-5 * w.abs(), "{engine:?} writing: {g} vs {w}");
                }
            }
        }
    }
}
