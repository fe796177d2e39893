//! From a trace to ONNX nodes: each traced op the outputs depend on becomes the standard ONNX
//! operators that compute it (opset 17 and later).
//!
//! Only ops the outputs depend on are lowered: a composite reports its primitives and then
//! itself (`observe`), and the primitives, whose results only the composite read, drop out.
//! A tensor no op made is a graph input, a parameter (by its state-dict key) or a constant.

use std::collections::HashMap;

use liandan_tensor::autograd::GradFn;
use liandan_tensor::backend::{BinaryOp, CmpOp, UnaryOp, Window2d};
use liandan_tensor::{ops, CustomKernel, DType, Device, LayerNormOptions, Tensor};

use super::graph::{Attr, Dim, Graph, Operand, Origin, ValueId, ValueKind};
use super::trace::{Record, Trace};
use crate::error::{Error, Result};

/// Lowers the ops of `trace` that its outputs depend on; `params` names the model's tensors.
pub(super) fn lower(trace: &Trace, params: &[(String, Tensor)], opset: i64) -> Result<Graph> {
    let producer: HashMap<u64, usize> = trace.records.iter().enumerate().map(|(i, r)| (r.output.id(), i)).collect();
    let mut l = Lowering { graph: Graph::default(), opset, ids: HashMap::new(), params: params.iter().map(|(k, t)| (t.id(), k.as_str())).collect() };
    for (i, x) in trace.inputs.iter().enumerate() {
        if l.ids.contains_key(&x.id()) {
            return Err(Error::Export(format!("example input {i} is the same tensor as an earlier one; give each input its own tensor")));
        }
        let v = l.graph.add_value(x.dtype(), Some(x.shape().to_vec()), ValueKind::Input(i));
        l.ids.insert(x.id(), v);
        l.graph.inputs.push(v);
        l.graph.input_dims.push(fixed(x.shape()));
    }

    // The records the outputs depend on, found by walking back from them.
    let mut live = vec![false; trace.records.len()];
    let mut stack: Vec<u64> = trace.outputs.iter().map(Tensor::id).collect();
    while let Some(id) = stack.pop() {
        if let Some(&r) = producer.get(&id) {
            if !live[r] {
                live[r] = true;
                stack.extend(trace.records[r].operands().into_iter().map(Tensor::id));
            }
        }
    }

    for (r, _) in trace.records.iter().zip(&live).filter(|(_, &on)| on) {
        let ins: Vec<ValueId> = r.operands().into_iter().map(|t| l.value_of(t)).collect();
        let out = l.op(r, &ins)?;
        if l.graph.values[out].shape.is_none() {
            l.graph.values[out].shape = Some(r.output.shape().to_vec());
        }
        l.ids.insert(r.output.id(), out);
    }
    for t in &trace.outputs {
        let v = l.value_of(t);
        l.graph.outputs.push(v);
        l.graph.output_dims.push(fixed(t.shape()));
    }
    Ok(l.graph)
}

fn fixed(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d as i64)).collect()
}

struct Lowering<'a> {
    graph: Graph,
    opset: i64,
    /// Tensor id to the value holding it.
    ids: HashMap<u64, ValueId>,
    params: HashMap<u64, &'a str>,
}

