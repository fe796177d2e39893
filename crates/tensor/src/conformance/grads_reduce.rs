//! Gradient checks of the reductions (sum, mean, var, max, min), of matmul in all its
//! shapes (vectors, broadcast batches, transposed operands) and of `linear`.

use super::grads::{check_grads, leaf, strided_leaf};
use crate::Device;

pub fn sum(d: &Device) {
    let x = leaf(d, &[3, 7, 5], 1);
    check_grads("sum one dim", std::slice::from_ref(&x), |x| x[0].sum(&[1], false), 1e-7, 1e-6);
    check_grads("sum non-adjacent dims", std::slice::from_ref(&x), |x| x[0].sum(&[0, 2], false), 1e-7, 1e-6);
    check_grads("sum keepdim", &[x], |x| x[0].sum(&[2], true), 1e-7, 1e-6);
    check_grads("sum strided", &[strided_leaf(d, &[4, 3, 5], 2)], |x| x[0].sum(&[0, 2], true), 1e-7, 1e-6);
    check_grads("sum_all", &[strided_leaf(d, &[7, 33], 3)], |x| x[0].sum_all(), 1e-6, 1e-6);
    // A square before the sum makes the gradient depend on x.
    check_grads("sum_all of square", &[leaf(d, &[33], 4)], |x| x[0].square()?.sum_all(), 1e-6, 1e-6);
}

pub fn mean(d: &Device) {
    let x = leaf(d, &[3, 7, 5], 5);
    check_grads("mean non-adjacent keepdim", std::slice::from_ref(&x), |x| x[0].mean(&[0, 2], true), 1e-7, 1e-6);
    check_grads("mean last dim", &[x], |x| x[0].mean(&[2], false), 1e-7, 1e-6);
    check_grads("mean_all strided", &[strided_leaf(d, &[7, 5], 6)], |x| x[0].square()?.mean_all(), 1e-7, 1e-6);
}

pub fn var(d: &Device) {
    let x = leaf(d, &[3, 7, 5], 7);
    check_grads("var biased", std::slice::from_ref(&x), |x| x[0].var(&[1], false, false), 1e-6, 1e-5);
    check_grads("var unbiased", std::slice::from_ref(&x), |x| x[0].var(&[1], true, true), 1e-6, 1e-5);
    check_grads("var non-adjacent", &[x], |x| x[0].var(&[0, 2], false, true), 1e-6, 1e-5);
    check_grads("var strided", &[strided_leaf(d, &[7, 5], 8)], |x| x[0].var(&[0], false, false), 1e-6, 1e-5);
}

pub fn max_min(d: &Device) {
    // Seeded values have no ties, so each arg-extremum is unique and stable over the step.
    let x = leaf(d, &[5, 7], 9);
    check_grads("max dim 1", std::slice::from_ref(&x), |x| x[0].max(1usize, false), 1e-7, 1e-6);
    check_grads("max dim 0 keepdim", std::slice::from_ref(&x), |x| x[0].max(0usize, true), 1e-7, 1e-6);
    check_grads("min dim -1", &[x], |x| x[0].min(-1isize, false), 1e-7, 1e-6);
    check_grads("min strided", &[strided_leaf(d, &[3, 7, 5], 10)], |x| x[0].min(1usize, true), 1e-7, 1e-6);
    check_grads("max strided", &[strided_leaf(d, &[3, 7, 5], 11)], |x| x[0].max(2usize, false)?.square(), 1e-7, 1e-6);
}

pub fn max_min_all(d: &Device) {
    check_grads("max_all", &[leaf(d, &[33], 12)], |x| x[0].max_all(), 1e-7, 1e-6);
    check_grads("min_all", &[strided_leaf(d, &[7, 5], 13)], |x| x[0].min_all(), 1e-7, 1e-6);
    check_grads("max_all [1]", &[leaf(d, &[1], 14)], |x| x[0].max_all(), 1e-7, 1e-6);
}

pub fn matmul(d: &Device) {
    // Batched lhs against a 2-D rhs, and a transposed (non-contiguous) operand.
    let a = leaf(d, &[2, 3, 7], 3);
    let b = leaf(d, &[5, 7], 4).t().unwrap();
    check_grads("matmul batched x transposed", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[7, 33], 15), strided_leaf(d, &[33, 5], 16));
    check_grads("matmul 2-D, strided rhs", &[a, b], |x| x[0].matmul(&x[1]), 1e-6, 1e-6);
    // Transposed operands of one batch (`linear`'s `x W^T`, attention's `q k^T`): their
    // gradients are computed as transposes of row-major products.
    let (a, b) = (leaf(d, &[7, 3], 27), leaf(d, &[5, 7], 28));
    check_grads("matmul transposed x transposed", &[a, b], |x| x[0].t()?.matmul(&x[1].t()?), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[2, 3, 7], 29), leaf(d, &[2, 5, 7], 30));
    check_grads("matmul batched x batched transposed", &[a, b], |x| x[0].matmul(&x[1].t()?), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[1, 1], 17), leaf(d, &[1, 7], 18));
    check_grads("matmul [1, 1] x [1, 7]", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
}

pub fn matmul_vectors(d: &Device) {
    let (a, b) = (leaf(d, &[7], 19), leaf(d, &[7], 20));
    check_grads("matmul 1-D . 1-D", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[7], 21), strided_leaf(d, &[7, 5], 22));
    check_grads("matmul 1-D x 2-D", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (strided_leaf(d, &[5, 7], 23), leaf(d, &[7], 24));
    check_grads("matmul 2-D x 1-D", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[2, 3, 4], 25), leaf(d, &[4], 26));
    check_grads("matmul 3-D x 1-D", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
}

pub fn matmul_batched(d: &Device) {
    let (a, b) = (leaf(d, &[2, 1, 3, 4], 27), leaf(d, &[3, 4, 5], 28));
    check_grads("matmul [2,1,3,4] x [3,4,5]", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (strided_leaf(d, &[3, 1, 4], 29), leaf(d, &[2, 1, 4, 5], 30));
    check_grads("matmul strided [3,1,4] x [2,1,4,5]", &[a, b], |x| x[0].matmul(&x[1]), 1e-7, 1e-6);
    let (a, b) = (leaf(d, &[2, 3, 4], 31), leaf(d, &[2, 5, 4], 32));
    check_grads("matmul batched, transposed rhs", &[a, b], |x| x[0].matmul(&x[1].t()?), 1e-7, 1e-6);
}

pub fn linear(d: &Device) {
    let (x, w, b) = (leaf(d, &[2, 3, 5], 21), leaf(d, &[4, 5], 22), leaf(d, &[4], 23));
    check_grads("linear [2, 3, 5]", &[x, w, b], |x| x[0].linear(&x[1], Some(&x[2])), 1e-7, 1e-6);
    let (x, w) = (leaf(d, &[5], 24), strided_leaf(d, &[3, 5], 25));
    check_grads("linear 1-D input, strided weight", &[x, w], |x| x[0].linear(&x[1], None), 1e-7, 1e-6);
}
