// out = cond ? on_true : on_false, with on_true, on_false and out packed bf16 (the entry
// point is packed/entry2.wgsl's).

@group(0) @binding(1) var<storage, read> cond: array<u32>;
@group(0) @binding(2) var<storage, read> on_true: array<u32>;
@group(0) @binding(3) var<storage, read> on_false: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;

fn value_(i: u32) -> f32 {
    let t = offset_of(i, 1u);
    let f = offset_of(i, 2u);
    return select(widen_(on_false[f >> 1u], f), widen_(on_true[t >> 1u], t), cond[offset_of(i, 0u)] != 0u);
}

fn put_(w: u32, v: u32) { out[w] = v; }