impl Lowering<'_> {
    /// The value of `t`: what an op made, or else a parameter or a constant, added on first use.
    fn value_of(&mut self, t: &Tensor) -> ValueId {
        if let Some(&v) = self.ids.get(&t.id()) {
            return v;
        }
        let kind = match self.params.get(&t.id()) {
            Some(name) => ValueKind::Param(name.to_string(), t.clone()),
            None => ValueKind::Const(t.clone()),
        };
        let v = self.graph.add_value(t.dtype(), Some(t.shape().to_vec()), kind);
        self.ids.insert(t.id(), v);
        v
    }

    /// The nodes of one traced op; returns the value holding its result.
    fn op(&mut self, r: &Record, ins: &[ValueId]) -> Result<ValueId> {
        let origin = Origin { op: r.grad_fn.name(), layer: r.layer.clone() };
        let (dtype, shape) = (r.output.dtype(), r.output.shape());
        let v = |i: usize| Operand::Value(ins[i]);
        let g = &mut self.graph;
        let out = match &r.grad_fn {
            GradFn::Identity | GradFn::ToDevice { .. } | GradFn::Detach => ins[0],
            GradFn::Cast { .. } => g.push("Cast", vec![v(0)], vec![("to", Attr::Int(onnx_dtype(dtype)))], dtype, &origin),
            GradFn::Reshape { .. } => {
                // A 0 in the target would copy the input's dim unless `allowzero` says otherwise.
                let attrs = if shape.contains(&0) { vec![("allowzero", Attr::Int(1))] } else { vec![] };
                g.push("Reshape", vec![v(0), ints(shape)], attrs, dtype, &origin)
            }
            GradFn::Permute { perm } => g.push("Transpose", vec![v(0)], vec![("perm", Attr::Ints(as_i64(perm)))], dtype, &origin),
            GradFn::Narrow { dim, start, full } => {
                let end = start + shape[*dim];
                // "To the end" stays so when the axis is the batch.
                let end = if end == *full { i64::MAX } else { end as i64 };
                g.push("Slice", vec![v(0), Operand::ints([*start as i64]), Operand::ints([end]), Operand::ints([*dim as i64])], vec![], dtype, &origin)
            }
            GradFn::Expand { .. } => g.push("Expand", vec![v(0), ints(shape)], vec![], dtype, &origin),
            GradFn::Unary(op) => g.push(unary(*op, &origin)?, vec![v(0)], vec![], dtype, &origin),
            GradFn::Binary(op) => g.push(binary(*op, dtype, &origin)?, vec![v(0), v(1)], vec![], dtype, &origin),
            // Operands: the two branches, then the condition.
            GradFn::Select { .. } => g.push("Where", vec![v(2), v(0), v(1)], vec![], dtype, &origin),
            GradFn::Compare(CmpOp::Ne) => {
                let eq = g.push("Equal", vec![v(0), v(1)], vec![], dtype, &origin);
                g.push("Not", vec![Operand::Value(eq)], vec![], dtype, &origin)
            }
            GradFn::Compare(op) => g.push(compare(*op, &origin)?, vec![v(0), v(1)], vec![], dtype, &origin),
            GradFn::Sum { from } => {
                let x = match r.inputs[0].dtype() == dtype {
                    true => ins[0],
                    false => g.push("Cast", vec![v(0)], vec![("to", Attr::Int(onnx_dtype(dtype)))], dtype, &origin),
                };
                let axes: Vec<i64> = (0..from.len()).filter(|&d| from[d] != shape[d]).map(|d| d as i64).collect();
                match axes.is_empty() {
                    // An empty `axes` input would mean every axis to ReduceSum.
                    true => x,
                    false => g.push("ReduceSum", vec![Operand::Value(x), Operand::ints(axes)], vec![("keepdims", Attr::Int(1))], dtype, &origin),
                }
            }
            GradFn::Extremum { dim, max } => {
                let op = if *max { "ReduceMax" } else { "ReduceMin" };
                // Axes became an input in opset 18.
                let (inputs, mut attrs) = match self.opset >= 18 {
                    true => (vec![v(0), Operand::ints([*dim as i64])], vec![]),
                    false => (vec![v(0)], vec![("axes", Attr::Ints(vec![*dim as i64]))]),
                };
                attrs.push(("keepdims", Attr::Int(1)));
                g.push(op, inputs, attrs, dtype, &origin)
            }
            GradFn::ArgExtremum { dim, max } => {
                let op = if *max { "ArgMax" } else { "ArgMin" };
                g.push(op, vec![v(0)], vec![("axis", Attr::Int(*dim as i64)), ("keepdims", Attr::Int(1))], dtype, &origin)
            }
            GradFn::Matmul => g.push("MatMul", vec![v(0), v(1)], vec![], dtype, &origin),
            GradFn::MaxPool2d { window, .. } => {
                let mut attrs = window_attrs(window);
                attrs.push(("dilations", Attr::Ints(vec![window.dilation.0 as i64, window.dilation.1 as i64])));
                g.push("MaxPool", vec![v(0)], attrs, dtype, &origin)
            }
            GradFn::AvgPool2d { window, count_include_pad } => {
                let mut attrs = window_attrs(window);
                attrs.push(("count_include_pad", Attr::Int(*count_include_pad as i64)));
                g.push("AveragePool", vec![v(0)], attrs, dtype, &origin)
            }
            GradFn::Gather { dim, .. } => g.push("GatherElements", vec![v(0), v(1)], vec![("axis", Attr::Int(*dim as i64))], dtype, &origin),
            GradFn::IndexSelect { dim, .. } => g.push("Gather", vec![v(0), v(1)], vec![("axis", Attr::Int(*dim as i64))], dtype, &origin),
            // Operands: the tensor added into, the values, then the index.
            GradFn::ScatterAdd { dim, .. } => {
                let attrs = vec![("axis", Attr::Int(*dim as i64)), ("reduction", Attr::Str("add"))];
                g.push("ScatterElements", vec![v(0), v(2), v(1)], attrs, dtype, &origin)
            }
            GradFn::Cat { dim, .. } => {
                g.push("Concat", ins.iter().map(|&i| Operand::Value(i)).collect(), vec![("axis", Attr::Int(*dim as i64))], dtype, &origin)
            }
            GradFn::Relu => g.push("Relu", vec![v(0)], vec![], dtype, &origin),
            GradFn::AddRelu => {
                let sum = g.push("Add", vec![v(0), v(1)], vec![], dtype, &origin);
                g.push("Relu", vec![Operand::Value(sum)], vec![], dtype, &origin)
            }
            GradFn::Sigmoid => g.push("Sigmoid", vec![v(0)], vec![], dtype, &origin),
            GradFn::Tanh => g.push("Tanh", vec![v(0)], vec![], dtype, &origin),
            GradFn::Softplus => g.push("Softplus", vec![v(0)], vec![], dtype, &origin),
            GradFn::Softmax { dim } => g.push("Softmax", vec![v(0)], vec![("axis", Attr::Int(*dim as i64))], dtype, &origin),
            GradFn::LogSoftmax { dim } => g.push("LogSoftmax", vec![v(0)], vec![("axis", Attr::Int(*dim as i64))], dtype, &origin),
            GradFn::LayerNorm { options, .. } => self.layer_norm(r, ins, *options, &origin)?,
            GradFn::Conv2d(geom) => {
                let attrs = vec![
                    ("kernel_shape", Attr::Ints(vec![geom.kernel.0 as i64, geom.kernel.1 as i64])),
                    ("strides", Attr::Ints(vec![geom.stride.0 as i64, geom.stride.1 as i64])),
                    ("pads", Attr::Ints(pads(geom.padding))),
                    ("dilations", Attr::Ints(vec![geom.dilation.0 as i64, geom.dilation.1 as i64])),
                    ("group", Attr::Int(geom.groups as i64)),
                ];
                g.push("Conv", ins.iter().map(|&i| Operand::Value(i)).collect(), attrs, dtype, &origin)
            }
            GradFn::LstmCell => self.lstm_cell(r, ins, &origin),
            GradFn::Custom { op, .. } => {
                // The tensor crate's own custom ops, known by type; any other has no mapping.
                let op: &dyn CustomKernel = &**op;
                if op.downcast_ref::<ops::Gelu>().is_some() {
                    self.gelu(ins[0], dtype, &origin)
                } else if op.downcast_ref::<ops::GruCell>().is_some() {
                    self.gru_cell(r, ins, &origin)
                } else {
                    return Err(unsupported(&origin));
                }
            }
            GradFn::BatchNorm { .. } => {
                return Err(Error::Export(format!(
                    "{origin} normalizes with the batch's statistics, as batch norm does in training; call `model.eval()` before exporting"
                )))
            }
            _ => return Err(unsupported(&origin)),
        };
        Ok(out)
    }

    /// Exact GELU: the `Gelu` operator from opset 20, before it `0.5 x (1 + erf(x / sqrt 2))`.
    fn gelu(&mut self, x: ValueId, dtype: DType, origin: &Origin) -> ValueId {
        let g = &mut self.graph;
        if self.opset >= 20 {
            return g.push("Gelu", vec![Operand::Value(x)], vec![], dtype, origin);
        }
        let scaled = g.push("Div", vec![Operand::Value(x), Operand::Scalar(std::f64::consts::SQRT_2, dtype)], vec![], dtype, origin);
        let erf = g.push("Erf", vec![Operand::Value(scaled)], vec![], dtype, origin);
        let plus = g.push("Add", vec![Operand::Value(erf), Operand::Scalar(1.0, dtype)], vec![], dtype, origin);
        let prod = g.push("Mul", vec![Operand::Value(x), Operand::Value(plus)], vec![], dtype, origin);
        g.push("Mul", vec![Operand::Value(prod), Operand::Scalar(0.5, dtype)], vec![], dtype, origin)
    }

    /// `LayerNormalization` over the trailing axes the weight covers (or, without one, the
    /// fewest trailing axes that hold the normalized width), with a scale of ones where the
    /// layer has none: the operator requires one.
    fn layer_norm(&mut self, r: &Record, ins: &[ValueId], options: LayerNormOptions, origin: &Origin) -> Result<ValueId> {
        let x = &r.inputs[0];
        let rank = x.rank();
        let axes = match options.weight {
            true => r.inputs[1].rank(),
            false => (1..=rank).find(|&k| x.shape()[rank - k..].iter().product::<usize>() == options.width).unwrap_or(1),
        };
        let scale = match options.weight {
            true => ins[1],
            false => {
                let ones = Tensor::ones(&x.shape()[rank - axes..], x.dtype(), &Device::cpu())?;
                self.graph.add_value(x.dtype(), Some(ones.shape().to_vec()), ValueKind::Const(ones))
            }
        };
        let mut inputs = vec![Operand::Value(ins[0]), Operand::Value(scale)];
        if options.bias {
            inputs.push(Operand::Value(ins[if options.weight { 2 } else { 1 }]));
        }
        let attrs = vec![("axis", Attr::Int(-(axes as i64))), ("epsilon", Attr::Float(options.eps as f32))];
        Ok(self.graph.push("LayerNormalization", inputs, attrs, x.dtype(), origin))
    }

    /// Columns `k * width .. (k + 1) * width` of the `[N, G * width]` value `x`.
    fn gate(&mut self, x: ValueId, k: usize, width: usize, dtype: DType, origin: &Origin) -> ValueId {
        let bounds = vec![Operand::Value(x), Operand::ints([(k * width) as i64]), Operand::ints([((k + 1) * width) as i64]), Operand::ints([1])];
        self.graph.push("Slice", bounds, vec![], dtype, origin)
    }

    /// An LSTM step's arithmetic from its gates (`[N, 4H]`, plus a second term) and `c`,
    /// unrolled: `[2, N, H]` holding `h'` then `c'`, as the fused op returns them.
    fn lstm_cell(&mut self, r: &Record, ins: &[ValueId], origin: &Origin) -> ValueId {
        let (dtype, h) = (r.output.dtype(), r.inputs[1].shape()[1]);
        let val = Operand::Value;
        let gates = match ins.get(2) {
            Some(&more) => self.graph.push("Add", vec![val(ins[0]), val(more)], vec![], dtype, origin),
            None => ins[0],
        };
        let mut gate = |k, act| {
            let slice = self.gate(gates, k, h, dtype, origin);
            self.graph.push(act, vec![val(slice)], vec![], dtype, origin)
        };
        let (i, f, g, o) = (gate(0, "Sigmoid"), gate(1, "Sigmoid"), gate(2, "Tanh"), gate(3, "Sigmoid"));
        let gr = &mut self.graph;
        let kept = gr.push("Mul", vec![val(f), val(ins[1])], vec![], dtype, origin);
        let added = gr.push("Mul", vec![val(i), val(g)], vec![], dtype, origin);
        let c = gr.push("Add", vec![val(kept), val(added)], vec![], dtype, origin);
        let tanh_c = gr.push("Tanh", vec![val(c)], vec![], dtype, origin);
        let h = gr.push("Mul", vec![val(o), val(tanh_c)], vec![], dtype, origin);
        let h = gr.push("Unsqueeze", vec![val(h), Operand::ints([0])], vec![], dtype, origin);
        let c = gr.push("Unsqueeze", vec![val(c), Operand::ints([0])], vec![], dtype, origin);
        gr.push("Concat", vec![val(h), val(c)], vec![("axis", Attr::Int(0))], dtype, origin)
    }

    /// A GRU step's arithmetic from `x_gates`, `h_gates` (`[N, 3H]`, order r, z, n) and `h`,
    /// unrolled: `h' = n + z (h - n)`.
    fn gru_cell(&mut self, r: &Record, ins: &[ValueId], origin: &Origin) -> ValueId {
        let (dtype, h) = (r.output.dtype(), r.inputs[2].shape()[1]);
        let val = Operand::Value;
        let mut parts = |k| (self.gate(ins[0], k, h, dtype, origin), self.gate(ins[1], k, h, dtype, origin));
        let ((xr, hr), (xz, hz), (xn, hn)) = (parts(0), parts(1), parts(2));
        let gr = &mut self.graph;
        let act = |gr: &mut Graph, op, a, b| {
            let sum = gr.push("Add", vec![val(a), val(b)], vec![], dtype, origin);
            gr.push(op, vec![val(sum)], vec![], dtype, origin)
        };
        let (reset, update) = (act(gr, "Sigmoid", xr, hr), act(gr, "Sigmoid", xz, hz));
        let gated = gr.push("Mul", vec![val(reset), val(hn)], vec![], dtype, origin);
        let n = act(gr, "Tanh", xn, gated);
        let diff = gr.push("Sub", vec![val(ins[2]), val(n)], vec![], dtype, origin);
        let step = gr.push("Mul", vec![val(update), val(diff)], vec![], dtype, origin);
        gr.push("Add", vec![val(n), val(step)], vec![], dtype, origin)
    }
}

