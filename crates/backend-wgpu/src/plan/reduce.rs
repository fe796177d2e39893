//! A reduction's plan: how its invocations are spread over each lane ([`spread`]), and
//! whether a few long lanes are cut into chunks and reduced in two passes ([`reduce()`]).

use super::{Options, WG};

/// `t` invocations per output; `cols`: they sit `256 / t` apart rather than side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Spread {
    pub(crate) t: usize,
    pub(crate) cols: bool,
}

pub(crate) const ONE: Spread = Spread { t: 1, cols: false };
pub(crate) const SPREADS: [Spread; 6] = [
    ONE,
    Spread { t: 8, cols: false },
    Spread { t: 32, cols: false },
    Spread { t: 256, cols: false },
    Spread { t: 4, cols: true },
    Spread { t: 16, cols: true },
];

/// The spread for lanes of `len` elements `inner` apart, `outputs` of them. Enough invocations
/// to fill a big GPU (some 256K), each with enough elements to be worth a tree.
pub(crate) fn spread(len: usize, inner: usize, outputs: usize) -> Spread {
    let rows = |t| Spread { t, cols: false };
    let cols = |t| Spread { t, cols: true };
    match (inner, len) {
        (_, 0..=16) => ONE,
        (1, 17..=128) => rows(8),
        (1, 129..=4096) if outputs >= 2048 => rows(32),
        (1, _) => rows(256),
        _ if outputs >= 262_144 => ONE,
        // Long columns, many of them: an invocation each, its warp reading neighbouring
        // columns of a row, and the lanes cut into chunks (two passes). A 4096 x 16384 sum
        // down the columns read 3.15-3.29 TB/s this way on an H200 against 2.68-2.71 with 16
        // an output; not for short lanes such as a split product's partial sums, where it cost
        // the vae's step 10%.
        _ if outputs >= 8192 && len >= 1024 => ONE,
        _ if outputs >= 32_768 => cols(4),
        _ => cols(16),
    }
}

/// A reduction of at least `SPLIT_MIN` elements in fewer than `FEW_GROUPS` workgroups is split
/// into chunks of at least `MIN_CHUNK` elements per lane, aiming at `SPLIT_GROUPS` workgroups.
/// The thresholds are low because the common small cases are bias gradients (a `[1024, 512]`
/// sum over the batch is 32 workgroups unsplit, each of whose invocations walks 64 rows) and
/// whole-tensor sums (one workgroup unsplit), where the second dispatch costs a few
/// microseconds and the idle GPU costs tens.
const SPLIT_MIN: usize = 1 << 16;
const FEW_GROUPS: usize = 1024;
const SPLIT_GROUPS: usize = 2048;
const MIN_CHUNK: usize = 64;

/// A reduction of lanes `[outer, len, inner]`: one pass, or a first pass over `chunks` chunks
/// of `chunk` elements per lane and a second over their partial results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReducePlan {
    Whole,
    Split { chunks: usize, chunk: usize },
}

/// The plan of a reduction of `dims` `[outer, len, inner]` over a view of `numel` elements.
pub(crate) fn reduce(dims: [usize; 3], numel: usize) -> ReducePlan {
    let [outer, len, inner] = dims;
    let groups = (outer * inner).div_ceil(WG / spread(len, inner, outer * inner).t);
    if groups >= FEW_GROUPS || len < 2 * MIN_CHUNK || numel < SPLIT_MIN {
        return ReducePlan::Whole;
    }
    let chunk = len.div_ceil(SPLIT_GROUPS.div_ceil(groups).min(len / MIN_CHUNK));
    ReducePlan::Split { chunks: len.div_ceil(chunk), chunk }
}

/// A sum down the columns of a contiguous `[outer, len, inner]` view on the column kernel
/// (`shaders/reduce/columns.wgsl`): each invocation reads four neighbouring columns (a vector
/// load) from every `lanes`-th row of its chunk, `width` such invocations side by side, so a
/// workgroup reads whole rows; the lanes' sums meet in workgroup memory. Where `chunks > 1`
/// the partial sums of each chunk are summed by a second pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Columns {
    /// Invocations side by side along a row, four columns each.
    pub(crate) width: usize,
    /// Invocations down the rows a column group.
    pub(crate) lanes: usize,
    /// Workgroups across a row.
    pub(crate) tiles: usize,
    pub(crate) chunks: usize,
    pub(crate) chunk_rows: usize,
}

/// Workgroups a column sum aims at (some eight a multiprocessor of a big GPU).
const COLUMN_GROUPS: usize = 1024;
/// Rows an invocation reads at least (two rounds of its four loads in flight), so that the
/// second pass stays small.
const COLUMN_ROWS: usize = 8;
/// Outputs past which the tree reduction's own spread already reads whole rows.
const COLUMN_OUTPUTS: usize = 65_536;

/// The column kernel's plan for `[outer, len, inner]`, or `None` where it does not apply:
/// `inner` not a multiple of four, lanes too short to be worth it, or so many outputs that an
/// invocation an output reads whole rows already (or the options keep the tree).
pub(crate) fn columns([outer, len, inner]: [usize; 3], options: &Options) -> Option<Columns> {
    if options.tree_column_sums || inner == 0 || !inner.is_multiple_of(4) || len < 32 || outer * inner > COLUMN_OUTPUTS {
        return None;
    }
    let groups = inner / 4;
    let width = groups.min(64);
    let lanes = WG / width;
    let tiles = groups.div_ceil(width);
    // A small sum stays one dispatch, as the tree's does: a second costs more than it saves.
    let most = if outer * len * inner < SPLIT_MIN { 1 } else { (len / (lanes * COLUMN_ROWS)).max(1) };
    let chunks = COLUMN_GROUPS.div_ceil(outer * tiles).clamp(1, most);
    let chunk_rows = len.div_ceil(chunks);
    Some(Columns { width, lanes, tiles, chunks: len.div_ceil(chunk_rows), chunk_rows })
}

