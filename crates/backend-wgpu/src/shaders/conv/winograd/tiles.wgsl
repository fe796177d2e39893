// Which tile invocation i of a Winograd stage over [channels, P] works on (both tile sizes):
// p.patches = P (tiles in all), p.tiles per image, p.tiles_w per row. `row` is the channel (of
// x, dy or y), (ty, tx) the tile's place in image `img`, its top-left output at (R ty, R tx)
// for tiles of R x R outputs.

struct TileAt {
    row: u32,
    img: u32,
    ty: u32,
    tx: u32,
}

fn tile_at(i: u32) -> TileAt {
    let row = i / p.patches;
    let q = i - row * p.patches;
    let img = q / p.tiles;
    let t = q - img * p.tiles;
    let ty = t / p.tiles_w;
    return TileAt(row, img, ty, t - ty * p.tiles_w);
}
