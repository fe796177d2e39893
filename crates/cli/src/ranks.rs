//! `mpirun -n N liandan train ...`: joining the MPI job the launcher started (with the `mpi`
//! feature), the device each rank takes, what `info` says per rank, and ending every rank
//! when one fails.

use std::process::Command;
use std::time::Duration;

use liandan_nn::Device;
use liandan_train::distributed::Distributed;

use crate::output::note;
use crate::Failure;

/// The MPI job this process was started in, if any. A build without MPI refuses to run under
/// a launcher: each rank would train alone on all the data and overwrite the others' files.
pub fn join() -> Result<Option<Distributed>, Failure> {
    #[cfg(feature = "mpi")]
    return Distributed::from_mpi_env().map_err(Failure::from);
    #[cfg(not(feature = "mpi"))]
    {
        if liandan_train::distributed::launched_by_mpi() {
            return Err(Failure::usage(
                "an MPI launcher started this liandan, which was built without MPI; build it with `--features mpi` (docs/DISTRIBUTED.md), or run it without mpirun",
            ));
        }
        Ok(None)
    }
}

/// The device a rank trains on: `--device`/`LIANDAN_DEVICE` when they name one device
/// (`cpu`, `gpu:N`), else the host's GPU number `local_rank` when there are that many, else
/// the process's own choice.
pub fn device(dist: &Distributed, flag: Option<&str>, (device, why): (Device, String)) -> (Device, String) {
    let named = flag
        .map(str::to_string)
        .or_else(|| liandan_tensor::settings::DEVICE.text_in(&liandan_tensor::settings::env).ok().flatten())
        .is_some_and(|s| s.trim() != "gpu" && !s.trim().is_empty());
    if named {
        return (device, why);
    }
    let mine = dist.device_for(&device);
    match mine.same(&device) {
        true => (device, format!("{why}; local rank {} shares it", dist.local_rank())),
        false => (mine, format!("local rank {}'s GPU", dist.local_rank())),
    }
}

/// One line per rank, gathered on every rank: `rank 1 of 2 (local rank 1 of 2): gpu:1 (...)`.
pub fn describe(dist: &Distributed, device: &Device, why: &str) -> Vec<String> {
    let mine = format!("rank {} of {} (local rank {} of {}): {device} ({why})", dist.rank(), dist.size(), dist.local_rank(), dist.local_size());
    dist.all_gather(mine.as_bytes()).into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect()
}

/// `result` of `command` on one rank of `dist`: a failure ends the whole job (MPI_Abort), so
/// that no rank waits for this one forever, after printing the message with the rank (a quiet
/// stop, rank 0's stdout closed, has none). A stop on Ctrl-C is the same on every rank and
/// ends normally.
pub fn or_abort<T>(dist: &Distributed, command: &str, result: Result<T, Failure>) -> Result<T, Failure> {
    match result {
        Err(f) if f.code != 130 => {
            if !f.message.is_empty() {
                note!("liandan {command}: rank {} of {}: {}", dist.rank(), dist.size(), f.message.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            // The launcher forwards output asynchronously; an abort at once can lose the line.
            std::thread::sleep(Duration::from_millis(200));
            dist.abort(i32::from(f.code))
        }
        other => other,
    }
}

/// `liandan train --gpus N ...`: the same command as N ranks under `mpiexec`, on this machine.
pub fn launch(n: usize) -> Result<(), Failure> {
    if liandan_train::distributed::launched_by_mpi() {
        return Err(Failure::usage("--gpus starts its own ranks; under mpirun, leave it out (mpirun's -n says how many)"));
    }
    if !cfg!(feature = "mpi") {
        return Err(Failure::usage("--gpus needs a liandan built with `--features mpi` (docs/DISTRIBUTED.md)"));
    }
    let exe = std::env::current_exe().map_err(|e| Failure::usage(format!("--gpus: cannot find this program's path ({e})")))?;
    let mut args = std::env::args_os().skip(1).peekable();
    let mut rest = Vec::new();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--gpus") => drop(args.next()),
            Some(s) if s.starts_with("--gpus=") => {}
            _ => rest.push(arg),
        }
    }
    // Ctrl-C reaches mpiexec too, which passes it on to every rank: this process just waits.
    let _ = ctrlc::set_handler(|| {});
    let status = Command::new("mpiexec").arg("-n").arg(n.to_string()).arg(exe).args(rest).status().map_err(|e| {
        Failure::usage(format!(
            "--gpus {n} runs `mpiexec`, which did not start ({e}); install MPI (apt-get install mpich) or start the ranks with mpirun yourself"
        ))
    })?;
    match status.code() {
        Some(0) => Ok(()),
        code => {
            Err(Failure { code: code.map_or(1, |c| c.clamp(1, 255) as u8), message: format!("the {n} ranks stopped with {status} (their messages are above)") })
        }
    }
}
