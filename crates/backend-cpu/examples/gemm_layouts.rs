//! How fast the two gemm crates run the zoo's products against a transposed rhs on this CPU,
//! each way the CPU backend can take (`Engine::Tuned` in `src/matmul.rs` picks among them per
//! shape at run time): `gemm` into the row-major block, `gemm` into a column-major block then
//! transposed, and `matrixmultiply`. One thread.
//!
//! ```text
//! cargo run --release -p liandan-backend-cpu --example gemm_layouts
//! ```

#[path = "common/timing.rs"]
mod timing;
use timing::time;

/// `c = a b^T` for row-major `a` `[m, k]`, `b` `[n, k]` and `c` `[m, n]`, one way.
fn product(way: usize, [m, k, n]: [usize; 3], a: &[f32], b: &[f32], c: &mut [f32], scratch: &mut Vec<f32>) {
    let (ki, ni) = (k as isize, n as isize);
    // SAFETY: every matrix lies inside its slice (the strides come from the shapes above) and
    // the destination overlaps neither operand.
    unsafe {
        match way {
            0 => {
                gemm::gemm(m, n, k, c.as_mut_ptr(), 1, ni, false, a.as_ptr(), 1, ki, b.as_ptr(), ki, 1, 0.0, 1.0, false, false, false, gemm::Parallelism::None)
            }
            1 => {
                scratch.resize(m * n, 0.0);
                gemm::gemm(
                    m,
                    n,
                    k,
                    scratch.as_mut_ptr(),
                    m as isize,
                    1,
                    false,
                    a.as_ptr(),
                    1,
                    ki,
                    b.as_ptr(),
                    ki,
                    1,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
                // scratch is [n, m] row-major: 16 of its rows at a time into c's rows.
                for j0 in (0..n).step_by(16) {
                    for i in 0..m {
                        for j in j0..(j0 + 16).min(n) {
                            c[i * n + j] = scratch[j * m + i];
                        }
                    }
                }
            }
            _ => matrixmultiply::sgemm(m, k, n, 1.0, a.as_ptr(), ki, 1, b.as_ptr(), 1, ki, 0.0, c.as_mut_ptr(), ni, 1),
        }
    }
}

fn main() {
    // Linear layers and the LSTM's gate products at batch 16 to 128, and convolution weight
    // gradients (mnist_cnn's, resnet18's stem) at batch 16.
    let shapes = [[16, 256, 1024], [16, 1024, 256], [64, 256, 1024], [128, 784, 400], [64, 9216, 288], [64, 16384, 27], [64, 9216, 128], [16, 9216, 128]];
    println!("| [m, k] x [k, n], rhs transposed | gemm row-major | gemm column-major + transpose | matrixmultiply |");
    println!("|---|---|---|---|");
    for [m, k, n] in shapes {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.1).collect();
        let (mut c, mut scratch) = (vec![0.0f32; m * n], Vec::new());
        let cells: Vec<String> = (0..3)
            .map(|way| {
                let us = time(0.15, || product(way, [m, k, n], &a, &b, &mut c, &mut scratch));
                format!("{us:.0} us ({:.0} GFLOP/s)", 2.0 * (m * k * n) as f64 / us / 1e3)
            })
            .collect();
        println!("| {m}x{k}x{n} | {} |", cells.join(" | "));
    }
}
