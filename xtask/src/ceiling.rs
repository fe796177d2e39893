//! `cargo xtask ceiling [--quick] [--only TEXT,..]` (the kernels whose name contains one TEXT;
//! `latency` for the latency rows): what the GPU's arithmetic reaches through wgpu when nothing
//! but the arithmetic is asked of it, beside the inner loops of our matrix products run without
//! their global loads. The gap between a ceiling and the full kernel (`cargo xtask bench`'s
//! matmul rows) says where a product's time goes:
//!
//! - `fma f32`: 16 independent vec4 multiply-add chains an invocation (the f32 peak).
//! - `mac f32`: the tiled f32 matmul's inner loop (matmul/tile.wgsl: 128 x 128 tile, 8 x 8 an
//!   invocation, four vec4 reads of workgroup memory a step of 64 multiply-adds) over a staged
//!   slice that never changes: no global loads, no barriers.
//!   `+ staging` stores each slice again between two barriers, as the kernel stages every
//!   slice (vec4 stores, or a's transposed as the K-major loader does; 16 or 32 deep), and
//!   `+ global fetch` takes the stored values from a 4096 x 4096 matrix, the next slice's
//!   fetched after the barriers as the kernel fetches ahead. `two copies read in turn` reads
//!   the other of two staged slices each pass (so no compiler keeps a pass's reads in
//!   registers), `128 invocations` stages 64 x 128 tiles in workgroups half the size, and
//!   `+ global loads` uses no workgroup memory at all: each step's vec4s read from the matrix
//!   through the L1 cache.
//! - `mma f16`: cooperative 16 x 16 x 16 f16 products summed in f32 on operands held in
//!   registers (the tensor-core peak through `coopMultiplyAdd`), 16 subgroups of 32 x 64 (the
//!   `tall` variant's) or 8 of 64 x 64. `+ loads` reads each 16-deep step's blocks from
//!   workgroup memory (`coopLoadT` as the kernel does for row-major operands, or `coopLoad`);
//!   every 32 deep, `+ barriers` adds the two barriers alone, `+ stores` the slice's stores
//!   alone, `+ staging` both, and `+ global fetch` the next slice fetched from a 4096 x 4096
//!   matrix after them. `mma f16 tile` stages tiles of other shapes and depths (`16-byte
//!   fetches`: each fetch an aligned pair of `vec4<f16>`, stored as two; `one 4096^3 product's
//!   tiles`: `prefetch`'s structure over the work of one such product, 4,096 deep a tile).
//! - `parameters`: the backend's own `prefetch` f16 kernel and tiled f32 kernel on a 4096^3
//!   product, their parameter block in a buffer, as immediate data (as the backend passes it),
//!   or folded into the source as constants (what a kernel specialized to one shape would see).
//!
//! - `latency` (a table of its own): one submission and the wait for it through wgpu alone, in
//!   microseconds: an empty command buffer, one dispatch of one workgroup, with a parameter
//!   block written by `Queue::write_buffer` or set as immediate data, with a read-back; then
//!   the same straight through Vulkan on a device of its own (`raw_latency.rs`): the floor
//!   under wgpu's rows, and so under the backend's synchronize.
//!
//! Each kernel runs as many workgroups as fill the device several times over, timed on the
//! host around a batch of dispatches after a warm-up; rates count a multiply-add as two
//! operations. Nothing is checked: the results are written out only so that no compiler can
//! drop the work.

use std::time::Instant;

type Fallible<T> = std::result::Result<T, String>;

/// One ceiling: its name, WGSL source, invocations a workgroup, and f32/f16 operations a
/// workgroup does.
struct Kernel {
    name: String,
    wgsl: String,
    flops_per_group: f64,
    coop: bool,
    /// Whether it reads a 4096 x 4096 matrix (binding 2) as its operands.
    mat: bool,
    /// Workgroups a dispatch, where not the tool's fill-the-device count.
    groups: Option<u32>,
}

const SRC_VEC4S: u32 = 4096;

/// The f32 multiply-add peak: 16 vec4 chains an invocation.
fn fma_f32(iters: u32) -> Kernel {
    let mut s = String::from(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;\n\
         @compute @workgroup_size(256)\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n\
         \x20   let m = src[lid % 64u];\n\
         \x20   let c = src[64u + lid % 64u];\n",
    );
    for i in 0..16 {
        s += &format!("    var a{i} = vec4<f32>(f32(gid.x + {i}u));\n");
    }
    s += &format!("    for (var i = 0u; i < {iters}u; i++) {{\n");
    for i in 0..16 {
        s += &format!("        a{i} = fma(a{i}, m, c);\n");
    }
    s += "    }\n    dst[gid.x] = ";
    s += &(0..16).map(|i| format!("a{i}")).collect::<Vec<_>>().join(" + ");
    s += ";\n}\n";
    Kernel { name: "fma f32".into(), wgsl: s, flops_per_group: 256.0 * 16.0 * 4.0 * 2.0 * iters as f64, coop: false, mat: false, groups: None }
}

/// The body of tile.wgsl's `mac` for H = 2: the 16 vec4 multiply-adds of the outer product of
/// `a0`, `a1` (four rows each) and `b0`, `b1` (four columns each) into `acc`.
fn mac_body() -> String {
    let mut s = String::new();
    for (i, (a, b)) in [("a0", "b0"), ("a0", "b1"), ("a1", "b0"), ("a1", "b1")].iter().enumerate() {
        for (q, c) in ["x", "y", "z", "w"].iter().enumerate() {
            s += &format!("    acc[{}] = fma(vec4<f32>({a}.{c}), {b}, acc[{}]);\n", i * 4 + q, i * 4 + q);
        }
    }
    s
}

/// [`mac_body`], the end of `mac`, and the head of a 256-invocation entry point up to the
/// invocation's place in the 16 x 16 grid (`tx`, `ty`).
fn mac_body_and_main() -> String {
    mac_body()
        + "}\n\
           @compute @workgroup_size(256)\n\
           fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n\
           \x20   let tx = lid % 16u;\n\
           \x20   let ty = lid / 16u;\n"
}

/// The end of an f32 ceiling's loop body and of its kernel: `mac` over the `bk` rows of a staged
/// slice (from row `base` on), then the sums written out so that no compiler can drop them.
fn slice_and_out(bk: u32, base: &str) -> String {
    let mut s = format!("        for (var kk = 0u; kk < {bk}u; kk += 4u) {{\n");
    for q in 0..4 {
        s += &format!("            mac({base}kk + {q}u, tx, ty);\n");
    }
    s += "        }\n    }\n";
    s + &sums_out()
}

/// The last lines of an f32 ceiling: its 16 vec4 sums added up and written out.
fn sums_out() -> String {
    let mut s = String::from("    var t = vec4<f32>();\n");
    for i in 0..16 {
        s += &format!("    t += acc[{i}];\n");
    }
    s + "    dst[gid.x] = t;\n}\n"
}

