// The entry point of a multi-tensor ("foreach") fused optimizer update (`gpu.rs`): the update's
// files come before it CHUNK times, copy k's names ending in `_k` and its bindings following
// copy k - 1's, and `update_at(k, e)` runs copy k on element `e`. Each workgroup updates 1,024
// elements of one tensor, four an invocation 256 apart, so that it finds its tensor once for
// four elements and a quarter as many workgroups start. A whole block of 1,024 goes to
// `update4_at(k, e)`: the update's own `update4(e)` where it has one (its four elements' loads
// before any store, so that four are in flight), else `update(e)` four times.
//
// `p.n` = workgroups that do work; the offsets are 0 (every operand starts its buffer) and the
// hyper-parameters are the one-tensor kernel's; `p.table` holds, per tensor k, its first
// workgroup, then its element count. Entries past the last tensor start at 0xffffffff, so the
// search stops before them. `skipped()` is false, or, gated, reads the gate: the loss
// scaler's flag, 0.0 or -0.0 when every gradient is finite (read as bits, which a NaN cannot
// confuse).

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let group = wid.y * nwg.x + wid.x;
  // A gated update does nothing when the loss scaler found a gradient not finite.
  if (group >= p.n || skipped()) { return; }
  var k = 0u;
  while (k + 1u < CHUNK && p.table[2u * (k + 1u)] <= group) {
    k++;
  }
  let first = (group - p.table[2u * k]) * 1024u + lid;
  let n = p.table[2u * k + 1u];
  if (first + 768u < n) {
    update4_at(k, first);
    return;
  }
  for (var r = 0u; r < 4u; r++) {
    let e = first + 256u * r;
    if (e >= n) { return; }
    update_at(k, e);
  }
}
