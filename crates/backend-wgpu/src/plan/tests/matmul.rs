//! The zoo's matrix products: each linear layer's forward (with its bias), input gradient and
//! weight gradient, the ViT's attention products, the LSTM's, and the batched products of the
//! Winograd convolutions (f32 only, their cut given).

use liandan_tensor::DType::{BF16, F16, F32};

use super::{h200, lavapipe, mismatches, profiles};
use crate::plan::Load::{self, Outer, Strided, K};
use crate::plan::{lstm_step, matmul, MatmulPlan, Options, Product};

/// A product of the zoo: its name, `[batch, m, k, n]`, the loaders of a and b, and whether a
/// bias is added.
type Row = (&'static str, [usize; 4], Load, Load, bool);

const PRODUCTS: &[Row] = &[
    ("mlp fc1 forward", [1, 1024, 1024, 512], K, K, true),
    ("mlp fc2 forward", [1, 1024, 512, 256], K, K, true),
    ("mlp fc3 forward", [1, 1024, 256, 10], K, K, true),
    ("mlp fc3 input grad", [1, 1024, 10, 256], Strided, Outer, false),
    ("mlp fc2 input grad", [1, 1024, 256, 512], K, Outer, false),
    ("mlp fc3 weight grad", [1, 10, 1024, 256], Strided, Outer, false),
    ("mlp fc2 weight grad", [1, 256, 1024, 512], Outer, Outer, false),
    ("mlp fc1 weight grad", [1, 512, 1024, 1024], Outer, Outer, false),
    ("mnist_cnn fc1 forward", [1, 64, 9216, 128], K, K, true),
    ("mnist_cnn fc2 forward", [1, 64, 128, 10], K, K, true),
    ("mnist_cnn fc2 input grad", [1, 64, 10, 128], Strided, Outer, false),
    ("mnist_cnn fc1 input grad", [1, 64, 128, 9216], K, Outer, false),
    ("mnist_cnn fc2 weight grad", [1, 10, 64, 128], Strided, Outer, false),
    ("mnist_cnn fc1 weight grad", [1, 128, 64, 9216], Outer, Outer, false),
    ("resnet18 fc forward", [1, 128, 512, 10], K, K, true),
    ("resnet18 fc input grad", [1, 128, 10, 512], Strided, Outer, false),
    ("resnet18 fc weight grad", [1, 10, 128, 512], Strided, Outer, false),
    ("seed003_cnn fc1 forward", [1, 128, 512, 1024], K, K, true),
    ("seed003_cnn fc2 forward", [1, 128, 1024, 10], K, K, true),
    ("seed003_cnn fc2 input grad", [1, 128, 10, 1024], Strided, Outer, false),
    ("seed003_cnn fc1 input grad", [1, 128, 1024, 512], K, Outer, false),
    ("seed003_cnn fc2 weight grad", [1, 10, 128, 1024], Strided, Outer, false),
    ("seed003_cnn fc1 weight grad", [1, 1024, 128, 512], Outer, Outer, false),
    ("seed003_cnn conv2 input grad (columns)", [128, 576, 512, 121], Outer, Strided, false),
    ("lstm input projection forward", [1, 1792, 28, 1024], K, K, true),
    ("lstm recurrent input grad", [1, 64, 1024, 256], K, Outer, false),
    ("lstm fc forward", [1, 64, 256, 10], K, K, true),
    ("lstm fc input grad", [1, 64, 10, 256], Strided, Outer, false),
    ("lstm fc weight grad", [1, 10, 64, 256], Strided, Outer, false),
    ("lstm weight_hh grad", [1, 1024, 1728, 256], Outer, Outer, false),
    ("lstm weight_ih grad", [1, 1024, 1792, 28], Outer, Outer, false),
    ("vae fc1 forward", [1, 128, 784, 400], K, K, true),
    ("vae fc21 forward", [1, 128, 400, 20], K, K, true),
    ("vae fc3 forward", [1, 128, 20, 400], K, K, true),
    ("vae fc4 forward", [1, 128, 400, 784], K, K, true),
    ("vae fc4 input grad", [1, 128, 784, 400], K, Outer, false),
    ("vae fc3 input grad", [1, 128, 400, 20], K, Outer, false),
    ("vae fc21 input grad", [1, 128, 20, 400], K, Outer, false),
    ("vae fc4 weight grad", [1, 784, 128, 400], Outer, Outer, false),
    ("vae fc3 weight grad", [1, 400, 128, 20], Outer, Outer, false),
    ("vae fc21 weight grad", [1, 20, 128, 400], Outer, Outer, false),
    ("vae fc1 weight grad", [1, 400, 128, 784], Outer, Outer, false),
    ("vit qkv forward", [1, 8320, 192, 576], K, K, true),
    ("vit attention q k^T", [384, 65, 64, 65], K, K, false),
    ("vit attention p v", [384, 65, 65, 64], Strided, Outer, false),
    ("vit proj forward", [1, 8320, 192, 192], K, K, true),
    ("vit mlp fc1 forward", [1, 8320, 192, 768], K, K, true),
    ("vit mlp fc2 forward", [1, 8320, 768, 192], K, K, true),
    ("vit head forward", [1, 128, 192, 10], K, K, false),
    ("vit head forward, its bias in the product (as f16 runs it)", [1, 128, 192, 10], K, K, true),
    ("vit head input grad", [1, 128, 10, 192], Strided, Outer, false),
    ("vit mlp fc2 input grad", [1, 8320, 192, 768], K, Outer, false),
    ("vit mlp fc1 input grad", [1, 8320, 768, 192], K, Outer, false),
    ("vit proj input grad", [1, 8320, 192, 192], K, Outer, false),
    ("vit qkv input grad", [1, 8320, 576, 192], K, Outer, false),
    ("vit head weight grad", [1, 10, 128, 192], Strided, Outer, false),
    ("vit mlp fc2 weight grad", [1, 192, 8320, 768], Outer, Outer, false),
    ("vit mlp fc1 weight grad", [1, 768, 8320, 192], Outer, Outer, false),
    ("vit proj weight grad", [1, 192, 8320, 192], Outer, Outer, false),
    ("vit qkv weight grad", [1, 576, 8320, 192], Outer, Outer, false),
];

/// A batched product of an f32 Winograd convolution (`plan/winograd.rs`): its name, `[batch,
/// m, k, n]`, the loaders of a and b, and the cut the convolution gives (F(4x4)'s).
type WinogradRow = (&'static str, [usize; 4], Load, Load, Option<(usize, usize)>);

const WINOGRAD: &[WinogradRow] = &[
    ("resnet18 layer2 conv forward and input grad (Winograd F2)", [16, 128, 128, 8192], K, Outer, None),
    ("resnet18 layer3 conv forward and input grad (Winograd F2)", [16, 256, 256, 2048], K, Outer, None),
    ("resnet18 layer4 conv forward and input grad (Winograd F2)", [16, 512, 512, 512], K, Outer, None),
    ("resnet18 layer1 conv weight grad (Winograd F4)", [36, 64, 8192, 64], K, K, Some((64, 32))),
    ("resnet18 layer2 conv weight grad (Winograd F4)", [36, 128, 2048, 128], K, K, Some((64, 8))),
    ("resnet18 layer3 conv weight grad (Winograd F4)", [36, 256, 512, 256], K, K, Some((64, 1))),
    ("resnet18 layer4 conv weight grad (Winograd F4)", [36, 512, 128, 512], K, K, Some((64, 1))),
    ("seed003_cnn conv2 weight grad (Winograd, 61 images)", [36, 512, 549, 64], Strided, Strided, Some((64, 1))),
    ("seed003_cnn conv2 weight grad (Winograd, 67 images)", [36, 512, 603, 64], Strided, Strided, Some((64, 1))),
];

/// The products of `PRODUCTS` in f32, f16 and packed bf16 (autocast's), then Winograd's in
/// f32, with their names.
fn products() -> Vec<(String, Product)> {
    let product =
        |dtype, [batch, m, k, n]: [usize; 4], a, b, bias, cut| Product { dtype, batch, m, k, n, a, b, bias, packed: dtype == BF16, cut, addressable: true };
    let mut out = Vec::new();
    for dtype in [F32, F16, BF16] {
        for &(name, sizes, a, b, bias) in PRODUCTS {
            out.push((format!("{name} {dtype}"), product(dtype, sizes, a, b, bias, None)));
        }
    }
    for &(name, sizes, a, b, cut) in WINOGRAD {
        out.push((format!("{name} f32"), product(F32, sizes, a, b, false, cut)));
    }
    out
}

/// The route on each profile; after a copy of the rhs, that and the route of the copy (read
/// in vec4s along N).
fn routes(p: &Product) -> [String; 3] {
    profiles().map(|caps| match matmul(p, &caps, &Options::default(), None) {
        MatmulPlan::CopyRhs => format!("rhs copy, {}", matmul(&Product { b: Outer, ..*p }, &caps, &Options::default(), None)),
        plan => plan.to_string(),
    })
}

/// Prints the table below from the plans (`cargo test -p liandan-backend-wgpu --lib
/// print_matmul_routes -- --ignored --nocapture`), for a reader to compare with the last.
#[test]
#[ignore]
fn print_matmul_routes() {
    for (name, p) in products() {
        let [a, b, c] = routes(&p);
        println!("    ({name:?}, [{a:?}, {b:?}, {c:?}]),");
    }
}

/// Each product's route on the H200, lavapipe and a Metal-like adapter (see `MatmulPlan`'s
/// `Display`); bf16 as autocast holds it, packed.
const ROUTES: &[(&str, [&str; 3])] = &[
    ("mlp fc1 forward f32", ["tiled 64x64 /4 +bias", "tiled 64x64 /4 +bias", "tiled 64x64 /4 +bias"]),
    ("mlp fc2 forward f32", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("mlp fc3 forward f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("mlp fc3 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc2 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc3 weight grad f32", ["tiled 64x64 /16", "tiled 64x64 /16", "tiled 64x64 /16"]),
    ("mlp fc2 weight grad f32", ["tiled 64x64 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mlp fc1 weight grad f32", ["tiled 64x64 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mnist_cnn fc1 forward f32", ["tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias"]),
    ("mnist_cnn fc2 forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("mnist_cnn fc2 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc2 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc forward f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("resnet18 fc input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 forward f32", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("seed003_cnn fc2 forward f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("seed003_cnn fc2 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 input grad f32", ["small 16x16", "small 16x16", "small 16x16"]),
    ("seed003_cnn fc2 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn conv2 input grad (columns) f32", ["tiled 128x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("lstm input projection forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("lstm recurrent input grad f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc forward f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm fc weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm weight_hh grad f32", ["tiled 64x64 /6", "tiled 64x64 /6", "tiled 64x64 /6"]),
    ("lstm weight_ih grad f32", ["tiled 64x64 /28", "tiled 64x64 /28", "tiled 64x64 /28"]),
    ("vae fc1 forward f32", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc21 forward f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc3 forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 input grad f32", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc3 input grad f32", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc21 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc4 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc3 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc21 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc1 weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv forward f32", ["tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit attention q k^T f32", ["heads", "heads", "heads"]),
    ("vit attention p v f32", ["heads", "heads", "heads"]),
    ("vit proj forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit mlp fc1 forward f32", ["tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit mlp fc2 forward f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head forward f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head forward, its bias in the product (as f16 runs it) f32", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 input grad f32", ["tiled 128x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("vit mlp fc1 input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit proj input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv input grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head weight grad f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 weight grad f32", ["tiled 64x64 /29", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit mlp fc1 weight grad f32", ["tiled 64x64 /29", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit proj weight grad f32", ["tiled 64x64 /31", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("vit qkv weight grad f32", ["tiled 64x64 /31", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("mlp fc1 forward f16", ["coop Tall 256x128 /4 +bias", "tiled 64x64 /4 +bias", "tiled 64x64 /4 +bias"]),
    ("mlp fc2 forward f16", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("mlp fc3 forward f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("mlp fc3 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc2 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc3 weight grad f16", ["tiled 64x64 /16", "tiled 64x64 /16", "tiled 64x64 /16"]),
    ("mlp fc2 weight grad f16", ["tiled 64x64 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mlp fc1 weight grad f16", ["coop Tall 256x128 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mnist_cnn fc1 forward f16", ["tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias"]),
    ("mnist_cnn fc2 forward f16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("mnist_cnn fc2 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc2 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc forward f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("resnet18 fc input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 forward f16", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("seed003_cnn fc2 forward f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("seed003_cnn fc2 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 input grad f16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("seed003_cnn fc2 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn conv2 input grad (columns) f16", ["coop Tall 256x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("lstm input projection forward f16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("lstm recurrent input grad f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc forward f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm fc weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm weight_hh grad f16", ["coop Tall 256x128 /6", "tiled 64x64 /6", "tiled 64x64 /6"]),
    ("lstm weight_ih grad f16", ["tiled 64x64 /28", "tiled 64x64 /28", "tiled 64x64 /28"]),
    ("vae fc1 forward f16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc21 forward f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc3 forward f16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 forward f16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 input grad f16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc3 input grad f16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc21 input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc4 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc3 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc21 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc1 weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv forward f16", ["coop Tall 256x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit attention q k^T f16", ["heads", "heads", "heads"]),
    ("vit attention p v f16", ["heads", "heads", "heads"]),
    ("vit proj forward f16", ["coop Tall 256x128 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit mlp fc1 forward f16", ["coop Tall 256x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit mlp fc2 forward f16", ["coop Tall 256x128 /2 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head forward f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head forward, its bias in the product (as f16 runs it) f16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head input grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 input grad f16", ["coop Tall 256x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("vit mlp fc1 input grad f16", ["coop Tall 256x128 /2", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit proj input grad f16", ["coop Tall 256x128 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv input grad f16", ["coop Tall 256x128 /2", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head weight grad f16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 weight grad f16", ["coop Tall 256x128 /22", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit mlp fc1 weight grad f16", ["coop Tall 256x128 /22", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit proj weight grad f16", ["coop Tall 256x128 /52", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("vit qkv weight grad f16", ["coop Tall 256x128 /22", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("mlp fc1 forward bf16", ["coop Tall 256x128 /4 +bias", "tiled 64x64 /4 +bias", "tiled 64x64 /4 +bias"]),
    ("mlp fc2 forward bf16", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("mlp fc3 forward bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("mlp fc3 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc2 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mlp fc3 weight grad bf16", ["tiled 64x64 /16", "tiled 64x64 /16", "tiled 64x64 /16"]),
    ("mlp fc2 weight grad bf16", ["tiled 64x64 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mlp fc1 weight grad bf16", ["coop Tall 256x128 /4", "tiled 64x64 /4", "tiled 64x64 /4"]),
    ("mnist_cnn fc1 forward bf16", ["tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias", "tiled 64x64 /36 +bias"]),
    ("mnist_cnn fc2 forward bf16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("mnist_cnn fc2 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc2 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("mnist_cnn fc1 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc forward bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("resnet18 fc input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 fc weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 forward bf16", ["tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias", "tiled 64x64 /2 +bias"]),
    ("seed003_cnn fc2 forward bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("seed003_cnn fc2 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 input grad bf16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("seed003_cnn fc2 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn fc1 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn conv2 input grad (columns) bf16", ["coop Tall 256x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("lstm input projection forward bf16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("lstm recurrent input grad bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc forward bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("lstm fc input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm fc weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("lstm weight_hh grad bf16", ["coop Tall 256x128 /6", "tiled 64x64 /6", "tiled 64x64 /6"]),
    ("lstm weight_ih grad bf16", ["tiled 64x64 /28", "tiled 64x64 /28", "tiled 64x64 /28"]),
    ("vae fc1 forward bf16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc21 forward bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc3 forward bf16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 forward bf16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vae fc4 input grad bf16", ["small 16x16", "small 16x16", "small 16x16"]),
    ("vae fc3 input grad bf16", ["small 8x16", "small 8x16", "small 8x16"]),
    ("vae fc21 input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc4 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc3 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc21 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vae fc1 weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv forward bf16", ["coop Tall 256x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit attention q k^T bf16", ["heads", "heads", "heads"]),
    ("vit attention p v bf16", ["heads", "heads", "heads"]),
    ("vit proj forward bf16", ["coop Tall 256x128 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit mlp fc1 forward bf16", ["coop Tall 256x128 /1 +bias", "tiled 128x128 /1 +bias", "tiled 128x128 /1 +bias"]),
    ("vit mlp fc2 forward bf16", ["coop Tall 256x128 /2 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head forward bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head forward, its bias in the product (as f16 runs it) bf16", ["tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias", "tiled 64x64 /1 +bias"]),
    ("vit head input grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 input grad bf16", ["coop Tall 256x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("vit mlp fc1 input grad bf16", ["coop Tall 256x128 /2", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit proj input grad bf16", ["coop Tall 256x128 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit qkv input grad bf16", ["coop Tall 256x128 /2", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit head weight grad bf16", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("vit mlp fc2 weight grad bf16", ["coop Tall 256x128 /22", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit mlp fc1 weight grad bf16", ["coop Tall 256x128 /22", "tiled 64x64 /29", "tiled 64x64 /29"]),
    ("vit proj weight grad bf16", ["coop Tall 256x128 /52", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("vit qkv weight grad bf16", ["coop Tall 256x128 /22", "tiled 64x64 /31", "tiled 64x64 /31"]),
    ("resnet18 layer2 conv forward and input grad (Winograd F2) f32", ["tiled 128x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("resnet18 layer3 conv forward and input grad (Winograd F2) f32", ["tiled 128x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("resnet18 layer4 conv forward and input grad (Winograd F2) f32", ["tiled 128x128 /1", "tiled 128x128 /1", "tiled 128x128 /1"]),
    ("resnet18 layer1 conv weight grad (Winograd F4) f32", ["tiled 64x64 /32", "tiled 64x64 /32", "tiled 64x64 /32"]),
    ("resnet18 layer2 conv weight grad (Winograd F4) f32", ["tiled 64x64 /8", "tiled 64x64 /8", "tiled 64x64 /8"]),
    ("resnet18 layer3 conv weight grad (Winograd F4) f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("resnet18 layer4 conv weight grad (Winograd F4) f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn conv2 weight grad (Winograd, 61 images) f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
    ("seed003_cnn conv2 weight grad (Winograd, 67 images) f32", ["tiled 64x64 /1", "tiled 64x64 /1", "tiled 64x64 /1"]),
];

#[test]
fn every_zoo_product_takes_its_route() {
    let products = products();
    assert_eq!(products.len(), ROUTES.len(), "a row per product");
    let rows = products.iter().zip(ROUTES).map(|((name, p), (row, want))| {
        assert_eq!(name, row, "the table's rows in the order of `products`");
        (name.clone(), *want, routes(p))
    });
    let wrong = mismatches(rows);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The LSTM's step (`[64, 256] x [256, 1024]` and the cell) runs fused on every adapter.
#[test]
fn the_zoo_lstm_step_runs_fused() {
    assert!(lstm_step(64, 256, true));
    assert!(!lstm_step(64, 256, false), "h or the weights off vec4s");
    assert!(!lstm_step(1024, 256, true), "past the one-dispatch kernel's outputs");
}

/// A cut asked for by the `coop_cut` knob: the variant of that tile and K in that many ranges
/// on the tensor cores, whatever the rule would pick; a tile no variant has, and a device
/// without tensor cores, keep the rule's.
#[test]
fn a_coop_cut_overrides_the_rule_on_tensor_cores() {
    let fc2 = Product { dtype: F16, batch: 1, m: 8320, k: 768, n: 192, a: K, b: K, bias: true, packed: false, cut: None, addressable: true };
    let with = |cut| Options { coop_cut: cut, ..Options::default() };
    let route = |caps, o: &Options| matmul(&fc2, &caps, o, None).to_string();
    assert_eq!(route(h200(), &Options::default()), "coop Tall 256x128 /2 +bias");
    assert_eq!(route(h200(), &with(Some(((64, 128), 2)))), "coop Short 64x128 /2 +bias");
    assert_eq!(route(h200(), &with(Some(((128, 256), 1)))), "coop Many 128x256 /1 +bias");
    assert_eq!(route(h200(), &with(Some(((96, 96), 1)))), "coop Tall 256x128 /2 +bias");
    assert_eq!(route(lavapipe(), &with(Some(((64, 128), 2)))), route(lavapipe(), &Options::default()));
}
