// Partial sums over a split of K stay f32, the accumulators' type: a 16 x 16 sum that lies
// inside y is stored straight from its cooperative matrix (rows p.n apart).
const STORE_DIRECT: bool = true;
fn store_frag(c: coop_mat16x16<f32, C>, at: u32) {
    let s = p.n;
    coopStoreT(c, &y[at], s);
}
// The operands are f16 as stored: nothing to scale (see scaled.wgsl).
fn scale_operands() {}
