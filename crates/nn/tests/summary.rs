//! Model summaries: the rows (layer, output shape, parameters) and the totals.

use liandan_nn::layers::{BatchNorm2dConfig, Conv2dConfig, Flatten, LinearConfig, ReLU, Sequential};
use liandan_nn::summary::{self, SummaryRow};
use liandan_nn::{zoo, Device, ModuleExt};

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
