//! The `liandan` command line.
//!
//! Today it has `info` (the devices liandan can use). `train` arrives with the training-loop
//! issue; until then it says so and exits with an error instead of pretending.

use std::process::ExitCode;

use liandan_nn::{DType, Device, Tensor};

const USAGE: &str = "usage: liandan <command>

commands:
  info     list the devices liandan can use and the one it would pick
  train    train a model (not available yet: it lands with the training-loop issue)";

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
