//! Data chores: `cargo xtask fuzz [--cases N]` fuzzes the dataset parsers and the safetensors
//! reader (zero panics, no allocation beyond what the input justifies); `cargo xtask
//! bench-loader` times the DataLoader alone on the CPU.

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use liandan_tensor::Device;
use liandan_train::data::fuzz::{self, Format};
use liandan_train::data::{bundled_mnist, DataLoader, Dataset, ImageDataset, Transform, Transformed};

/// Records the largest single allocation, so the fuzzer can tell a parser that trusts a
/// header's huge size from one that checks it against the input, and the heap's peak, which
/// `xtask bench` reports as the CPU's peak memory (the CPU backend's tensors live there).
pub struct Tracking;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
static HEAP: AtomicUsize = AtomicUsize::new(0);
static HEAP_PEAK: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = HEAP.fetch_add(by, Ordering::Relaxed) + by;
    HEAP_PEAK.fetch_max(now, Ordering::Relaxed);
}

/// How many allocations (and reallocations) this process has made, for `bench-host`'s count
/// per op.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed) as u64
}

/// The most heap this process has held at once, in bytes.
pub fn peak_heap_bytes() -> u64 {
    HEAP_PEAK.load(Ordering::Relaxed) as u64
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above, i.e. from the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; the system allocator checks `new_size`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

/// What an input of `len` bytes may justify: the parsed arrays (labels widen u8 to i64, 8x),
/// a gzip stream's 1032:1 expansion, and the readers' fixed 1 MiB buffers.
fn allowed(format: Format, len: usize) -> usize {
    let factor = if format == Format::IdxGz { 1032 } else { 8 };
    len * factor + (2 << 20)
}

pub fn fuzz_all(args: &[String]) -> Result<(), String> {
    let cases = args.iter().position(|a| a == "--cases").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(100_000usize);
    let scratch = std::env::temp_dir().join(format!("liandan-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    std::panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    println!("| input | cases | accepted | rejected | panics | over-allocations |");
    println!("|---|---|---|---|---|---|");
    for format in Format::ALL {
        let input = fuzz::seed_input(format, &scratch);
        let (mut accepted, mut panics, mut over) = (0, 0, 0);
        for case in 0..cases as u64 {
            let bytes = fuzz::mutate(&input, 0x5eed, case);
            LARGEST.store(0, Ordering::Relaxed);
            match catch_unwind(AssertUnwindSafe(|| fuzz::parse(format, &bytes, &scratch))) {
                Ok(ok) => accepted += usize::from(ok),
                Err(_) => {
                    panics += 1;
                    failures.push(format!("{format:?} case {case}: panic"));
                }
            }
            let largest = LARGEST.load(Ordering::Relaxed);
            if largest > allowed(format, bytes.len()) {
                over += 1;
                failures.push(format!("{format:?} case {case}: allocated {largest} bytes for a {}-byte input", bytes.len()));
            }
        }
        println!("| {format:?} | {cases} | {accepted} | {} | {panics} | {over} |", cases - accepted - panics);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.into_iter().take(20).collect::<Vec<_>>().join("\n"))
    }
}

/// Batches per second over `epochs` epochs of `loader`, waiting for each batch's tensors.
fn rate(loader: &DataLoader, epochs: u64) -> Result<f64, String> {
    let t = Instant::now();
    let mut n = 0;
    for epoch in 0..epochs {
        for b in loader.iter(epoch).map_err(|e| e.to_string())? {
            b.map_err(|e| e.to_string())?;
            n += 1;
        }
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

pub fn bench_loader() -> Result<(), String> {
    let dev = Device::cpu();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("DataLoader alone, batches onto the CPU device, {cores} cores");
    println!("| data | batch | workers | batches/s | samples/s |");
    println!("|---|---|---|---|---|");
    let (train, _) = bundled_mnist().map_err(|e| e.to_string())?;
    let train: Arc<dyn Dataset> = Arc::new(train);
    for workers in [0, 1, 2, 4] {
        let loader = DataLoader::new(train.clone(), 64, &dev).map_err(|e| e.to_string())?.shuffle(0).drop_last(true).workers(workers);
        let r = rate(&loader, 4)?;
        println!("| bundled MNIST, normalized | 64 | {workers} | {r:.0} | {:.0} |", r * 64.0);
    }
    // CIFAR-10-shaped u8 images (10,000 of them, 30 MB) through torchvision's CIFAR pipeline.
    let pixels: Vec<u8> = (0..10_000 * 3072u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let labels = (0..10_000).map(|i| i % 10).collect();
    let images: Arc<dyn Dataset> = Arc::new(ImageDataset::new(pixels, labels, &[3, 32, 32]).map_err(|e| e.to_string())?);
    let pipeline = vec![
        Transform::RandomCrop { height: 32, width: 32, padding: 4 },
        Transform::RandomHorizontalFlip { p: 0.5 },
        Transform::ToFloat { scale: 1.0 / 255.0 },
        Transform::Normalize { mean: vec![0.4914, 0.4822, 0.4465], std: vec![0.2470, 0.2435, 0.2616] },
    ];
    let cifar: Arc<dyn Dataset> = Arc::new(Transformed::new(images, pipeline).map_err(|e| e.to_string())?);
    for workers in [0, 1, 2, 4] {
        let loader = DataLoader::new(cifar.clone(), 128, &dev).map_err(|e| e.to_string())?.shuffle(0).drop_last(true).workers(workers);
        let r = rate(&loader, 2)?;
        println!("| CIFAR-10-shaped, crop+flip+normalize | 128 | {workers} | {r:.0} | {:.0} |", r * 128.0);
    }
    Ok(())
}
