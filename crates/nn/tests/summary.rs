//! Model summaries: the rows (layer, output shape, parameters) and the totals.

use std::sync::Mutex;

use liandan_nn::layers::{BatchNorm2d, BatchNorm2dConfig, Conv2d, Conv2dConfig, Flatten, Linear, LinearConfig, ReLU, Sequential};
use liandan_nn::summary::{self, SummaryRow};
use liandan_nn::{impl_module, profile, zoo, DType, Device, Forward, ModuleExt, Result, Tensor};

fn row(layer: &str, depth: usize, output_shape: &[usize], params: usize) -> SummaryRow {
    SummaryRow { layer: layer.into(), depth, output_shape: output_shape.to_vec(), params }
}

#[test]
fn a_sequential_lists_its_layers_in_call_order() {
    let dev = Device::cpu();
    let model = Sequential::new()
        .push(Conv2dConfig::new(3, 8, 3).init(&dev).unwrap())
        .push(BatchNorm2dConfig::new(8).init(&dev).unwrap())
        .push(ReLU)
        .push(Flatten::default())
        .push(LinearConfig::new(8 * 6 * 6, 10).init(&dev).unwrap());
    let s = summary::summary(&model, &[2, 3, 8, 8], &dev).unwrap();
    assert_eq!(
        s.rows,
        [
            row("Conv2d-1", 0, &[2, 8, 6, 6], 224),
            row("BatchNorm-2", 0, &[2, 8, 6, 6], 16),
            row("ReLU-3", 0, &[2, 8, 6, 6], 0),
            row("Flatten-4", 0, &[2, 288], 0),
            row("Linear-5", 0, &[2, 10], 2890),
        ]
    );
    assert_eq!((s.total_params, s.trainable_params), (3130, 3130));
    let text = s.to_string();
    for needle in ["Layer (type)", "Output Shape", "Param #", "Conv2d-1", "[2, 8, 6, 6]", "2,890", "Total params: 3,130", "Non-trainable params: 0"] {
        assert!(text.contains(needle), "`{needle}` missing from\n{text}");
    }
    // Taking a summary builds no graph and leaves no recorder behind.
    assert!(model.parameters().iter().all(|p| p.grad().is_none()));
    let again = summary::summary(&model, &[1, 3, 8, 8], &dev).unwrap();
    assert_eq!(again.rows.len(), 5);
    assert_eq!(again.rows[4].output_shape, [1, 10]);
}

#[test]
fn nested_blocks_are_indented_and_totals_count_each_parameter_once() {
    let dev = Device::cpu();
    let model = zoo::build("resnet18", &dev).unwrap();
    let s = summary::summary(model.as_ref(), &[1, 3, 32, 32], &dev).unwrap();
    let blocks: Vec<&SummaryRow> = s.rows.iter().filter(|r| r.layer.starts_with("BasicBlock")).collect();
    assert_eq!(blocks.len(), 8);
    assert_eq!(blocks[7].output_shape, [1, 512, 4, 4]);
    let first = s.rows.iter().position(|r| r.layer.starts_with("BasicBlock")).unwrap();
    assert_eq!(s.rows[first + 1].depth, 1, "a block's layers sit beneath it");
    assert_eq!(s.rows.last().unwrap().output_shape, [1, 10]);
    assert_eq!(s.total_params, 11_173_962);
}

#[test]
fn a_wrong_input_shape_is_an_error_and_the_next_summary_works() {
    let dev = Device::cpu();
    let model = zoo::build("mlp", &dev).unwrap();
    assert!(summary::summary(model.as_ref(), &[4, 100], &dev).is_err());
    let s = summary::summary(model.as_ref(), &[4, 1024], &dev).unwrap();
    assert_eq!(s.rows.len(), 3);
    assert_eq!(s.total_params, 658_698);
}

/// A block of the user's own: a struct, one `impl_module!`, a `forward_impl`, and no scope
/// written anywhere.
struct Block {
    conv: Conv2d,
    bn: BatchNorm2d,
    probe: Probe,
}

impl_module!(Block { conv, bn, probe });

impl Forward for Block {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.probe.forward(&self.bn.forward(&self.conv.forward(x)?)?.relu()?)
    }
}

/// Records the layer path anomaly reports would name while it runs.
#[derive(Default)]
struct Probe {
    seen: Mutex<Option<String>>,
}

impl_module!(Probe {});

impl Forward for Probe {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        *self.seen.lock().unwrap() = summary::current_layer();
        Ok(x.clone())
    }
}

struct Net {
    block: Block,
    fc: Linear,
}

impl_module!(Net { block, fc });

impl Forward for Net {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.forward(&self.block.forward(x)?.flatten(1, -1)?)
    }
}

fn net(dev: &Device) -> Net {
    let block = Block { conv: Conv2dConfig::new(3, 4, 3).init(dev).unwrap(), bn: BatchNorm2dConfig::new(4).init(dev).unwrap(), probe: Probe::default() };
    Net { block, fc: LinearConfig::new(4 * 6 * 6, 10).init(dev).unwrap() }
}

#[test]
fn a_model_of_your_own_gets_rows_without_writing_a_scope() {
    let dev = Device::cpu();
    let model = net(&dev);
    let s = summary::summary(&model, &[2, 3, 8, 8], &dev).unwrap();
    // The model itself has no row (as torchsummary); its block has one, with its layers beneath.
    assert_eq!(
        s.rows,
        [
            row("Block-1", 0, &[2, 4, 6, 6], 112 + 8),
            row("Conv2d-2", 1, &[2, 4, 6, 6], 112),
            row("BatchNorm-3", 1, &[2, 4, 6, 6], 8),
            row("Probe-4", 1, &[2, 4, 6, 6], 0),
            row("Linear-5", 0, &[2, 10], 1450),
        ]
    );
    // Inside a layer path (what anomaly detection opens), a running layer knows its name.
    summary::with_layer_path(|| model.forward(&Tensor::zeros(&[1, 3, 8, 8], DType::F32, &dev).unwrap())).unwrap();
    assert_eq!(model.block.probe.seen.lock().unwrap().as_deref(), Some("Block-1 > Probe-4"));
    // The model inside a Sequential is a layer like any other.
    let s = summary::summary(&Sequential::new().push(net(&dev)), &[2, 3, 8, 8], &dev).unwrap();
    assert_eq!((s.rows[0].layer.as_str(), s.rows[0].depth, s.rows[1].layer.as_str(), s.rows[1].depth), ("Net-1", 0, "Block-2", 1));
}

#[test]
fn the_profiler_groups_a_model_of_your_own_by_its_blocks() {
    let dev = Device::cpu();
    let model = net(&dev);
    profile::start().unwrap();
    let out = model.forward(&Tensor::ones(&[2, 3, 8, 8], DType::F32, &dev).unwrap());
    let p = profile::stop().unwrap();
    out.unwrap();
    let layers: Vec<String> = p.by_layer().into_iter().map(|r| r.name).collect();
    for want in ["Block/Conv2d", "Block/BatchNorm", "Linear"] {
        assert!(layers.iter().any(|l| l == want), "no `{want}` among {layers:?}");
    }
    // The relu between the block's layers runs in the block itself.
    assert!(layers.iter().any(|l| l == "Block"), "{layers:?}");
}
