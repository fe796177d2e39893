//! The native window and index kernels against the CPU backend, through the kernel trait
//! directly: odd geometries (stride 2, padding 1, dilation 2, 7x9 and 33x33 planes), views with
//! an offset, max-pool ties and NaNs (indices compared exactly), scatter-add with heavily
//! repeated indices, out-of-range indices, and no CPU fallback for f32.

use liandan_backend_wgpu as _;
use liandan_tensor::backend::Window2d;
use liandan_tensor::conformance::values;
use liandan_tensor::dtype::{bytes_to_f64, f64_to_bytes};
use liandan_tensor::layout::contiguous_strides;
use liandan_tensor::{DType, Device, Error, Layout, Result, Storage, Strided};

mod common;
use common::gpu;

/// A tensor's storage on one device, with `pad` junk elements before the data so the view has
/// an offset.
struct Buf {
    storage: Storage,
    layout: Layout,
    dtype: DType,
}

impl Buf {
    fn new(d: &Device, v: &[f64], shape: &[usize], dtype: DType, pad: usize) -> Buf {
        let mut all = vec![7.0; pad];
        all.extend_from_slice(v);
        let storage = d.backend().from_host(&f64_to_bytes(&all, dtype), dtype).unwrap();
        Buf { storage, layout: Layout::new(shape, contiguous_strides(shape), pad), dtype }
    }

    /// The same data viewed transposed on its last two axes (stored that way).
    fn transposed(d: &Device, v: &[f64], shape: &[usize], dtype: DType) -> Buf {
        let r = shape.len();
        let mut stored = shape.to_vec();
        stored.swap(r - 2, r - 1);
        let (rows, cols) = (shape[r - 2], shape[r - 1]);
        let t: Vec<f64> = (0..v.len())
            .map(|f| {
                let (b, rc) = (f / (rows * cols), f % (rows * cols));
                let (j, i) = (rc / rows, rc % rows);
                v[b * rows * cols + i * cols + j]
            })
            .collect();
        let mut strides = contiguous_strides(&stored);
        strides.swap(r - 2, r - 1);
        let storage = d.backend().from_host(&f64_to_bytes(&t, dtype), dtype).unwrap();
        Buf { storage, layout: Layout::new(shape, strides, 0), dtype }
    }

    fn view(&self) -> Strided<'_> {
        Strided { storage: &*self.storage, layout: &self.layout, dtype: self.dtype }
    }
}

fn read(d: &Device, s: &Storage, numel: usize, dtype: DType) -> Vec<f64> {
    let bytes = d.backend().to_host(Strided { storage: &**s, layout: &Layout::contiguous(&[numel]), dtype }).unwrap();
    bytes_to_f64(&bytes, dtype)
}

#[track_caller]
fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= atol + rtol * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// An N=2, C=3 window geometry.
fn window(h: usize, w: usize, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize), dilation: (usize, usize)) -> Window2d {
    Window2d { n: 2, c: 3, h, w, kernel, stride, padding, dilation }
}

/// The geometries under test: N=2, C=3, 7x9 and 33x33 planes, with stride 2, padding 1 and
/// dilation 2 alone and together.
fn geometries() -> Vec<Window2d> {
    let mut out = Vec::new();
    for (h, w) in [(7, 9), (33, 33)] {
        for (stride, padding, dilation) in [((1, 1), (0, 0), (1, 1)), ((2, 2), (1, 1), (1, 1)), ((2, 1), (1, 0), (2, 2)), ((1, 2), (1, 1), (2, 1))] {
            out.push(window(h, w, (3, 2), stride, padding, dilation));
        }
    }
    out
}

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// Tolerance of a sum of a few values in `dtype` (f32 accumulation for the half types).
fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 1e-5,
        DType::F64 => 1e-12,
        _ => 1e-2,
    }
}

#[test]
fn im2col_col2im_match_cpu() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    for w in geometries() {
        for dtype in FLOATS {
            let x = values(w.n * w.c * w.h * w.w, 1);
            let shape = [w.n, w.c, w.h, w.w];
            let cols_n = w.n * w.col_rows() * w.col_cols();
            let pad_value = if dtype == DType::F64 { 0.1 } else { -0.5 };
            let run = |d: &Device| {
                let b = Buf::new(d, &x, &shape, dtype, 5);
                read(d, &d.backend().im2col(b.view(), w, pad_value).unwrap(), cols_n, dtype)
            };
            assert_close(&format!("im2col {w:?} {dtype}"), &run(&g), &run(&cpu), 0.0, 0.0);
            let cols = values(cols_n, 2);
            let cshape = [w.n, w.col_rows(), w.col_cols()];
            let run = |d: &Device| {
                let b = Buf::new(d, &cols, &cshape, dtype, 3);
                read(d, &d.backend().col2im(b.view(), w).unwrap(), w.n * w.c * w.h * w.w, dtype)
            };
            assert_close(&format!("col2im {w:?} {dtype}"), &run(&g), &run(&cpu), tol(dtype), tol(dtype));
        }
    }
}

