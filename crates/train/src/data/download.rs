//! Downloads of the full MNIST, Fashion-MNIST and CIFAR-10 into a cache directory: SHA-256
//! verified, resumed after a cut connection (in the same run or the next), shown with a
//! progress bar, renamed into place only when complete and correct. A file we did not write is
//! never deleted.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IsTerminal, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use liandan_tensor::settings::{env, SettingError, Vars};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::settings;

/// A file to fetch: its name in the cache and under the base URL, and its SHA-256.
#[derive(Clone, Copy, Debug)]
pub struct RemoteFile {
    pub name: &'static str,
    pub sha256: &'static str,
}

/// The full MNIST (PyTorch's mirror of LeCun's files).
pub const MNIST_URL: &str = "https://ossci-datasets.s3.amazonaws.com/mnist/";
pub const MNIST_FILES: [RemoteFile; 4] = [
    RemoteFile { name: "train-images-idx3-ubyte.gz", sha256: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609" },
    RemoteFile { name: "train-labels-idx1-ubyte.gz", sha256: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c" },
    RemoteFile { name: "t10k-images-idx3-ubyte.gz", sha256: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6" },
    RemoteFile { name: "t10k-labels-idx1-ubyte.gz", sha256: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6" },
];

/// Fashion-MNIST, from Zalando Research's bucket.
pub const FASHION_MNIST_URL: &str = "https://fashion-mnist.s3.eu-central-1.amazonaws.com/";
pub const FASHION_MNIST_FILES: [RemoteFile; 4] = [
    RemoteFile { name: "train-images-idx3-ubyte.gz", sha256: "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84" },
    RemoteFile { name: "train-labels-idx1-ubyte.gz", sha256: "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845" },
    RemoteFile { name: "t10k-images-idx3-ubyte.gz", sha256: "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073" },
    RemoteFile { name: "t10k-labels-idx1-ubyte.gz", sha256: "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5" },
];

/// CIFAR-10's binary version, from its authors.
pub const CIFAR10_URL: &str = "https://www.cs.toronto.edu/~kriz/";
pub const CIFAR10_FILE: RemoteFile = RemoteFile { name: "cifar-10-binary.tar.gz", sha256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd" };

/// Attempts per file; each one after the first resumes where the previous was cut off.
const ATTEMPTS: usize = 3;

/// `LIANDAN_DATA` and `LIANDAN_DATA_URL` in `vars` ([`crate::settings`]): the cache directory
/// and the base URL, where set.
pub(crate) fn read_settings(vars: Vars) -> std::result::Result<(Option<PathBuf>, Option<String>), SettingError> {
    Ok((settings::DATA.path_in(vars)?, settings::DATA_URL.text_in(vars)?))
}

/// The cache directory: `$LIANDAN_DATA`, else `liandan` in the user's cache directory
/// (`$XDG_CACHE_HOME`, `~/.cache`, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows).
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = read_settings(&env).map_err(liandan_tensor::Error::from)?.0 {
        return Ok(dir);
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = if cfg!(windows) {
        env("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        env("HOME").map(|h| h.join("Library/Caches"))
    } else {
        env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|h| h.join(".cache")))
    };
    base.map(|b| b.join("liandan")).ok_or_else(|| Error::InvalidArgument {
        op: "data::download::cache_dir",
        what: "no cache directory: set LIANDAN_DATA to a directory for datasets".into(),
    })
}

/// The base URL to download from: `$LIANDAN_DATA_URL` (ending in `/`), else `default`.
pub fn base_url(default: &str) -> Result<String> {
    Ok(match read_settings(&env).map_err(liandan_tensor::Error::from)?.1 {
        Some(u) if u.ends_with('/') => u,
        Some(u) => format!("{u}/"),
        None => default.to_string(),
    })
}

/// Downloads MNIST into `root/mnist` (root: [`cache_dir`] when `None`) and returns that
/// directory, ready for [`super::Mnist::load`]. Files already there and correct are kept.
pub fn mnist(root: Option<&Path>) -> Result<PathBuf> {
    fetch_all(MNIST_URL, &MNIST_FILES, &root_or_cache(root)?.join("mnist"))
}

/// Downloads Fashion-MNIST into `root/fashion-mnist`; see [`mnist`].
pub fn fashion_mnist(root: Option<&Path>) -> Result<PathBuf> {
    fetch_all(FASHION_MNIST_URL, &FASHION_MNIST_FILES, &root_or_cache(root)?.join("fashion-mnist"))
}

/// Downloads and unpacks CIFAR-10 into `root/cifar-10-batches-bin` (for [`super::cifar10`]).
pub fn cifar10(root: Option<&Path>) -> Result<PathBuf> {
    fetch_and_unpack(&format!("{CIFAR10_URL}{}", CIFAR10_FILE.name), CIFAR10_FILE.sha256, &root_or_cache(root)?, "cifar-10-batches-bin")
}

/// Fetches the `.tar.gz` at `url` into `root` and unpacks its top directory `top` there,
/// unless `root/top` already exists; returns `root/top`.
pub fn fetch_and_unpack(url: &str, sha256: &str, root: &Path, top: &str) -> Result<PathBuf> {
    let dir = root.join(top);
    if dir.is_dir() {
        return Ok(dir);
    }
    let name = url.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("download.tar.gz");
    let archive = fetch(url, sha256, &root.join(name))?;
    unpack_tar_gz(&archive, root, top)
}

fn root_or_cache(root: Option<&Path>) -> Result<PathBuf> {
    root.map(Path::to_path_buf).map_or_else(cache_dir, Ok)
}

/// Fetches every file of `files` from `base` into `dir`; returns `dir`.
pub fn fetch_all(base: &str, files: &[RemoteFile], dir: &Path) -> Result<PathBuf> {
    for f in files {
        fetch(&format!("{base}{}", f.name), f.sha256, &dir.join(f.name))?;
    }
    Ok(dir.to_path_buf())
}

/// Unpacks the archive into a scratch directory beside `root`, then renames its top directory
/// `top` into `root` in one step, so a cut-off unpacking never looks complete.
fn unpack_tar_gz(archive: &Path, root: &Path, top: &str) -> Result<PathBuf> {
    let bad = |e: io::Error| Error::Data { path: archive.to_path_buf(), detail: format!("cannot unpack it ({e}); delete it and download again") };
    let scratch = root.join(format!(".{top}.unpacking"));
    let _ = fs::remove_dir_all(&scratch);
    let file = File::open(archive).map_err(bad)?;
    tar::Archive::new(flate2::read::GzDecoder::new(file)).unpack(&scratch).map_err(bad)?;
    let dest = root.join(top);
    fs::rename(scratch.join(top), &dest).map_err(bad)?;
    let _ = fs::remove_dir_all(&scratch);
    Ok(dest)
}

/// Downloads `url` to `dest` unless `dest` already holds bytes with SHA-256 `sha256`.
///
/// Bytes go to `dest.part` first; a cut connection is resumed with an HTTP range request
/// (restarted when the server ignores ranges), up to three attempts, and a `.part` left by an
/// earlier run is resumed the same way. Only a complete file with the right checksum is synced
/// and renamed to `dest`; a download with a wrong checksum deletes its partial file. A `dest`
/// that is already there with another checksum was not written by us (we rename only checked
/// files into place): it is left alone and the error says so.
pub fn fetch(url: &str, sha256: &str, dest: &Path) -> Result<PathBuf> {
    let fail = |detail: String| Error::Download { url: url.to_string(), detail };
    if dest.is_file() {
        let got = file_sha256(dest).map_err(|e| Error::Data { path: dest.to_path_buf(), detail: format!("cannot read it ({e})") })?;
        if got == sha256 {
            return Ok(dest.to_path_buf());
        }
        return Err(Error::Data {
            path: dest.to_path_buf(),
            detail: format!(
                "SHA-256 mismatch (expected {sha256}, got {got}); the file is left as it is. Replace it with a correct copy, \
                 or move it away to download it again"
            ),
        });
    }
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create {} ({e}); set LIANDAN_DATA to a writable directory", dir.display())))?;
    }
    let part = dest.with_extension(format!("{}part", dest.extension().map(|e| format!("{}.", e.to_string_lossy())).unwrap_or_default()));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        match attempt(&agent, url, &part) {
            Ok(()) => {
                let got = file_sha256(&part).map_err(|e| fail(format!("cannot read {} ({e})", part.display())))?;
                if got != sha256 {
                    let _ = fs::remove_file(&part); // ours, and wrong: a retry must start afresh
                    return Err(fail(format!(
                        "SHA-256 mismatch (expected {sha256}, got {got}); the download is corrupt or the server's file changed. \
                         Run again, or place a correct copy at {}",
                        dest.display()
                    )));
                }
                fs::rename(&part, dest).map_err(|e| fail(format!("cannot rename {} into place ({e})", part.display())))?;
                if let Some(dir) = dest.parent().and_then(|d| File::open(d).ok()) {
                    let _ = dir.sync_all(); // makes the rename durable where directories can be synced
                }
                return Ok(dest.to_path_buf());
            }
            Err(Attempt::Fatal(detail)) => return Err(fail(detail)),
            Err(Attempt::Retry(detail)) => last = detail,
        }
    }
    // Promise a resume only when there is something to resume from.
    let kept = match fs::metadata(&part).map(|m| m.len()) {
        Ok(0) => {
            let _ = fs::remove_file(&part); // ours, and empty
            String::new()
        }
        Ok(n) => format!(", keeping the {n} bytes received in {} to resume from on the next run", part.display()),
        Err(_) => String::new(),
    };
    Err(fail(format!(
        "{last}; gave up after {ATTEMPTS} attempts{kept}. When offline, copy the file by hand to {} \
         (LIANDAN_DATA sets the directory), or train on the bundled MNIST",
        dest.display()
    )))
}

enum Attempt {
    /// Worth another try (cut connection, timeout): the partial file is kept.
    Retry(String),
    /// Another try cannot help (404, unreachable host, disk error).
    Fatal(String),
}

/// One request, appending to `part` from where it ends.
fn attempt(agent: &ureq::Agent, url: &str, part: &Path) -> std::result::Result<(), Attempt> {
    let disk = |e: io::Error| Attempt::Fatal(format!("cannot write {} ({e})", part.display()));
    let have = fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    let mut request = agent.get(url);
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    let response = request.call().map_err(|e| match e {
        ureq::Error::Io(_) | ureq::Error::Timeout(_) => Attempt::Retry(format!("the connection failed ({e})")),
        _ => Attempt::Fatal(format!("cannot reach the server ({e}); check the network. When offline, download the file elsewhere and copy it into the cache directory (LIANDAN_DATA), or train on the bundled MNIST")),
    })?;
    let status = response.status().as_u16();
    let mut file = OpenOptions::new().create(true).append(true).open(part).map_err(disk)?;
    let start = match status {
        206 => have,
        200 => {
            // The server sends the whole file (it ignored the range, or there was none).
            file.set_len(0).map_err(disk)?;
            0
        }
        416 => {
            // Our partial file is not a prefix the server recognizes: start over next attempt.
            file.set_len(0).map_err(disk)?;
            return Err(Attempt::Retry("the server refused to resume the partial download".into()));
        }
        _ => {
            return Err(Attempt::Fatal(format!(
                "the server answered HTTP {status}; check the URL, or download the file by hand into the cache directory (LIANDAN_DATA)"
            )))
        }
    };
    let remaining = response.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let bar = if io::stderr().is_terminal() { ProgressBar::new(start + remaining.unwrap_or(0)) } else { ProgressBar::hidden() };
    bar.set_style(ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}").unwrap_or_else(|_| ProgressStyle::default_bar()));
    bar.set_message(url.rsplit('/').next().unwrap_or(url).to_string());
    bar.set_position(start);
    file.seek(io::SeekFrom::End(0)).map_err(disk)?;
    let mut body = response.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                file.sync_all().map_err(disk)?;
                bar.abandon();
                return Err(Attempt::Retry(format!("the connection was cut after {} bytes ({e})", bar.position())));
            }
        };
        file.write_all(&buf[..n]).map_err(disk)?;
        bar.inc(n as u64);
    }
    file.sync_all().map_err(disk)?;
    bar.finish_and_clear();
    Ok(())
}

/// The lowercase hex SHA-256 of the file at `path`.
pub fn file_sha256(path: &Path) -> io::Result<String> {
    let mut hasher = Sha256::new();
    io::copy(&mut File::open(path)?, &mut hasher)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
