//! The zoo's convolution passes: forward (with the bias where the layer has one), input
//! gradient (every layer but the first) and weight gradient.

use liandan_tensor::ConvGeometry;
use liandan_tensor::DType::{BF16, F16, F32, F64};

use super::{defaults, geom, mismatches, profiles};
use crate::plan::{conv, ConvCall, Options, Pass};

/// A zoo layer: its name, geometry, whether it has a bias, and whether its input's gradient is
/// computed (not for a model's first layer).
type Layer = (&'static str, ConvGeometry, bool, bool);

const LAYERS: &[Layer] = &[
    ("mnist_cnn conv1", geom(64, 1, 28, 32, 3, 1, 0), true, false),
    ("mnist_cnn conv2", geom(64, 32, 26, 64, 3, 1, 0), true, true),
    ("seed003_cnn conv1", geom(128, 1, 28, 64, 3, 1, 0), true, false),
    ("seed003_cnn conv2", geom(128, 64, 13, 512, 3, 1, 0), true, true),
    ("resnet18 conv1", geom(128, 3, 32, 64, 3, 1, 1), false, false),
    ("resnet18 layer1 conv", geom(128, 64, 32, 64, 3, 1, 1), false, true),
    ("resnet18 layer2.0 conv1", geom(128, 64, 32, 128, 3, 2, 1), false, true),
    ("resnet18 layer2.0 shortcut", geom(128, 64, 32, 128, 1, 2, 0), false, true),
    ("resnet18 layer2 conv", geom(128, 128, 16, 128, 3, 1, 1), false, true),
    ("resnet18 layer3.0 conv1", geom(128, 128, 16, 256, 3, 2, 1), false, true),
    ("resnet18 layer3.0 shortcut", geom(128, 128, 16, 256, 1, 2, 0), false, true),
    ("resnet18 layer3 conv", geom(128, 256, 8, 256, 3, 1, 1), false, true),
    ("resnet18 layer4.0 conv1", geom(128, 256, 8, 512, 3, 2, 1), false, true),
    ("resnet18 layer4.0 shortcut", geom(128, 256, 8, 512, 1, 2, 0), false, true),
    ("resnet18 layer4 conv", geom(128, 512, 4, 512, 3, 1, 1), false, true),
    ("vit patch_embed", geom(128, 3, 32, 192, 4, 4, 0), true, false),
];

/// The passes of `LAYERS` in order, with their names: `(name, call)`.
fn passes() -> Vec<(String, ConvCall)> {
    let mut out = Vec::new();
    for dtype in [F32, F16, BF16] {
        for &(name, geom, bias, input) in LAYERS {
            let call = |pass: Pass, plain: bool| ConvCall::new(pass, geom, dtype, plain);
            out.push((format!("{name} forward {dtype}"), call(Pass::Forward, !bias)));
            if input {
                out.push((format!("{name} input {dtype}"), call(Pass::Input, true)));
            }
            out.push((format!("{name} weight {dtype}"), call(Pass::Weight, true)));
        }
    }
    out
}

fn routes(call: &ConvCall) -> [String; 3] {
    profiles().map(|caps| conv(call, &caps, &defaults(), None).to_string())
}

/// Prints the table below from the plans (`cargo test -p liandan-backend-wgpu --lib
/// print_conv_routes -- --ignored --nocapture`), for a reader to compare with the last.
#[test]
#[ignore]
fn print_conv_routes() {
    for (name, call) in passes() {
        let [a, b, c] = routes(&call);
        println!("    ({name:?}, [{a:?}, {b:?}, {c:?}]),");
    }
}

/// Each pass's route on the H200, lavapipe and a Metal-like adapter (see `ConvPlan`'s
/// `Display`: Winograd's tile, the columns, or the implicit GEMM's kernel, tile and splits of K).
const ROUTES: &[(&str, [&str; 3])] = &[
    ("mnist_cnn conv1 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv1 weight f32", ["implicit 64x64 /169", "implicit 64x64 /169", "implicit 64x64 /169"]),
    ("mnist_cnn conv2 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 weight f32", ["implicit 64x64 /144", "implicit 64x64 /144", "implicit 64x64 /144"]),
    ("seed003_cnn conv1 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("seed003_cnn conv1 weight f32", ["implicit 64x64 /338", "implicit 64x64 /338", "implicit 64x64 /338"]),
    ("seed003_cnn conv2 forward f32", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("seed003_cnn conv2 input f32", ["columns", "columns", "columns"]),
    ("seed003_cnn conv2 weight f32", ["winograd F4 in 2 chunks", "winograd F4 in 2 chunks", "winograd F4 in 2 chunks"]),
    ("resnet18 conv1 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 conv1 weight f32", ["implicit 64x64 /512", "implicit 64x64 /512", "implicit 64x64 /512"]),
    ("resnet18 layer1 conv forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv weight f32", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer2.0 conv1 forward f32", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 conv1 input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 conv1 weight f32", ["implicit 64x64 /57", "implicit 64x64 /57", "implicit 64x64 /57"]),
    ("resnet18 layer2.0 shortcut forward f32", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 shortcut input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 shortcut weight f32", ["implicit 64x64 /128", "implicit 64x64 /128", "implicit 64x64 /128"]),
    ("resnet18 layer2 conv forward f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer2 conv input f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer2 conv weight f32", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer3.0 conv1 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 conv1 input f32", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer3.0 conv1 weight f32", ["implicit 64x64 /15", "implicit 64x64 /15", "implicit 64x64 /15"]),
    ("resnet18 layer3.0 shortcut forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut weight f32", ["implicit 64x64 /32", "implicit 64x64 /32", "implicit 64x64 /32"]),
    ("resnet18 layer3 conv forward f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer3 conv input f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer3 conv weight f32", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer4.0 conv1 forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 input f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 weight f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut input f32", ["implicit 64x64 /2", "implicit 64x64 /2", "implicit 64x64 /2"]),
    ("resnet18 layer4.0 shortcut weight f32", ["implicit 64x64 /8", "implicit 64x64 /8", "implicit 64x64 /8"]),
    ("resnet18 layer4 conv forward f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer4 conv input f32", ["winograd F2", "winograd F2", "winograd F2"]),
    ("resnet18 layer4 conv weight f32", ["winograd F4", "winograd F4", "winograd F4"]),
    ("vit patch_embed forward f32", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("vit patch_embed weight f32", ["implicit 64x64 /32", "implicit 64x64 /32", "implicit 64x64 /32"]),
    ("mnist_cnn conv1 forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv1 weight f16", ["implicit 64x64 /169", "implicit 64x64 /169", "implicit 64x64 /169"]),
    ("mnist_cnn conv2 forward f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 input f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 weight f16", ["implicit 64x64 /144", "implicit 64x64 /144", "implicit 64x64 /144"]),
    ("seed003_cnn conv1 forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("seed003_cnn conv1 weight f16", ["implicit 64x64 /338", "implicit 64x64 /338", "implicit 64x64 /338"]),
    ("seed003_cnn conv2 forward f16", ["coop Tall 256x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("seed003_cnn conv2 input f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("seed003_cnn conv2 weight f16", ["coop Tall 256x128 /13", "winograd F4 in 2 chunks", "winograd F4 in 2 chunks"]),
    ("resnet18 conv1 forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 conv1 weight f16", ["implicit 64x64 /512", "implicit 64x64 /512", "implicit 64x64 /512"]),
    ("resnet18 layer1 conv forward f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv input f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv weight f16", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer2.0 conv1 forward f16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 conv1 input f16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 conv1 weight f16", ["coop Many 128x256 /44", "implicit 64x64 /57", "implicit 64x64 /57"]),
    ("resnet18 layer2.0 shortcut forward f16", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 shortcut input f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 shortcut weight f16", ["implicit 64x64 /128", "implicit 64x64 /128", "implicit 64x64 /128"]),
    ("resnet18 layer2 conv forward f16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2 conv input f16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2 conv weight f16", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer3.0 conv1 forward f16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 conv1 input f16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer3.0 conv1 weight f16", ["coop Tall 256x128 /14", "implicit 64x64 /15", "implicit 64x64 /15"]),
    ("resnet18 layer3.0 shortcut forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut input f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut weight f16", ["implicit 64x64 /32", "implicit 64x64 /32", "implicit 64x64 /32"]),
    ("resnet18 layer3 conv forward f16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3 conv input f16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3 conv weight f16", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer4.0 conv1 forward f16", ["coop Tall 256x128 /4", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 input f16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 weight f16", ["coop Tall 256x128 /3", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut input f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut weight f16", ["implicit 64x64 /8", "implicit 64x64 /8", "implicit 64x64 /8"]),
    ("resnet18 layer4 conv forward f16", ["coop Tall 256x128 /4", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4 conv input f16", ["coop Tall 256x128 /4", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4 conv weight f16", ["winograd F4", "winograd F4", "winograd F4"]),
    ("vit patch_embed forward f16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("vit patch_embed weight f16", ["coop Tall 256x128 /51", "implicit 64x64 /32", "implicit 64x64 /32"]),
    ("mnist_cnn conv1 forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv1 weight bf16", ["implicit 64x64 /169", "implicit 64x64 /169", "implicit 64x64 /169"]),
    ("mnist_cnn conv2 forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 input bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("mnist_cnn conv2 weight bf16", ["implicit 64x64 /144", "implicit 64x64 /144", "implicit 64x64 /144"]),
    ("seed003_cnn conv1 forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("seed003_cnn conv1 weight bf16", ["implicit 64x64 /338", "implicit 64x64 /338", "implicit 64x64 /338"]),
    ("seed003_cnn conv2 forward bf16", ["coop Tall 256x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("seed003_cnn conv2 input bf16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("seed003_cnn conv2 weight bf16", ["coop Tall 256x128 /13", "winograd F4 in 2 chunks", "winograd F4 in 2 chunks"]),
    ("resnet18 conv1 forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 conv1 weight bf16", ["implicit 64x64 /512", "implicit 64x64 /512", "implicit 64x64 /512"]),
    ("resnet18 layer1 conv forward bf16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv input bf16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer1 conv weight bf16", ["winograd F4", "winograd F4", "winograd F4"]),
    ("resnet18 layer2.0 conv1 forward bf16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 conv1 input bf16", ["coop Short 64x128 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 conv1 weight bf16", ["coop Many 128x256 /44", "implicit 64x64 /57", "implicit 64x64 /57"]),
    ("resnet18 layer2.0 shortcut forward bf16", ["implicit 128x128 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer2.0 shortcut input bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer2.0 shortcut weight bf16", ["implicit 64x64 /128", "implicit 64x64 /128", "implicit 64x64 /128"]),
    ("resnet18 layer2 conv forward bf16", ["coop Many 128x256 /1", "winograd F2", "winograd F2"]),
    ("resnet18 layer2 conv input bf16", ["coop Many 128x256 /1", "winograd F2", "winograd F2"]),
    ("resnet18 layer2 conv weight bf16", ["coop Many 128x256 /26", "winograd F4", "winograd F4"]),
    ("resnet18 layer3.0 conv1 forward bf16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 conv1 input bf16", ["coop Many 128x256 /1", "implicit 128x128 /1", "implicit 128x128 /1"]),
    ("resnet18 layer3.0 conv1 weight bf16", ["coop Tall 256x128 /14", "implicit 64x64 /15", "implicit 64x64 /15"]),
    ("resnet18 layer3.0 shortcut forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut input bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer3.0 shortcut weight bf16", ["implicit 64x64 /32", "implicit 64x64 /32", "implicit 64x64 /32"]),
    ("resnet18 layer3 conv forward bf16", ["coop Tall 256x128 /2", "winograd F2", "winograd F2"]),
    ("resnet18 layer3 conv input bf16", ["coop Tall 256x128 /2", "winograd F2", "winograd F2"]),
    ("resnet18 layer3 conv weight bf16", ["coop Tall 256x128 /7", "winograd F4", "winograd F4"]),
    ("resnet18 layer4.0 conv1 forward bf16", ["coop Tall 256x128 /4", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 input bf16", ["coop Tall 256x128 /2", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 conv1 weight bf16", ["coop Tall 256x128 /3", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut input bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("resnet18 layer4.0 shortcut weight bf16", ["implicit 64x64 /8", "implicit 64x64 /8", "implicit 64x64 /8"]),
    ("resnet18 layer4 conv forward bf16", ["coop Tall 256x128 /4", "winograd F2", "winograd F2"]),
    ("resnet18 layer4 conv input bf16", ["coop Tall 256x128 /4", "winograd F2", "winograd F2"]),
    ("resnet18 layer4 conv weight bf16", ["coop Tall 256x128 /1", "winograd F4", "winograd F4"]),
    ("vit patch_embed forward bf16", ["implicit 64x64 /1", "implicit 64x64 /1", "implicit 64x64 /1"]),
    ("vit patch_embed weight bf16", ["implicit 64x64 /32", "implicit 64x64 /32", "implicit 64x64 /32"]),
];

#[test]
fn every_zoo_convolution_takes_its_route() {
    let passes = passes();
    assert_eq!(passes.len(), ROUTES.len(), "a row per pass");
    let rows = passes.iter().zip(ROUTES).map(|((name, call), (row, want))| {
        assert_eq!(name, row, "the table's rows in the order of `passes`");
        (name.clone(), *want, routes(call))
    });
    let wrong = mismatches(rows);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What the kernels cannot address or compute runs as the composite: f64 (on an adapter with
/// it, too), an output past one binding, an operand's view reaching past 32-bit indexing, and
/// an image wider than the weight gradient's packed tap shifts.
#[test]
fn what_the_kernels_cannot_address_runs_as_the_composite() {
    let route = |call: ConvCall| routes(&call).map(|r| r.to_string());
    let layer = geom(128, 64, 32, 64, 3, 1, 1);
    assert_eq!(route(ConvCall::new(Pass::Forward, layer, F64, true)), ["composite (Dtype)"; 3].map(String::from));
    // 2^31 outputs of 4 bytes: past every profile's binding, and past signed 32-bit indices.
    let huge = geom(1 << 14, 64, 32, 128, 3, 1, 1);
    assert_eq!(route(ConvCall::new(Pass::Forward, huge, F32, true)), ["composite (Size)"; 3].map(String::from));
    let far = ConvCall { operand_reach: i32::MAX as usize, ..ConvCall::new(Pass::Weight, layer, F32, true) };
    assert_eq!(route(far), ["composite (Size)"; 3].map(String::from));
    let wide = ConvGeometry { w: 70_000, ..geom(1, 1, 3, 1, 3, 1, 1) };
    assert_eq!(route(ConvCall::new(Pass::Weight, wide, F32, true)), ["composite (Size)"; 3].map(String::from));
    // The same layer as the zoo has it runs on the kernels.
    assert!(route(ConvCall::new(Pass::Weight, layer, F32, true)).iter().all(|r| !r.starts_with("composite")));
}

/// A cut asked for by the `coop_cut` knob: every pass the tensor cores take runs on that
/// layout with K in that many ranges (at most one a 32-deep slice), Winograd off, so that each
/// layout can be timed on each pass (weight gradients of 64 channels too, which the rule keeps
/// off them); passes the tensor-core kernels do not take (the 3-channel stem) are untouched.
#[test]
fn a_coop_cut_overrides_the_rule_on_tensor_cores() {
    let layer1 = geom(128, 64, 32, 64, 3, 1, 1);
    let layer4 = geom(128, 512, 4, 512, 3, 1, 1);
    let route = |g, pass, cut| {
        let options = Options { coop_cut: cut, ..defaults() };
        conv(&ConvCall::new(pass, g, F16, true), &super::h200(), &options, None).to_string()
    };
    assert_eq!(route(layer1, Pass::Forward, None), "coop Short 64x128 /1");
    assert_eq!(route(layer1, Pass::Forward, Some(((128, 256), 2))), "coop Many 128x256 /2");
    let layer2 = geom(128, 128, 16, 128, 3, 1, 1);
    assert_eq!(route(layer2, Pass::Weight, None), "winograd F4");
    assert_eq!(route(layer2, Pass::Weight, Some(((256, 128), 8))), "coop Tall 256x128 /8");
    // 64 output channels are too few rows for the rule's weight gradients there, not for a cut.
    assert_eq!(route(layer1, Pass::Weight, None), "winograd F4");
    assert_eq!(route(layer1, Pass::Weight, Some(((64, 128), 32))), "coop Short 64x128 /32");
    // K of 576 holds 18 slices.
    assert_eq!(route(layer1, Pass::Input, Some(((128, 128), 64))), "coop Prefetch 128x128 /18");
    assert_eq!(route(layer4, Pass::Input, Some(((96, 96), 2))), route(layer4, Pass::Input, None));
    let stem = geom(128, 3, 32, 64, 3, 1, 1);
    assert_eq!(route(stem, Pass::Forward, Some(((256, 128), 4))), route(stem, Pass::Forward, None));
}
