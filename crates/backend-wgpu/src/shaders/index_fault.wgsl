// Shared by the index kernels: the three words after the operands' layouts (`extra(0)` = the
// indexed axis' stride in the target, `extra(1)` = its size, `extra(2)` = the tag naming the op
// the indices are for), and the fault words an out-of-range index is reported in. A kernel
// cannot fail mid-dispatch, so it skips the bad element and the host raises the error at its
// next read: fault[0] = 1 when any index was bad, fault[1..3] = the low and high words of the
// first one recorded, fault[3] = its axis' size, fault[4] = its kernel's tag.

@group(0) @binding(4) var<storage, read_write> fault: array<atomic<u32>>;

fn extra(k: u32) -> u32 {
  let rank = p.rank;
  return p.dims[rank + OPERANDS * (rank + 1u) + k];
}

// An i64 index (low, high words) inside 0..size; a negative one has a high word of all ones.
fn in_range(k: vec2<u32>) -> bool {
  return k.y == 0u && k.x < extra(1u);
}

fn report(k: vec2<u32>) {
  if (atomicExchange(&fault[0], 1u) == 0u) {
    atomicStore(&fault[1], k.x);
    atomicStore(&fault[2], k.y);
    atomicStore(&fault[3], extra(1u));
    atomicStore(&fault[4], extra(2u));
  }
}