#[test]
fn max_pool_matches_cpu_with_ties_and_nans() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    for w in geometries() {
        for dtype in FLOATS {
            // Few distinct values, so windows hold ties; a NaN now and then.
            let x: Vec<f64> =
                values(w.n * w.c * w.h * w.w, 3).iter().enumerate().map(|(i, v)| if i % 17 == 5 { f64::NAN } else { (v * 2.0).round() }).collect();
            let shape = [w.n, w.c, w.h, w.w];
            let n = w.n * w.c * w.col_cols();
            let run = |d: &Device| {
                let b = Buf::new(d, &x, &shape, dtype, 1);
                let (v, i) = d.backend().max_pool2d(b.view(), w).unwrap();
                (read(d, &v, n, dtype), read(d, &i, n, DType::I64))
            };
            let ((gv, gi), (cv, ci)) = (run(&g), run(&cpu));
            assert_close(&format!("max_pool2d values {w:?} {dtype}"), &gv, &cv, 0.0, 0.0);
            assert_eq!(gi, ci, "max_pool2d indices {w:?} {dtype}");
        }
    }
}

#[test]
fn avg_pool_and_backward_match_cpu() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    for w in geometries().into_iter().filter(|w| w.dilation == (1, 1)) {
        for w in [w, Window2d { kernel: (3, 3), ..w }] {
            for dtype in FLOATS {
                for cip in [true, false] {
                    let x = values(w.n * w.c * w.h * w.w, 4);
                    let shape = [w.n, w.c, w.h, w.w];
                    let n = w.n * w.c * w.col_cols();
                    let run = |d: &Device| {
                        let b = Buf::new(d, &x, &shape, dtype, 2);
                        read(d, &d.backend().avg_pool2d(b.view(), w, cip).unwrap(), n, dtype)
                    };
                    assert_close(&format!("avg_pool2d {w:?} {dtype} cip {cip}"), &run(&g), &run(&cpu), tol(dtype), tol(dtype));
                    let dy = values(n, 5);
                    let dshape = [w.n, w.c, w.out_h(), w.out_w()];
                    let run = |d: &Device| {
                        let b = Buf::new(d, &dy, &dshape, dtype, 2);
                        read(d, &d.backend().avg_pool2d_backward(b.view(), w, cip).unwrap(), w.n * w.c * w.h * w.w, dtype)
                    };
                    assert_close(&format!("avg_pool2d_backward {w:?} {dtype} cip {cip}"), &run(&g), &run(&cpu), tol(dtype), tol(dtype));
                }
            }
        }
    }
}

/// `n` indices in `0..size`.
fn indices(n: usize, size: usize, seed: u64) -> Vec<f64> {
    values(n, seed).iter().enumerate().map(|(i, v)| ((v.abs() * 1000.0) as usize + i * 7) as f64 % size as f64).collect()
}

#[test]
fn gather_and_index_select_match_cpu_for_every_dtype() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    for dtype in DType::ALL {
        let src: Vec<f64> = values(5 * 33, 6).iter().map(|v| if dtype.is_float() { *v } else { (v.abs() * 10.0).round() % 2.0 }).collect();
        // gather along each dim of [5, 33] with taller / narrower indices, contiguous and strided.
        for (dim, ishape) in [(1, [4, 40]), (0, [9, 20])] {
            let idx = indices(ishape[0] * ishape[1], [5, 33][dim], 7);
            let run = |d: &Device, strided: bool| {
                let s = if strided { Buf::transposed(d, &src, &[5, 33], dtype) } else { Buf::new(d, &src, &[5, 33], dtype, 4) };
                let i = if strided { Buf::transposed(d, &idx, &ishape, DType::I64) } else { Buf::new(d, &idx, &ishape, DType::I64, 2) };
                read(d, &d.backend().gather(s.view(), i.view(), dim).unwrap(), idx.len(), dtype)
            };
            for strided in [false, true] {
                assert_close(&format!("gather dim {dim} {dtype} strided {strided}"), &run(&g, strided), &run(&cpu, strided), 0.0, 0.0);
            }
        }
        for dim in [0, 1] {
            let idx = indices(50, [5, 33][dim], 8);
            let run = |d: &Device| {
                let s = Buf::transposed(d, &src, &[5, 33], dtype);
                let i = Buf::new(d, &idx, &[50], DType::I64, 3);
                let n = if dim == 0 { 50 * 33 } else { 5 * 50 };
                read(d, &d.backend().index_select(s.view(), i.view(), dim).unwrap(), n, dtype)
            };
            assert_close(&format!("index_select dim {dim} {dtype}"), &run(&g), &run(&cpu), 0.0, 0.0);
        }
    }
}

