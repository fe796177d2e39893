// y = convert_(x) between dtypes. The parts before this file: cast/helpers.wgsl (i64 <-> the
// float W, which is f64 when either side is f64, else f32), one of cast/from_*.wgsl
// (`wide_(v) -> W`, `low_word_(v) -> u32`) and one of cast/to_*.wgsl (`convert_`).

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_y>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    y[i] = convert_(x[offset_of(i, 0u)]);
}