/// The tiled f32 kernel's inner loop (tile.wgsl's `mac`, H = 2, BK = 16, rows of 33 vec4s),
/// optionally restaging every slice between two barriers.
fn mac_f32(iters: u32, staging: Staging, bk: u32) -> Kernel {
    let mut s = format!(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;\n\
         {mat}\
         const STR: u32 = 33u;\n\
         const V: u32 = {v}u;\n\
         var<workgroup> as_: array<vec4<f32>, V>;\n\
         var<workgroup> bs_: array<vec4<f32>, V>;\n\
         var<private> acc: array<vec4<f32>, 16>;\n\
         fn mac(kk: u32, tx: u32, ty: u32) {{\n\
         \x20   let a0 = as_[kk * STR + ty];\n\
         \x20   let b0 = bs_[kk * STR + tx];\n\
         \x20   let a1 = as_[kk * STR + 16u + ty];\n\
         \x20   let b1 = bs_[kk * STR + 16u + tx];\n",
        v = if staging == Staging::Alternate { 2 * bk * 33 } else { bk * 33 },
        mat = if staging == Staging::Fetched { "@group(0) @binding(2) var<storage, read> mat: array<vec4<f32>>;\n" } else { "" },
    );
    s += &mac_body_and_main();
    s += "\
          \x20   for (var i = lid; i < V; i += 256u) {\n\
          \x20       as_[i] = src[i % 4096u] * 0.001;\n\
          \x20       bs_[i] = src[(i + 7u) % 4096u] * 0.001;\n\
          \x20   }\n\
          \x20   var r0 = src[lid];\n\
          \x20   var r1 = src[lid + 256u];\n\
          \x20   var q0 = r0;\n\
          \x20   var q1 = r1;\n\
          \x20   // One of the 32 x 32 tiles of 128 x 128 of a 4096 x 4096 product.\n\
          \x20   let m0 = ((wid.x % 1024u) / 32u) * 128u;\n\
          \x20   let n0 = (wid.x % 32u) * 128u;\n\
          \x20   acc = array<vec4<f32>, 16>();\n\
          \x20   workgroupBarrier();\n";
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n");
    match staging {
        Staging::None => {}
        Staging::Alternate => s += &format!("        let at = (it % 2u) * {bk}u;\n"),
        Staging::Vec4 => {
            s += "        workgroupBarrier();\n\
                  \x20       as_[(lid / 16u) * STR + lid % 16u] = r0;\n\
                  \x20       bs_[(lid / 32u) * STR + 16u + lid % 16u] = r1;\n\
                  \x20       workgroupBarrier();\n";
        }
        // tile.wgsl's a_k_put for two vec4s along K: each one's four values go to four rows.
        Staging::Transposing | Staging::Fetched => {
            s += "        workgroupBarrier();\n";
            for (p, r) in ["r0", "r1"].iter().enumerate() {
                s += &format!(
                    "        {{\n            let v = lid + {}u;\n            let nn = v / 4u;\n            let at = (v % 4u) * 4u * STR + nn / 4u;\n            let c = nn % 4u;\n            \
                     as_[at][c] = {r}.x;\n            as_[at + STR][c] = {r}.y;\n            as_[at + 2u * STR][c] = {r}.z;\n            as_[at + 3u * STR][c] = {r}.w;\n        }}\n",
                    256 * p
                );
            }
            s += "        bs_[(lid / 32u) * STR + lid % 32u] = q0;\n\
                  \x20       bs_[(lid / 32u + 8u) * STR + lid % 32u] = q1;\n\
                  \x20       workgroupBarrier();\n";
            if staging == Staging::Fetched {
                // The next slice: a (row-major) in vec4s along K, b (row-major) along N, as
                // tile.wgsl's loaders read them, without their bounds tests.
                s += &format!(
                    "        let k0 = ((it + 1u) * {bk}u) % 4096u;\n\
                     \x20       r0 = mat[((m0 + lid / 4u) * 4096u + k0 + (lid % 4u) * 4u) / 4u];\n\
                     \x20       r1 = mat[((m0 + 64u + lid / 4u) * 4096u + k0 + (lid % 4u) * 4u) / 4u];\n\
                     \x20       q0 = mat[((k0 + lid / 32u) * 4096u + n0 + (lid % 32u) * 4u) / 4u];\n\
                     \x20       q1 = mat[((k0 + 8u + lid / 32u) * 4096u + n0 + (lid % 32u) * 4u) / 4u];\n"
                );
            }
        }
    }
    s += &slice_and_out(bk, if staging == Staging::Alternate { "at + " } else { "" });
    let name = match staging {
        Staging::None => format!("mac f32, {bk} deep"),
        Staging::Alternate => format!("mac f32, {bk} deep, two copies read in turn"),
        Staging::Vec4 => format!("mac f32 + staging, {bk} deep"),
        Staging::Transposing => format!("mac f32 + transposing staging, {bk} deep"),
        Staging::Fetched => format!("mac f32 + transposing staging + global fetch, {bk} deep"),
    };
    Kernel { name, wgsl: s, flops_per_group: 256.0 * 64.0 * bk as f64 * 2.0 * iters as f64, coop: false, mat: staging == Staging::Fetched, groups: None }
}

/// The tiled f32 kernel's arithmetic (8 x 8 an invocation in blocks 64 apart, a 128 x 128 tile
/// a workgroup of 256) with no workgroup memory and no barriers: every step's four vec4s read
/// straight from a 4096 x 4096 matrix (a K-major, b row-major, so both are contiguous along
/// the tile), left to the L1 cache to share between the invocations that read the same ones;
/// with `ahead`, the next step's vec4s are read before this step's multiply-adds.
fn mac_f32_direct(iters: u32, ahead: bool) -> Kernel {
    let mut s = String::from(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;\n\
         @group(0) @binding(2) var<storage, read> mat: array<vec4<f32>>;\n\
         var<private> acc: array<vec4<f32>, 16>;\n\
         fn mac(a0: vec4<f32>, a1: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>) {\n",
    );
    s += &mac_body_and_main();
    s += "\
          \x20   // src is bound (as the other kernels'), so read, but adds nothing.\n\
          \x20   let m0 = ((wid.x % 1024u) / 32u) * 128u + (u32(src[lid % 64u].w) & 0u);\n\
          \x20   let n0 = (wid.x % 32u) * 128u;\n\
          \x20   let ai = m0 / 4u + ty;\n\
          \x20   let bi = n0 / 4u + tx;\n\
          \x20   acc = array<vec4<f32>, 16>();\n";
    let load = |pre: &str, k: &str| {
        format!("        {pre}a0 = mat[{k} * 1024u + ai];\n        {pre}a1 = mat[{k} * 1024u + ai + 16u];\n        {pre}b0 = mat[{k} * 1024u + bi];\n        {pre}b1 = mat[{k} * 1024u + bi + 16u];\n")
    };
    if ahead {
        s += &load("var ", "0u").replace("        ", "    ");
    }
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n        let k = it % 4096u;\n");
    if ahead {
        s += "        let kn = (it + 1u) % 4096u;\n";
        s += &load("let n", "kn");
        s += "        mac(a0, a1, b0, b1);\n        a0 = na0;\n        a1 = na1;\n        b0 = nb0;\n        b1 = nb1;\n";
    } else {
        s += &load("let ", "k");
        s += "        mac(a0, a1, b0, b1);\n";
    }
    s += "    }\n";
    s += &sums_out();
    let name = format!("mac f32 + global loads{}, no workgroup memory", if ahead { " one step ahead" } else { "" });
    Kernel { name, wgsl: s, flops_per_group: 256.0 * 64.0 * 2.0 * iters as f64, coop: false, mat: true, groups: None }
}

/// The tiled f32 kernel's inner loop and staging (vec4 stores between two barriers, 16 deep)
/// in workgroups of 128 invocations, each a 64 x 128 tile (8 x 8 an invocation, blocks 32 rows
/// and 64 columns apart): the same registers an invocation, twice the workgroups a
/// multiprocessor, half the invocations waiting at each barrier.
fn mac_f32_half(iters: u32, staging: bool) -> Kernel {
    let mut s = String::from(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;\n\
         const STR: u32 = 33u;\n\
         var<workgroup> as_: array<vec4<f32>, 528>;\n\
         var<workgroup> bs_: array<vec4<f32>, 528>;\n\
         var<private> acc: array<vec4<f32>, 16>;\n\
         fn mac(kk: u32, tx: u32, ty: u32) {\n\
         \x20   let a0 = as_[kk * STR + ty];\n\
         \x20   let b0 = bs_[kk * STR + tx];\n\
         \x20   let a1 = as_[kk * STR + 8u + ty];\n\
         \x20   let b1 = bs_[kk * STR + 16u + tx];\n",
    );
    s += &mac_body();
    s += "}\n\
          @compute @workgroup_size(128)\n\
          fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n\
          \x20   let tx = lid % 16u;\n\
          \x20   let ty = lid / 16u;\n\
          \x20   for (var i = lid; i < 528u; i += 128u) {\n\
          \x20       as_[i] = src[i % 4096u] * 0.001;\n\
          \x20       bs_[i] = src[(i + 7u) % 4096u] * 0.001;\n\
          \x20   }\n\
          \x20   let r0 = src[lid];\n\
          \x20   let r1 = src[lid + 128u];\n\
          \x20   let q0 = src[lid + 256u];\n\
          \x20   let q1 = src[lid + 384u];\n\
          \x20   acc = array<vec4<f32>, 16>();\n\
          \x20   workgroupBarrier();\n";
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n");
    if staging {
        // 64 x 16 of a (two vec4s an invocation) and 128 x 16 of b (four).
        s += "        workgroupBarrier();\n\
              \x20       as_[(lid / 8u) * STR + lid % 8u] = r0;\n\
              \x20       as_[(lid / 8u) * STR + 8u + lid % 8u] = r1;\n\
              \x20       bs_[(lid / 16u) * STR + lid % 16u] = q0;\n\
              \x20       bs_[(lid / 16u) * STR + 16u + lid % 16u] = q1;\n\
              \x20       bs_[(8u + lid / 16u) * STR + lid % 16u] = q0;\n\
              \x20       bs_[(8u + lid / 16u) * STR + 16u + lid % 16u] = q1;\n\
              \x20       workgroupBarrier();\n";
    }
    s += &slice_and_out(16, "");
    let name = format!("mac f32{}, 16 deep, 128 invocations", if staging { " + staging" } else { "" });
    Kernel { name, wgsl: s, flops_per_group: 128.0 * 64.0 * 16.0 * 2.0 * iters as f64, coop: false, mat: false, groups: None }
}

/// The tiled f32 structure with twice the work an invocation: 8 x 16 sums (two blocks of four
/// rows 64 apart, four of four columns a quarter of the tile apart), so that each step reads
/// six vec4s of workgroup memory for 128 multiply-adds where tile.wgsl reads four for 64. `wg`
/// invocations (16 x `wg` / 16) make a 128 x `wg` tile. `stage`: each 16-deep slice stored
/// again between two barriers (a's transposed, as tile.wgsl's K-major loader stores it);
/// `fetch`: its values fetched from a 4096 x 4096 matrix, the next slice's after the barriers.
fn mac_f32_wide(iters: u32, wg: u32, stage: bool, fetch: bool) -> Kernel {
    let tx_n = wg / 16;
    let bn = tx_n * 16;
    let strb = bn / 4 + 1;
    // vec4s of a slice an invocation: a is 128 x 16, b 16 x bn.
    let (pa, pb) = (512 / wg, 4 * bn / wg);
    let mut s = format!(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;\n\
         {mat}\
         const STRA: u32 = 33u;\n\
         const STRB: u32 = {strb}u;\n\
         var<workgroup> as_: array<vec4<f32>, {va}>;\n\
         var<workgroup> bs_: array<vec4<f32>, {vb}>;\n\
         var<private> acc: array<vec4<f32>, 32>;\n\
         fn mac(kk: u32, tx: u32, ty: u32) {{\n\
         \x20   let a0 = as_[kk * STRA + ty];\n\
         \x20   let a1 = as_[kk * STRA + 16u + ty];\n",
        mat = if fetch { "@group(0) @binding(2) var<storage, read> mat: array<vec4<f32>>;\n" } else { "" },
        va = 16 * 33,
        vb = 16 * strb,
    );
    for j in 0..4 {
        s += &format!("    let b{j} = bs_[kk * STRB + {}u + tx];\n", j * tx_n);
    }
    for i in 0..2 {
        for j in 0..4 {
            for (q, c) in ["x", "y", "z", "w"].iter().enumerate() {
                let at = (i * 4 + j) * 4 + q;
                s += &format!("    acc[{at}] = fma(vec4<f32>(a{i}.{c}), b{j}, acc[{at}]);\n");
            }
        }
    }
    s += &format!(
        "}}\n\
         @compute @workgroup_size({wg})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   let tx = lid % {tx_n}u;\n\
         \x20   let ty = lid / {tx_n}u;\n\
         \x20   for (var i = lid; i < {va}u; i += {wg}u) {{ as_[i] = src[i % 4096u] * 0.001; }}\n\
         \x20   for (var i = lid; i < {vb}u; i += {wg}u) {{ bs_[i] = src[(i + 7u) % 4096u] * 0.001; }}\n\
         \x20   // One of the 32 x {nt} tiles of 128 x {bn} of a 4096 x 4096 product.\n\
         \x20   let m0 = ((wid.x % {tiles}u) / {nt}u) * 128u;\n\
         \x20   let n0 = (wid.x % {nt}u) * {bn}u;\n",
        va = 16 * 33,
        vb = 16 * strb,
        nt = 4096 / bn,
        tiles = 32 * (4096 / bn),
    );
    for p in 0..pa {
        s += &format!("    var r{p} = src[(lid + {}u) % 4096u];\n", p * wg);
    }
    for p in 0..pb {
        s += &format!("    var q{p} = src[(lid + {}u) % 4096u];\n", (pa + p) * wg);
    }
    s += "    acc = array<vec4<f32>, 32>();\n    workgroupBarrier();\n";
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n");
    if stage {
        s += "        workgroupBarrier();\n";
        for p in 0..pa {
            // Vec4 v of a's slice: row v / 4 of the tile, depth (v % 4) * 4 .. + 3, each value to its own row of as_.
            s += &format!(
                "        {{\n            let v = lid + {}u;\n            let mm = v / 4u;\n            let at = (v % 4u) * 4u * STRA + mm / 4u;\n            let c = mm % 4u;\n            \
                 as_[at][c] = r{p}.x;\n            as_[at + STRA][c] = r{p}.y;\n            as_[at + 2u * STRA][c] = r{p}.z;\n            as_[at + 3u * STRA][c] = r{p}.w;\n        }}\n",
                p * wg
            );
        }
        for p in 0..pb {
            s += &format!("        bs_[((lid + {o}u) / {q}u) * STRB + (lid + {o}u) % {q}u] = q{p};\n", o = p * wg, q = bn / 4);
        }
        s += "        workgroupBarrier();\n";
        if fetch {
            s += "        let k0 = ((it + 1u) * 16u) % 4096u;\n";
            for p in 0..pa {
                s += &format!("        r{p} = mat[((m0 + (lid + {o}u) / 4u) * 4096u + k0 + ((lid + {o}u) % 4u) * 4u) / 4u];\n", o = p * wg);
            }
            for p in 0..pb {
                s += &format!("        q{p} = mat[((k0 + (lid + {o}u) / {q}u) * 4096u + n0 + ((lid + {o}u) % {q}u) * 4u) / 4u];\n", o = p * wg, q = bn / 4);
            }
        }
    }
    s += "        for (var kk = 0u; kk < 16u; kk += 4u) {\n";
    for q in 0..4 {
        s += &format!("            mac(kk + {q}u, tx, ty);\n");
    }
    s += "        }\n    }\n    var t = vec4<f32>();\n";
    for i in 0..32 {
        s += &format!("    t += acc[{i}];\n");
    }
    // Keep the staged registers live where nothing stores them.
    if !stage {
        s += &(0..pa).map(|p| format!("    t += r{p};\n")).collect::<String>();
        s += &(0..pb).map(|p| format!("    t += q{p};\n")).collect::<String>();
    }
    s += "    dst[gid.x] = t;\n}\n";
    let what = match (stage, fetch) {
        (false, _) => "",
        (true, false) => " + transposing staging",
        (true, true) => " + transposing staging + global fetch",
    };
    let name = format!("mac f32 8 x 16 an invocation{what}, 16 deep, {wg} invocations (128 x {bn})");
    Kernel { name, wgsl: s, flops_per_group: wg as f64 * 128.0 * 16.0 * 2.0 * iters as f64, coop: false, mat: fetch, groups: None }
}

/// [`mac_f32`]'s kernel structure (transposing staging, the next slice fetched) with `extra`
/// more values held in registers through the loop (vec4s updated once a slice, so no compiler
/// can sink or rematerialize them; `extra` / 4 vec4 multiply-adds a slice, not counted), to see
/// what a kernel past 128 registers an invocation (one workgroup of 256 a multiprocessor rather
/// than two) loses.
fn mac_f32_pressed(iters: u32, extra: u32) -> Kernel {
    let mut k = mac_f32(iters, Staging::Fetched, 16);
    let n = extra / 4;
    let decl: String = (0..n).map(|i| format!("    var p{i} = src[(lid + {}u) % 4096u];\n", 1024 + 64 * i)).collect();
    let bump: String = (0..n).map(|i| format!("        p{i} = fma(p{i}, vec4<f32>(1.0001), vec4<f32>(0.5));\n")).collect();
    let used: String = (0..n).map(|i| format!("    t += p{i};\n")).collect();
    let head = format!("    for (var it = 0u; it < {iters}u; it++) {{\n");
    k.wgsl = k.wgsl.replacen(&head, &format!("{decl}{head}{bump}"), 1).replacen("    dst[gid.x] = t;", &format!("{used}    dst[gid.x] = t;"), 1);
    k.name = format!("{} + {extra} values held through the loop", k.name);
    k
}

/// What the f32 ceiling stores between its two barriers every slice.
#[derive(Clone, Copy, PartialEq)]
enum Staging {
    /// Nothing, and no barriers.
    None,
    /// Nothing, and no barriers, but each pass over the slice reads the other of two copies
    /// (both staged once, before the loop), so no compiler can keep a slice's reads in
    /// registers from one pass to the next.
    Alternate,
    /// Two vec4s an invocation (as the loaders along M or N store theirs).
    Vec4,
    /// a's two vec4s along K as eight scalars in four rows each (tile.wgsl's K-major loader
    /// of a row-major a), b's two vec4s whole.
    Transposing,
    /// `Transposing`, the values fetched from a 4096 x 4096 matrix, the next slice's after the
    /// second barrier (as the kernel fetches ahead).
    Fetched,
}

/// The start of a tensor-core ceiling's source: its extensions and bindings (src, dst, and
/// with `mat` the 4096 x 4096 matrix as f16).
fn coop_head(mat: bool) -> String {
    let mut s = String::from(
        "enable f16;\nenable wgpu_cooperative_matrix;\n\
         @group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<f32>;\n",
    );
    if mat {
        s += "@group(0) @binding(2) var<storage, read> mat: array<vec4<f16>>;\n";
    }
    s
}

/// Where a workgroup of `tall`'s tile shape (256 x 128, subgroups 2 across) works: its tile
/// (m0, n0) of a 4096 x 4096 product, its subgroup and the subgroup's block (wm, wn).
fn tall_place(fm: u32) -> String {
    format!(
        "    let m0 = ((wid.x % 512u) / 32u) * 256u;\n    let n0 = (wid.x % 32u) * 128u;\n    let sg = lid / 32u;\n    let wm = (sg / 2u) * {}u;\n    let wn = (sg % 2u) * 64u;\n",
        16 * fm
    )
}

/// Declarations of a subgroup's `fm` x 4 cooperative sums `cIJ`.
fn accumulators(fm: u32) -> String {
    let mut s = String::new();
    for i in 0..fm {
        for j in 0..4 {
            s += &format!("    var c{i}{j} = coop_mat16x16<f32, C>();\n");
        }
    }
    s
}

/// `cIJ += aI x bJ` for every sum, the blocks named `{a}I` and `{b}J`.
fn products(fm: u32, a: &str, b: &str) -> String {
    let mut s = String::new();
    for i in 0..fm {
        for j in 0..4 {
            s += &format!("        c{i}{j} = coopMultiplyAdd({a}{i}, {b}{j}, c{i}{j});\n");
        }
    }
    s
}

/// Ends a tensor-core ceiling's source `s` (its loop closed): every subgroup stores its sums
/// where no other writes, and the count of operations.
fn coop_kernel(name: String, mut s: String, wg: u32, fm: u32, iters: u32, mat: bool) -> Kernel {
    s += "    let s16 = 16u;\n";
    for i in 0..fm {
        for j in 0..4 {
            s += &format!(
                "    let out{i}{j} = (wid.x * {sgs}u + sg) * {per}u + {}u;\n    coopStore(c{i}{j}, &dst[out{i}{j}], s16);\n",
                256 * (i * 4 + j),
                sgs = wg / 32,
                per = 256 * 4 * fm
            );
        }
    }
    s += "}\n";
    let products = (wg / 32) * fm * 4;
    Kernel { name, wgsl: s, flops_per_group: products as f64 * 4096.0 * 2.0 * iters as f64, coop: true, mat, groups: None }
}

/// How a tensor-core ceiling gets its operands each 16-deep step.
#[derive(Clone, Copy, PartialEq)]
enum Operands {
    /// Loaded once, kept in registers.
    Registers,
    /// Loaded from workgroup memory every step, transposed (`coopLoadT`) or not.
    Loads { transposed: bool },
    /// Transposed loads, and every other step the 32-deep slice stored again (`stores`)
    /// between two barriers (`barriers`), its values fetched from a 4096 x 4096 matrix, the
    /// next slice's after the second barrier (`fetch`).
    Staged { barriers: bool, stores: bool, fetch: bool },
}

/// With `fm` 2: 16 subgroups of 32 (the `tall` variant's 512 invocations), each 2 x 4
/// cooperative sums of 16 x 16 (`tall`'s 32 x 64 block a subgroup); with `fm` 4, 8 subgroups
/// of 4 x 4 sums (`prefetch`'s 64 x 64 block). The staged slices are laid out as the kernels'
/// for a row-major a (rows of 32 + 8 along K, 256 of them) and b (rows of 128 + 8 along N, 32).
fn mma_f16(iters: u32, ops: Operands, fm: u32) -> Kernel {
    let wg = if fm == 2 { 512 } else { 256 };
    const KROW: u32 = 10;
    const NROW: u32 = 34;
    let (load, what) = match ops {
        Operands::Registers => ("", ""),
        Operands::Loads { transposed: true } => ("coopLoadT", " + loads (T)"),
        Operands::Loads { transposed: false } => ("coopLoad", " + loads (N)"),
        Operands::Staged { barriers: true, stores: true, fetch: true } => ("coopLoadT", " + loads (T) + staging + global fetch"),
        Operands::Staged { barriers: true, stores: true, fetch: false } => ("coopLoadT", " + loads (T) + staging"),
        Operands::Staged { barriers: true, .. } => ("coopLoadT", " + loads (T) + barriers"),
        Operands::Staged { .. } => ("coopLoadT", " + loads (T) + stores"),
    };
    let fetch = matches!(ops, Operands::Staged { fetch: true, .. });
    let name = format!("mma f16{what}, {wg} invocations, {}x64 a subgroup", 16 * fm);
    // Every index and stride handed to a cooperative load or store is a `let` of its own
    // (naga's SPIR-V writer panics on some inline ones), hence the two functions.
    let mut s = format!(
        "{head}\
         var<workgroup> as_: array<vec4<f16>, {a}>;\n\
         var<workgroup> bs_: array<vec4<f16>, {b}>;\n\
         fn frag_a(mi: u32, kk: u32) -> coop_mat16x16<f16, A> {{\n\
         \x20   let at = mi * {KROW}u + kk / 4u;\n\
         \x20   let s = {KROW}u;\n\
         \x20   return {load}<coop_mat16x16<f16, A>>(&as_[at], s);\n\
         }}\n\
         fn frag_b(nj: u32, kk: u32) -> coop_mat16x16<f16, B> {{\n\
         \x20   let at = kk * {NROW}u + nj / 4u;\n\
         \x20   let s = {NROW}u;\n\
         \x20   return {load}<coop_mat16x16<f16, B>>(&bs_[at], s);\n\
         }}\n\
         @compute @workgroup_size({wg})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   for (var i = lid; i < {a}u; i += {wg}u) {{ as_[i] = vec4<f16>(src[i % 4096u] * 0.001); }}\n\
         \x20   for (var i = lid; i < {b}u; i += {wg}u) {{ bs_[i] = vec4<f16>(src[(i + 3u) % 4096u] * 0.001); }}\n\
         \x20   workgroupBarrier();\n\
         \x20   // One of the 16 x 32 tiles of 256 x 128 of a 4096 x 4096 product.\n\
         {place}",
        a = 256 * KROW,
        b = 32 * NROW,
        place = tall_place(fm),
        head = coop_head(fetch),
        load = if load.is_empty() { "coopLoadT" } else { load },
    );
    s += &accumulators(fm);
    if ops == Operands::Registers {
        for i in 0..fm {
            s += &format!("    let a{i} = frag_a(wm + {}u, 0u);\n", 16 * i);
        }
        for j in 0..4 {
            s += &format!("    let b{j} = frag_b(wn + {}u, 0u);\n", 16 * j);
        }
    }
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n        let kk = (it % 2u) * 16u;\n");
    // This invocation's share of a slice (as the kernels' a_fetch and b_fetch): vec4 v of a's
    // 256 x 32 slice is row v / 8, vec4 v % 8 along K; of b's 32 x 128 slice, row v / 32, vec4
    // v % 32 along N.
    let (pa, pb) = (2048 / wg, 1024 / wg);
    if let Operands::Staged { barriers, stores, fetch } = ops {
        let mut head = String::new();
        for p in 0..pa {
            head += &format!("    var ra{p} = vec4<f16>(src[lid + {}u]);\n", wg * p);
        }
        for p in 0..pb {
            head += &format!("    var rb{p} = vec4<f16>(src[lid + {}u]);\n", wg * p + 7);
        }
        s = s.replace("    for (var it = 0u;", &(head + "    for (var it = 0u;"));
        s += "        if (kk == 0u) {\n";
        if barriers {
            s += "            workgroupBarrier();\n";
        }
        if stores {
            for p in 0..pa {
                s += &format!("            as_[((lid + {v}u) / 8u) * {KROW}u + lid % 8u] = ra{p};\n", v = wg * p);
            }
            for p in 0..pb {
                s += &format!("            bs_[((lid + {v}u) / 32u) * {NROW}u + lid % 32u] = rb{p};\n", v = wg * p);
            }
        }
        if barriers {
            s += "            workgroupBarrier();\n";
        }
        if fetch {
            s += "            let k0 = ((it / 2u + 1u) * 32u) % 4096u;\n";
            for p in 0..pa {
                s += &format!("            ra{p} = mat[(m0 + (lid + {v}u) / 8u) * 1024u + k0 / 4u + lid % 8u];\n", v = wg * p);
            }
            for p in 0..pb {
                s += &format!("            rb{p} = mat[(k0 + (lid + {v}u) / 32u) * 1024u + n0 / 4u + lid % 32u];\n", v = wg * p);
            }
        }
        s += "        }\n";
    }
    if ops != Operands::Registers {
        for i in 0..fm {
            s += &format!("        let a{i} = frag_a(wm + {}u, kk);\n", 16 * i);
        }
        for j in 0..4 {
            s += &format!("        let b{j} = frag_b(wn + {}u, kk);\n", 16 * j);
        }
    }
    s += &products(fm, "a", "b");
    s += "    }\n";
    coop_kernel(name, s, wg, fm, iters, fetch)
}

/// `mma_f16`'s subgroups on two copies of 16-deep slices in separate arrays: each step
/// multiplies the blocks of one copy while storing the next slice into the other, then (with
/// `barrier`) one barrier. Stores never touch the array being read, and a 16-deep step costs one
/// barrier, where the single copy costs two every 32 deep. With `fetch`, the stored values come
/// from a 4096 x 4096 matrix, fetched one step ahead of their store.
fn mma_f16_double(iters: u32, fm: u32, barrier: bool, fetch: bool) -> Kernel {
    const KROW: u32 = 6;
    const NROW: u32 = 34;
    let wg = if fm == 2 { 512 } else { 256 };
    let (pa, pb) = (1024 / wg, 512 / wg);
    let what = match (barrier, fetch) {
        (false, _) => " + stores into the other copy",
        (true, false) => " + double-buffered staging",
        (true, true) => " + double-buffered staging + global fetch",
    };
    let name = format!("mma f16{what}, {wg} invocations, {}x64 a subgroup", 16 * fm);
    let mut s = format!(
        "{head}\
         var<workgroup> a0_: array<vec4<f16>, {a}>;\n\
         var<workgroup> a1_: array<vec4<f16>, {a}>;\n\
         var<workgroup> b0_: array<vec4<f16>, {b}>;\n\
         var<workgroup> b1_: array<vec4<f16>, {b}>;\n",
        a = 256 * KROW,
        b = 16 * NROW,
        head = coop_head(fetch),
    );
    for c in 0..2 {
        s += &format!(
            "fn fa{c}(mi: u32) -> coop_mat16x16<f16, A> {{\n    let at = mi * {KROW}u;\n    let s = {KROW}u;\n    return coopLoadT<coop_mat16x16<f16, A>>(&a{c}_[at], s);\n}}\n\
             fn fb{c}(nj: u32) -> coop_mat16x16<f16, B> {{\n    let at = nj / 4u;\n    let s = {NROW}u;\n    return coopLoadT<coop_mat16x16<f16, B>>(&b{c}_[at], s);\n}}\n"
        );
    }
    s += &format!(
        "@compute @workgroup_size({wg})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   for (var i = lid; i < {a}u; i += {wg}u) {{ a0_[i] = vec4<f16>(src[i % 4096u] * 0.001); a1_[i] = a0_[i]; }}\n\
         \x20   for (var i = lid; i < {b}u; i += {wg}u) {{ b0_[i] = vec4<f16>(src[(i + 3u) % 4096u] * 0.001); b1_[i] = b0_[i]; }}\n\
         \x20   workgroupBarrier();\n\
         {place}",
        a = 256 * KROW,
        b = 16 * NROW,
        place = tall_place(fm),
    );
    s += &accumulators(fm);
    for p in 0..pa {
        s += &format!("    var ra{p} = vec4<f16>(src[lid + {}u]);\n", wg * p);
    }
    for p in 0..pb {
        s += &format!("    var rb{p} = vec4<f16>(src[lid + {}u]);\n", wg * p + 7);
    }
    s += &format!("    for (var it = 0u; it < {iters}u; it += 2u) {{\n");
    for (c, other) in [(0, 1), (1, 0)] {
        for i in 0..fm {
            s += &format!("        let a{c}{i} = fa{c}(wm + {}u);\n", 16 * i);
        }
        for j in 0..4 {
            s += &format!("        let b{c}{j} = fb{c}(wn + {}u);\n", 16 * j);
        }
        for p in 0..pa {
            s += &format!("        a{other}_[((lid + {v}u) / 4u) * {KROW}u + lid % 4u] = ra{p};\n", v = wg * p);
        }
        for p in 0..pb {
            s += &format!("        b{other}_[((lid + {v}u) / 32u) * {NROW}u + lid % 32u] = rb{p};\n", v = wg * p);
        }
        if fetch {
            s += &format!("        let k{c} = ((it + {}u) * 16u) % 4096u;\n", c + 2);
            for p in 0..pa {
                s += &format!("        ra{p} = mat[(m0 + (lid + {v}u) / 4u) * 1024u + k{c} / 4u + lid % 4u];\n", v = wg * p);
            }
            for p in 0..pb {
                s += &format!("        rb{p} = mat[(k{c} + (lid + {v}u) / 32u) * 1024u + n0 / 4u + lid % 32u];\n", v = wg * p);
            }
        }
        s += &products(fm, &format!("a{c}"), &format!("b{c}"));
        if barrier {
            s += "        workgroupBarrier();\n";
        }
    }
    s += "    }\n";
    coop_kernel(name, s, wg, fm, iters, fetch)
}

/// `mma_f16`'s subgroups loading every 16-deep step's blocks straight from a 4096 x 4096
/// matrix (the `direct` path: no workgroup memory, no barriers; `coopLoadT` as for row-major
/// operands), with `ahead` the next step's blocks loaded while this step's multiply.
fn mma_f16_direct(iters: u32, fm: u32, ahead: bool) -> Kernel {
    let wg = if fm == 2 { 512 } else { 256 };
    let name = format!("mma f16 + global loads{}, {wg} invocations, {}x64 a subgroup", if ahead { " one step ahead" } else { "" }, 16 * fm);
    let mut s = format!(
        "{head}\
         fn ga(m: u32, k: u32) -> coop_mat16x16<f16, A> {{\n    let at = m * 1024u + k / 4u;\n    let s = 1024u;\n    return coopLoadT<coop_mat16x16<f16, A>>(&mat[at], s);\n}}\n\
         fn gb(k: u32, n: u32) -> coop_mat16x16<f16, B> {{\n    let at = k * 1024u + n / 4u;\n    let s = 1024u;\n    return coopLoadT<coop_mat16x16<f16, B>>(&mat[at], s);\n}}\n\
         @compute @workgroup_size({wg})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   // src is bound (as the other kernels'), so read, but adds nothing.\n\
         \x20   let m0 = ((wid.x % 512u) / 32u) * 256u + (u32(src[lid % 64u].w) & 0u);\n\
         \x20   let n0 = (wid.x % 32u) * 128u;\n\
         \x20   let sg = lid / 32u;\n\
         \x20   let am = m0 + (sg / 2u) * {bm}u;\n\
         \x20   let bn = n0 + (sg % 2u) * 64u;\n",
        head = coop_head(true),
        bm = 16 * fm,
    );
    s += &accumulators(fm);
    let load = |s: &mut String, pre: &str, k: &str| {
        for i in 0..fm {
            *s += &format!("        {pre}a{i} = ga(am + {}u, {k});\n", 16 * i);
        }
        for j in 0..4 {
            *s += &format!("        {pre}b{j} = gb({k}, bn + {}u);\n", 16 * j);
        }
    };
    if ahead {
        load(&mut s, "var ", "0u");
    }
    s += &format!("    for (var it = 0u; it < {iters}u; it++) {{\n        let k = (it * 16u) % 4096u;\n");
    if ahead {
        s += "        let kn = ((it + 1u) * 16u) % 4096u;\n";
        load(&mut s, "let n", "kn");
    } else {
        load(&mut s, "let ", "k");
    }
    s += &products(fm, "a", "b");
    if ahead {
        for i in 0..fm {
            s += &format!("        a{i} = na{i};\n");
        }
        for j in 0..4 {
            s += &format!("        b{j} = nb{j};\n");
        }
    }
    s += "    }\n";
    coop_kernel(name, s, wg, fm, iters, true)
}

/// The `tall` tensor-core matmul itself (the backend's source for a row-major a and b, f16
/// out) on a 4096^3 product, and the same with its source edited: the fetch's bounds tests
/// kept where the slice lies inside the operands, or the output cut (the
/// sums still go through the scratch, but one element is stored). Rows of `(name, wgsl)`; [`Gpu::time_product`] runs them.
fn real_f16() -> Fallible<Vec<(String, String)>> {
    let key = "MatmulCoop(Key { variant: Tall, a: K, b: Outer, partial: false, packed: false, packs_y: false, bias: false, rows: false })";
    let src = liandan_backend_wgpu::shaders::all_sources(true, false, false)
        .into_iter()
        .find(|(name, _)| name == key)
        .map(|(_, src)| src)
        .ok_or_else(|| format!("the backend has no kernel {key}"))?;
    let edit = |s: &str, from: &str, to: &str| -> Fallible<String> {
        if s.contains(from) {
            Ok(s.replace(from, to))
        } else {
            Err(format!("{key}'s source no longer holds {from:?}: update xtask ceiling"))
        }
    };
    let checked = edit(&src, "fetch_slices(lid, abase, bbase, m0, n0, k0, false);", "fetch_slices(lid, abase, bbase, m0, n0, k0, true);")?;
    let quiet = |s: &str| edit(s, "if (mm < d.y && nn < d.w) { store_y(", "if ((mm | nn) == 0u) { store_y(");
    Ok(vec![
        ("tall f16 matmul 4096^3 (the real kernel)".into(), src.clone()),
        ("  testing every fetched element".into(), checked),
        ("  storing one element of each sum".into(), quiet(&src)?),
    ])
}

/// The `prefetch` tensor-core matmul (what the backend runs for f16 products of 2,048 and more
/// in every dimension; a row-major a and b, f16 out) and the tiled f32 one (128 x 128 tiles) on
/// a 4096^3 product, one workgroup a tile: the parameter block read from a storage buffer, as
/// immediate data (as the backend passes it where the device has them), or folded into the
/// source as constants (what a kernel specialized to the product's shape and strides would
/// see). Rows of `(name, wgsl, whether it reads immediates, bytes an element)`;
/// [`Gpu::time_product`] runs them.
fn real_params() -> Fallible<Vec<(String, String, bool, u32)>> {
    let mut rows = Vec::new();
    for (key, what, bytes) in [
        (
            "MatmulCoop(Key { variant: Prefetch, a: K, b: Outer, partial: false, packed: false, packs_y: false, bias: false, rows: false })",
            "prefetch f16 matmul",
            2,
        ),
        ("Matmul(Key { dtype: F32, v: Variant { h: 2, a: K, b: Outer, out4: true, partial: false, packed: false, epilogue: None } })", "tiled f32 matmul", 4),
    ] {
        let find = |immediates: bool| {
            liandan_backend_wgpu::shaders::all_sources(true, false, immediates)
                .into_iter()
                .find(|(name, _)| name == key)
                .map(|(_, src)| src)
                .ok_or_else(|| format!("the backend has no kernel {key}"))
        };
        let (buffer, immediate) = (find(false)?, find(true)?);
        let decl = "var<immediate> p: Params;";
        if !immediate.contains(decl) {
            return Err(format!("{key}'s source no longer holds {decl:?}: update xtask ceiling"));
        }
        let values = REAL_PARAMS.iter().map(|v| format!("{v}u")).collect::<Vec<_>>().join(", ");
        let constants = immediate.replace(decl, &format!("const p = Params({values});"));
        rows.push((format!("{what} 4096^3, parameters in a buffer"), buffer, false, bytes));
        rows.push((format!("{what} 4096^3, parameters as immediates (as the backend)"), immediate, true, bytes));
        rows.push((format!("{what} 4096^3, parameters as constants"), constants, true, bytes));
    }
    Ok(rows)
}

/// matmul.wgsl's parameters for a 4096^3 product of row-major f16 operands: B, M, K, N; a's
/// strides over B, M, K and offset; b's over B, K, N and offset; the scalar loaders' directions;
/// one split of all of K; no bias (the fields of the backend's `MatmulParams`, in order).
const REAL_PARAMS: [u32; 17] = [1, 4096, 4096, 4096, 4096 * 4096, 4096, 1, 0, 4096 * 4096, 4096, 1, 0, 0, 1, 1, 4096, 0];

/// A staged tensor-core product of any shape of workgroup: `sgm` x `sgn` subgroups, each
/// `16 fm` x 64, slices `bk` deep staged as the kernels stage a row-major a (rows along K) and
/// b (rows along N), fetched from a 4096 x 4096 matrix: with `ahead` into registers after the
/// barriers, a slice ahead of its store (as the kernels do), else at the store (the latency
/// then shows unless another workgroup on the multiprocessor has work).
fn mma_f16_tile(iters: u32, sgm: u32, sgn: u32, fm: u32, bk: u32, ahead: bool, wide: bool) -> Kernel {
    let wg = 32 * sgm * sgn;
    let (bm, bn) = (16 * fm * sgm, 64 * sgn);
    let (krow, nrow) = ((bk + 8) / 4, (bn + 8) / 4);
    // Halves a fetch: 4 (vec4<f16>, as the kernels), or 8 (a 16-byte aligned pair of them, so
    // that the compiler may read each pair in one load).
    let h = if wide { 8 } else { 4 };
    let (pa, pb) = (bm * bk / h / wg, bk * bn / h / wg);
    let (tm, tn) = (4096 / bm, 4096 / bn);
    let name = format!(
        "mma f16 tile {bm}x{bn}, {wg} invocations ({sgm}x{sgn} of {}x64), {bk} deep, fetch {}{}",
        16 * fm,
        if ahead { "a slice ahead" } else { "at the store" },
        if wide { ", 16-byte fetches" } else { "" }
    );
    let mut s = format!(
        "{head}\
         var<workgroup> as_: array<vec4<f16>, {a}>;\n\
         var<workgroup> bs_: array<vec4<f16>, {b}>;\n\
         fn frag_a(mi: u32, kk: u32) -> coop_mat16x16<f16, A> {{\n    let at = mi * {krow}u + kk / 4u;\n    let s = {krow}u;\n    return coopLoadT<coop_mat16x16<f16, A>>(&as_[at], s);\n}}\n\
         fn frag_b(nj: u32, kk: u32) -> coop_mat16x16<f16, B> {{\n    let at = kk * {nrow}u + nj / 4u;\n    let s = {nrow}u;\n    return coopLoadT<coop_mat16x16<f16, B>>(&bs_[at], s);\n}}\n\
         @compute @workgroup_size({wg})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         \x20   let t = wid.x % {tiles}u;\n\
         \x20   let m0 = (t / {tn}u) * {bm}u + (u32(src[lid % 64u].w) & 0u);\n\
         \x20   let n0 = (t % {tn}u) * {bn}u;\n\
         \x20   let sg = lid / 32u;\n\
         \x20   let wm = (sg / {sgn}u) * {fmr}u;\n\
         \x20   let wn = (sg % {sgn}u) * 64u;\n",
        a = bm * krow,
        b = bk * nrow,
        head = if wide { coop_head(false) + "struct Eight {\n    @align(16) lo: vec4<f16>,\n    hi: vec4<f16>,\n}\n@group(0) @binding(2) var<storage, read> mat: array<Eight>;\n" } else { coop_head(true) },
        tiles = tm * tn,
        fmr = 16 * fm,
    );
    s += &accumulators(fm);
    // A row of the matrix is 4096 halves: 1024 vec4<f16>, 512 vec4<u32>.
    let row = 4096 / h;
    let fetch = |s: &mut String, pre: &str, k: &str| {
        for p in 0..pa {
            *s += &format!("        {pre}ra{p} = mat[(m0 + (lid + {v}u) / {q}u) * {row}u + {k} / {h}u + lid % {q}u];\n", v = wg * p, q = bk / h);
        }
        for p in 0..pb {
            *s += &format!("        {pre}rb{p} = mat[({k} + (lid + {v}u) / {q}u) * {row}u + n0 / {h}u + lid % {q}u];\n", v = wg * p, q = bn / h);
        }
    };
    if ahead {
        fetch(&mut s, "var ", "0u");
    }
    let steps = bk / 16;
    s += &format!("    for (var it = 0u; it < {}u; it++) {{\n        let k = (it * {bk}u) % 4096u;\n        workgroupBarrier();\n", iters / steps);
    if !ahead {
        fetch(&mut s, "let ", "k");
    }
    // The stores of the fetched registers (`r{op}{p}`) into the staged slice (`{op}s_`, rows
    // of `stride` vec4s, `per_row` fetches a row).
    let put = |s: &mut String, op: &str, count: u32, stride: u32, per_row: u32| {
        for p in 0..count {
            let at = format!("((lid + {v}u) / {per_row}u) * {stride}u", v = wg * p);
            if wide {
                *s += &format!("        {{\n            let at = {at} + (lid % {per_row}u) * 2u;\n            {op}s_[at] = r{op}{p}.lo;\n            {op}s_[at + 1u] = r{op}{p}.hi;\n        }}\n");
            } else {
                *s += &format!("        {op}s_[{at} + lid % {per_row}u] = r{op}{p};\n");
            }
        }
    };
    put(&mut s, "a", pa, krow, bk / h);
    put(&mut s, "b", pb, nrow, bn / h);
    s += "        workgroupBarrier();\n";
    if ahead {
        s += &format!("        let kn = ((it + 1u) * {bk}u) % 4096u;\n");
        fetch(&mut s, "", "kn");
    }
    for st in 0..steps {
        for i in 0..fm {
            s += &format!("        let a{st}{i} = frag_a(wm + {}u, {}u);\n", 16 * i, 16 * st);
        }
        for j in 0..4 {
            s += &format!("        let b{st}{j} = frag_b(wn + {}u, {}u);\n", 16 * j, 16 * st);
        }
        s += &products(fm, &format!("a{st}"), &format!("b{st}"));
    }
    s += "    }\n";
    coop_kernel(name, s, wg, fm, iters, true)
}

fn kernels(quick: bool) -> Vec<Kernel> {
    let (f, m, c) = if quick { (16, 4, 8) } else { (2048, 256, 2048) };
    let mut all = vec![
        fma_f32(f),
        mac_f32(m, Staging::None, 16),
        mac_f32(m, Staging::Alternate, 16),
        mac_f32(m, Staging::Vec4, 16),
        mac_f32(m, Staging::Transposing, 16),
        mac_f32(m / 2, Staging::Vec4, 32),
        mac_f32(m / 2, Staging::Transposing, 32),
        mac_f32(m, Staging::Fetched, 16),
        mac_f32_direct(m * 16, false),
        mac_f32_direct(m * 16, true),
        mac_f32_half(m, false),
        mac_f32_half(m, true),
    ];
    all.push(mac_f32_pressed(m, 32));
    all.push(mac_f32_pressed(m, 64));
    for wg in [256, 128] {
        for (stage, fetch) in [(false, false), (true, false), (true, true)] {
            all.push(mac_f32_wide(m / 2, wg, stage, fetch));
        }
    }
    for fm in [2, 4] {
        all.push(mma_f16(c, Operands::Registers, fm));
        all.push(mma_f16(c, Operands::Loads { transposed: true }, fm));
        all.push(mma_f16(c, Operands::Loads { transposed: false }, fm));
        for (barriers, stores, fetch) in [(true, false, false), (false, true, false), (true, true, false), (true, true, true)] {
            all.push(mma_f16(c, Operands::Staged { barriers, stores, fetch }, fm));
        }
        for (barrier, fetch) in [(false, false), (true, false), (true, true)] {
            all.push(mma_f16_double(c, fm, barrier, fetch));
        }
        all.push(mma_f16_direct(c, fm, false));
        all.push(mma_f16_direct(c, fm, true));
    }
    // Tiles and slice depths within 48 KiB of workgroup memory: (subgroups along M, along N,
    // 16 x 16 rows a subgroup, depth, fetch ahead).
    for (sgm, sgn, fm, bk, ahead) in [
        (8, 2, 2, 32, true),
        (2, 2, 4, 32, true),
        (2, 2, 4, 32, false),
        (2, 2, 4, 64, true),
        (2, 2, 4, 64, false),
        (4, 2, 4, 32, true),
        (4, 2, 2, 64, false),
        (2, 4, 2, 64, false),
        (4, 4, 2, 32, true),
    ] {
        all.push(mma_f16_tile(c, sgm, sgn, fm, bk, ahead, false));
    }
    // The best of those (`prefetch`'s structure) over one 4096^3 product's work: 4,096 deep on
    // one workgroup a tile, where the rows above go 32,768 deep on 4.1 workgroups a tile.
    let mut one = mma_f16_tile(if quick { c } else { 256 }, 2, 2, 4, 32, true, false);
    one.name += ", 4096 deep on 1024 workgroups (one 4096^3 product's tiles)";
    one.groups = Some(1024);
    all.push(one);
    // The two best of those with fetches of 16 bytes rather than 8.
    for (sgm, sgn, fm, bk, ahead) in [(2, 2, 4, 32, true), (8, 2, 2, 32, true), (2, 2, 4, 32, false)] {
        all.push(mma_f16_tile(c, sgm, sgn, fm, bk, ahead, true));
    }
    all
}

/// Every ceiling kernel's name and WGSL (the full-size ones), for `cargo xtask kernel-stats
/// --ceiling`.
pub fn sources() -> Vec<(String, String)> {
    kernels(false).into_iter().map(|k| (k.name, k.wgsl)).collect()
}

pub fn run(args: &[String]) -> Fallible<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let gpu = Gpu::open()?;
    println!("device: {}{}", gpu.name, if gpu.coop { "" } else { " (no 16x16x16 f16 cooperative matrices: the mma rows are skipped)" });
    // Enough workgroups to fill any GPU several times over; fewer on a software rasterizer.
    let (groups, reps) = if quick { (8u32, 2u32) } else { (132 * 32, 5) };
    let header = || {
        println!("| kernel | workgroups | ms a dispatch | TFLOP/s |");
        println!("|---|---|---|---|");
    };
    let mut headed = false;
    let only: Vec<&str> = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).map(|o| o.split(',').collect()).unwrap_or_default();
    for k in kernels(quick) {
        if !only.is_empty() && !only.iter().any(|o| k.name.contains(o)) {
            continue;
        }
        if k.coop && !gpu.coop {
            continue;
        }
        // A grid of its own is a short dispatch: more of them in the timed batch.
        let (groups, reps) = match k.groups {
            Some(g) => (g, reps * 20),
            None => (groups, reps),
        };
        let ms = gpu.time(&k, groups, reps)?;
        if !std::mem::replace(&mut headed, true) {
            header();
        }
        let tflops = k.flops_per_group * groups as f64 / (ms * 1e-3) / 1e12;
        println!("| {} | {groups} | {ms:.3} | {tflops:.2} |", k.name);
    }
    if gpu.coop && !quick {
        for (name, wgsl) in real_f16()? {
            if !only.is_empty() && !only.iter().any(|o| name.contains(o) || o.contains("real")) {
                continue;
            }
            let ms = gpu.time_product(&name, &wgsl, false, 2, 256, reps)?;
            if !std::mem::replace(&mut headed, true) {
                header();
            }
            println!("| {name} | 32 x 16 | {ms:.3} | {:.2} |", 2.0 * 4096f64.powi(3) / (ms * 1e-3) / 1e12);
        }
    }
    if gpu.coop && !quick {
        for (name, wgsl, immediates, bytes) in real_params()? {
            if !only.is_empty() && !only.iter().any(|o| name.contains(o)) {
                continue;
            }
            if immediates && !gpu.immediates {
                continue;
            }
            let ms = gpu.time_product(&name, &wgsl, immediates, bytes, 128, reps)?;
            if !std::mem::replace(&mut headed, true) {
                header();
            }
            println!("| {name} | 32 x 32 | {ms:.3} | {:.2} |", 2.0 * 4096f64.powi(3) / (ms * 1e-3) / 1e12);
        }
    }
    if only.is_empty() || only.iter().any(|o| "latency".contains(o)) {
        latency(&gpu, if quick { 20 } else { 2000 })?;
    }
    Ok(())
}

/// The latency rows' kernel: one element incremented, its count from a uniform parameter block.
const LATENCY_ADD: &str = "@group(0) @binding(0) var<uniform> n: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < n.x { y[gid.x] = y[gid.x] + 1.0; }
}
";

/// The same with a 256-byte parameter block as immediate data, as the backend's kernels take it.
const LATENCY_ADD_IMMEDIATE: &str = "var<immediate> n: array<vec4<u32>, 16>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < n[0].x { y[gid.x] = y[gid.x] + 1.0; }
}
";

/// What one submission and a wait for it cost through wgpu alone: the floor under the
/// backend's synchronize (`cargo xtask bench-host --only sync`, whose split rows time the same
/// parts inside the backend). Each row runs `reps` times, each from an idle device: record (a
/// new encoder and its commands), write (`Queue::write_buffer` of a 16-byte parameter block),
/// finish (`CommandEncoder::finish`), submit (`Queue::submit`), wait (polling until the
/// queue is empty, as the backend's synchronize first does, or one blocking wait), and for the
/// read-back row the mapping read too. Prints medians of the whole and means of the parts, us.
fn latency(gpu: &Gpu, reps: usize) -> Fallible<()> {
    let pipeline = gpu.pipeline("latency add", LATENCY_ADD);
    let params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("params"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    gpu.queue.write_buffer(&params, 0, &[1u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let y = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("y"),
        size: 256,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let back = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("read-back"),
        size: 256,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: y.as_entire_binding() },
        ],
    });
    // The same kernel reading a 256-byte parameter block from immediate data (push constants)
    // instead of a buffer: no write before the submit.
    let immediate = gpu.immediates.then(|| {
        let module = gpu.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("latency add, immediates"),
            source: wgpu::ShaderSource::Wgsl(LATENCY_ADD_IMMEDIATE.into()),
        });
        let entry = wgpu::BindGroupLayoutEntry {
            binding: 1,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only: false }, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        };
        let layout = gpu.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &[entry] });
        let pipeline_layout =
            gpu.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: None, bind_group_layouts: &[Some(&layout)], immediate_size: 256 });
        let pipeline = gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("latency add, immediates"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &[wgpu::BindGroupEntry { binding: 1, resource: y.as_entire_binding() }],
        });
        (pipeline, group)
    });
    let block: Vec<u8> = (0..64u32).flat_map(|i| u32::from(i == 0).to_le_bytes()).collect();
    let idle = |spin: bool| -> Fallible<u32> {
        let mut polls = 0;
        if spin {
            let start = Instant::now();
            while start.elapsed().as_secs_f64() < 1.0 {
                polls += 1;
                if gpu.device.poll(wgpu::PollType::Poll).map_err(|e| e.to_string())?.is_queue_empty() {
                    return Ok(polls);
                }
                std::hint::spin_loop();
            }
        }
        gpu.device.poll(wgpu::PollType::Wait { submission_index: None, timeout: None }).map_err(|e| e.to_string())?;
        Ok(polls)
    };
    // (name, dispatch, write the parameters, read 4 bytes back, spin, parameters as immediates)
    let mut rows = vec![
        ("empty command buffer, polled", false, false, false, true, false),
        ("a dispatch of one workgroup, polled", true, false, false, true, false),
        ("a dispatch, blocking wait", true, false, false, false, false),
        ("write_buffer + a dispatch, polled", true, true, false, true, false),
        ("write_buffer + a dispatch + read 4 bytes back, polled", true, true, true, true, false),
    ];
    if immediate.is_some() {
        rows.push(("256 bytes of immediates + a dispatch, polled", true, false, false, true, true));
        rows.push(("256 bytes of immediates + a dispatch + read 4 bytes back, polled", true, false, true, true, true));
    }
    println!();
    println!("| latency ({reps} each) | whole, median us | record | write | finish | submit | wait (+ map) | polls |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, dispatch, write, read, spin, immediates) in rows {
        let mut whole = Vec::with_capacity(reps);
        let mut parts = [0f64; 5];
        let mut polls = 0u64;
        // The first tenth warms up; the rest counts.
        let warm = reps / 10;
        for rep in 0..reps + warm {
            let t0 = Instant::now();
            let mut encoder = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            if dispatch {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
                match (&immediate, immediates) {
                    (Some((pipeline, group)), true) => {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, group, &[]);
                        pass.set_immediates(0, &block);
                    }
                    _ => {
                        pass.set_pipeline(&pipeline);
                        pass.set_bind_group(0, &group, &[]);
                    }
                }
                pass.dispatch_workgroups(1, 1, 1);
            }
            if read {
                encoder.copy_buffer_to_buffer(&y, 0, &back, 0, 4);
            }
            let t1 = Instant::now();
            if write {
                gpu.queue.write_buffer(&params, 0, &[1u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            }
            let t2 = Instant::now();
            let commands = encoder.finish();
            let t3 = Instant::now();
            gpu.queue.submit([commands]);
            let t4 = Instant::now();
            let (tx, rx) = std::sync::mpsc::channel();
            if read {
                back.slice(..4).map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
            }
            let n = idle(spin)?;
            if read {
                rx.recv().map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
                let value = f32::from_le_bytes(back.slice(..4).get_mapped_range().map_err(|e| e.to_string())?[..4].try_into().expect("4 bytes"));
                std::hint::black_box(value);
                back.unmap();
            }
            let t5 = Instant::now();
            if rep >= warm {
                whole.push((t5 - t0).as_secs_f64() * 1e6);
                for (p, (a, b)) in parts.iter_mut().zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)]) {
                    *p += (b - a).as_secs_f64() * 1e6;
                }
                polls += n as u64;
            }
        }
        whole.sort_by(f64::total_cmp);
        let n = reps as f64;
        let p: Vec<String> = parts.iter().map(|v| format!("{:.1}", v / n)).collect();
        println!("| {name} | {:.1} | {} | {:.0} |", whole[reps / 2], p.join(" | "), polls as f64 / n);
    }
    // The same through Vulkan alone: `finish` is vkEndCommandBuffer, and nothing is written.
    match crate::raw_latency::rows(reps) {
        Ok((device, rows)) => {
            for r in rows {
                let [record, end, submit, wait] = r.parts;
                println!("| {} | {:.1} | {record:.1} | - | {end:.1} | {submit:.1} | {wait:.1} | {:.0} |", r.name, r.median, r.polls);
            }
            println!();
            println!("(raw Vulkan rows: {device}, a Vulkan device of their own; `finish` is vkEndCommandBuffer)");
        }
        Err(e) => println!("| raw Vulkan: {e} | | | | | | | |"),
    }
    Ok(())
}

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// A 4096 x 4096 f32 matrix (or 4096 x 8192 f16) of small values, for the kernels that
    /// fetch their operands.
    mat: wgpu::Buffer,
    name: String,
    coop: bool,
    /// Whether the device takes 256 bytes of immediate data (push constants) a dispatch.
    immediates: bool,
}

