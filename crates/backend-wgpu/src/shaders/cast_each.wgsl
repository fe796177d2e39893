// Up to 12 tensors cast at once (`cast_each.rs`): slot k reads x<k> and writes y<k>, its
// workgroups starts[k] .. starts[k + 1] covering numels[k] elements from element offsets[k],
// PER of them an invocation. The file before this one defines `out_`, a stored result from
// one or two stored inputs, and the storage types XS and YS (packed bf16 is u32 words). Slots
// past `count` bind slot 0's buffers again and are never reached.

@group(0) @binding(1) var<storage, read> x0: array<XS>;
@group(0) @binding(2) var<storage, read> x1: array<XS>;
@group(0) @binding(3) var<storage, read> x2: array<XS>;
@group(0) @binding(4) var<storage, read> x3: array<XS>;
@group(0) @binding(5) var<storage, read> x4: array<XS>;
@group(0) @binding(6) var<storage, read> x5: array<XS>;
@group(0) @binding(7) var<storage, read> x6: array<XS>;
@group(0) @binding(8) var<storage, read> x7: array<XS>;
@group(0) @binding(9) var<storage, read> x8: array<XS>;
@group(0) @binding(10) var<storage, read> x9: array<XS>;
@group(0) @binding(11) var<storage, read> x10: array<XS>;
@group(0) @binding(12) var<storage, read> x11: array<XS>;
@group(0) @binding(13) var<storage, read_write> y0: array<YS>;
@group(0) @binding(14) var<storage, read_write> y1: array<YS>;
@group(0) @binding(15) var<storage, read_write> y2: array<YS>;
@group(0) @binding(16) var<storage, read_write> y3: array<YS>;
@group(0) @binding(17) var<storage, read_write> y4: array<YS>;
@group(0) @binding(18) var<storage, read_write> y5: array<YS>;
@group(0) @binding(19) var<storage, read_write> y6: array<YS>;
@group(0) @binding(20) var<storage, read_write> y7: array<YS>;
@group(0) @binding(21) var<storage, read_write> y8: array<YS>;
@group(0) @binding(22) var<storage, read_write> y9: array<YS>;
@group(0) @binding(23) var<storage, read_write> y10: array<YS>;
@group(0) @binding(24) var<storage, read_write> y11: array<YS>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.y * nwg.x + wid.x;
    var k = 0u;
    while (k + 1u < p.count && g >= p.starts[k + 1u]) {
        k += 1u;
    }
    // i: this invocation's result, of the slot's first element e (the word of e when WIDEN).
    let i = (g - p.starts[k]) * 256u + lid;
    if (g < p.starts[k] || i * PER >= p.numels[k]) {
        return;
    }
    let e = p.offsets[k] + i * PER;
    let two = PER == 2u && i * PER + 1u < p.numels[k];
    let a = select(e, e >> 1u, WIDEN);
    let b = select(a, a + 1u, two);
    switch k {
        case 0u: { y0[i] = out_(x0[a], x0[b], e, two); }
        case 1u: { y1[i] = out_(x1[a], x1[b], e, two); }
        case 2u: { y2[i] = out_(x2[a], x2[b], e, two); }
        case 3u: { y3[i] = out_(x3[a], x3[b], e, two); }
        case 4u: { y4[i] = out_(x4[a], x4[b], e, two); }
        case 5u: { y5[i] = out_(x5[a], x5[b], e, two); }
        case 6u: { y6[i] = out_(x6[a], x6[b], e, two); }
        case 7u: { y7[i] = out_(x7[a], x7[b], e, two); }
        case 8u: { y8[i] = out_(x8[a], x8[b], e, two); }
        case 9u: { y9[i] = out_(x9[a], x9[b], e, two); }
        case 10u: { y10[i] = out_(x10[a], x10[b], e, two); }
        default: { y11[i] = out_(x11[a], x11[b], e, two); }
    }
}