/// Workgroups a channel sum aims at, and the fewest elements a chunk of a channel takes (eight
/// an invocation: two rounds of its four loads in flight).
const CHANNEL_GROUPS: usize = 1024;
const CHANNEL_MIN: usize = 2048;

/// The chunks each of `channels` channels of `len` elements is summed in (`shaders/reduce/
/// channels.wgsl`): some [`CHANNEL_GROUPS`] workgroups in all, where the channels have the
/// elements for it (mnist_cnn's 64 channels of 64 x 576 in 16: a workgroup a channel would
/// leave most multiprocessors idle, each invocation waiting on a long chain of loads).
pub(crate) fn channel_chunks(channels: usize, len: usize) -> usize {
    CHANNEL_GROUPS.div_ceil(channels.max(1)).clamp(1, len.div_ceil(CHANNEL_MIN).max(1))
}

#[cfg(test)]
mod tests {
    use super::{channel_chunks, columns, reduce, spread, Columns, Options, ReducePlan, Spread};

    /// Reductions of the zoo's shapes and two whole-tensor sums: which spread and which passes
    /// each gets.
    #[test]
    fn each_reduction_gets_its_spread_and_passes() {
        let rows = |t| Spread { t, cols: false };
        let cols = |t| Spread { t, cols: true };
        // (dims, spread, plan)
        let cases = [
            // A bias gradient of mlp: [1024, 512] summed over the batch.
            ([1, 1024, 512], cols(16), ReducePlan::Split { chunks: 16, chunk: 64 }),
            // Softmax's max over 10 classes at batch 1024.
            ([1024, 10, 1], Spread { t: 1, cols: false }, ReducePlan::Whole),
            // A layer norm's rows of vit (768 wide) at batch 128 x 65 tokens.
            ([8320, 768, 1], rows(32), ReducePlan::Whole),
            // Many short columns: 128 x 3,136 lanes of 64 (resnet18's first stage, over its channels).
            ([128, 64, 3136], Spread { t: 1, cols: false }, ReducePlan::Whole),
            // A whole-tensor sum of a million elements: one lane.
            ([1, 1 << 20, 1], rows(256), ReducePlan::Split { chunks: 2048, chunk: 512 }),
            // A small whole-tensor sum stays one pass.
            ([1, 1000, 1], rows(256), ReducePlan::Whole),
        ];
        for (dims, want_spread, want_plan) in cases {
            let [outer, len, inner] = dims;
            assert_eq!(spread(len, inner, outer * inner), want_spread, "{dims:?}");
            assert_eq!(reduce(dims, outer * len * inner), want_plan, "{dims:?}");
        }
    }

    /// vit's bias gradients (`[128 x 65, C]` summed over the rows) on the column kernel: whole
    /// rows a workgroup, about a thousand workgroups; shapes it leaves to the tree.
    #[test]
    fn bias_gradients_take_the_column_kernel() {
        let plan = |inner| columns([1, 8320, inner], &Options::default()).unwrap();
        assert_eq!(plan(192), Columns { width: 48, lanes: 5, tiles: 1, chunks: 208, chunk_rows: 40 });
        assert_eq!(plan(768), Columns { width: 64, lanes: 4, tiles: 3, chunks: 260, chunk_rows: 32 });
        for c in [192, 576, 768, 3072] {
            let p = plan(c);
            assert!(p.width * p.lanes <= 256 && p.width * p.tiles * 4 >= c, "{c}: {p:?}");
            assert!(p.chunks * p.chunk_rows >= 8320 && (p.chunks - 1) * p.chunk_rows < 8320, "{c}: {p:?}");
        }
        // Columns not in fours, short lanes, and many outputs stay on the tree.
        assert_eq!(columns([1, 8320, 10], &Options::default()), None);
        assert_eq!(columns([1, 16, 192], &Options::default()), None);
        assert_eq!(columns([128, 64, 3136], &Options::default()), None);
        // A short lane is one chunk, and so is a small sum (vae's bias gradients).
        assert_eq!(columns([1, 40, 8], &Options::default()).map(|p| p.chunks), Some(1));
        assert_eq!(columns([1, 128, 400], &Options::default()).map(|p| p.chunks), Some(1));
        let tree = Options { tree_column_sums: true, ..Options::default() };
        assert_eq!(columns([1, 8320, 192], &tree), None);
    }

    /// Convolutions' bias gradients: mnist_cnn's and seed003_cnn's, in chunks to some thousand
    /// workgroups; a small one in one pass.
    #[test]
    fn channel_sums_are_cut_to_fill_the_gpu() {
        assert_eq!(channel_chunks(64, 64 * 576), 16);
        assert_eq!(channel_chunks(32, 64 * 676), 22);
        assert_eq!(channel_chunks(512, 128 * 121), 2);
        assert_eq!(channel_chunks(8, 100), 1);
        assert_eq!(channel_chunks(4096, 1 << 20), 1);
    }
}
