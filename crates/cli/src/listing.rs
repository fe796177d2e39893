//! `liandan info`, `zoo` and `summary`: what liandan can run on, and the models it has.

use liandan_nn::{summary, zoo, DType, Device, ModuleExt, Tensor};

use crate::args::SummaryArgs;
use crate::Failure;

/// The devices, their facts, the one `best()` picks, and a tiny computation on it.
pub fn info() -> Result<(), Failure> {
    for d in Device::all() {
        println!("{d}");
        for (key, value) in d.describe() {
            println!("    {key:<24} {value}");
        }
    }
    let best = Device::best().map_err(|e| Failure::usage(e.to_string()))?;
    println!("best: {best}");
    // A tiny computation, so `info` also proves the device works.
    let x = Tensor::arange(0.0, 4.0, 1.0, DType::F32, &best).map_err(|e| Failure { code: 1, message: e.to_string() })?;
    let sum = x.sum_all().and_then(|s| s.item::<f32>()).map_err(|e| Failure { code: 1, message: e.to_string() })?;
    println!("check: sum(0..4) = {sum}");
    Ok(())
}

pub fn zoo() {
    println!("{:<12} {:>12}  {:<16} {:<16} architecture", "model", "params", "input (batch)", "loss");
    for s in zoo::SPECS {
        let input = s.input_shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        println!("{:<12} {:>12}  {:<16} {:<16} {}", s.name, s.params, input, s.loss, s.architecture);
    }
}

/// `liandan summary <model> [--batch N]`, on the CPU (shapes and counts are the same on every
/// device).
pub fn summary(args: &SummaryArgs) -> Result<(), Failure> {
    let name = args.model.as_deref().ok_or_else(|| Failure::usage("summary needs a model name; `liandan zoo` lists them"))?;
    let spec = zoo::spec(name)?;
    let mut shape = spec.input_shape.to_vec();
    shape[0] = match &args.batch {
        None => 1,
        Some(n) => n.parse().ok().filter(|&b| b > 0).ok_or_else(|| Failure::usage(format!("--batch takes a positive whole number, not `{n}`")))?,
    };
    let dev = Device::cpu();
    let model = zoo::build(name, &dev)?;
    let s = summary::summary(model.as_ref(), &shape, &dev)?;
    println!("{name}: {}", spec.architecture);
    print!("{s}");
    debug_assert_eq!(model.num_parameters(), spec.params);
    Ok(())
}
