// Stores a transform's rows first .. first + n - 1 (components 0 .. n - 1 of each of o's
// vec4s, one per column s) into the 36 matrices of `dst`: element (r, s) into matrix 6 r + s,
// at this invocation's place i (p.invocations invocations, each matrix that long).

fn put(i: u32, first: u32, n: u32, o: Six) {
    let step = p.invocations;
    for (var q = 0u; q < n; q++) {
        let at = 6u * (first + q) * step + i;
        dst[at] = store_x(o.v0[q]);
        dst[at + step] = store_x(o.v1[q]);
        dst[at + 2u * step] = store_x(o.v2[q]);
        dst[at + 3u * step] = store_x(o.v3[q]);
        dst[at + 4u * step] = store_x(o.v4[q]);
        dst[at + 5u * step] = store_x(o.v5[q]);
    }
}
