// y = f(x) elementwise; f is substituted for {{EXPR}} (in terms of `v`), per op and dtype.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;

// Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, below f32 resolution near 1.
fn erf_(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(z));
    let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(z) * (1.0 - p * exp(-z * z));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    let v = load_x(x[offset_of(i, 0u)]);
    y[i] = store_x({{EXPR}});
}