#[test]
fn scatter_add_with_many_repeats_matches_cpu() {
    let Some(g) = gpu() else { return };
    let cpu = Device::cpu();
    for dtype in FLOATS {
        // 10000 updates into 7 slots.
        let (dst, src, idx) = (values(7, 9), values(10_000, 10), indices(10_000, 7, 11));
        let run = |d: &Device| {
            let (a, i, s) = (Buf::new(d, &dst, &[7], dtype, 1), Buf::new(d, &idx, &[10_000], DType::I64, 0), Buf::new(d, &src, &[10_000], dtype, 2));
            read(d, &d.backend().scatter_add(a.view(), i.view(), s.view(), 0).unwrap(), 7, dtype)
        };
        // ~1400 terms per slot summed in an unspecified order.
        let t = if dtype == DType::F64 {
            1e-10
        } else if dtype == DType::F32 {
            1e-3
        } else {
            0.5
        };
        assert_close(&format!("scatter_add 10000 into 7 {dtype}"), &run(&g), &run(&cpu), t, t);
        // 2-D along each dim, strided index and src, an index shorter than dst off dim.
        for (dim, ishape) in [(0, [40, 20]), (1, [4, 60])] {
            let (dst, src) = (values(5 * 33, 12), values(ishape[0] * ishape[1], 13));
            let idx = indices(src.len(), [5, 33][dim], 14);
            let run = |d: &Device| {
                let a = Buf::transposed(d, &dst, &[5, 33], dtype);
                let (i, s) = (Buf::transposed(d, &idx, &ishape, DType::I64), Buf::transposed(d, &src, &ishape, dtype));
                read(d, &d.backend().scatter_add(a.view(), i.view(), s.view(), dim).unwrap(), 5 * 33, dtype)
            };
            let t = tol(dtype) * 10.0;
            assert_close(&format!("scatter_add dim {dim} {dtype}"), &run(&g), &run(&cpu), t, t);
        }
    }
}

#[test]
fn out_of_range_indices_are_errors() {
    let Some(g) = gpu() else { return };
    let src = Buf::new(&g, &values(10, 15), &[2, 5], DType::F32, 0);
    let ones = Buf::new(&g, &[1.0; 3], &[1, 3], DType::F32, 0);
    for bad in [5.0, -1.0, 4294967296.0] {
        let idx = Buf::new(&g, &[0.0, bad, 1.0], &[1, 3], DType::I64, 0);
        let want = bad as i64;
        // The op returns at once; the bad index surfaces at the next wait on this thread.
        let is_range = |r: Result<Storage>, op: &str| match r.and_then(|_| g.backend().synchronize()) {
            Err(Error::IndexOutOfRange { index, size: 5, .. }) => assert_eq!(index, want, "{op}"),
            Err(e) => panic!("{op} with index {bad}: wrong error {e}"),
            Ok(_) => panic!("{op} with index {bad}: expected an error"),
        };
        is_range(g.backend().gather(src.view(), idx.view(), 1), "gather");
        is_range(g.backend().scatter_add(src.view(), idx.view(), ones.view(), 1), "scatter_add");
        let flat = Buf::new(&g, &[bad], &[1], DType::I64, 0);
        is_range(g.backend().index_select(src.view(), flat.view(), 1), "index_select");
    }
    // The device carries on after the error.
    let idx = Buf::new(&g, &[4.0, 0.0, 1.0], &[1, 3], DType::I64, 0);
    let got = read(&g, &g.backend().gather(src.view(), idx.view(), 1).unwrap(), 3, DType::F32);
    let v = bytes_to_f64(&f64_to_bytes(&values(10, 15), DType::F32), DType::F32);
    assert_eq!(got, vec![v[4], v[0], v[1]]);
}

