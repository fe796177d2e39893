//! A whole LSTM direction in one kernel each way (`LstmSequence`, `LstmSequenceBackward`), in
//! f32: the cell adds each step's input gates to its recurrent product and leaves the gates
//! activated in the product's place, where backward reads them instead of recomputing four of
//! its five transcendentals; the gate gradients are written where their join would put them.
//! Other types are left to the step-by-step ops.

use liandan_tensor::ops::{LstmSequence, LstmSequenceBackward};
use liandan_tensor::{DType, Result, Strided};
use rayon::prelude::*;

use crate::kernel::slices;
use crate::matmul::{engine, product, Operand};
use crate::storage::{alloc, alloc_overwritten, backend_error, CpuStorage};
use crate::strided::parallel;
use crate::vmath::{lstm_cell_backward_kept_row, lstm_cell_keep_row};

/// The position of the `s`-th step of `l`.
fn position(s: usize, l: usize, reverse: bool) -> usize {
    if reverse {
        l - 1 - s
    } else {
        s
    }
}

/// Block `i` of `len` elements of `v`, read, beside block `j` (another) written.
fn read_write<T>(v: &mut [T], i: usize, j: usize, len: usize) -> (&[T], &mut [T]) {
    if i < j {
        let (a, b) = v.split_at_mut(j * len);
        (&a[i * len..][..len], &mut b[..len])
    } else {
        let (a, b) = v.split_at_mut(i * len);
        (&b[..len], &mut a[j * len..][..len])
    }
}

/// Runs `f(row, a, b, c)` over matching rows of three outputs, in parallel when they are large.
fn rows3(a: &mut [f32], wa: usize, b: &mut [f32], wb: usize, c: &mut [f32], wc: usize, f: impl Fn(usize, &mut [f32], &mut [f32], &mut [f32]) + Sync) {
    if parallel(a.len() + b.len() + c.len()) {
        a.par_chunks_mut(wa).zip(b.par_chunks_mut(wb)).zip(c.par_chunks_mut(wc)).enumerate().for_each(|(r, ((x, y), z))| f(r, x, y, z));
    } else {
        a.chunks_mut(wa).zip(b.chunks_mut(wb)).zip(c.chunks_mut(wc)).enumerate().for_each(|(r, ((x, y), z))| f(r, x, y, z));
    }
}

/// `LstmSequence`: `x_gates [L, N, 4H]`, `w_hh [4H, H]`, `h0`, `c0 [N, H]` to the states
/// `[L + 1, N, H]`, the activated gates `[L, N, 4H]` and the cell states `[L, N, H]`.
pub(crate) fn lstm_sequence(op: &LstmSequence, inputs: &[Strided]) -> Option<Result<Vec<CpuStorage>>> {
    if inputs.len() != 4 || inputs.iter().any(|s| s.dtype != DType::F32) {
        return None;
    }
    Some((|| {
        let v = slices::<f32>("lstm_sequence", inputs)?;
        let (xg, w, h0, c0) = (&v[0], &v[1], &v[2], &v[3]);
        let shape = inputs[0].layout.shape();
        let (l, n, g) = (shape[0], shape[1], shape[2]);
        let h = g / 4;
        let (nh, ng) = (n * h, n * g);
        if l == 0 || g % 4 != 0 || w.len() != g * h || h0.len() != nh || c0.len() != nh {
            return Err(backend_error("lstm_sequence", "takes x_gates [L, N, 4H] (L > 0), w_hh [4H, H], h0 and c0 [N, H]"));
        }
        let engine = engine()?;
        let mut states = alloc_overwritten("lstm_sequence", (l + 1) * nh, 0.0f32)?;
        let mut act = alloc_overwritten("lstm_sequence", l * ng, 0.0f32)?;
        let mut cells = alloc_overwritten("lstm_sequence", l * nh, 0.0f32)?;
        for s in 0..l {
            let t = position(s, l, op.reverse);
            let (gates, x) = (&mut act[t * ng..][..ng], &xg[t * ng..][..ng]);
            let (h_prev, h_out) = if s == 0 { (&h0[..], &mut states[t * nh..][..nh]) } else { read_write(&mut states, position(s - 1, l, op.reverse), t, nh) };
            if s > 0 || !op.zero_state {
                // h_prev W_hh^T, W_hh^T read in place as a transposed view; the cell adds x.
                product(engine, true, false, [n, h, g], Operand { data: h_prev, strides: [h, 1] }, Operand { data: w, strides: [1, h] }, gates);
            } else {
                gates.fill(0.0);
            }
            let (c_prev, c_out) = if s == 0 { (&c0[..], &mut cells[t * nh..][..nh]) } else { read_write(&mut cells, position(s - 1, l, op.reverse), t, nh) };
            rows3(gates, g, h_out, h, c_out, h, |r, gates, h_row, c_row| lstm_cell_keep_row(gates, &x[r * g..][..g], &c_prev[r * h..][..h], h_row, c_row));
        }
        let last = position(l - 1, l, op.reverse);
        states[l * nh..].copy_from_slice(&cells[last * nh..][..nh]);
        Ok(vec![CpuStorage::F32(states.into()), CpuStorage::F32(act.into()), CpuStorage::F32(cells.into())])
    })())
}

