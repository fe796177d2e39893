//! The directory `train --out` writes a run into: one live run at a time, and no run replaced
//! by a new one unless asked (`--overwrite`). The lock is the operating system's advisory lock
//! on `DIR/.liandan.lock`, which frees itself when its process ends however it ends, so a lock
//! left by a killed run never blocks; the file holds the process id for the message.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::output::note;
use crate::Failure;

/// The files a run writes; a directory holding any of them holds a run.
const RUN_FILES: [&str; 5] = ["last.safetensors", "best.safetensors", "history.csv", "history.json", "history.png"];
const LOCK_FILE: &str = ".liandan.lock";
/// How TensorBoard's event files are named.
const EVENTS_PREFIX: &str = "events.out.tfevents.";

/// The lock on a run directory, held until dropped.
pub struct RunLock {
    _file: File,
    /// The directories `lock` created, deepest first: a start that fails before writing
    /// anything takes them away again, so that it leaves no empty run behind.
    created: Vec<PathBuf>,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let Some(dir) = self.created.first() else { return };
        let only_lock = fs::read_dir(dir).is_ok_and(|entries| entries.flatten().all(|e| e.file_name() == LOCK_FILE));
        if only_lock && fs::remove_file(dir.join(LOCK_FILE)).is_ok() {
            // `remove_dir` leaves a directory that something else has written into since.
            self.created.iter().try_for_each(fs::remove_dir).ok();
        }
    }
}

/// Creates `dir` if need be and takes its lock; an error when another live run holds it or when
/// we cannot write there.
pub fn lock(dir: &Path) -> Result<RunLock, Failure> {
    let fail = |e: io::Error| Failure::usage(format!("cannot write to {} ({e}); pass --out with a directory you can write", dir.display()));
    let created: Vec<PathBuf> = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).map(Path::to_path_buf).collect();
    fs::create_dir_all(dir).map_err(fail)?;
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join(LOCK_FILE)).map_err(fail)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0).and_then(|()| file.rewind()).and_then(|()| writeln!(file, "{}", std::process::id())).map_err(fail)?;
        }
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let who = match holder.trim() {
                "" => "another run".to_string(),
                pid => format!("another run (process {pid})"),
            };
            return Err(Failure::usage(format!("{} is in use by {who}; wait for it to finish, or train into another --out", dir.display())));
        }
        // A file system without locks (some network ones): train, unguarded.
        Err(TryLockError::Error(e)) => note!("note: cannot lock {} ({e}); nothing stops a second run from writing there too", dir.display()),
    }
    Ok(RunLock { _file: file, created })
}

/// Refuses to start afresh in a directory that holds a run, unless `overwrite`.
pub fn check_fresh(dir: &Path, overwrite: bool) -> Result<(), Failure> {
    let found = run_files(dir);
    if found.is_empty() || overwrite {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{} already holds a run ({}); continue it with --resume, replace it with --overwrite, or pick another --out",
        dir.display(),
        found.join(", ")
    )))
}

/// Removes the files of the run in `dir` (`--overwrite`), and nothing else.
pub fn clear(dir: &Path) -> Result<(), Failure> {
    for name in run_files(dir) {
        let path = dir.join(name);
        fs::remove_file(&path).map_err(|e| Failure::usage(format!("cannot remove {} to overwrite the run ({e})", path.display())))?;
    }
    Ok(())
}

/// The run's files in `dir`, its TensorBoard event files (`train --tensorboard`) among them.
fn run_files(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = RUN_FILES.into_iter().filter(|f| dir.join(f).exists()).map(String::from).collect();
    let mut events: Vec<String> = fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(EVENTS_PREFIX)).collect())
        .unwrap_or_default();
    events.sort();
    found.extend(events);
    found
}
