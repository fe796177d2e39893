//! How the `gemm` crate's own threading compares with cutting a product into one one-thread
//! piece per rayon thread, along its columns or along its rows (what `gemm_pieces` in
//! `src/matmul.rs` does for threaded products), on the zoo's shapes. Row-major operands;
//! `RAYON_NUM_THREADS` sets the threads.
//!
//! ```text
//! RAYON_NUM_THREADS=16 cargo run --release -p liandan-backend-cpu --example gemm_threads
//! ```

use rayon::prelude::*;

#[path = "common/timing.rs"]
mod timing;
use timing::time;

/// The operands and the result, by pointer, for the threads.
#[derive(Clone, Copy)]
struct Ptrs(*const f32, *const f32, *mut f32);
// SAFETY: the pieces read a and b and write disjoint blocks of c, all alive until they return.
unsafe impl Send for Ptrs {}
unsafe impl Sync for Ptrs {}

/// Rows `rows` and columns `cols` of `c = a b`, for row-major `a` `[m, k]`, `b` `[k, n]` and
/// `c` `[m, n]`, on this thread or on `gemm`'s.
///
/// # Safety
/// The pointers hold those shapes, and the block lies inside `c`.
unsafe fn block(p: Ptrs, [k, n]: [usize; 2], rows: (usize, usize), cols: (usize, usize), par: gemm::Parallelism) {
    let (a, b, c) = (p.0.add(rows.0 * k), p.1.add(cols.0), p.2.add(rows.0 * n + cols.0));
    gemm::gemm(rows.1 - rows.0, cols.1 - cols.0, k, c, 1, n as isize, false, a, 1, k as isize, b, 1, n as isize, 0.0, 1.0, false, false, false, par);
}

fn main() {
    let threads = rayon::current_num_threads();
    println!("us a call, {threads} threads: one thread | gemm threaded | pieces along n | pieces along m");
    let shapes = [
        [64usize, 256, 1024],
        [64, 1024, 256],
        [16, 256, 1024],
        [128, 1152, 512],
        [64, 576, 1024],
        [128, 784, 400],
        [512, 2304, 256],
        [512, 4608, 256],
        [1024, 1024, 1024],
        [256, 9216, 64],
    ];
    for [m, k, n] in shapes {
        let (a, b, mut c) = (vec![1.0f32; m * k], vec![1.0f32; k * n], vec![0.0f32; m * n]);
        let p = Ptrs(a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        let mut row = Vec::new();
        for way in 0..4 {
            // SAFETY: every block lies inside the buffers above, and the pieces' blocks are disjoint.
            let us = time(0.3, || unsafe {
                match way {
                    0 => block(p, [k, n], (0, m), (0, n), gemm::Parallelism::None),
                    1 => block(p, [k, n], (0, m), (0, n), gemm::Parallelism::Rayon(0)),
                    _ => {
                        let len = if way == 2 { n } else { m };
                        let piece = len.div_ceil(threads).next_multiple_of(16).max(32);
                        (0..len.div_ceil(piece)).into_par_iter().for_each(|j| {
                            let span = (j * piece, len.min((j + 1) * piece));
                            let (rows, cols) = if way == 2 { ((0, m), span) } else { (span, (0, n)) };
                            block(p, [k, n], rows, cols, gemm::Parallelism::None)
                        });
                    }
                }
            });
            row.push(format!("{us:6.0}"));
        }
        println!("[{m}, {k}] x [{k}, {n}]: {}", row.join(" | "));
    }
}
