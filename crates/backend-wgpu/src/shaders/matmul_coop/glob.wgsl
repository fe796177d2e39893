// The 16 x 16 block at rows m.., depth k.. of a, straight from its buffer. Only for a read in
// vec4s (then `a` is an array of vec4s, and the offset and stride are multiples of 4) and a
// block inside a.
fn glob_a(base: u32, m: u32, k: u32) -> coop_mat16x16<f16, A> {
    if (A_LOAD == LOAD_OUTER) {
        let at = (base + k * p.a_stride_k + m) / 4u;
        let s = p.a_stride_k / 4u;
        return coopLoad<coop_mat16x16<f16, A>>(&a[at], s);
    }
    let at = (base + m * p.a_stride_m + k) / 4u;
    let s = p.a_stride_m / 4u;
    return coopLoadT<coop_mat16x16<f16, A>>(&a[at], s);
}

// The 16 x 16 block at depth k.., columns n.. of b, straight from its buffer (as glob_a).
fn glob_b(base: u32, n: u32, k: u32) -> coop_mat16x16<f16, B> {
    if (B_LOAD == LOAD_K) {
        let at = (base + n * p.b_stride_n + k) / 4u;
        let s = p.b_stride_n / 4u;
        return coopLoad<coop_mat16x16<f16, B>>(&b[at], s);
    }
    let at = (base + k * p.b_stride_k + n) / 4u;
    let s = p.b_stride_k / 4u;
    return coopLoadT<coop_mat16x16<f16, B>>(&b[at], s);
}
