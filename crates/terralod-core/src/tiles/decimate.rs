//! A coarser level's tile from its finer level's tiles. Level `L`'s sample `i` is level
//! 0's sample `min(i · 2^L, last)` ([`crate::heightfield::level_source`]), which is level
//! `L − 1`'s sample `2i` (clamped alike): a level's tiles are the even samples of the four
//! finer tiles under each, so an import reads its source once, at level 0.

/// The even samples (rows and columns `0, 2, …, side − 1`) of a `side × side` tile, `side`
/// odd: `(side + 1) / 2` a side.
pub(super) fn even_samples<T: Copy>(samples: &[T], side: usize) -> Vec<T> {
    debug_assert!(side % 2 == 1 && samples.len() == side * side);
    samples
        .chunks_exact(side)
        .step_by(2)
        .flat_map(|row| row.iter().step_by(2).copied())
        .collect()
}

/// The tile `tx` of a coarser row from the even samples (each `half × half`, [`even_samples`])
/// of the two finer rows under it, `upper` and `lower` (absent below the grid's last row),
/// each indexed by its tiles' column. The finer tiles `2 tx` and `2 tx + 1` of a row meet at
/// the coarse tile's middle column, and the rows likewise. A finer tile past the grid's edge
/// does not exist: every position there is clamped to the grid's last sample, which the
/// tile before it holds in its last column (or row), so that column (row) is repeated, as
/// an import pads a tile reaching past the edge.
pub(super) fn coarser_tile<T: Copy>(
    upper: &[Vec<T>],
    lower: Option<&[Vec<T>]>,
    tx: usize,
    half: usize,
) -> Vec<T> {
    let side = 2 * half - 1;
    let mut out = Vec::with_capacity(side * side);
    for j in 0..side {
        let (tiles, row) = match lower {
            Some(lower) if j >= half => (lower, j + 1 - half),
            _ => (upper, j.min(half - 1)),
        };
        let left = &tiles[2 * tx][row * half..(row + 1) * half];
        out.extend_from_slice(left);
        match tiles.get(2 * tx + 1) {
            Some(right) => out.extend_from_slice(&right[row * half + 1..(row + 1) * half]),
            None => out.extend(std::iter::repeat_n(left[half - 1], half - 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coarser_tile_holds_the_finer_grids_even_samples_clamped_at_its_edge() {
        // A finer level of 19 × 13 samples in tiles of 4 cells (5 samples), padded past the
        // edge by clamping: 5 × 3 tiles. The coarser level has 10 × 7 samples, 3 × 2 tiles,
        // the last of each row and column over a missing finer one. Each coarse sample
        // (x, y) must be the fine sample (2x, 2y), clamped to the fine grid.
        let (fine_w, fine_h, cells) = (19usize, 13usize, 4usize);
        let side = cells + 1;
        let fine = |x: usize, y: usize| (x.min(fine_w - 1) * 100 + y.min(fine_h - 1)) as u32;
        let tiles_of = |n: usize| (n - 1).div_ceil(cells);
        let fine_tile = |tx: usize, ty: usize| -> Vec<u32> {
            (0..side)
                .flat_map(|j| (0..side).map(move |i| fine(tx * cells + i, ty * cells + j)))
                .collect()
        };
        let fine_row = |ty: usize| -> Vec<Vec<u32>> {
            (0..tiles_of(fine_w))
                .map(|tx| even_samples(&fine_tile(tx, ty), side))
                .collect()
        };
        let (coarse_w, coarse_h) = ((fine_w - 1).div_ceil(2) + 1, (fine_h - 1).div_ceil(2) + 1);
        for cty in 0..tiles_of(coarse_h) {
            let upper = fine_row(2 * cty);
            let lower = (2 * cty + 1 < tiles_of(fine_h)).then(|| fine_row(2 * cty + 1));
            for ctx in 0..tiles_of(coarse_w) {
                let tile = coarser_tile(&upper, lower.as_deref(), ctx, side.div_ceil(2));
                for j in 0..side {
                    for i in 0..side {
                        let (x, y) = (ctx * cells + i, cty * cells + j);
                        assert_eq!(
                            tile[j * side + i],
                            fine(2 * x, 2 * y),
                            "coarse tile ({ctx}, {cty}) sample ({i}, {j})"
                        );
                    }
                }
            }
        }
    }
}