fn ints(shape: &[usize]) -> Operand {
    Operand::ints(shape.iter().map(|&d| d as i64))
}

fn as_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// ONNX's pads: the begins of each spatial axis, then the ends.
fn pads((h, w): (usize, usize)) -> Vec<i64> {
    vec![h as i64, w as i64, h as i64, w as i64]
}

fn window_attrs(w: &Window2d) -> Vec<(&'static str, Attr)> {
    vec![
        ("kernel_shape", Attr::Ints(vec![w.kernel.0 as i64, w.kernel.1 as i64])),
        ("strides", Attr::Ints(vec![w.stride.0 as i64, w.stride.1 as i64])),
        ("pads", Attr::Ints(pads(w.padding))),
    ]
}

fn unsupported(origin: &Origin) -> Error {
    Error::Export(format!("{origin} has no ONNX mapping; the ops that export are listed in the docs of `liandan_nn::export`"))
}

fn unary(op: UnaryOp, origin: &Origin) -> Result<&'static str> {
    Ok(match op {
        UnaryOp::Neg => "Neg",
        UnaryOp::Abs => "Abs",
        UnaryOp::Sign => "Sign",
        UnaryOp::Exp => "Exp",
        UnaryOp::Log => "Log",
        UnaryOp::Sqrt => "Sqrt",
        UnaryOp::Recip => "Reciprocal",
        UnaryOp::Sin => "Sin",
        UnaryOp::Cos => "Cos",
        UnaryOp::Erf => "Erf",
        UnaryOp::Floor => "Floor",
        UnaryOp::Ceil => "Ceil",
        UnaryOp::Round => "Round",
        #[allow(unreachable_patterns)]
        _ => return Err(unsupported(origin)),
    })
}

