//! The `liandan` command line.
//!
//! Today it has `info` (the devices liandan can use), `zoo` (the seed models) and `summary`
//! (a model's layers, output shapes and parameters). `train` arrives with the training-loop
//! issue; until then it says so and exits with an error instead of pretending.

use std::process::ExitCode;

use liandan_nn::{summary, zoo, DType, Device, ModuleExt, Tensor};

const USAGE: &str = "usage: liandan <command>

commands:
  info                        list the devices liandan can use and the one it would pick
  zoo                         list the seed models with their inputs, losses and optimizers
  summary <model> [--batch N] a zoo model's layers, output shapes and parameter counts
  train                       train a model (not available yet: it lands with the training-loop issue)";

fn info() -> liandan_nn::Result<()> {
    for d in Device::all() {
        println!("{d}");
        for (key, value) in d.describe() {
            println!("    {key:<24} {value}");
        }
    }
    let best = Device::best();
    println!("best: {best}");
    // A tiny computation, so `info` also proves the device works.
    let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32, &best)?;
    println!("check: sum(0..4) = {}", x.sum_all()?.item::<f32>()?);
    Ok(())
}

fn list_zoo() {
    println!("{:<12} {:>12}  {:<16} {:<16} architecture", "model", "params", "input (batch)", "loss");
    for s in zoo::SPECS {
        let input = s.input_shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        println!("{:<12} {:>12}  {:<16} {:<16} {}", s.name, s.params, input, s.loss, s.architecture);
    }
}

/// `liandan summary <model> [--batch N]`, on the CPU (shapes and counts are the same on every
/// device).
fn show_summary(args: &[String]) -> Result<(), String> {
    let name = args.first().ok_or("summary needs a model name; `liandan zoo` lists them")?;
    let spec = zoo::spec(name).map_err(|e| e.to_string())?;
    let mut shape = spec.input_shape.to_vec();
    match args.get(1).map(String::as_str) {
        None => shape[0] = 1,
        Some("--batch") => {
            let n = args.get(2).ok_or("--batch needs a number")?;
            shape[0] = n.parse().ok().filter(|&b| b > 0).ok_or_else(|| format!("--batch takes a positive whole number, not `{n}`"))?;
        }
        Some(other) => return Err(format!("unexpected argument `{other}`; usage: liandan summary <model> [--batch N]")),
    }
    let dev = Device::cpu();
    let model = zoo::build(name, &dev).map_err(|e| e.to_string())?;
    let s = summary::summary(model.as_ref(), &shape, &dev).map_err(|e| e.to_string())?;
    println!("{name}: {}", spec.architecture);
    print!("{s}");
    debug_assert_eq!(model.num_parameters(), spec.params);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("info") => match info() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("liandan info: {e}");
                ExitCode::FAILURE
            }
        },
        Some("zoo") => {
            list_zoo();
            ExitCode::SUCCESS
        }
        Some("summary") => match show_summary(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("liandan summary: {e}");
                ExitCode::from(2)
            }
        },
        Some("train") => {
            eprintln!("liandan train: not available yet; the training loop lands with its own issue. See README.md for what runs today.");
            ExitCode::from(2)
        }
        Some("-h") | Some("--help") | None => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("liandan: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
