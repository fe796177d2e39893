//! What the CLI's tests share: running the command and reading what it says, a local HTTP
//! server standing in for the dataset mirrors, the MNIST files kept in the repository, and
//! `.npy` headers.

// Each test file uses a part.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// Serves `files` by name (404 for others) to `requests` requests, then stops; returns the base URL.
pub fn serve(files: HashMap<String, Vec<u8>>, requests: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut asked = Vec::new();
        for _ in 0..requests {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
            }
            let name = first.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_string();
            let reply = match files.get(&name) {
                Some(body) => {
                    let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
                    r.extend_from_slice(body);
                    r
                }
                None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
            };
            let _ = stream.write_all(&reply);
            asked.push(name);
        }
        asked
    });
    (base, handle)
}

/// The real MNIST test split kept in the repository (its SHA-256 sums are the published ones).
pub fn bundled(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../train/data/mnist").join(name)).unwrap()
}

/// A run's stdout and stderr as text.
pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs `c`, fails unless it succeeded, and returns its stdout and stderr.
pub fn run(c: &mut Command) -> (String, String) {
    let o = c.output().expect("the liandan binary runs");
    let (out, err) = text(&o);
    assert!(o.status.success(), "{c:?} failed with {:?}:\n{out}\n{err}", o.status.code());
    (out, err)
}

/// Fails unless `o`, the run of `args`, exited with status 2 and a message holding `needle`,
/// not a panic.
pub fn assert_usage_error(args: &[&str], o: &Output, needle: &str) {
    let (_, err) = text(o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

/// The start of a `.npy` file (version 1.0) of `descr` (`<f4`, `|u1`) and `shape` (the Python
/// tuple, `(28, 28)`), padded as NumPy pads it so that the data starts at a multiple of 64.
pub fn npy_header(descr: &str, shape: &str) -> Vec<u8> {
    let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    b.extend(std::iter::repeat_n(b' ', pad));
    b.push(b'\n');
    b
}
