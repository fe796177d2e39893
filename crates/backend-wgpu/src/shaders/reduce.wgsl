// Reduces axis 1 of an [outer, len, inner] view: T invocations share each output, each folding
// every T-th element of the lane, then a tree in workgroup memory joins their T partial results.
// A workgroup of 256 serves R = 256 / T outputs.
//
// `ReduceParams`: the view's sizes, strides and offset, and `chunks` pieces of `chunk_len`
// elements a lane may be cut into (a first pass
// of a split reduction, writing partial results); outputs are then [outer, chunks, inner].
//
// Chosen per kernel: the bindings with `load_(k, j) -> Acc` and `store_(o, Acc)` (a part from
// reduce/ before this file); the constants FOLD, the fold (0 sum_, 1 max_, 2 min_), and T and
// COLS, how the workgroup is shared out (see below).

struct Acc { v: C_x, i: u32 }

// The index of "no element yet": it loses to every element.
const NONE: u32 = 0xffffffffu;
const R: u32 = 256u / T;
// Which invocations share an output. Rows (false): T adjacent invocations, for inner = 1, where
// one lane's elements are adjacent in memory. Columns (true): every R-th invocation, so adjacent
// invocations serve adjacent outputs, which for inner > 1 are adjacent in memory. (COLS.)

var<workgroup> sv: array<C_x, 256>;
var<workgroup> si: array<u32, 256>;


fn sum_(a: Acc, b: Acc) -> Acc {
    return Acc(a.v + b.v, 0u);
}

fn nan_(x: C_x) -> bool {
    return !(x == x);
}

// Max and min carry the winner's index so that all four share one fold. NaN beats everything,
// as in PyTorch, and a tie goes to the smaller index whichever side holds it, so the first
// occurrence wins in whatever order the tree joins partial results.
fn pick_(a: Acc, b: Acc, b_beats: bool, a_beats: bool) -> Acc {
    if (a.i == NONE || (b.i != NONE && (b_beats || (!a_beats && b.i < a.i)))) { return b; }
    return a;
}

fn max_(a: Acc, b: Acc) -> Acc {
    return pick_(a, b, b.v > a.v || (nan_(b.v) && !nan_(a.v)), a.v > b.v || (nan_(a.v) && !nan_(b.v)));
}

fn min_(a: Acc, b: Acc) -> Acc {
    return pick_(a, b, b.v < a.v || (nan_(b.v) && !nan_(a.v)), a.v < b.v || (nan_(a.v) && !nan_(b.v)));
}

fn fold_(a: Acc, b: Acc) -> Acc {
    switch FOLD {
        case 0u: { return sum_(a, b); }
        case 1u: { return max_(a, b); }
        default: { return min_(a, b); }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let len = p.len;
    let inner = p.inner;
    let chunks = p.chunks;
    let clen = p.chunk_len;
    let n = p.outer * chunks * inner;
    var t = lid % T;
    var r = lid / T;
    if (COLS) {
        t = lid / R;
        r = lid % R;
    }
    let o = (wid.y * nwg.x + wid.x) * R + r;
    var a = Acc(C_x(0), NONE);
    if (o < n) {
        let i = o % inner;
        let q = o / inner;
        let c = q % chunks;
        let start = c * clen;
        let end = min(len, start + clen);
        let base = p.offset + (q / chunks) * p.outer_stride + i * p.inner_stride;
        let step = p.len_stride;
        // Four loads in flight per invocation before they are folded, in order.
        var j = start + t;
        for (; j + 3u * T < end; j += 4u * T) {
            let x0 = load_(base + j * step, j);
            let x1 = load_(base + (j + T) * step, j + T);
            let x2 = load_(base + (j + 2u * T) * step, j + 2u * T);
            let x3 = load_(base + (j + 3u * T) * step, j + 3u * T);
            a = fold_(fold_(fold_(fold_(a, x0), x1), x2), x3);
        }
        for (; j < end; j += T) {
            a = fold_(a, load_(base + j * step, j));
        }
    }
    if (T > 1u) {
        sv[lid] = a.v;
        si[lid] = a.i;
        workgroupBarrier();
        let stride = select(1u, R, COLS);
        for (var s = T / 2u; s > 0u; s >>= 1u) {
            if (t < s) {
                let k = lid + s * stride;
                a = fold_(a, Acc(sv[k], si[k]));
                sv[lid] = a.v;
                si[lid] = a.i;
            }
            workgroupBarrier();
        }
    }
    if (t == 0u && o < n) {
        store_(o, a);
    }
}
