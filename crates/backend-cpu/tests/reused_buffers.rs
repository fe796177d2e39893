//! Kernels that write every element of their outputs and working buffers take a kept buffer
//! with its old values, unfilled (`storage::alloc_overwritten`): after the same ops have left
//! poisoned buffers of every size they use in the pool, their results are the ones they give
//! from an empty pool, bit for bit. Alone in this binary: the pool is process-wide.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Tensor};

/// Every element's bits.
fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// Convolutions with and without padding, ReLU, the fused add and ReLU, batch norm with and
/// without its ReLU, and their gradients, on inputs of 147 KiB (buffers that large are kept).
fn run(x: &Tensor, other: &Tensor, weight: &Tensor, shortcut: &Tensor, scale: &Tensor) -> Vec<Vec<u64>> {
    let x = x.detach().requires_grad_(true).unwrap();
    let y = x.conv2d(weight, None, (1, 1), (1, 1), (1, 1), 1).unwrap();
    let s = x.conv2d(shortcut, None, (2, 2), (0, 0), (1, 1), 1).unwrap();
    let a = y.batch_norm_relu(None, None, None, None, true, 0.1, 1e-5).unwrap();
    let b = x.relu().unwrap().add_relu(other).unwrap();
    let c = y.batch_norm(None, None, None, None, true, 0.1, 1e-5).unwrap();
    let loss =
        a.mul(scale).unwrap().add(&c).unwrap().sum_all().unwrap().add(&b.sum_all().unwrap()).unwrap().add(&s.square().unwrap().sum_all().unwrap()).unwrap();
    loss.backward().unwrap();
    [&y, &s, &a, &b, &c, &x.grad().unwrap()].iter().map(|t| bits(t)).collect()
}

/// GELU, softmax along rows, layer norm and an LSTM cell of two gate terms, and their
/// gradients, on rows and gates of 64 KiB and more.
fn run_rows(z: &[Tensor]) -> Vec<Vec<u64>> {
    let z: Vec<Tensor> = z.iter().map(|t| t.detach().requires_grad_(true).unwrap()).collect();
    let (x, w, b, gx, gh, c, r) = (&z[0], &z[1], &z[2], &z[3], &z[4], &z[5], &z[6]);
    let g = x.gelu().unwrap();
    let s = x.softmax(-1isize).unwrap();
    let l = x.layer_norm(1, Some(w), Some(b), 1e-5).unwrap();
    let (h, c2) = Tensor::lstm_cell_sum(gx, gh, c).unwrap();
    let rows = g.add(&s).unwrap().add(&l).unwrap().mul(r).unwrap().sum_all().unwrap();
    let loss = rows.add(&h.mul(c).unwrap().add(&c2).unwrap().sum_all().unwrap()).unwrap();
    loss.backward().unwrap();
    let grads = z.iter().take(6).map(|t| t.grad().unwrap());
    [g, s, l, h, c2].into_iter().chain(grads).map(|t| bits(&t)).collect()
}

fn row_kernels_writing_whole_buffers_ignore_what_a_kept_buffer_held() {
    let dev = Device::cpu();
    let t = |shape: &[usize], seed: u64| Tensor::randn(shape, seed, DType::F32, &dev).unwrap();
    let z = [t(&[64, 640], 11), t(&[640], 12), t(&[640], 13), t(&[64, 1024], 14), t(&[64, 1024], 15), t(&[64, 256], 16), t(&[64, 640], 17)];
    dev.empty_cache();
    let want = run_rows(&z);
    for poison in [f64::NAN, 2.5] {
        let p: Vec<Tensor> = z.iter().map(|v| v.mul_scalar(0.0).unwrap().add_scalar(poison).unwrap()).collect();
        drop(run_rows(&p));
    }
    let got = run_rows(&z);
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert!(got == want, "result {i}: a kept buffer's old values leaked into it");
    }
}

/// One test: the other's buffers would come and go in the pool beneath it.
#[test]
fn kernels_writing_whole_buffers_ignore_what_a_kept_buffer_held() {
    convolutions_and_batch_norm_ignore_what_a_kept_buffer_held();
    row_kernels_writing_whole_buffers_ignore_what_a_kept_buffer_held();
}

fn convolutions_and_batch_norm_ignore_what_a_kept_buffer_held() {
    let dev = Device::cpu();
    let t = |shape: &[usize], seed: u64| Tensor::randn(shape, seed, DType::F32, &dev).unwrap();
    let (x, other, weight, shortcut) = (t(&[2, 8, 48, 48], 1), t(&[2, 8, 48, 48], 2), t(&[16, 8, 3, 3], 3), t(&[16, 8, 1, 1], 4));
    let scale = t(&[2, 16, 48, 48], 5);
    dev.empty_cache();
    let want = run(&x, &other, &weight, &shortcut, &scale);

    // The same ops on NaN, then on 2.5 everywhere, give back buffers of every size they use
    // (results, gradients, the convolutions' columns) holding NaN or non-zero values.
    for poison in [f64::NAN, 2.5] {
        let p = |v: &Tensor| v.mul_scalar(0.0).unwrap().add_scalar(poison).unwrap();
        drop(run(&p(&x), &p(&other), &p(&weight), &p(&shortcut), &p(&scale)));
    }
    let got = run(&x, &other, &weight, &shortcut, &scale);
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert!(got == want, "result {i}: a kept buffer's old values leaked into it");
    }
}
