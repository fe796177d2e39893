//! Kernels that share their work out by the number of threads give the same results on 1, 2
//! and 4: concatenations of one row of parts and of fewer rows than threads, and sums down
//! the columns of a matrix too narrow for one block of columns a thread (cut in smaller ones).
//! (The optimizers' update kernels, which run in pieces on the pool too, are `liandan-train`'s
//! to test.)

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Tensor};

/// `f`'s result in a pool of `threads` threads, as f64s.
fn on(threads: usize, f: impl Fn() -> Tensor + Send + Sync) -> Vec<f64> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
    pool.install(|| f().to_vec_f64().unwrap())
}

#[test]
fn concatenations_and_column_sums_do_not_depend_on_the_threads() {
    let d = Device::cpu();
    // 28 steps' [64, 256] states joined along dim 0 (one row of parts), and 3 parts along dim 1
    // of 2 rows (two rows of parts), one of them a strided view.
    let steps: Vec<Tensor> = (0..28).map(|s| Tensor::randn(&[64, 256], s, DType::F32, &d).unwrap()).collect();
    let a = Tensor::randn(&[2, 30000], 40, DType::F32, &d).unwrap();
    let b = Tensor::randn(&[9000, 2], 41, DType::F32, &d).unwrap().t().unwrap();
    let c = Tensor::randn(&[2, 7], 42, DType::F32, &d).unwrap();
    let rows = || Tensor::cat(&steps.iter().collect::<Vec<_>>(), 0usize).unwrap();
    let cols = || Tensor::cat(&[&a, &b, &c], 1usize).unwrap();
    // A bias gradient's column sums: 1,792 rows of 1,024 lanes, and 3 rows of 40,000.
    let g = Tensor::randn(&[1792, 1024], 43, DType::F32, &d).unwrap();
    let h = Tensor::randn(&[3, 40000], 44, DType::F32, &d).unwrap();
    let sums = || Tensor::cat(&[&g.sum(&[0], false).unwrap(), &h.sum(&[0], false).unwrap()], 0usize).unwrap();

    let serial = [on(1, rows), on(1, cols), on(1, sums)];
    // The parts where they belong: part s of the rows at s * 64 * 256.
    assert_eq!(serial[0][5 * 64 * 256..6 * 64 * 256], steps[5].to_vec_f64().unwrap()[..]);
    let row1 = &serial[1][30000 + 9000 + 7..];
    assert_eq!(row1[30000..39000], b.to_vec_f64().unwrap()[9000..]);
    let gs = g.to_vec_f64().unwrap();
    let want: Vec<f64> = (0..1024).map(|j| (0..1792).map(|i| gs[i * 1024 + j]).sum::<f64>()).collect();
    for (j, (got, want)) in serial[2].iter().zip(&want).enumerate() {
        assert!((got - want).abs() <= 1e-3, "column {j}: {got} against {want}");
    }
    for threads in [2, 4] {
        assert_eq!([on(threads, rows), on(threads, cols), on(threads, sums)], serial, "{threads} threads");
    }
}
