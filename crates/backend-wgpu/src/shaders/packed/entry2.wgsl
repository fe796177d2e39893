// The entry point of the elementwise kernels that write packed bf16: an invocation computes
// elements 2w and 2w + 1 (`value_(i)`, from the file before this one) and writes word w whole
// (`put_`), so no two invocations share a word.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = p.numel;
    let w = flat_id(wid, nwg, lid);
    if (w >= (n + 1u) / 2u) { return; }
    let i = 2u * w;
    var v = narrow_(value_(i));
    if (i + 1u < n) {
        v |= narrow_(value_(i + 1u)) << 16u;
    }
    put_(w, v);
}
