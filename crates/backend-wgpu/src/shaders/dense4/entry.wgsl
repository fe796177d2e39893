// The entry point of the dense f32 and f16 elementwise kernels: every operand read (and the result
// written) in whole vec4s, one an invocation. The launch's grid holds an invocation per four
// elements; the count is a multiple of four and every operand's first element sits at a
// multiple of four (`elementwise::Key::dense4` checks both). The kernel's file before this
// one defines `run4_(j)`, which computes and stores vec4 `j` of the result.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let j = flat_id(wid, nwg, lid);
    if (j < p.numel / 4u) {
        run4_(j);
    }
}