impl Gpu {
    fn open() -> Fallible<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
        adapters.sort_by_key(|a| match a.get_info().device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::Cpu => 3,
            _ => 2,
        });
        let adapter = adapters.into_iter().next().ok_or("no GPU adapter (Vulkan, Metal or DX12) found")?;
        let info = adapter.get_info();
        let coop = adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16)
            && adapter.cooperative_matrix_properties().iter().any(|p| {
                (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == wgpu::CooperativeScalarType::F16 && p.cr_type == wgpu::CooperativeScalarType::F32
            })
            && (info.subgroup_min_size, info.subgroup_max_size) == (32, 32)
            && adapter.limits().max_compute_invocations_per_workgroup >= 512;
        let mut features = if coop { wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16 } else { wgpu::Features::empty() };
        let immediates = adapter.features().contains(wgpu::Features::IMMEDIATES) && adapter.limits().max_immediate_size >= 256;
        if immediates {
            features |= wgpu::Features::IMMEDIATES;
        }
        let desc = wgpu::DeviceDescriptor {
            label: Some("xtask ceiling"),
            required_features: features,
            required_limits: adapter.limits(),
            // SAFETY: wgpu asks us to accept that its experimental features may hold bugs; a
            // benchmark's worst case is a wrong time.
            experimental_features: if coop { unsafe { wgpu::ExperimentalFeatures::enabled() } } else { wgpu::ExperimentalFeatures::disabled() },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| format!("{}: could not open the device: {e}", info.name))?;
        let mat = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("mat"),
            size: 4096 * 4096 * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // Not zeros: tensor cores multiplying zeros draw less power, and so may run faster.
        let values: Vec<u8> = (0..4096 * 4096u32).flat_map(|i| (0.5f32 + (i % 251) as f32 * 1e-3).to_le_bytes()).collect();
        queue.write_buffer(&mat, 0, &values);
        Ok(Gpu { device, queue, mat, name: format!("{} ({:?})", info.name, info.backend), coop, immediates })
    }

    /// The compute pipeline of `wgsl` (entry point `main`, its layout derived from the source),
    /// built as the backend builds its trusted kernels: without naga's run-time checks.
    fn pipeline(&self, name: &str, wgsl: &str) -> wgpu::ComputePipeline {
        let desc = wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
        // SAFETY: every index of these kernels is bounded by constants, the invocation's id and
        // (the backend's matmul) the parameters, within the buffers `time` and `time_product` bind.
        let module = unsafe { self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) };
        self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &[], zero_initialize_workgroup_memory: false },
            cache: None,
        })
    }

    /// Milliseconds a dispatch of `grid` takes, the mean of `reps` in one batch after one
    /// dispatch of warm-up; `immediates`, the immediate data the kernel reads, if any.
    fn timed(
        &self,
        name: &str,
        pipeline: &wgpu::ComputePipeline,
        group: &wgpu::BindGroup,
        immediates: Option<&[u8]>,
        grid: (u32, u32),
        reps: u32,
    ) -> Fallible<f64> {
        let run = |n: u32| -> Fallible<f64> {
            let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, group, &[]);
                if let Some(block) = immediates {
                    pass.set_immediates(0, block);
                }
                for _ in 0..n {
                    pass.dispatch_workgroups(grid.0, grid.1, 1);
                }
            }
            let t = Instant::now();
            self.queue.submit([encoder.finish()]);
            self.device.poll(wgpu::PollType::Wait { submission_index: None, timeout: None }).map_err(|e| format!("{name}: {e}"))?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        };
        run(1)?;
        Ok(run(reps)? / reps as f64)
    }

    fn buffer(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Milliseconds a 4096^3 product by the matmul kernel `wgsl` (its bindings: the parameters,
    /// a, b and y; elements of `bytes`) takes on a grid of one workgroup a tile of `rows` x 128,
    /// the mean of `20 reps` after one of warm-up; a and b are both the first 4096 x 4096
    /// elements of the shared matrix. The parameters go in a buffer at binding 0, or with
    /// `immediates` as immediate data (unread where the source folded them into constants).
    fn time_product(&self, name: &str, wgsl: &str, immediates: bool, bytes: u32, rows: u32, reps: u32) -> Fallible<f64> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let n = 4096u32;
        let block: Vec<u8> = REAL_PARAMS.iter().chain(std::iter::repeat_n(&0, 64 - REAL_PARAMS.len())).flat_map(|x| x.to_le_bytes()).collect();
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only }, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        };
        let mut entries = vec![storage(1, true), storage(2, true), storage(3, false)];
        if !immediates {
            entries.insert(0, storage(0, true));
        }
        let layout = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
        let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: if immediates { 256 } else { 0 },
        });
        let desc = wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
        // SAFETY: as `pipeline`'s: the kernel's indices stay within the buffers bound here.
        let module = unsafe { self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) };
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &[], zero_initialize_workgroup_memory: false },
            cache: None,
        });
        let pbuf = self.buffer("params", 256);
        self.queue.write_buffer(&pbuf, 0, &block);
        let y = self.buffer("y", (n * n * bytes) as u64);
        let half = wgpu::BufferBinding { buffer: &self.mat, offset: 0, size: std::num::NonZeroU64::new((n * n * bytes) as u64) };
        let mut bound = vec![
            wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::Buffer(half.clone()) },
            wgpu::BindGroupEntry { binding: 2, resource: wgpu::BindingResource::Buffer(half) },
            wgpu::BindGroupEntry { binding: 3, resource: y.as_entire_binding() },
        ];
        if !immediates {
            bound.insert(0, wgpu::BindGroupEntry { binding: 0, resource: pbuf.as_entire_binding() });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &layout, entries: &bound });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!("{name}: {e}"));
        }
        self.timed(name, &pipeline, &group, immediates.then_some(&block[..]), (n / 128, n / rows), reps * 20)
    }

    /// Milliseconds a dispatch of `groups` workgroups of `k` takes, the mean of `reps` in one
    /// batch after one dispatch of warm-up.
    fn time(&self, k: &Kernel, groups: u32, reps: u32) -> Fallible<f64> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let pipeline = self.pipeline(&k.name, &k.wgsl);
        let src_data: Vec<f32> = (0..SRC_VEC4S * 4).map(|i| 1.0 - (i % 97) as f32 * 1e-4).collect();
        let src = self.buffer("src", (src_data.len() * 4) as u64);
        self.queue.write_buffer(&src, 0, &src_data.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
        // The largest output any kernel writes: 16 subgroups' 8 sums of 256 f32 a workgroup.
        let dst = self.buffer("dst", groups as u64 * 16 * 2048 * 4);
        let mut entries = vec![
            wgpu::BindGroupEntry { binding: 0, resource: src.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: dst.as_entire_binding() },
        ];
        if k.mat {
            entries.push(wgpu::BindGroupEntry { binding: 2, resource: self.mat.as_entire_binding() });
        }
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &pipeline.get_bind_group_layout(0), entries: &entries });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!("{}: {e}", k.name));
        }
        self.timed(&k.name, &pipeline, &group, None, (groups, 1), reps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ceiling kernel is valid WGSL for naga (the same front end wgpu runs), with the
    /// capabilities the device is opened with, so a GPU run never meets a compile error.
    #[test]
    fn every_kernel_validates() {
        let real = real_f16().expect("the edits still apply to the backend's source");
        let real = real.into_iter().map(|(name, wgsl)| Kernel { name, wgsl, flops_per_group: 0.0, coop: true, mat: false, groups: None });
        let prefetch = real_params().expect("the edit still applies to the backend's source");
        let real = real.chain(prefetch.into_iter().map(|(name, wgsl, _, _)| Kernel { name, wgsl, flops_per_group: 0.0, coop: true, mat: false, groups: None }));
        let latency = [LATENCY_ADD, LATENCY_ADD_IMMEDIATE, crate::raw_latency::ADD].map(|w| Kernel {
            name: "latency".into(),
            wgsl: w.into(),
            flops_per_group: 0.0,
            coop: false,
            mat: false,
            groups: None,
        });
        for k in kernels(true).into_iter().chain(real).chain(latency) {
            let module = naga::front::wgsl::parse_str(&k.wgsl).unwrap_or_else(|e| panic!("{}: {}\n{}", k.name, e.emit_to_string(&k.wgsl), k.wgsl));
            let caps = naga::valid::Capabilities::SHADER_FLOAT16 | naga::valid::Capabilities::COOPERATIVE_MATRIX | naga::valid::Capabilities::IMMEDIATES;
            let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{}: {}\n{}", k.name, e.emit_to_string(&k.wgsl), k.wgsl));
            // As wgpu's Vulkan backend writes a trusted module (no run-time checks).
            let options =
                naga::back::spv::Options { lang_version: (1, 6), bounds_check_policies: naga::proc::BoundsCheckPolicies::default(), ..Default::default() };
            naga::back::spv::write_vec(&module, &info, &options, None).unwrap_or_else(|e| panic!("{}: SPIR-V translation failed: {e:?}", k.name));
        }
    }
}
