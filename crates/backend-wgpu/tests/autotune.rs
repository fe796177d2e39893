//! The autotune (`LIANDAN_AUTOTUNE`, `WgpuOptions::autotune`): products and
//! convolutions cut as measured give the results of the rule's cut, the measured cuts are kept
//! in a file per adapter and read back instead of measured again, a cut in the file is the
//! one that runs, and a damaged file is measured again and rewritten. Skips without an adapter
//! unless `LIANDAN_REQUIRE_GPU` is set.

use std::path::{Path, PathBuf};

use liandan_backend_wgpu::testing::dispatches_recorded;
use liandan_backend_wgpu::{WgpuBackend, WgpuOptions};
use liandan_tensor::{DType, Device, Tensor};

mod common;
use common::gpu;

/// A device of its own with the autotune on, its cuts kept in `dir`.
fn tuned(dir: &Path) -> Device {
    common::gpu_with(|o| {
        o.autotune = true;
        o.autotune_dir = Some(dir.to_path_buf());
    })
    .expect("a GPU, found before")
}

/// Points `d`'s autotune at `dir`.
fn retune(d: &Device, dir: &Path) {
    let backend = WgpuBackend::of(d).unwrap();
    backend.set_options(WgpuOptions { autotune_dir: Some(dir.to_path_buf()), ..backend.options() }).unwrap();
}

/// Shapes measured on `d` so far.
fn measured(d: &Device) -> u64 {
    WgpuBackend::of(d).unwrap().autotune_measured()
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    let (g, w) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap());
    assert_eq!(g.len(), w.len(), "{what}");
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: element {i}: got {g}, want {w}");
    }
}

/// A fresh directory under the system's temporary one.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("liandan-autotune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The one file the autotune wrote in `dir`.
fn the_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one file per adapter in {}: {files:?}", dir.display());
    files[0].clone()
}

/// `[m, k] x [k, n]` and its value on `d`. The lhs is stored transposed: these small products
/// then stay on the tiled kernel, whose cuts the autotune times (with a row-major lhs they
/// take the one-dispatch kernel for small products, which has no cuts to time).
fn product(d: &Device, m: usize, k: usize, n: usize) -> (Tensor, Tensor, Tensor) {
    let a = Tensor::randn(&[k, m], 1, DType::F32, d).unwrap().t().unwrap();
    let b = Tensor::randn(&[k, n], 2, DType::F32, d).unwrap();
    let y = a.matmul(&b).unwrap();
    (a, b, y)
}

/// A strided 3x3 convolution's output and its input and weight gradients (all three passes).
fn conv(d: &Device) -> Vec<Tensor> {
    let x = Tensor::randn(&[2, 16, 12, 12], 3, DType::F32, d).unwrap().requires_grad_(true).unwrap();
    let w = Tensor::randn(&[32, 16, 3, 3], 4, DType::F32, d).unwrap().requires_grad_(true).unwrap();
    let y = x.conv2d(&w, None, (2, 2), (1, 1), (1, 1), 1).unwrap();
    y.square().unwrap().sum_all().unwrap().backward().unwrap();
    vec![y.detach(), x.grad().unwrap(), w.grad().unwrap()]
}

#[test]
fn tuned_cuts_give_the_rules_results_and_are_kept_on_disk() {
    let Some(d) = gpu() else { return };
    let dir = scratch("disk");
    let (_, _, want) = product(&d, 64, 1024, 64);
    let want_conv = conv(&d);
    let t = tuned(&dir);
    let (got, got_conv) = (product(&t, 64, 1024, 64).2, conv(&t));
    close("a tuned matmul", &got, &want, 1e-4);
    for (g, w) in got_conv.iter().zip(&want_conv) {
        close("a tuned convolution pass", g, w, 1e-4);
    }
    // The product and the three passes (the input gradient's phases share one cut).
    assert_eq!(measured(&t), 4, "every shape measured once");
    let file = the_file(&dir);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("# liandan autotune"), "{text}");
    for what in ["matmul f32 b=1 m=64 k=1024 n=64", "conv Forward f32", "conv Input f32", "conv Weight f32"] {
        assert!(lines.iter().any(|l| l.starts_with(what)), "no line for {what} in {text}");
    }

    // The same shapes again, and in another process's view (a second directory holding a copy
    // of the file): read, not measured.
    let again = scratch("copy");
    std::fs::create_dir_all(&again).unwrap();
    std::fs::copy(&file, again.join(file.file_name().unwrap())).unwrap();
    let before = measured(&t);
    product(&t, 64, 1024, 64);
    conv(&t);
    retune(&t, &again);
    product(&t, 64, 1024, 64);
    conv(&t);
    assert_eq!(measured(&t), before, "cuts in the file are not measured again");

    // A cut written in the file is the one that runs: K split in four is a product and a sum
    // of the partial results, unsplit one dispatch.
    let line = lines.iter().find(|l| l.starts_with("matmul f32 b=1 m=64 k=1024 n=64")).unwrap();
    let key = line.split('\t').next().unwrap();
    for (cut, dispatches) in [("64 4", 2), ("64 1", 1), ("128 2", 2)] {
        let edited = scratch(&format!("edited-{}", cut.replace(' ', "-")));
        std::fs::create_dir_all(&edited).unwrap();
        std::fs::write(edited.join(file.file_name().unwrap()), text.replace(line, &format!("{key}\t{cut} 1.0"))).unwrap();
        retune(&t, &edited);
        let (a, b, _) = product(&t, 64, 1024, 64);
        let start = dispatches_recorded();
        let y = a.matmul(&b).unwrap();
        let counted = dispatches_recorded() - start;
        assert_eq!(counted, dispatches, "the cut {cut} from the file");
        close(&format!("the matmul cut as {cut}"), &y, &want, 1e-4);
        std::fs::remove_dir_all(&edited).unwrap();
    }

    // A damaged file: measured again, without an error, and rewritten whole.
    let damaged = scratch("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::write(damaged.join(file.file_name().unwrap()), "# liandan autotune 1 x\tnot this adapter\nmatmul\tgarbage\n").unwrap();
    let before = measured(&t);
    retune(&t, &damaged);
    let y = product(&t, 64, 1024, 64).2;
    close("the matmul after a damaged file", &y, &want, 1e-4);
    assert_eq!(measured(&t) - before, 1, "the damaged file's shape measured again");
    let rewritten = std::fs::read_to_string(damaged.join(file.file_name().unwrap())).unwrap();
    assert_eq!(rewritten.lines().next(), Some(lines[0]), "rewritten with this adapter's header");
    assert_eq!(rewritten.lines().count(), 2, "{rewritten}");

    // Off (the default): nothing measured, nothing written.
    product(&d, 32, 512, 32);
    assert_eq!(measured(&d), 0);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&again).unwrap();
    std::fs::remove_dir_all(&damaged).unwrap();
}

#[test]
fn a_directory_that_cannot_be_written_keeps_the_cuts_in_memory() {
    let Some(d) = gpu() else { return };
    // A file where the directory should be: creating it fails.
    let blocked = scratch("blocked");
    std::fs::write(&blocked, "not a directory").unwrap();
    let (_, _, want) = product(&d, 48, 768, 40);
    let t = tuned(&blocked);
    let y = product(&t, 48, 768, 40).2;
    close("a tuned matmul with no cache", &y, &want, 1e-4);
    assert_eq!(measured(&t), 1);
    // Measured once: kept in memory for the same directory.
    product(&t, 48, 768, 40);
    assert_eq!(measured(&t), 1);
    std::fs::remove_file(&blocked).unwrap();
}
