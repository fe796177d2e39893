// One invocation's sums in the small products' kernels (matmul/small.wgsl, lstm_step.wgsl):
// rows ra of a (element offsets, read in vec4s along K by fetch_a4) times four columns of b,
// over the vec4 steps g, g + G, g + 2G, ... of K; row i's four sums in ri. b is read by
// fetch_b4 in vec4s along K (sums_k: rb the four columns' rows of b's [N, K] view) or along N
// (sums_n: cb the first column's offset, ks b's stride along K).

struct Sums4 {
    r0: vec4<C_x>,
    r1: vec4<C_x>,
    r2: vec4<C_x>,
    r3: vec4<C_x>,
}

fn sums_k(ra: vec4<u32>, rb: vec4<u32>, g: u32, k_len: u32) -> Sums4 {
    var s = Sums4(vec4<C_x>(), vec4<C_x>(), vec4<C_x>(), vec4<C_x>());
    for (var k = g * 4u; k < k_len; k += G * 4u) {
        let a0 = fetch_a4(ra.x + k);
        let a1 = fetch_a4(ra.y + k);
        let a2 = fetch_a4(ra.z + k);
        let a3 = fetch_a4(ra.w + k);
        let b0 = fetch_b4(rb.x + k);
        let b1 = fetch_b4(rb.y + k);
        let b2 = fetch_b4(rb.z + k);
        let b3 = fetch_b4(rb.w + k);
        s.r0 += vec4<C_x>(dot(a0, b0), dot(a0, b1), dot(a0, b2), dot(a0, b3));
        s.r1 += vec4<C_x>(dot(a1, b0), dot(a1, b1), dot(a1, b2), dot(a1, b3));
        s.r2 += vec4<C_x>(dot(a2, b0), dot(a2, b1), dot(a2, b2), dot(a2, b3));
        s.r3 += vec4<C_x>(dot(a3, b0), dot(a3, b1), dot(a3, b2), dot(a3, b3));
    }
    return s;
}

fn sums_n(ra: vec4<u32>, cb: u32, ks: u32, g: u32, k_len: u32) -> Sums4 {
    var s = Sums4(vec4<C_x>(), vec4<C_x>(), vec4<C_x>(), vec4<C_x>());
    for (var k = g * 4u; k < k_len; k += G * 4u) {
        let a0 = fetch_a4(ra.x + k);
        let a1 = fetch_a4(ra.y + k);
        let a2 = fetch_a4(ra.z + k);
        let a3 = fetch_a4(ra.w + k);
        let b0 = fetch_b4(cb + k * ks);
        let b1 = fetch_b4(cb + (k + 1u) * ks);
        let b2 = fetch_b4(cb + (k + 2u) * ks);
        let b3 = fetch_b4(cb + (k + 3u) * ks);
        s.r0 += a0.x * b0 + a0.y * b1 + a0.z * b2 + a0.w * b3;
        s.r1 += a1.x * b0 + a1.y * b1 + a1.z * b2 + a1.w * b3;
        s.r2 += a2.x * b0 + a2.y * b1 + a2.z * b2 + a2.w * b3;
        s.r3 += a3.x * b0 + a3.y * b1 + a3.z * b2 + a3.w * b3;
    }
    return s;
}
