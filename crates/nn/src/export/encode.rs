//! The graph written as ONNX's protobuf messages: names, initializers, the nodes that compute
//! batch-dependent shapes, and the `ModelProto` bytes.

use std::collections::{HashMap, HashSet};

use liandan_tensor::{DType, Device, Tensor};
use prost::Message;

use super::graph::{Attr, Dim, Graph, Node, Operand, ValueKind};
use super::lower::onnx_dtype;
use super::proto::{
    attribute_proto::AttributeType, tensor_shape_proto::dimension, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use crate::error::{Error, Result};

/// What names the graph's ends and where it comes from.
pub(super) struct Header<'a> {
    pub graph_name: &'a str,
    pub opset: i64,
    pub input_names: &'a [String],
    pub output_names: &'a [String],
}

/// The protobuf limit on one message; larger models need ONNX's external data, which this
/// exporter does not write.
const MAX_BYTES: usize = (1 << 31) - 1;

/// Encodes `g` as a complete ONNX model.
pub(super) fn encode(g: &Graph, header: &Header) -> Result<Vec<u8>> {
    let mut e = Encoder { g, names: vec![String::new(); g.values.len()], initializers: Vec::new(), consts: HashMap::new(), prelude: Vec::new(), batch: None };
    e.name_values(header)?;
    // Only what a node or an output reads: the peepholes leave constants behind (an epsilon).
    let read: HashSet<usize> = g
        .nodes
        .iter()
        .flat_map(|n| &n.inputs)
        .filter_map(|o| if let Operand::Value(v) = o { Some(*v) } else { None })
        .chain(g.outputs.iter().copied())
        .collect();
    for v in 0..g.values.len() {
        if let (ValueKind::Param(_, t) | ValueKind::Const(t), true) = (&g.values[v].kind, read.contains(&v)) {
            e.initializers.push(tensor_proto(&e.names[v], t)?);
        }
    }
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.iter().enumerate() {
        nodes.push(e.node(i, n)?);
    }
    // A graph output that is not a node's own result gets one, under the output's name.
    let mut outputs = Vec::new();
    for (i, &v) in g.outputs.iter().enumerate() {
        let name = &header.output_names[i];
        if e.names[v] != *name {
            nodes.push(node_proto("Identity", vec![e.names[v].clone()], name.clone(), format!("/output_{i}/Identity")));
        }
        outputs.push(value_info(name, g.values[v].dtype, &g.output_dims[i]));
    }
    let inputs = g.inputs.iter().zip(&g.input_dims).map(|(&v, dims)| value_info(&e.names[v], g.values[v].dtype, dims)).collect();
    let mut all_nodes = std::mem::take(&mut e.prelude);
    all_nodes.extend(nodes);
    check_unique(&all_nodes, &e.initializers, header)?;

    let graph = GraphProto {
        node: all_nodes,
        name: Some(header.graph_name.to_string()),
        initializer: e.initializers,
        input: inputs,
        output: outputs,
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(ir_version(header.opset)),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(header.opset) }],
        producer_name: Some("liandan".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        doc_string: Some("A forward pass traced by liandan in eval mode.".into()),
        graph: Some(graph),
        ..Default::default()
    };
    let size = model.encoded_len();
    if size > MAX_BYTES {
        return Err(Error::Export(format!("the model takes {size} bytes, over the 2 GiB a protobuf message can hold (ONNX's external data is not written)")));
    }
    Ok(model.encode_to_vec())
}

/// The IR version that goes with an opset (ONNX's versioning table).
fn ir_version(opset: i64) -> i64 {
    match opset {
        ..=18 => 8,
        19 | 20 => 9,
        _ => 10,
    }
}

/// Key of a deduplicated constant: ints, or a scalar's dtype and bits.
#[derive(PartialEq, Eq, Hash)]
enum ConstKey {
    Ints(Vec<i64>),
    Scalar(DType, u64),
}

struct Encoder<'g> {
    g: &'g Graph,
    names: Vec<String>,
    initializers: Vec<TensorProto>,
    consts: HashMap<ConstKey, String>,
    /// Nodes that compute shapes from the batch size, ahead of every other node.
    prelude: Vec<NodeProto>,
    /// The batch size as a 1-D int64 tensor, once a shape needs it.
    batch: Option<String>,
}

