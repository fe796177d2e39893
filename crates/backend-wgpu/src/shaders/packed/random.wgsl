// Seeded random fill (`random_draw.wgsl`) into packed bf16, two elements a word (the entry
// point is packed/entry2.wgsl's); the chunks of a huge tensor start at even elements.

@group(0) @binding(1) var<storage, read_write> y: array<u32>;

fn value_(i: u32) -> f32 {
    return random_(i + p.first);
}

fn put_(w: u32, v: u32) { y[w] = v; }
