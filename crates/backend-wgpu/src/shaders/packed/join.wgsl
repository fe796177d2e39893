// One part of a join of packed bf16 tensors along a later dimension (packed.rs's
// concat_packed): p.rows runs of p.run words, read one after another from x at word p.first,
// written p.stride words apart into y from word p.start. A word an invocation: the runs are whole
// words, so no two invocations share one.
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = flat_id(wid, nwg, lid);
    if (w >= p.rows * p.run) { return; }
    let row = w / p.run;
    y[p.start + row * p.stride + (w - row * p.run)] = x[p.first + w];
}