impl Encoder<'_> {
    /// Inputs and outputs by the names asked for, parameters by their state-dict keys, the
    /// rest by their layer and op (`/BasicBlock-4/Conv2d-5/Conv_12`).
    fn name_values(&mut self, header: &Header) -> Result<()> {
        let g = self.g;
        let mut constants = 0;
        for (v, value) in g.values.iter().enumerate() {
            self.names[v] = match &value.kind {
                ValueKind::Input(i) => header.input_names[*i].clone(),
                ValueKind::Param(key, _) => key.clone(),
                ValueKind::Const(_) => {
                    constants += 1;
                    format!("/Constant_{}", constants - 1)
                }
                ValueKind::Node => String::new(),
            };
        }
        for (i, n) in g.nodes.iter().enumerate() {
            for &o in &n.outputs {
                self.names[o] = format!("{}_output", node_name(i, n));
            }
        }
        // An output made by a node (and by nothing else among the outputs) takes the output's name.
        for (i, &v) in g.outputs.iter().enumerate() {
            let alone = g.outputs.iter().filter(|&&o| o == v).count() == 1;
            if alone && matches!(g.values[v].kind, ValueKind::Node) {
                self.names[v] = header.output_names[i].clone();
            }
        }
        Ok(())
    }

    fn node(&mut self, i: usize, n: &Node) -> Result<NodeProto> {
        let mut inputs = Vec::with_capacity(n.inputs.len());
        for (k, operand) in n.inputs.iter().enumerate() {
            inputs.push(match operand {
                Operand::Value(v) => self.names[*v].clone(),
                // Reshape's target may leave one dimension, the batch's, to be inferred.
                Operand::Ints(dims) => self.shape(dims, n.op == "Reshape" && k == 1)?,
                Operand::Scalar(x, dtype) => self.scalar(*x, *dtype)?,
            });
        }
        let mut node = node_proto(n.op, inputs, self.names[n.outputs[0]].clone(), node_name(i, n));
        node.output = n.outputs.iter().map(|&o| self.names[o].clone()).collect();
        node.attribute = n.attrs.iter().map(|(name, a)| attribute(name, a)).collect::<Result<_>>()?;
        Ok(node)
    }

    fn ints(&mut self, values: Vec<i64>) -> Result<String> {
        let key = ConstKey::Ints(values.clone());
        if let Some(name) = self.consts.get(&key) {
            return Ok(name.clone());
        }
        let name = format!("/Constant_ints_{}", self.consts.len());
        let t = Tensor::from_vec(values.clone(), &[values.len()], &Device::cpu())?;
        self.initializers.push(tensor_proto(&name, &t)?);
        self.consts.insert(key, name.clone());
        Ok(name)
    }

    fn scalar(&mut self, x: f64, dtype: DType) -> Result<String> {
        let key = ConstKey::Scalar(dtype, x.to_bits());
        if let Some(name) = self.consts.get(&key) {
            return Ok(name.clone());
        }
        let name = format!("/Constant_scalar_{}", self.consts.len());
        self.initializers.push(tensor_proto(&name, &Tensor::from_f64s(&[x], &[], dtype, &Device::cpu())?)?);
        self.consts.insert(key, name.clone());
        Ok(name)
    }

    /// A prelude node with one output, named after it.
    fn prelude_node(&mut self, op: &str, inputs: Vec<String>, attrs: Vec<AttributeProto>) -> String {
        let name = format!("/shape/{op}_{}", self.prelude.len());
        let output = format!("{name}_output");
        let mut node = node_proto(op, inputs, output.clone(), name);
        node.attribute = attrs;
        self.prelude.push(node);
        output
    }

    /// The batch size, `[N]`, read from the first input's shape.
    fn batch_size(&mut self) -> String {
        if let Some(b) = &self.batch {
            return b.clone();
        }
        let input = self.names[self.g.inputs[0]].clone();
        let attrs = vec![int_attr("start", 0), int_attr("end", 1)];
        let b = self.prelude_node("Shape", vec![input], attrs);
        self.batch = Some(b.clone());
        b
    }

    /// A 1-D int64 operand: a constant where every dimension is fixed (in a reshape's target,
    /// also where only one follows the batch: it becomes -1), else computed from the batch size.
    fn shape(&mut self, dims: &[Dim], reshape: bool) -> Result<String> {
        let varying = dims.iter().filter(|d| matches!(d, Dim::Batch { .. })).count();
        if varying == 0 || (reshape && varying == 1) {
            return self.ints(dims.iter().map(|d| if let Dim::Fixed(x) = d { *x } else { -1 }).collect());
        }
        let mut pieces = Vec::new();
        let mut run = Vec::new();
        for d in dims {
            match *d {
                Dim::Fixed(x) => run.push(x),
                Dim::Batch { a, c } => {
                    if !run.is_empty() {
                        pieces.push(self.ints(std::mem::take(&mut run))?);
                    }
                    let mut n = self.batch_size();
                    if a != 1 {
                        let factor = self.ints(vec![a])?;
                        n = self.prelude_node("Mul", vec![n, factor], vec![]);
                    }
                    if c != 0 {
                        let offset = self.ints(vec![c])?;
                        n = self.prelude_node("Add", vec![n, offset], vec![]);
                    }
                    pieces.push(n);
                }
            }
        }
        if !run.is_empty() {
            pieces.push(self.ints(run)?);
        }
        Ok(match pieces.len() {
            1 => pieces.remove(0),
            _ => self.prelude_node("Concat", pieces, vec![int_attr("axis", 0)]),
        })
    }
}

