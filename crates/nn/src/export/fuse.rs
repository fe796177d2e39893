//! Peepholes: the operators a deployment expects where liandan traces their pieces.
//!
//! `linear` traces as a product with the transposed weight plus the bias, which becomes one
//! `Gemm` over the weight as stored (as `torch.onnx` writes `nn.Linear`); batch norm in eval
//! mode traces as `(x - mean) / sqrt(var + eps) * weight + bias` over reshaped `[C]` buffers,
//! which becomes `BatchNormalization` (what runtimes fold into the convolution before it).
//! A match only rewrites intermediates nothing else reads; the pieces left unread are pruned.

use super::graph::{Attr, Graph, Node, Operand, ValueId, ValueKind};

/// Applies every peephole, then prunes what they left unread.
pub(super) fn fuse(g: &mut Graph) {
    for i in 0..g.nodes.len() {
        if let Some(node) = gemm(g, i).or_else(|| batch_norm(g, i)) {
            g.nodes[i] = node;
        }
    }
    g.prune();
}

/// The node making `v`, when it is an `op` and only one input reads `v`.
fn only_use<'g>(g: &'g Graph, v: &Operand, op: &str) -> Option<&'g Node> {
    let &Operand::Value(v) = v else { return None };
    let n = &g.nodes[g.producer(v)?];
    (n.op == op && g.uses(v) == 1).then_some(n)
}

fn value(o: &Operand) -> Option<ValueId> {
    match o {
        &Operand::Value(v) => Some(v),
        _ => None,
    }
}

fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    g.values[v].shape.as_ref().map(Vec::len)
}

/// A parameter or constant: a tensor the graph stores.
fn stored(g: &Graph, v: ValueId) -> bool {
    matches!(g.values[v].kind, ValueKind::Param(..) | ValueKind::Const(_))
}

/// `Add(MatMul(x, Transpose(w)), b)` with `x` a matrix, `w` a stored `[out, in]` weight and
/// `b` a stored `[out]` bias: `Gemm(x, w, b, transB = 1)`.
fn gemm(g: &Graph, i: usize) -> Option<Node> {
    let add = &g.nodes[i];
    if add.op != "Add" {
        return None;
    }
    let product = only_use(g, &add.inputs[0], "MatMul")?;
    let transpose = only_use(g, &product.inputs[1], "Transpose")?;
    let (x, w, b) = (value(&product.inputs[0])?, value(&transpose.inputs[0])?, value(&add.inputs[1])?);
    let bias_len = g.values[b].shape.as_ref().filter(|s| s.len() == 1)?[0];
    let w_shape = g.values[w].shape.as_ref()?;
    let plain = rank(g, x) == Some(2) && w_shape.len() == 2 && w_shape[0] == bias_len && stored(g, w) && stored(g, b);
    if !plain || transpose.attrs != [("perm", Attr::Ints(vec![1, 0]))] {
        return None;
    }
    let inputs = vec![Operand::Value(x), Operand::Value(w), Operand::Value(b)];
    Some(Node { op: "Gemm", inputs, outputs: add.outputs.clone(), attrs: vec![("transB", Attr::Int(1))], origin: product.origin.clone() })
}

/// Eval-mode batch norm as liandan composes it:
///
/// ```text
/// Add(Mul(Mul(Sub(x, Reshape(mean)), Reciprocal(Sqrt(Add(Reshape(var), eps)))), Reshape(weight)), Reshape(bias))
/// ```
///
/// with `mean`, `var`, `weight` and `bias` stored `[C]` tensors and `C` the channels (axis 1)
/// of `x`: `BatchNormalization(x, weight, bias, mean, var)`.
fn batch_norm(g: &Graph, i: usize) -> Option<Node> {
    let shift = &g.nodes[i];
    if shift.op != "Add" {
        return None;
    }
    let scaled = only_use(g, &shift.inputs[0], "Mul")?;
    let normed = only_use(g, &scaled.inputs[0], "Mul")?;
    let centered = only_use(g, &normed.inputs[0], "Sub")?;
    let inv = only_use(g, &normed.inputs[1], "Reciprocal")?;
    let root = only_use(g, &inv.inputs[0], "Sqrt")?;
    let padded = only_use(g, &root.inputs[0], "Add")?;
    let x = value(&centered.inputs[0])?;
    let channels = *g.values[x].shape.as_ref().filter(|s| s.len() >= 2)?.get(1)?;
    // Each `[C]` tensor reaches the arithmetic through a reshape to `[1, C, 1, ...]`.
    let per_channel = |o: &Operand| -> Option<ValueId> {
        let reshape = only_use(g, o, "Reshape")?;
        let t = value(&reshape.inputs[0])?;
        (stored(g, t) && g.values[t].shape.as_deref() == Some(&[channels][..])).then_some(t)
    };
    let (mean, var) = (per_channel(&centered.inputs[1])?, per_channel(&padded.inputs[0])?);
    let (weight, bias) = (per_channel(&scaled.inputs[1])?, per_channel(&shift.inputs[1])?);
    let eps = value(&padded.inputs[1])?;
    let ValueKind::Const(eps) = &g.values[eps].kind else { return None };
    let eps = (eps.numel() == 1).then(|| eps.to_vec_f64().ok()).flatten()?[0];
    let inputs = [x, weight, bias, mean, var].into_iter().map(Operand::Value).collect();
    Some(Node {
        op: "BatchNormalization",
        inputs,
        outputs: shift.outputs.clone(),
        attrs: vec![("epsilon", Attr::Float(eps as f32))],
        origin: centered.origin.clone(),
    })
}
