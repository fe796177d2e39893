//! `liandan export`: a zoo model with its checkpoint's weights, written as an ONNX file for
//! ONNX Runtime and the runtimes that read ONNX (`liandan_nn::export` does the work).

use liandan_nn::export::{self, OnnxOptions, OPSETS};
use liandan_nn::zoo::{self, Vae};
use liandan_nn::{checkpoint, DType, Device, ModuleExt, Tensor};

use crate::args::ExportArgs;
use crate::common::{build_model, load_weights};
use crate::output::say;
use crate::Failure;

/// `liandan export`: loads the checkpoint into the zoo model, traces one forward pass in eval
/// mode on the CPU and writes it. The VAE is exported with its sampling noise as a second input
/// (`noise`, `[N, 20]`; zeros give the mean's reconstruction) and its three outputs.
pub fn export(a: &ExportArgs) -> Result<(), Failure> {
    let spec = zoo::spec(&a.model)?;
    let opset = match a.opset.trim().parse::<i64>() {
        Ok(n) if OPSETS.contains(&n) => n,
        _ => return Err(Failure::usage(format!("--opset {}: liandan writes ONNX opsets {} to {}", a.opset, OPSETS.start(), OPSETS.end()))),
    };
    let batch = match a.batch.trim() {
        "dynamic" => None,
        n => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => return Err(Failure::usage(format!("--batch {}: give `dynamic` or a positive batch size such as 1", a.batch))),
        },
    };
    if a.out.is_dir() {
        return Err(Failure::usage(format!("--out {}: is a directory; give a file name such as model.onnx", a.out.display())));
    }
    let device = Device::cpu();
    let sample = &spec.input_shape[1..];
    let mut net = build_model(spec, sample, &device, 0)?;
    load_weights(&net, &a.checkpoint, &device)?;
    net.eval();

    let n = batch.unwrap_or(2);
    let shape: Vec<usize> = std::iter::once(n).chain(sample.iter().copied()).collect();
    let x = Tensor::rand(&shape, 0.0, 1.0, 0, DType::F32, &device)?;
    let options = OnnxOptions::default().with_opset(opset).with_dynamic_batch(batch.is_none()).with_graph_name(spec.name);
    let replaced = a.out.is_file();
    let onnx = if spec.name == "vae" {
        let mut vae = Vae::new(&device)?;
        checkpoint::load_state_dict(&vae.state_dict(), net.state_dict(), true)?;
        vae.eval();
        let noise = Tensor::randn(&[n, 20], 1, DType::F32, &device)?;
        let options = options.with_input_names(&["input", "noise"]).with_output_names(&["reconstruction", "mu", "logvar"]);
        let forward = |x: &[Tensor]| {
            let out = vae.forward_with_noise(&x[0], &x[1])?;
            Ok(vec![out.reconstruction, out.mu, out.logvar])
        };
        export::onnx_with(&vae, &[x, noise], forward, &a.out, &options)?
    } else {
        export::onnx(&net.inner, &[x], &a.out, &options)?
    };

    let batch = batch.map_or("batch".to_string(), |n| n.to_string());
    let dims = sample.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ");
    let nodes: usize = onnx.op_counts.iter().map(|(_, n)| n).sum();
    let ops = onnx.op_counts.iter().map(|(op, n)| format!("{op} {n}")).collect::<Vec<_>>().join(", ");
    let note = if replaced { " (replaced the file that was there)" } else { "" };
    say!("wrote {}{note}: {} for ONNX opset {opset}, {} parameters", a.out.display(), spec.name, thousands(net.num_parameters()))?;
    say!("inputs: {} [{batch}, {dims}] f32; outputs: {}", onnx.inputs.join(", "), onnx.outputs.join(", "))?;
    say!("{nodes} nodes: {ops}")?;
    Ok(())
}

/// `1199882` as `1,199,882`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits.as_bytes().rchunks(3).rev().map(|g| std::str::from_utf8(g).expect("ASCII digits")).collect();
    groups.join(",")
}