/// `/Layer-1/Sub-2/Op_i`: the layer path the node came from, its op and its index.
fn node_name(i: usize, n: &Node) -> String {
    let layer = n.origin.layer.as_deref().map(|l| l.replace(" > ", "/")).unwrap_or_default();
    match layer.is_empty() {
        true => format!("/{}_{i}", n.op),
        false => format!("/{layer}/{}_{i}", n.op),
    }
}

fn node_proto(op: &str, input: Vec<String>, output: String, name: String) -> NodeProto {
    NodeProto { input, output: vec![output], name: Some(name), op_type: Some(op.to_string()), domain: Some(String::new()), ..Default::default() }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(AttributeType::Int as i32), i: Some(i), ..Default::default() }
}

fn attribute(name: &str, a: &Attr) -> Result<AttributeProto> {
    let mut p = AttributeProto { name: Some(name.into()), ..Default::default() };
    let kind = match a {
        Attr::Int(i) => {
            p.i = Some(*i);
            AttributeType::Int
        }
        Attr::Ints(v) => {
            p.ints = v.clone();
            AttributeType::Ints
        }
        Attr::Float(f) => {
            p.f = Some(*f);
            AttributeType::Float
        }
        Attr::Str(s) => {
            p.s = Some(s.as_bytes().to_vec());
            AttributeType::String
        }
        Attr::Scalar(x, dtype) => {
            p.t = Some(tensor_proto("", &Tensor::from_f64s(&[*x], &[1], *dtype, &Device::cpu())?)?);
            AttributeType::Tensor
        }
    };
    p.r#type = Some(kind as i32);
    Ok(p)
}

fn value_info(name: &str, dtype: DType, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| {
            let value = match *d {
                Dim::Fixed(x) => dimension::Value::DimValue(x),
                Dim::Batch { a: 1, c: 0 } => dimension::Value::DimParam("batch".into()),
                Dim::Batch { a, c: 0 } => dimension::Value::DimParam(format!("{a}*batch")),
                Dim::Batch { a, c } => dimension::Value::DimParam(format!("{a}*batch+{c}")),
            };
            super::proto::tensor_shape_proto::Dimension { value: Some(value), ..Default::default() }
        })
        .collect();
    let tensor = type_proto::Tensor { elem_type: Some(onnx_dtype(dtype) as i32), shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

/// `t` as an initializer: its dims, dtype and little-endian bytes.
fn tensor_proto(name: &str, t: &Tensor) -> Result<TensorProto> {
    let raw = crate::checkpoint::host_bytes(t)?;
    Ok(TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(onnx_dtype(t.dtype()) as i32),
        name: (!name.is_empty()).then(|| name.to_string()),
        raw_data: Some(raw),
        ..Default::default()
    })
}

/// Every name the graph defines (inputs, initializers, node outputs) must be defined once.
fn check_unique(nodes: &[NodeProto], initializers: &[TensorProto], header: &Header) -> Result<()> {
    let mut seen = HashSet::new();
    let defined = header.input_names.iter().chain(initializers.iter().filter_map(|t| t.name.as_ref())).chain(nodes.iter().flat_map(|n| &n.output));
    for name in defined {
        if !seen.insert(name) {
            return Err(Error::Export(format!(
                "the name `{name}` would be given to two values in the graph (an input or output name that is also a parameter's?); pick other input and output names"
            )));
        }
    }
    Ok(())
}
