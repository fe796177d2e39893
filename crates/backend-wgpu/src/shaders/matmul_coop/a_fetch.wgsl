// a of a matrix product for matmul_coop.wgsl: vec4 i of this invocation's share of the slice at
// k0 (zeros outside a), along K for LOAD_K, along M for LOAD_OUTER. Without `edge` the slice
// lies inside a (fetch() says so), and nothing is tested.
fn a_fetch(i: u32, lid: u32, base: u32, m0: u32, k0: u32, edge: bool) -> vec4<f16> {
    let v = lid + WG * i;
    if (A_LOAD == LOAD_K) {
        let m = m0 + v / (BK / 4u);
        let k = k0 + (v % (BK / 4u)) * 4u;
        if (!edge || (m < p.m && k < kend)) { return raw_a4(base + m * p.a_stride_m + k); }
    } else {
        let m = m0 + (v % (BM / 4u)) * 4u;
        let k = k0 + v / (BM / 4u);
        if (!edge || (m < p.m && k < kend)) { return raw_a4(base + k * p.a_stride_k + m); }
    }
    return vec4<f16>();
}
