// b of a matrix product for matmul_coop.wgsl, as its a_fetch: vec4 i of this invocation's share
// of the slice at k0, along K for LOAD_K (b stored N x K), along N for LOAD_OUTER (a
// convolution's b is conv/gather_coop.wgsl's); nothing tested without `edge`.
fn b_fetch(i: u32, lid: u32, base: u32, n0: u32, k0: u32, edge: bool) -> vec4<f16> {
    let v = lid + WG * i;
    if (B_LOAD == LOAD_K) {
        let n = n0 + v / (BK / 4u);
        let k = k0 + (v % (BK / 4u)) * 4u;
        if (!edge || (n < p.n && k < kend)) { return raw_b4(base + n * p.b_stride_n + k); }
    } else {
        let n = n0 + (v % (BN / 4u)) * 4u;
        let k = k0 + v / (BN / 4u);
        if (!edge || (n < p.n && k < kend)) { return raw_b4(base + k * p.b_stride_k + n); }
    }
    return vec4<f16>();
}

