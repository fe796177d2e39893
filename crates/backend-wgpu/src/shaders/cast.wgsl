// y = convert_(x) between dtypes. The parts before this file: cast/helpers.wgsl (i64 <-> the
// float W, which is f64 when either side is f64, else f32), one of cast/from_*.wgsl
// (`wide_(v) -> W`, `low_word_(v) -> u32`) and one of cast/to_*.wgsl (`convert_`).

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_y>;

// Element i, and its conversion stored (the entry point is elementwise4.wgsl's).
fn load_(i: u32) -> S_x { return x[offset_of(i, 0u)]; }
fn store_(i: u32, v: S_x) { y[i] = convert_(v); }
