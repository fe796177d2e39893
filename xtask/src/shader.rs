//! `cargo xtask shader [KEY] [--no-f16] [--no-f64] [--immediates]`: the assembled WGSL of one
//! kernel variant, as the backend compiles it, or the list of every variant's key. A key is
//! written as the list prints it; spaces may be left out (`Fill{dtype:F32}`).

/// What the command prints to stdout, or the one line of a usage error (exit status 2).
pub fn run(args: &[String]) -> Result<String, String> {
    let flag = |name: &str| args.iter().any(|a| a == name);
    if let Some(bad) = args.iter().find(|a| a.starts_with("--") && !["--no-f16", "--no-f64", "--immediates"].contains(&a.as_str())) {
        return Err(format!("unknown option {bad:?}; use --no-f16, --no-f64 or --immediates"));
    }
    let sources = liandan_backend_wgpu::shaders::all_sources(!flag("--no-f16"), !flag("--no-f64"), flag("--immediates"));
    let keys: Vec<&str> = args.iter().map(String::as_str).filter(|a| !a.starts_with("--")).collect();
    let listing = || sources.iter().map(|(key, _)| format!("{key}\n")).collect::<String>();
    match keys.as_slice() {
        [] => Ok(listing()),
        [key] => {
            let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
            let wanted = squeeze(key);
            match sources.iter().find(|(k, _)| squeeze(k) == wanted) {
                Some((_, src)) => Ok(src.clone()),
                None => {
                    print!("{}", listing());
                    Err(format!("no kernel variant {key:?}; the keys are listed above"))
                }
            }
        }
        _ => Err(format!("one key at a time, not {}; quote a key that holds spaces", keys.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::run;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_listed_key_prints_its_source() {
        let list = run(&[]).unwrap();
        let keys: Vec<&str> = list.lines().collect();
        assert!(keys.len() > 100, "{} keys", keys.len());
        for key in [keys[0], keys[keys.len() / 2], keys[keys.len() - 1]] {
            let src = run(&args(&[key])).unwrap();
            assert!(src.contains("@compute"), "{key}: {src}");
            let squeezed: String = key.chars().filter(|c| *c != ' ').collect();
            assert_eq!(run(&args(&[&squeezed])).unwrap(), src);
        }
    }

    #[test]
    fn the_device_flags_change_the_source() {
        let key = run(&[]).unwrap().lines().next().unwrap().to_string();
        let storage = run(&args(&[&key])).unwrap();
        let immediate = run(&args(&[&key, "--immediates"])).unwrap();
        assert!(storage.contains("var<storage, read>") && immediate.contains("var<immediate>"));
    }

    #[test]
    fn a_bad_key_or_option_is_one_line() {
        for bad in [args(&["NoSuchKernel"]), args(&["a", "b"]), args(&["--f32"])] {
            let e = run(&bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