fn binary(op: BinaryOp, dtype: DType, origin: &Origin) -> Result<&'static str> {
    Ok(match (op, dtype) {
        // On bools liandan's maximum and minimum are or and and.
        (BinaryOp::Maximum, DType::Bool) => "Or",
        (BinaryOp::Minimum, DType::Bool) => "And",
        // liandan rounds integer division down, ONNX toward zero.
        (BinaryOp::Div, d) if !d.is_float() => return Err(unsupported(origin)),
        (BinaryOp::Add, _) => "Add",
        (BinaryOp::Sub, _) => "Sub",
        (BinaryOp::Mul, _) => "Mul",
        (BinaryOp::Div, _) => "Div",
        (BinaryOp::Pow, _) => "Pow",
        (BinaryOp::Maximum, _) => "Max",
        (BinaryOp::Minimum, _) => "Min",
        #[allow(unreachable_patterns)]
        _ => return Err(unsupported(origin)),
    })
}

fn compare(op: CmpOp, origin: &Origin) -> Result<&'static str> {
    Ok(match op {
        CmpOp::Eq => "Equal",
        CmpOp::Lt => "Less",
        CmpOp::Le => "LessOrEqual",
        CmpOp::Gt => "Greater",
        CmpOp::Ge => "GreaterOrEqual",
        _ => return Err(unsupported(origin)),
    })
}

/// ONNX's `TensorProto.DataType` of a dtype.
pub(super) fn onnx_dtype(dtype: DType) -> i64 {
    match dtype {
        DType::F32 => 1,
        DType::U8 => 2,
        DType::I64 => 7,
        DType::Bool => 9,
        DType::F16 => 10,
        DType::F64 => 11,
        DType::BF16 => 16,
    }
}