/// `LstmSequenceBackward`: the gradient of the states `[L + 1, N, H]`, the forward's `act`
/// `[L, N, 4H]` and `cells` `[L, N, H]`, `c0 [N, H]` and `w_hh [4H, H]` to the gate
/// gradients `[L, N, 4H]`, `dc0` and `dh0`.
pub(crate) fn lstm_sequence_backward(op: &LstmSequenceBackward, inputs: &[Strided]) -> Option<Result<Vec<CpuStorage>>> {
    if inputs.len() != 5 || inputs.iter().any(|s| s.dtype != DType::F32) {
        return None;
    }
    Some((|| {
        let v = slices::<f32>("lstm_sequence_backward", inputs)?;
        let (grad, act, cells, c0, w) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
        let shape = inputs[1].layout.shape();
        let (l, n, g) = (shape[0], shape[1], shape[2]);
        let h = g / 4;
        let (nh, ng) = (n * h, n * g);
        if l == 0 || g % 4 != 0 || grad.len() != (l + 1) * nh || cells.len() != l * nh || c0.len() != nh || w.len() != g * h {
            return Err(backend_error(
                "lstm_sequence_backward",
                "takes the states' gradient [L + 1, N, H], act [L, N, 4H], cells [L, N, H], c0 [N, H], w_hh [4H, H]",
            ));
        }
        let engine = engine()?;
        let mut dgates = alloc_overwritten("lstm_sequence_backward", l * ng, 0.0f32)?;
        // The cell state's gradient into the step and out of it; h's from the step after.
        let mut dc = grad[l * nh..][..nh].to_vec();
        let mut dc_out = alloc_overwritten("lstm_sequence_backward", nh, 0.0f32)?;
        let mut dh_next = alloc("lstm_sequence_backward", nh, 0.0f32)?;
        for s in (0..l).rev() {
            let t = position(s, l, op.reverse);
            let c_prev = if s == 0 { &c0[..] } else { &cells[position(s - 1, l, op.reverse) * nh..][..nh] };
            let (a, c_new, dh) = (&act[t * ng..][..ng], &cells[t * nh..][..nh], &grad[t * nh..][..nh]);
            let dg = &mut dgates[t * ng..][..ng];
            {
                let dh_more = &dh_next;
                crate::fused::rows(dg, g, &mut dc_out, h, |r, dg_row, dc_row| {
                    let at = r * h..(r + 1) * h;
                    lstm_cell_backward_kept_row(
                        &a[r * g..][..g],
                        &c_prev[at.clone()],
                        &c_new[at.clone()],
                        [&dh[at.clone()], &dh_more[at.clone()]],
                        &dc[at],
                        dg_row,
                        dc_row,
                    )
                });
            }
            std::mem::swap(&mut dc, &mut dc_out);
            if s > 0 || op.want_dh0 {
                // h's gradient from this step: dgates W_hh.
                product(engine, true, false, [n, g, h], Operand { data: dg, strides: [g, 1] }, Operand { data: w, strides: [h, 1] }, &mut dh_next);
            }
        }
        if !op.want_dh0 {
            dh_next.fill(0.0);
        }
        Ok(vec![CpuStorage::F32(dgates.into()), CpuStorage::F32(dc.into()), CpuStorage::F32(dh_next.into())])
    })())
}
