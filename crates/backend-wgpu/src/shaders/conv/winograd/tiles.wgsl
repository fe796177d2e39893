// Which tile invocation i of a Winograd stage over [channels, P] works on (both tile sizes):
// params[1] P (tiles in all), [2] tiles per image, [3] tiles per row. `row` is the channel (of
// x, dy or y), (ty, tx) the tile's place in image `img`, its top-left output at (R ty, R tx)
// for tiles of R x R outputs.

struct TileAt {
    row: u32,
    img: u32,
    ty: u32,
    tx: u32,
}

fn tile_at(i: u32) -> TileAt {
    let row = i / params[1];
    let p = i - row * params[1];
    let img = p / params[2];
    let t = p - img * params[2];
    let ty = t / params[3];
    return TileAt(row, img, ty, t - ty * params[3]);
}
