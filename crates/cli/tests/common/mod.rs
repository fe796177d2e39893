//! What the CLI's tests share: a local HTTP server standing in for the dataset mirrors, and the
//! MNIST files kept in the repository.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;

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
