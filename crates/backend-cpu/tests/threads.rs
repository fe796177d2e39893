//! Kernels that share their work out by the number of threads give the same results on 1, 2
//! and 4: concatenations of one row of parts and of fewer rows than threads, and sums down
//! the columns of a matrix too narrow for one block of columns a thread (cut in smaller ones);
//! the optimizers' updates, run in pieces on the pool when large.

use liandan_backend_cpu as _;
use liandan_tensor::{AdadeltaStep, AdagradStep, AdamStep, DType, Device, FusedOp, RmsPropStep, SgdStep, Strided, Tensor};

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

#[test]
fn optimizer_updates_do_not_depend_on_the_threads() {
    let d = Device::cpu();
    // A parameter of 100,003 elements: a dozen pieces of the pool's chunk, the last one short.
    let n = 100_003;
    let t = |seed: u64| Tensor::randn(&[n], seed, DType::F32, &d).unwrap();
    let (param, grad, state1, state2, state3) = (t(1), t(2), t(3).abs().unwrap(), t(4).abs().unwrap(), t(5).abs().unwrap());
    let adam = |amsgrad| AdamStep {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 1e-2,
        step: 3,
        amsgrad,
        maximize: false,
        decoupled_weight_decay: true,
    };
    let sgd = |momentum, first| SgdStep { lr: 0.1, momentum, dampening: 0.0, weight_decay: 5e-4, nesterov: false, maximize: false, first };
    let rmsprop = RmsPropStep { lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0.0, momentum: 0.9, centered: true, maximize: false };
    let cases: Vec<(FusedOp, Vec<&Tensor>)> = vec![
        (FusedOp::AdamStep(adam(false)), vec![&param, &grad, &state1, &state2]),
        (FusedOp::AdamStep(adam(true)), vec![&param, &grad, &state1, &state2, &state3]),
        (FusedOp::SgdStep(sgd(0.0, false)), vec![&param, &grad]),
        (FusedOp::SgdStep(sgd(0.9, true)), vec![&param, &grad]),
        (FusedOp::SgdStep(sgd(0.9, false)), vec![&param, &grad, &state1]),
        (FusedOp::AdadeltaStep(AdadeltaStep { lr: 1.0, rho: 0.9, eps: 1e-6, weight_decay: 0.0, maximize: false }), vec![&param, &grad, &state1, &state2]),
        (FusedOp::AdagradStep(AdagradStep { lr: 1e-2, lr_decay: 0.0, weight_decay: 0.0, eps: 1e-10, step: 2, maximize: false }), vec![&param, &grad, &state1]),
        (FusedOp::RmsPropStep(rmsprop), vec![&param, &grad, &state1, &state2, &state3]),
    ];
    for (op, inputs) in &cases {
        let run = |threads: usize| -> Vec<Vec<f64>> {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
            pool.install(|| {
                let storages: Vec<_> = inputs.iter().map(|x| x.storage()).collect();
                let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(x, s)| Strided { storage: &**s, layout: x.layout(), dtype: DType::F32 }).collect();
                let outs = d.backend().fused(op, &views).expect("the CPU has this update").unwrap();
                outs.into_iter()
                    .map(|s| Tensor::from_storage(s, liandan_tensor::Layout::contiguous(&[n]), DType::F32, &d).unwrap().to_vec_f64().unwrap())
                    .collect()
            })
        };
        let whole = run(1);
        assert_eq!(whole.len(), op.outputs());
        assert!(whole[0].iter().zip(&param.to_vec_f64().unwrap()).filter(|(a, b)| a != b).count() > n / 2, "{}: the parameter moved", op.name());
        // Bit for bit (a centered RMSprop's square average minus its squared mean may be
        // negative here, and NaN is not equal to itself).
        let bits = |outs: Vec<Vec<f64>>| -> Vec<Vec<u64>> { outs.iter().map(|o| o.iter().map(|x| x.to_bits()).collect()).collect() };
        let whole = bits(whole);
        for threads in [2, 4] {
            assert!(bits(run(threads)) == whole, "{} on {threads} threads", op.name());
        }
    }
}
