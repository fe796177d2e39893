// Shared by every kernel: invocation indices.

// The flat invocation index over a 2-D grid of 256-wide workgroups (grids are split in two
// dimensions because one may hold at most 65,535 workgroups).
fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * 256u + lid;
}
