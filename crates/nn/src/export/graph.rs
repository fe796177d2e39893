//! The exporter's graph: ONNX nodes over numbered values, before names and protobuf.
//!
//! Lowering (`lower.rs`) fills it from a trace; the dynamic batch (`batch.rs`) compares two of
//! them; the peepholes (`fuse.rs`) rewrite it; `encode.rs` writes it as a `ModelProto`.

use liandan_tensor::{DType, Tensor};

/// A value: a graph input, a parameter, a constant or a node's output.
pub(super) type ValueId = usize;

/// What a value is and where it comes from.
#[derive(Clone)]
pub(super) struct Value {
    pub dtype: DType,
    /// The shape in the trace, where known (the values lowering makes up have none).
    pub shape: Option<Vec<usize>>,
    pub kind: ValueKind,
}

#[derive(Clone)]
pub(super) enum ValueKind {
    /// The graph's input number `i`.
    Input(usize),
    /// A parameter or buffer of the model, under its state-dict key.
    Param(String, Tensor),
    /// A tensor the forward pass made without an op (`zeros`, a scalar of `mul_scalar`).
    Const(Tensor),
    /// The output of a node.
    Node,
}

/// One dimension of a shape operand: fixed, or `a * N + c` for the batch size `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dim {
    Fixed(i64),
    Batch { a: i64, c: i64 },
}

/// An input of a node.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Operand {
    Value(ValueId),
    /// A 1-D int64 tensor: a shape, axes, slice bounds.
    Ints(Vec<Dim>),
    /// A scalar constant of a dtype (GELU's 0.5 and 1).
    Scalar(f64, DType),
}

impl Operand {
    pub fn ints(values: impl IntoIterator<Item = i64>) -> Operand {
        Operand::Ints(values.into_iter().map(Dim::Fixed).collect())
    }
}

/// An attribute of a node.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
    Str(&'static str),
    /// A one-element tensor (`ConstantOfShape`'s value).
    Scalar(f64, DType),
}

#[derive(Clone, Debug)]
pub(super) struct Node {
    pub op: &'static str,
    pub inputs: Vec<Operand>,
    pub outputs: Vec<ValueId>,
    pub attrs: Vec<(&'static str, Attr)>,
    /// Where it came from: the traced op and its layer, for names and messages.
    pub origin: Origin,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Origin {
    pub op: String,
    pub layer: Option<String>,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.layer {
            Some(layer) => write!(f, "`{}` in layer {layer}", self.op),
            None => write!(f, "`{}` (outside any layer)", self.op),
        }
    }
}

#[derive(Clone, Default)]
pub(super) struct Graph {
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    /// The shapes of the inputs and outputs, the batch dimension marked where it varies.
    pub input_dims: Vec<Vec<Dim>>,
    pub output_dims: Vec<Vec<Dim>>,
}

impl Graph {
    pub fn add_value(&mut self, dtype: DType, shape: Option<Vec<usize>>, kind: ValueKind) -> ValueId {
        self.values.push(Value { dtype, shape, kind });
        self.values.len() - 1
    }

    /// Appends a node with one new output of `dtype` and returns that output.
    pub fn push(&mut self, op: &'static str, inputs: Vec<Operand>, attrs: Vec<(&'static str, Attr)>, dtype: DType, origin: &Origin) -> ValueId {
        let out = self.add_value(dtype, None, ValueKind::Node);
        self.nodes.push(Node { op, inputs, outputs: vec![out], attrs, origin: origin.clone() });
        out
    }

    /// The node that makes `value`, if a node does.
    pub fn producer(&self, value: ValueId) -> Option<usize> {
        self.nodes.iter().position(|n| n.outputs.contains(&value))
    }

    /// How many node inputs and graph outputs read `value`.
    pub fn uses(&self, value: ValueId) -> usize {
        let reads = self.nodes.iter().flat_map(|n| &n.inputs).filter(|o| **o == Operand::Value(value)).count();
        reads + self.outputs.iter().filter(|&&o| o == value).count()
    }

    /// Drops the nodes whose outputs nothing reads, until none is left.
    pub fn prune(&mut self) {
        loop {
            let mut used = vec![false; self.values.len()];
            for &o in &self.outputs {
                used[o] = true;
            }
            for n in &self.nodes {
                for i in &n.inputs {
                    if let Operand::Value(v) = i {
                        used[*v] = true;
                    }
                }
            }
            let before = self.nodes.len();
            self.nodes.retain(|n| n.outputs.iter().any(|&o| used[o]));
            if self.nodes.len() == before {
                return;
            }
        }
    }
}
