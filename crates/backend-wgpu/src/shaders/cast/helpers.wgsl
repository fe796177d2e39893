fn i64_to_float_(v: vec2<u32>) -> W {
    // A value that fits 32 bits converts directly; splitting it would cancel in f32.
    if (v.y == select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) { return W(bitcast<i32>(v.x)); }
    return W(bitcast<i32>(v.y)) * W(4294967296.0) + W(v.x);
}

fn i64_from_float_(t: W) -> vec2<u32> {
    if (abs(t) < W(2147483648.0)) {
        let v = i32(t);
        return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));
    }
    // Beyond 32 bits the value is a whole number in any float, so the split is exact.
    let hi = floor(t / W(4294967296.0));
    let lo = t - hi * W(4294967296.0);
    return vec2<u32>(u32(lo), bitcast<u32>(i32(hi)));
}
