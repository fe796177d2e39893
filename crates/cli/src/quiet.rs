//! Keeps graphics-driver noise off the terminal.
//!
//! Probing Vulkan devices makes Mesa's window-system layer try to reach a Wayland display
//! through libwayland-client, which prints `error: XDG_RUNTIME_DIR is invalid or not set in
//! the environment.` to stderr (twice: once per Vulkan instance wgpu creates) when the variable
//! is unset, as on a server without a display. liandan never draws to a window, so when the
//! variable is unset or names no usable directory we point it at a private directory of our
//! own. libwayland then finds no display there and says nothing; nothing else is hidden.

use std::path::PathBuf;

/// Sets `XDG_RUNTIME_DIR` to a private directory when it is unset or unusable. Must run
/// before any thread starts (it changes the environment).
pub fn private_runtime_dir() {
    let usable = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).is_some_and(|d| d.is_absolute() && d.is_dir());
    if usable {
        return;
    }
    let dir = std::env::temp_dir().join(format!("liandan-runtime-{}", user_id()));
    if create_private(&dir).is_ok() {
        // Single-threaded here: main calls this first, before any device or thread exists.
        std::env::set_var("XDG_RUNTIME_DIR", &dir);
    }
}

/// The directory, readable by its owner only, as the XDG spec asks of a runtime directory.
fn create_private(dir: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let meta = std::fs::symlink_metadata(dir)?;
        // Another user's directory (or a link planted in /tmp) is not ours to use.
        if !meta.is_dir() || meta.uid() != user_id() || meta.permissions().mode() & 0o077 != 0 {
            return Err(std::io::Error::other("not a private directory of ours"));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn user_id() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // The owner of our home-less temp files: the uid a file we create gets.
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

#[cfg(not(unix))]
fn user_id() -> u32 {
    0
}
