//! How fast the CPU runs resnet18's 3x3 convolutions at batch 16, each pass on its own:
//! the forward, the input gradient and the weight gradient; stride 1, then the stride-2
//! convolutions that open each later stage. `RAYON_NUM_THREADS` sets the threads, and an
//! argument (`forward`, `input` or `weight`) picks one pass.
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo run --release -p liandan-backend-cpu --example conv_passes
//! ```

use liandan_tensor::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight};
use liandan_tensor::{ConvGeometry, DType, Device, Tensor};

#[path = "common/timing.rs"]
mod timing;
use timing::time;

fn main() -> liandan_tensor::Result<()> {
    let d = Device::cpu();
    let filter = std::env::args().nth(1);
    let same = [(64, 32), (128, 16), (256, 8), (512, 4)].map(|(c, hw)| (c, hw, c, 1));
    let down = [(64, 32), (128, 16), (256, 8)].map(|(c, hw)| (c, hw, 2 * c, 2));
    for (c, hw, o, stride) in same.into_iter().chain(down) {
        let g = ConvGeometry { n: 16, c, h: hw, w: hw, o, kernel: (3, 3), stride: (stride, stride), padding: (1, 1), dilation: (1, 1), groups: 1 };
        let ohw = hw / stride;
        let x = Tensor::randn(&[16, c, hw, hw], 1, DType::F32, &d)?;
        let w = Tensor::randn(&[o, c, 3, 3], 2, DType::F32, &d)?;
        let dy = Tensor::randn(&[16, o, ohw, ohw], 3, DType::F32, &d)?;
        let flops = 2.0 * (16 * o * c * 9 * ohw * ohw) as f64;
        let mut line = format!("[16, {c}, {hw}, {hw}] -> {o}, stride {stride}");
        for pass in ["forward", "input", "weight"] {
            if filter.as_deref().is_some_and(|f| f != pass) {
                continue;
            }
            let us = liandan_backend_cpu::on_pool(|| {
                time(1.0, || {
                    let out = match pass {
                        "forward" => Tensor::custom(Conv2d(g), &[&x, &w]),
                        "input" => Tensor::custom(Conv2dBackwardInput(g), &[&dy, &w]),
                        _ => Tensor::custom(Conv2dBackwardWeight(g), &[&dy, &x]),
                    };
                    drop(out.expect("the convolution runs"));
                })
            });
            line += &format!("  {pass} {:.0} us ({:.0} GFLOP/s)", us, flops / us / 1e3);
        }
        println!("{line}");
    }
    Ok(())
}
