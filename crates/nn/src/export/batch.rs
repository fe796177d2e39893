//! Two traces made one graph: how the export finds what depends on the batch size, and what
//! changes from one run to the next.
//!
//! The forward pass is traced twice, at two batch sizes for a dynamic batch (at the same one
//! otherwise), and both traces are lowered. The graphs must have the same nodes; a shape,
//! axis or bound that differs is a linear function `a * N + c` of the batch size `N`, written
//! into the graph as that (`encode.rs` computes it from the input's shape), and a constant
//! that differs is either one value everywhere in a batch-sized shape (`zeros([N, H])`, an
//! LSTM's first state), which becomes a `ConstantOfShape`, or an error: random numbers
//! (dropout in training mode, sampling noise) or values read back from the input cannot be
//! exported as constants.

use liandan_tensor::Tensor;

use super::graph::{Attr, Dim, Graph, Node, Operand, Origin, ValueKind};
use crate::error::{Error, Result};

/// The batch sizes of the two traces, `None` when both ran at the same one.
pub(super) type Batches = Option<(usize, usize)>;

/// Merges the graphs of two traces (`a` at the first batch size, `b` at the second).
pub(super) fn unify(mut a: Graph, b: &Graph, batches: Batches) -> Result<Graph> {
    let differ = |what: String| match batches {
        Some((na, nb)) => Error::Export(format!("the forward pass ran different ops at batch {na} and at batch {nb} ({what}); export with a fixed batch size")),
        None => Error::Export(format!("two runs of the forward pass ran different ops ({what}); its ops must not depend on anything but the input's shape")),
    };
    if a.nodes.len() != b.nodes.len() || a.values.len() != b.values.len() || a.outputs != b.outputs {
        return Err(differ(format!("{} ops and {} ops", a.nodes.len(), b.nodes.len())));
    }
    for (na, nb) in a.nodes.iter_mut().zip(&b.nodes) {
        if na.op != nb.op || na.attrs != nb.attrs || na.outputs != nb.outputs || na.inputs.len() != nb.inputs.len() {
            return Err(differ(format!("{} against {}", na.origin, nb.origin)));
        }
        for (ia, ib) in na.inputs.iter_mut().zip(&nb.inputs) {
            match (&*ia, ib) {
                (Operand::Ints(da), Operand::Ints(db)) if da.len() == db.len() => {
                    let dims = da.iter().zip(db).map(|(&x, &y)| merge(x, y, batches)).collect::<Option<Vec<Dim>>>();
                    *ia = Operand::Ints(dims.ok_or_else(|| differ(format!("{}: a shape or bound {da:?} against {db:?}", na.origin)))?);
                }
                (x, y) if x == y => {}
                _ => return Err(differ(format!("{} reads other inputs", na.origin))),
            }
        }
    }
    for (i, (da, db)) in a.output_dims.iter_mut().zip(&b.output_dims).enumerate() {
        let dims = merge_all(da, db, batches).ok_or_else(|| differ(format!("output {i} has shape {da:?} against {db:?}")))?;
        *da = dims;
    }
    for (i, (da, db)) in a.input_dims.iter_mut().zip(&b.input_dims).enumerate() {
        *da = merge_all(da, db, batches).ok_or_else(|| differ(format!("input {i} has shape {da:?} against {db:?}")))?;
    }

    // Constants: the same in both, or one value over a batch-sized shape.
    let mut prelude = Vec::new();
    for v in 0..a.values.len() {
        let (ValueKind::Const(ta), ValueKind::Const(tb)) = (&a.values[v].kind, &b.values[v].kind) else { continue };
        if same(ta, tb)? {
            continue;
        }
        let user = a.nodes.iter().find(|n| n.inputs.contains(&Operand::Value(v))).map(|n| n.origin.clone()).unwrap_or_default();
        let fill = match (batches, uniform(ta)?, uniform(tb)?) {
            (Some(_), Some(x), Some(y)) if x.to_bits() == y.to_bits() && ta.rank() == tb.rank() && ta.shape() != tb.shape() => x,
            // A batch-shaped tensor that agrees where the two overlap follows the batch; one that
            // does not changed on its own (a dropout mask).
            (Some(_), _, _) if ta.shape() != tb.shape() && same(&overlap(ta, tb)?, &overlap(tb, ta)?)? => {
                return Err(Error::Export(format!(
                    "{user} reads a tensor the forward pass made (not a parameter, an input or an op's result) whose shape follows the batch \
                     and whose values are not all one number; it cannot follow a dynamic batch: export with a fixed batch size"
                )))
            }
            _ => {
                return Err(Error::Export(format!(
                    "{user} reads a tensor the forward pass made (not a parameter, an input or an op's result) that changed between two runs: \
                     random numbers (dropout in training mode: call `model.eval()`; sampling noise: pass it as an input) or values read \
                     back from the input"
                )))
            }
        };
        let shape: Vec<Dim> =
            merge_all(&dims(ta), &dims(tb), batches).ok_or_else(|| Error::Export(format!("{user}: a constant's shape does not follow the batch linearly")))?;
        let dtype = a.values[v].dtype;
        a.values[v].kind = ValueKind::Node;
        let origin = Origin { op: "constant".into(), layer: user.layer };
        prelude.push(Node {
            op: "ConstantOfShape",
            inputs: vec![Operand::Ints(shape)],
            outputs: vec![v],
            attrs: vec![("value", Attr::Scalar(fill, dtype))],
            origin,
        });
    }
    prelude.append(&mut a.nodes);
    a.nodes = prelude;
    Ok(a)
}

/// One dimension from its values in the two traces.
fn merge(x: Dim, y: Dim, batches: Batches) -> Option<Dim> {
    match (x, y, batches) {
        (x, y, _) if x == y => Some(x),
        (Dim::Fixed(p), Dim::Fixed(q), Some((na, nb))) => {
            let (na, nb) = (na as i64, nb as i64);
            let a = (q - p) / (nb - na);
            (a * (nb - na) == q - p).then_some(Dim::Batch { a, c: p - a * na })
        }
        _ => None,
    }
}

fn merge_all(a: &[Dim], b: &[Dim], batches: Batches) -> Option<Vec<Dim>> {
    if a.len() != b.len() {
        return None;
    }
    a.iter().zip(b).map(|(&x, &y)| merge(x, y, batches)).collect()
}

fn dims(t: &Tensor) -> Vec<Dim> {
    t.shape().iter().map(|&d| Dim::Fixed(d as i64)).collect()
}

/// Whether two constants have the same shape and the same bits.
fn same(a: &Tensor, b: &Tensor) -> Result<bool> {
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        return Ok(false);
    }
    let (x, y) = (a.to_vec_f64()?, b.to_vec_f64()?);
    Ok(x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()))
}

/// The part of `a` within `b`'s shape (all of `a` when the ranks differ).
fn overlap(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.rank() != b.rank() {
        return Ok(a.clone());
    }
    let mut t = a.clone();
    for (d, (&x, &y)) in a.shape().iter().zip(b.shape()).enumerate() {
        t = t.narrow(d, 0, x.min(y))?;
    }
    Ok(t)
}

/// The one value every element of `t` holds, if there is one.
fn uniform(t: &Tensor) -> Result<Option<f64>> {
    let v = t.to_vec_f64()?;
    Ok(match v.first() {
        Some(&first) if v.iter().all(|x| x.to_bits() == first.to_bits()) => Some(first),
        _ => None,
    })
}