/// A synchronize reads the index-fault words back only after an index kernel; before and after
/// one, repeatedly, a bad index is still reported once, at the next wait on the thread that
/// recorded it, and a wait with none pending succeeds.
#[test]
fn synchronize_reports_bad_indices_after_index_kernels_only() {
    let Some(g) = gpu() else { return };
    let src = Buf::new(&g, &values(10, 18), &[2, 5], DType::F32, 0);
    let bad = Buf::new(&g, &[0.0, 9.0, 1.0], &[1, 3], DType::I64, 0);
    let good = Buf::new(&g, &[0.0, 4.0, 1.0], &[1, 3], DType::I64, 0);
    for round in 0..3 {
        g.synchronize().unwrap_or_else(|e| panic!("round {round}: nothing pending: {e}"));
        let out = g.backend().gather(src.view(), good.view(), 1).unwrap();
        g.synchronize().unwrap_or_else(|e| panic!("round {round}: a good gather: {e}"));
        g.backend().gather(src.view(), bad.view(), 1).unwrap();
        // Other work in between (a fill), then the wait: the fault is still heard.
        g.backend().full(4, 1.0, DType::F32).unwrap();
        match g.synchronize() {
            Err(Error::IndexOutOfRange { index: 9, size: 5, .. }) => {}
            other => panic!("round {round}: expected index 9 out of range, got {other:?}"),
        }
        g.synchronize().unwrap_or_else(|e| panic!("round {round}: the fault is reported once: {e}"));
        // A read-back (through the reused buffer) after a bad index reports it too.
        g.backend().gather(src.view(), bad.view(), 1).unwrap();
        let read_back = g.backend().to_host(Strided { storage: &*out, layout: &Layout::contiguous(&[3]), dtype: DType::F32 });
        assert!(matches!(read_back, Err(Error::IndexOutOfRange { index: 9, .. })), "round {round}: a read reports the fault");
        let v = bytes_to_f64(&f64_to_bytes(&values(10, 18), DType::F32), DType::F32);
        assert_eq!(read(&g, &out, 3, DType::F32), vec![v[0], v[4], v[1]], "round {round}");
    }
}

#[test]
fn f32_window_and_index_ops_never_fall_back() {
    let Some(g) = gpu() else { return };
    let w = window(7, 9, (3, 3), (2, 2), (1, 1), (1, 1));
    let x = Buf::new(&g, &values(2 * 3 * 7 * 9, 16), &[2, 3, 7, 9], DType::F32, 0);
    let b = g.backend();
    let cols = b.im2col(x.view(), w, 0.0).unwrap();
    let cshape = [2, w.col_rows(), w.col_cols()];
    b.col2im(Strided { storage: &*cols, layout: &Layout::contiguous(&cshape), dtype: DType::F32 }, w).unwrap();
    let (v, i) = b.max_pool2d(x.view(), w).unwrap();
    let oshape = [2 * 3, w.col_cols()];
    let zeros = Buf::new(&g, &vec![0.0; 2 * 3 * 7 * 9], &[6, 63], DType::F32, 0);
    let (vl, il) = (Layout::contiguous(&oshape), Layout::contiguous(&oshape));
    let (vs, is) = (Strided { storage: &*v, layout: &vl, dtype: DType::F32 }, Strided { storage: &*i, layout: &il, dtype: DType::I64 });
    b.scatter_add(zeros.view(), is, vs, 1).unwrap();
    b.gather(zeros.view(), is, 1).unwrap();
    b.avg_pool2d(x.view(), w, true).unwrap();
    let dy = Buf::new(&g, &values(2 * 3 * w.col_cols(), 17), &[2, 3, w.out_h(), w.out_w()], DType::F32, 0);
    b.avg_pool2d_backward(dy.view(), w, false).unwrap();
    let rows = Buf::new(&g, &[5.0, 0.0, 5.0], &[3], DType::I64, 0);
    b.index_select(zeros.view(), rows.view(), 0).unwrap();
    g.synchronize().unwrap();
    let ours = ["im2col", "col2im", "max_pool2d", "avg_pool2d", "gather", "scatter_add", "index_select"];
    let fell: Vec<_> = g.fallback_report().into_iter().filter(|(what, _)| what.contains("(f32)") && ours.iter().any(|op| what.starts_with(op))).collect();
    assert!(fell.is_empty(), "f32 window/index ops ran on the CPU: {fell:?}");
}
