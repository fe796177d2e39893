//! The downloader against a tiny HTTP server on 127.0.0.1 that each test starts: a good file,
//! a corrupted one, a connection cut mid-file (then resumed, in the same run or the next), a
//! 404, and a file placed by hand. No internet.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::thread::JoinHandle;

use liandan_train::data::download::{fetch, fetch_all, file_sha256, RemoteFile};
use liandan_train::Error;

/// What the server does with one request, given the `Range` start it asked for.
type Reply = fn(body: &[u8], range_start: Option<usize>) -> Vec<u8>;

/// Serves `replies.len()` requests in turn, then stops; returns the base URL, and the `Range`
/// start of each request when joined.
fn serve(body: Vec<u8>, replies: Vec<Reply>) -> (String, JoinHandle<Vec<Option<usize>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut ranges = Vec::new();
        for reply in replies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut range = None;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    range = v.trim().trim_end_matches('-').parse().ok();
                }
            }
            let _ = stream.write_all(&reply(&body, range));
            ranges.push(range);
        }
        ranges
    });
    (base, handle)
}

fn ok(body: &[u8], range: Option<usize>) -> Vec<u8> {
    let start = range.unwrap_or(0);
    let status = if range.is_some() { "206 Partial Content" } else { "200 OK" };
    let mut r = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len() - start).into_bytes();
    r.extend_from_slice(&body[start..]);
    r
}

/// Promises the whole file but sends only its first half, then closes.
fn cut(body: &[u8], _: Option<usize>) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
    r.extend_from_slice(&body[..body.len() / 2]);
    r
}

fn corrupt(body: &[u8], range: Option<usize>) -> Vec<u8> {
    let mut r = ok(body, range);
    let last = r.len() - 1;
    r[last] ^= 0xff;
    r
}

fn not_found(_: &[u8], _: Option<usize>) -> Vec<u8> {
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
}

fn payload() -> (Vec<u8>, String) {
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x");
    std::fs::write(&p, &body).unwrap();
    let sum = file_sha256(&p).unwrap();
    (body, sum)
}

fn message(e: Error) -> String {
    assert!(matches!(e, Error::Download { .. }), "{e:?}");
    e.to_string()
}

#[test]
fn good_file_lands_and_is_not_fetched_twice() {
    let (body, sum) = payload();
    let (base, server) = serve(body.clone(), vec![ok]);
    let dir = tempfile::tempdir().unwrap();
    let files = [RemoteFile { name: "a.bin", sha256: Box::leak(sum.into_boxed_str()) }];
    fetch_all(&base, &files, dir.path()).unwrap();
    server.join().unwrap();
    assert_eq!(std::fs::read(dir.path().join("a.bin")).unwrap(), body);
    // The server is gone: a second call must be satisfied by the verified file alone.
    fetch_all(&base, &files, dir.path()).unwrap();
    assert!(!dir.path().join("a.bin.part").exists());
}

#[test]
fn a_cut_connection_is_resumed_with_a_range_request() {
    let (body, sum) = payload();
    let (base, server) = serve(body.clone(), vec![cut, ok]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("b.bin");
    fetch(&format!("{base}b.bin"), &sum, &dest).unwrap();
    server.join().unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
}

#[test]
fn a_connection_cut_every_time_gives_up_and_keeps_the_partial_file() {
    let (body, sum) = payload();
    let (base, server) = serve(body.clone(), vec![cut, cut, cut]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("c.bin");
    let msg = message(fetch(&format!("{base}c.bin"), &sum, &dest).unwrap_err());
    server.join().unwrap();
    let part = format!("{}.part", dest.display());
    assert!(msg.contains("c.bin") && msg.contains("offline") && msg.contains(&format!("{part} to resume from")), "{msg}");
    assert!(!dest.exists());
    assert!(Path::new(&part).exists());
}

#[test]
fn a_corrupted_file_is_rejected_and_removed() {
    let (body, sum) = payload();
    let (base, server) = serve(body, vec![corrupt]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("d.bin");
    let msg = message(fetch(&format!("{base}d.bin"), &sum, &dest).unwrap_err());
    server.join().unwrap();
    assert!(msg.contains(&format!("SHA-256 mismatch (expected {sum}, got ")), "{msg}");
    assert!(!dest.exists());
    assert!(!dir.path().join("d.bin.part").exists());
}

#[test]
fn not_found_names_the_url() {
    let (body, sum) = payload();
    let (base, server) = serve(body, vec![not_found]);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{base}missing.bin");
    let msg = message(fetch(&url, &sum, &dir.path().join("missing.bin")).unwrap_err());
    server.join().unwrap();
    assert!(msg.contains(&url) && msg.contains("404"), "{msg}");
}

#[test]
fn an_unreachable_server_says_what_to_do_offline() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let msg = message(fetch(&format!("http://127.0.0.1:{port}/x.bin"), "00", &dir.path().join("x.bin")).unwrap_err());
    assert!(msg.contains("offline"), "{msg}");
    // Nothing arrived, so there is nothing to resume from, and the message promises nothing.
    assert!(!msg.contains(".part") && !msg.contains("resume"), "{msg}");
    assert!(!dir.path().join("x.bin.part").exists());
}

#[test]
fn a_partial_file_of_an_earlier_run_is_resumed_with_a_range_request() {
    let (body, sum) = payload();
    let (base, server) = serve(body.clone(), vec![ok]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("e.bin");
    std::fs::write(dir.path().join("e.bin.part"), &body[..body.len() / 3]).unwrap();
    fetch(&format!("{base}e.bin"), &sum, &dest).unwrap();
    assert_eq!(server.join().unwrap(), [Some(body.len() / 3)]);
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert!(!dir.path().join("e.bin.part").exists());
}

#[test]
fn a_file_placed_by_hand_with_another_checksum_is_kept_and_named() {
    let (_, sum) = payload();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("cifar-10-binary.tar.gz");
    std::fs::write(&dest, b"garbage\n").unwrap();
    // No server: a wrong file is never replaced, so nothing is fetched.
    let err = fetch("http://127.0.0.1:9/cifar-10-binary.tar.gz", &sum, &dest).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Data { .. }), "{err:?}");
    assert!(msg.contains(&format!("SHA-256 mismatch (expected {sum}, got ")) && msg.contains(&dest.display().to_string()), "{msg}");
    assert_eq!(std::fs::read(&dest).unwrap(), b"garbage\n", "the user's file is kept as it was");
}

#[test]
fn an_archive_is_fetched_and_unpacked_into_place() {
    // A .tar.gz holding top/test_batch.bin, as CIFAR-10's archive holds cifar-10-batches-bin/.
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let record = vec![7u8; 3073];
    let mut header = tar::Header::new_gnu();
    header.set_size(record.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, "top/test_batch.bin", record.as_slice()).unwrap();
    let archive = tar.into_inner().unwrap().finish().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("a"), &archive).unwrap();
    let sum = file_sha256(&scratch.path().join("a")).unwrap();

    let (base, server) = serve(archive, vec![ok]);
    let root = tempfile::tempdir().unwrap();
    let dir = liandan_train::data::download::fetch_and_unpack(&format!("{base}data.tar.gz"), &sum, root.path(), "top").unwrap();
    server.join().unwrap();
    assert_eq!(dir, root.path().join("top"));
    let ds = liandan_train::data::cifar10(&dir, liandan_train::data::Split::Test).unwrap();
    assert_eq!(liandan_train::data::Dataset::len(&ds), 1);
}
