// The finished y of a linear layer's product whose K was split (matmul.rs), f32 or f16 as
// stored: element i the sum of its p.splits partial sums (f32, p.numel apart) plus the bias of
// its column (i % p.n), rounded once; an element an invocation.
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<S_x>;
@group(0) @binding(3) var<storage, read> bias_: array<S_x>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.numel) { return; }
    var v = 0.0;
    for (var s = 0u; s < p.splits; s++) { v += partials[s * p.numel + i]; }
    y[i] = store_x(v + f32(load_x(bias_[p.bias_offset + i % p.n])));
}
