// Signed 64-bit less-than on (low, high) word pairs.
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn cmp_(a: vec2<u32>, b: vec2<u32>) -> bool {
    switch OP {
        case 0u: { return all(a == b); }
        case 1u: { return any(a != b); }
        case 2u: { return lt64(a, b); }
        case 3u: { return !lt64(b, a); }
        case 4u: { return lt64(b, a); }
        default: { return !lt64(a, b); }
    }
}
