//! Algorithm Q over a tiled terrain (issue 9): article 000's screen-space-error quadtree of
//! 3 × 3 fans, selected from the root every frame, reading only what is resident through
//! [`TileSource`], so it runs on terrains far larger than memory. While a tile is missing
//! the coarser node stands in (the tile is requested; no frame waits).
//!
//! # Nodes and where their data comes from
//!
//! Node `(k, ix, iz)` covers level-0 cells `[ix·2^k, (ix + 1)·2^k]` (and the same in z) and
//! is drawn as the fan over its corners, edge midpoints and centre, samples `2^(k−1)`
//! apart, as algorithm Q's nodes (`k = 1`: 3 × 3 samples, the finest). The roots are the
//! tiles of the coarsest level. A node exists when its origin lies in the data; one that
//! reaches beyond the leaves' extent (`2·⌈(W − 1)/2⌉`, as algorithm Q) is always split, so
//! what is drawn is that rectangle once the tiles allow.
//!
//! A level-`L` tile (`N` cells of `2^L`) holds every node with `2^(L+1) ≤ 2^k ≤ N·2^L` inside
//! it: the fan's samples are level-`L` samples (coarse samples *are* fine samples). When a
//! tile is first used, the selection builds a [`Pyramid`] over its `(N + 1)²` samples: per
//! node, the height range of its level-`L` samples and the largest distance `e_L` between
//! them and the fan. The level-`L` surface (either diagonal in every cell) is within the
//! block index's `error_to_finest` (`t_L`, of the level-`L` blocks under the node) of every
//! level-0 sample, so at every level-0 sample of the node
//!
//! `|h0 − fan| ≤ e_L + t_L`, and both lie in `[min_L − t_L, max_L + t_L]`
//!
//! (choose in each quadrant the level-`L` diagonals parallel to the fan's: the difference
//! of the fan and the level-`L` surface is linear on every level-`L` triangle, so at most
//! `e_L`). A node uses the finest resident tile holding it: level 0, when resident, gives
//! exact bounds (`t_0 = 0`), as in-memory algorithm Q's pyramid. Each node tested asks for
//! its finest tile (the one whose root it is, or level 0), so the bounds tighten as tiles
//! arrive; at most [`BUILDS_PER_FRAME`] tile pyramids are built per frame (the coarser tile
//! stands in for the others until the next frame).
//!
//! # Selection, balance and seams
//!
//! As the streamed block algorithm ([`super::streamed`]): a worklist from the roots; a leaf
//! whose bound passes the view is kept, else split when the tiles of its visible children
//! are resident (*held back* otherwise). Splitting first force-splits the drawn neighbours
//! one size larger (refused with the split when one lacks a tile), so drawn neighbours
//! differ by at most one size. A leaf skips its edge midpoint where the drawn neighbour
//! across is larger (the larger node draws only the two ends there, which are the leaf's
//! corners and the neighbour's midpoint: no T-junction). Skipping midpoint `m` of edge
//! `ab` replaces the fan's two triangles by one; their difference is linear on each half,
//! zero at the centre, `a` and `b`, so at most `δ = |h(m) − (h(a) + h(b)) / 2|`. A leaf is
//! kept when its bound plus the `δ` of each side facing a larger drawn neighbour passes
//! (neighbours only ever get finer, so the sides that skip can only become fewer); else,
//! if its plain bound passes, the larger neighbours across the sides that fail are split
//! (cheaper than splitting it, which would split them too); else it is split. Splitting
//! only across the failing sides makes each wanted split a property of the node and the
//! view, not of the order the worklist visits nodes in: with every tile resident the
//! result is the least balanced tree holding them, so a smaller τ never gives a coarser
//! mesh where it is seen.
//!
//! # Output
//!
//! [`Selection::Patches`] with a [`PatchPool`] of 2 × 2-cell slots: one instance per drawn
//! node, origin at its corner, step `2^(k−1)`, one of 16 fan index buffers (the bits of the
//! sides that skip their midpoint). A slot is filled from the node's tile when the node
//! starts being drawn and kept while it stays drawn.

use super::stitched_patch::Side;
use super::{
    GridVertices, LodAlgorithm, LodOptions, Pass, PatchInstance, PatchPool, Selection,
    SelectionStats, StreamCounts, StreamingLod, View, round_up,
};
use crate::camera::{Aabb, Containment, Frustum};
use crate::heightfield::{GridPos, Heightfield};
use crate::pyramid::Pyramid;
use crate::rounding::round_down;
use crate::tiles::level_blocks;
use crate::tiles::source::{TileKey, TileSource};
use glam::Vec3;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::time::Instant;

/// Tile pyramids one frame builds by default (0.5–0.75 ms each for a 257² tile in a
/// release build); the coarser tile stands in for the rest until a later frame.
pub const BUILDS_PER_FRAME: u32 = 4;

/// Frames a tile's pyramid is kept after its last use, so a tile used every other frame is
/// not rebuilt each time.
const KEEP_FRAMES: u32 = 30;

/// Slots of a new pool; it doubles when a frame draws more nodes.
const INITIAL_SLOTS: u32 = 256;

/// A tree node's state this frame.
const ABSENT: u8 = 0;
const LEAF: u8 = 1;
const SPLIT: u8 = 2;
const CULLED: u8 = 3;

const NONE: u32 = u32::MAX;

/// A node: `2^k` level-0 cells a side, at `(ix, iz)` in units of its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    k: u32,
    ix: u32,
    iz: u32,
}

impl Node {
    /// A unique 64-bit key (sizes up to `2^31`, coordinates below `2^29`).
    fn key(self) -> u64 {
        debug_assert!(self.ix < 1 << 29 && self.iz < 1 << 29 && self.k < 64);
        u64::from(self.k) << 58 | u64::from(self.ix) << 29 | u64::from(self.iz)
    }

    fn origin(self) -> (u64, u64) {
        (u64::from(self.ix) << self.k, u64::from(self.iz) << self.k)
    }

    /// Child `q` (`x` offset `q & 1`, `z` offset `q >> 1`).
    fn child(self, q: u32) -> Node {
        Node {
            k: self.k - 1,
            ix: 2 * self.ix + (q & 1),
            iz: 2 * self.iz + (q >> 1),
        }
    }
}

/// A tile as the selection uses it: the pyramid of its samples, kept while the tile is in
/// use, and its heights, held only in the frames that use it (between frames the cache
/// alone holds them, so they count against its cap and go when it evicts them).
struct TileNodes {
    key: TileKey,
    heights: Option<Arc<[f32]>>,
    pyramid: Pyramid,
    used_at: u32,
}

/// What the selection knows of a tile.
#[derive(Clone, Copy, Debug)]
enum Known {
    /// Built: its index in the tile slab.
    Ready(u32),
    /// Not resident (or not built, for lack of budget) when asked in frame `frame`.
    Missing { frame: u32 },
}

/// A node of this frame's tree. The four children of a split node are adjacent, in the
/// order of [`Node::child`], so a neighbour is found from a link without a lookup. What
/// the neighbour walks read is apart, in [`Shape`].
#[derive(Clone, Copy, Debug)]
struct TreeNode {
    node: Node,
    /// Frustum planes its box crosses (its children are tested against these only).
    planes: u8,
    /// Its pool slot once drawn.
    slot: u32,
    /// Per side (in [`Side::ALL`]'s order): a node across of its size or larger, found
    /// when it was added ([`NONE`] beyond the roots); [`Self::neighbour`] goes down from
    /// there to the deepest one, as the tree has grown since.
    links: [u32; 4],
    /// Unset ([`Bounds::NONE`]) for a culled or absent node.
    bounds: Bounds,
}

/// What the neighbour walks read of a tree node: 8 bytes, so the walks over a frame's
/// tree (every leaf looks at its four sides, several times) stay in cache.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// First of the four children, or [`NONE`] while not split.
    children: u32,
    /// The node's `k`.
    k: u8,
    state: u8,
}

/// A node's bounds, from one tile.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    /// The tile (slab index) its bounds and heights come from.
    tile: u32,
    /// Bound of the vertical error of its plain fan against level 0.
    plain: f32,
    aabb: Aabb,
}

impl Bounds {
    const NONE: Bounds = Bounds {
        tile: NONE,
        plain: 0.0,
        aabb: Aabb {
            min: Vec3::ZERO,
            max: Vec3::ZERO,
        },
    };
}

/// A child as a split finds it.
#[derive(Clone, Copy, Debug)]
enum Kid {
    /// Outside the data: not part of the tree.
    Absent,
    /// Outside the frustum: in the tree, never drawn, no tile needed.
    Culled,
    Seen(Bounds),
}

/// Why a split did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    Finest,
    MissingTile,
}

/// Counters of the last selection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamedQuadtreeStats {
    /// Nodes that wanted to split but were drawn whole because a tile was missing.
    pub nodes_held_back: u64,
    /// Tile pyramids built this frame.
    pub tiles_built: u64,
    /// Resident tiles whose pyramids wait for a later frame (the frame's budget was spent).
    pub tiles_deferred: u64,
    /// Tiles whose pyramids are kept.
    pub tiles_kept: u64,
    /// Pool slots filled this frame (nodes newly drawn).
    pub slots_filled: u64,
}

/// Algorithm Q over any [`TileSource`] (see the module docs).
pub struct StreamedQuadtreeLod<S: TileSource> {
    source: S,
    view_angle_aware: bool,
    /// `N` and `log2 N`.
    tile_cells: u32,
    tile_shift: u32,
    block_cells: u32,
    cell_size: f32,
    /// Level-0 samples.
    width: u64,
    height: u64,
    /// The leaves' extent (level-0 cells): nodes reaching past it are split.
    extent: (u64, u64),
    top_level: u32,
    /// Per level: blocks across and down.
    blocks: Vec<(u32, u32)>,
    /// The roots: the tiles of the coarsest level, across and down.
    roots: (u32, u32),
    root_k: u32,
    fans: Vec<Vec<u32>>,
    known_tiles: FxHashMap<TileKey, Known>,
    /// Built tiles; `None` entries are free.
    slab: Vec<Option<TileNodes>>,
    free_slab: Vec<u32>,
    builds_per_frame: u32,
    builds_left: u32,
    tree: Vec<TreeNode>,
    /// Per tree node, what the neighbour walks read.
    shapes: Vec<Shape>,
    /// Per root (row-major), its tree index or [`NONE`].
    root_index: Vec<u32>,
    worklist: Vec<u32>,
    drawn: Vec<u32>,
    slot_of: FxHashMap<u64, u32>,
    /// Per slot: the key of the node it holds and the last frame it was drawn.
    owner: Vec<(u64, u32)>,
    pool: PatchPool,
    instances: Vec<PatchInstance>,
    frame: u32,
    stats: SelectionStats,
    counters: StreamedQuadtreeStats,
}

impl<S: TileSource> std::fmt::Debug for StreamedQuadtreeLod<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedQuadtreeLod")
            .field("tile_cells", &self.tile_cells)
            .field("levels", &self.blocks.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// The 16 fans of a 2 × 2-cell patch (local vertex `j·3 + i`): 8 triangles from the
/// centre, counter-clockwise seen from above, minus the edge midpoints of the sides whose
/// bit (in [`Side::ALL`]'s order) is set in the buffer's index.
fn fan_buffers() -> Vec<Vec<u32>> {
    let at = |i: u32, j: u32| j * 3 + i;
    // The ring from the corner, with the side each midpoint lies on.
    let ring: [(u32, Option<Side>); 8] = [
        (at(0, 0), None),
        (at(0, 1), Some(Side::West)),
        (at(0, 2), None),
        (at(1, 2), Some(Side::South)),
        (at(2, 2), None),
        (at(2, 1), Some(Side::East)),
        (at(2, 0), None),
        (at(1, 0), Some(Side::North)),
    ];
    (0..16u32)
        .map(|skip| {
            let kept: Vec<u32> = ring
                .iter()
                .filter(|(_, side)| side.is_none_or(|s| skip >> side_bit(s) & 1 == 0))
                .map(|&(v, _)| v)
                .collect();
            (0..kept.len())
                .flat_map(|t| [at(1, 1), kept[t], kept[(t + 1) % kept.len()]])
                .collect()
        })
        .collect()
}

fn side_bit(side: Side) -> u32 {
    Side::ALL.iter().position(|&s| s == side).unwrap_or(0) as u32
}

/// For a child in quadrant `q`: the quadrant of the sibling across `side`, if a sibling
/// is across it.
fn sibling_across(q: u32, side: Side) -> Option<u32> {
    let (dx, dz) = (q & 1, q >> 1);
    let across = match side {
        Side::West => dx == 1,
        Side::East => dx == 0,
        Side::North => dz == 1,
        Side::South => dz == 0,
    };
    let flip = if matches!(side, Side::West | Side::East) {
        1
    } else {
        2
    };
    across.then_some(q ^ flip)
}

impl<S: TileSource> StreamedQuadtreeLod<S> {
    /// The algorithm over `source` (its header fixes the tree).
    pub fn new(source: S, options: LodOptions) -> StreamedQuadtreeLod<S> {
        let header = source.header().clone();
        let tile_cells = header.tile_cells;
        let block_cells = source.block_cells();
        let top_level = (header.levels.len() - 1) as u32;
        let tile_shift = tile_cells.trailing_zeros();
        let even = |cells: u64| cells.div_ceil(2) * 2;
        let (width, height) = (u64::from(header.width), u64::from(header.height));
        let top = &header.levels[top_level as usize];
        StreamedQuadtreeLod {
            view_angle_aware: options.view_angle_aware,
            tile_cells,
            tile_shift,
            block_cells,
            cell_size: header.mapping.cell_size,
            width,
            height,
            extent: (even(width - 1), even(height - 1)),
            top_level,
            blocks: header
                .levels
                .iter()
                .map(|g| level_blocks(g, block_cells))
                .collect(),
            roots: (top.tiles_x, top.tiles_y),
            root_k: top_level + tile_shift,
            fans: fan_buffers(),
            known_tiles: FxHashMap::default(),
            slab: Vec::new(),
            free_slab: Vec::new(),
            builds_per_frame: BUILDS_PER_FRAME,
            builds_left: 0,
            tree: Vec::new(),
            shapes: Vec::new(),
            root_index: Vec::new(),
            worklist: Vec::new(),
            drawn: Vec::new(),
            slot_of: FxHashMap::default(),
            owner: vec![(0, 0); INITIAL_SLOTS as usize],
            pool: PatchPool::with_height_range(
                2,
                INITIAL_SLOTS,
                (header.min_height, header.max_height),
            ),
            instances: Vec::new(),
            frame: 0,
            stats: SelectionStats::default(),
            counters: StreamedQuadtreeStats::default(),
            source,
        }
    }

    /// Builds up to `per_frame` tile pyramids a frame ([`BUILDS_PER_FRAME`] by default).
    /// `u32::MAX` makes a frame independent of the earlier ones when every tile is
    /// resident (the registry's in-memory tiles).
    pub fn with_builds_per_frame(mut self, per_frame: u32) -> Self {
        self.builds_per_frame = per_frame.max(1);
        self
    }

    /// Counters of the last selection.
    pub fn counters(&self) -> &StreamedQuadtreeStats {
        &self.counters
    }

    /// The pool of the last selection.
    pub fn pool(&self) -> &PatchPool {
        &self.pool
    }

    /// `(k, ix, iz)` and the tile level of every node drawn by the last selection.
    pub fn drawn_nodes(&self) -> impl Iterator<Item = ((u32, u32, u32), u32)> + '_ {
        self.drawn.iter().map(|&i| {
            let t = &self.tree[i as usize];
            (
                (t.node.k, t.node.ix, t.node.iz),
                self.tile(t.bounds.tile).key.0,
            )
        })
    }

    /// Whether the node's origin lies in the data (else it is not part of the tree).
    fn exists(&self, n: Node) -> bool {
        let (x, z) = n.origin();
        x < self.width - 1 && z < self.height - 1
    }

    /// Whether the node lies inside the leaves' extent (else it must be split).
    fn fits(&self, n: Node) -> bool {
        let (x, z) = n.origin();
        let size = 1u64 << n.k;
        x + size <= self.extent.0 && z + size <= self.extent.1
    }

    /// The level-`level` tile holding node `n`.
    fn tile_of(&self, n: Node, level: u32) -> TileKey {
        let (x, z) = n.origin();
        let shift = level + self.tile_shift;
        (level, (x >> shift) as u32, (z >> shift) as u32)
    }

    fn tile(&self, index: u32) -> &TileNodes {
        self.slab[index as usize]
            .as_ref()
            .expect("tree nodes refer to built tiles")
    }

    /// The slab index of the tile, built from the source when it is resident and the
    /// frame's budget allows; `None` when it cannot be used this frame.
    fn ready(&mut self, key: TileKey, build_anyway: bool) -> Option<u32> {
        let frame = self.frame;
        match self.known_tiles.get(&key).copied() {
            Some(Known::Missing { frame: asked }) if asked == frame => None,
            Some(Known::Ready(index)) => {
                let tile = self.slab[index as usize].as_mut()?;
                if tile.used_at == frame {
                    return Some(index);
                }
                // First use this frame: mark it used at the source (which may have evicted
                // it, and then the pyramid goes too).
                if let Some(heights) = self.source.tile_heights(key) {
                    tile.used_at = frame;
                    tile.heights = Some(heights);
                    Some(index)
                } else {
                    self.slab[index as usize] = None;
                    self.free_slab.push(index);
                    self.known_tiles.insert(key, Known::Missing { frame });
                    None
                }
            }
            _ => {
                let heights = self.source.tile_heights(key);
                let (known, index) = match heights {
                    Some(heights) if self.builds_left > 0 || build_anyway => {
                        self.builds_left = self.builds_left.saturating_sub(1);
                        self.counters.tiles_built += 1;
                        let side = self.tile_cells + 1;
                        let field = Heightfield::from_f32(side, side, heights.to_vec())
                            .expect("a resident tile holds finite heights");
                        let tile = TileNodes {
                            key,
                            pyramid: Pyramid::build(&field),
                            heights: Some(heights),
                            used_at: frame,
                        };
                        let index = match self.free_slab.pop() {
                            Some(i) => {
                                self.slab[i as usize] = Some(tile);
                                i
                            }
                            None => {
                                self.slab.push(Some(tile));
                                (self.slab.len() - 1) as u32
                            }
                        };
                        (Known::Ready(index), Some(index))
                    }
                    Some(_) => {
                        self.counters.tiles_deferred += 1;
                        (Known::Missing { frame }, None)
                    }
                    None => (Known::Missing { frame }, None),
                };
                self.known_tiles.insert(key, known);
                index
            }
        }
    }

    /// The node's bounds from the finest usable tile holding it (after asking the source
    /// for the finest one), or `None` when no tile holding it can be used this frame.
    /// `hint` is a tile already used this frame that may hold it (its parent's).
    fn bounds(&mut self, n: Node, hint: u32) -> Option<Bounds> {
        let finest = n.k.saturating_sub(self.tile_shift);
        let coarsest = (n.k - 1).min(self.top_level);
        let is_root = n.k == self.root_k;
        let hinted = (hint != NONE).then(|| self.tile(hint).key);
        for level in finest..=coarsest {
            let key = self.tile_of(n, level);
            if hinted == Some(key) {
                return Some(self.bounds_from(n, hint));
            }
            // Only the finest tile is asked for; a coarser one stands in if its pyramid is
            // built (and the cache still has it: using it marks it, or asks for it again).
            let built = matches!(self.known_tiles.get(&key), Some(Known::Ready(_)));
            if (level == finest || built)
                && let Some(index) = self.ready(key, is_root)
            {
                return Some(self.bounds_from(n, index));
            }
        }
        None
    }

    fn bounds_from(&self, n: Node, index: u32) -> Bounds {
        let tile = self.tile(index);
        let (level, tx, ty) = tile.key;
        let rel = n.k - level;
        let (x, z) = n.origin();
        let n_cells = u64::from(self.tile_cells);
        let (lx, lz) = (x >> level, z >> level);
        let local = (
            ((lx - u64::from(tx) * n_cells) >> rel) as u32,
            ((lz - u64::from(ty) * n_cells) >> rel) as u32,
        );
        let node = tile
            .pyramid
            .node((self.tile_shift - rel) as usize, local.0, local.1);
        let to_finest = self.error_to_finest(level, (lx, lz), 1u64 << rel);
        let size = (1u64 << n.k) as f32 * self.cell_size;
        let (x0, z0) = (x as f32 * self.cell_size, z as f32 * self.cell_size);
        let aabb = Aabb {
            min: Vec3::new(
                x0,
                round_down(f64::from(node.min_y) - f64::from(to_finest)),
                z0,
            ),
            max: Vec3::new(
                x0 + size,
                round_up(f64::from(node.max_y) + f64::from(to_finest)),
                z0 + size,
            ),
        };
        Bounds {
            tile: index,
            plain: round_up(f64::from(node.error) + f64::from(to_finest)),
            aabb,
        }
    }

    /// The largest `error_to_finest` of the level-`level` blocks under the square of
    /// `cells` level cells at `origin` (0 at level 0).
    fn error_to_finest(&self, level: u32, origin: (u64, u64), cells: u64) -> f32 {
        if level == 0 {
            return 0.0;
        }
        let b = u64::from(self.block_cells);
        let (real_x, real_y) = self.blocks[level as usize];
        let span = |start: u64, real: u32| {
            let last = u64::from(real - 1);
            (start / b).min(last) as u32..=((start + cells - 1) / b).min(last) as u32
        };
        let mut worst = 0.0f32;
        for by in span(origin.1, real_y) {
            for bx in span(origin.0, real_x) {
                worst = worst.max(self.source.block_bounds(level, bx, by).error_to_finest);
            }
        }
        worst
    }

    /// World height of level-0 grid position `(x, z)` from tile `index` (a level-`L`
    /// sample; positions beyond the tile read its nearest border, for normals only).
    fn height_at(tile: &TileNodes, tile_cells: u32, x: i64, z: i64) -> f32 {
        let n = i64::from(tile_cells);
        let (level, tx, ty) = tile.key;
        let lx = ((x.max(0) >> level) - i64::from(tx) * n).clamp(0, n);
        let lz = ((z.max(0) >> level) - i64::from(ty) * n).clamp(0, n);
        let heights = tile
            .heights
            .as_deref()
            .expect("a tile in use holds its heights");
        heights[(lz * (n + 1) + lx) as usize]
    }

    /// `δ` of side `side` of tree node `i`: how far its midpoint is from its ends' line.
    fn midpoint_offset(&self, i: u32, side: Side) -> f64 {
        let t = &self.tree[i as usize];
        let tile = self.tile(t.bounds.tile);
        let (x, z) = t.node.origin();
        let (x, z) = (x as i64, z as i64);
        let (s, h) = (1i64 << t.node.k, 1i64 << (t.node.k - 1));
        let (a, m, b) = match side {
            Side::North => ((x, z), (x + h, z), (x + s, z)),
            Side::South => ((x, z + s), (x + h, z + s), (x + s, z + s)),
            Side::West => ((x, z), (x, z + h), (x, z + s)),
            Side::East => ((x + s, z), (x + s, z + h), (x + s, z + s)),
        };
        let at = |p: (i64, i64)| f64::from(Self::height_at(tile, self.tile_cells, p.0, p.1));
        (at(m) - 0.5 * (at(a) + at(b))).abs()
    }

    /// The tree node covering the area across `side` of tree node `i` at its size or
    /// larger (the deepest one: from its link, down the children that touch it), if it is
    /// part of the tree.
    fn neighbour(&self, i: u32, side: Side) -> Option<u32> {
        let m = self.deepest_across(i, side);
        (m != NONE && self.shapes[m as usize].state != ABSENT).then_some(m)
    }

    /// As [`Self::neighbour`], absent nodes included ([`NONE`] beyond the roots).
    fn deepest_across(&self, i: u32, side: Side) -> u32 {
        let t = &self.tree[i as usize];
        let mut m = t.links[side_bit(side) as usize];
        if m == NONE {
            return NONE;
        }
        // A point just across the side: the child holding it touches this node.
        let (x, z) = t.node.origin();
        let size = 1u64 << t.node.k;
        let (px, pz) = match side {
            Side::West => (x.wrapping_sub(1), z),
            Side::East => (x + size, z),
            Side::North => (x, z.wrapping_sub(1)),
            Side::South => (x, z + size),
        };
        let k = t.node.k as u8;
        loop {
            let across = self.shapes[m as usize];
            if across.k == k || across.children == NONE {
                return m;
            }
            let half = u32::from(across.k) - 1;
            m = across.children + ((px >> half) & 1) as u32 + 2 * ((pz >> half) & 1) as u32;
        }
    }

    /// Sides of tree node `i` facing a larger drawn node, as bits in [`Side::ALL`]'s order.
    fn coarser_sides(&self, i: u32) -> u32 {
        let k = self.shapes[i as usize].k;
        let mut bits = 0;
        for side in Side::ALL {
            if let Some(m) = self.neighbour(i, side) {
                let m = self.shapes[m as usize];
                if m.state == LEAF && m.k > k {
                    bits |= 1 << side_bit(side);
                }
            }
        }
        bits
    }

    /// Appends a node to this frame's tree as a leaf (or culled, or absent).
    fn push(&mut self, n: Node, kid: Kid, planes: u8, links: [u32; 4], pass: &Pass<'_>) {
        let index = self.tree.len() as u32;
        let (state, crossing, bounds) = match kid {
            Kid::Seen(b) => match pass.crossing(planes, || b.aabb) {
                None => (CULLED, 0, b),
                Some(crossing) => (LEAF, crossing, b),
            },
            Kid::Culled => (CULLED, 0, Bounds::NONE),
            Kid::Absent => (ABSENT, 0, Bounds::NONE),
        };
        self.shapes.push(Shape {
            children: NONE,
            k: n.k as u8,
            state,
        });
        self.tree.push(TreeNode {
            node: n,
            planes: crossing,
            slot: NONE,
            links,
            bounds,
        });
        if state == LEAF {
            self.worklist.push(index);
        }
    }

    /// Splits leaf `i`, first force-splitting its drawn neighbours one size larger.
    fn try_split(&mut self, i: u32, pass: &Pass<'_>) -> Result<(), Refusal> {
        if self.shapes[i as usize].state == SPLIT {
            return Ok(());
        }
        let t = self.tree[i as usize];
        if t.node.k == 1 {
            return Err(Refusal::Finest);
        }
        // Per child: absent, culled (tested on its square with the parent's height range,
        // which holds its surface: no tile is asked for what is not seen) or its bounds.
        // Every visible child's tile is asked for before a missing one refuses the split.
        let mut kids = [Kid::Absent; 4];
        let mut missing = false;
        for (q, slot) in kids.iter_mut().enumerate() {
            let kid = t.node.child(q as u32);
            if !self.exists(kid) {
                continue;
            }
            let (x, z) = kid.origin();
            let size = (1u64 << kid.k) as f32 * self.cell_size;
            let (x0, z0) = (x as f32 * self.cell_size, z as f32 * self.cell_size);
            let square = Aabb {
                min: Vec3::new(x0, t.bounds.aabb.min.y, z0),
                max: Vec3::new(x0 + size, t.bounds.aabb.max.y, z0 + size),
            };
            *slot = if pass.crossing(t.planes, || square).is_none() {
                Kid::Culled
            } else if let Some(bounds) = self.bounds(kid, t.bounds.tile) {
                Kid::Seen(bounds)
            } else {
                missing = true;
                Kid::Absent
            };
        }
        if missing {
            return Err(Refusal::MissingTile);
        }
        for side in Side::ALL {
            if let Some(m) = self.neighbour(i, side)
                && self.shapes[m as usize].state == LEAF
                && u32::from(self.shapes[m as usize].k) > t.node.k
            {
                self.try_split(m, pass).map_err(|_| Refusal::MissingTile)?;
            }
        }
        let first = self.tree.len() as u32;
        let outer = Side::ALL.map(|side| self.deepest_across(i, side));
        self.shapes[i as usize] = Shape {
            state: SPLIT,
            children: first,
            ..self.shapes[i as usize]
        };
        for (q, kid) in kids.into_iter().enumerate() {
            let links = Side::ALL.map(|side| match sibling_across(q as u32, side) {
                Some(sibling) => first + sibling,
                None => outer[side_bit(side) as usize],
            });
            self.push(t.node.child(q as u32), kid, t.planes, links, pass);
        }
        Ok(())
    }

    /// Force-splits the drawn neighbours of `i` one size larger across the sides in
    /// `sides` (bits in [`Side::ALL`]'s order); whether none is left there.
    fn split_coarser_neighbours(&mut self, i: u32, sides: u32, pass: &Pass<'_>) -> bool {
        let k = self.shapes[i as usize].k;
        let mut all = true;
        for side in Side::ALL {
            if sides >> side_bit(side) & 1 != 0
                && let Some(m) = self.neighbour(i, side)
                && self.shapes[m as usize].state == LEAF
                && self.shapes[m as usize].k > k
            {
                all &= self.try_split(m, pass).is_ok();
            }
        }
        all
    }

    fn select_tree(&mut self, pass: &Pass<'_>) {
        let (across, down) = self.roots;
        self.root_index.clear();
        self.root_index.resize((across * down) as usize, NONE);
        for iz in 0..down {
            for ix in 0..across {
                let root = Node {
                    k: self.root_k,
                    ix,
                    iz,
                };
                if let Some(bounds) = self.bounds(root, NONE) {
                    self.root_index[(iz * across + ix) as usize] = self.tree.len() as u32;
                    let links = [NONE; 4];
                    self.push(root, Kid::Seen(bounds), Frustum::ALL_PLANES, links, pass);
                }
            }
        }
        // The roots' links, once all are in the tree.
        let at = |ix: Option<u32>, iz: Option<u32>| match (ix, iz) {
            (Some(ix), Some(iz)) if ix < across && iz < down => (iz * across + ix) as usize,
            _ => usize::MAX,
        };
        for iz in 0..down {
            for ix in 0..across {
                let r = self.root_index[(iz * across + ix) as usize];
                if r == NONE {
                    continue;
                }
                let index = &self.root_index;
                self.tree[r as usize].links = Side::ALL.map(|side| {
                    let p = match side {
                        Side::North => at(Some(ix), iz.checked_sub(1)),
                        Side::East => at(Some(ix + 1), Some(iz)),
                        Side::South => at(Some(ix), Some(iz + 1)),
                        Side::West => at(ix.checked_sub(1), Some(iz)),
                    };
                    index.get(p).copied().unwrap_or(NONE)
                });
            }
        }
        while let Some(i) = self.worklist.pop() {
            if self.shapes[i as usize].state != LEAF {
                continue;
            }
            let t = self.tree[i as usize];
            self.stats.nodes_visited += 1;
            let Bounds { plain, aabb, .. } = t.bounds;
            let accepts = |error: f32| pass.view.accepts(error, &aabb, pass.view_angle_aware);
            // A node whose plain fan fails splits whatever its neighbours are.
            if self.fits(t.node) && accepts(plain) {
                // The sides whose skipped midpoint the view refuses: their larger
                // neighbours are split (only those, so what is split does not depend on
                // the order nodes are visited, and a smaller τ never gives fewer splits).
                let seams = self.coarser_sides(i);
                let mut refused = 0;
                for side in Side::ALL {
                    let bit = 1 << side_bit(side);
                    if seams & bit != 0 {
                        let full = f64::from(plain) + self.midpoint_offset(i, side);
                        if !accepts(round_up(full)) {
                            refused |= bit;
                        }
                    }
                }
                if refused == 0 || self.split_coarser_neighbours(i, refused, pass) {
                    continue;
                }
            }
            match self.try_split(i, pass) {
                Ok(()) => {}
                // A finest node gets here only when its larger neighbours could not be
                // split (a tile missing) and its skipped midpoints fail the view.
                Err(Refusal::MissingTile | Refusal::Finest) => self.counters.nodes_held_back += 1,
            }
        }
    }

    /// Assigns pool slots: keeps those of nodes still drawn, frees the others, fills new
    /// ones from the node's tile.
    fn assign_slots(&mut self) {
        let frame = self.frame;
        for d in 0..self.drawn.len() {
            let i = self.drawn[d] as usize;
            if let Some(&slot) = self.slot_of.get(&self.tree[i].node.key()) {
                self.tree[i].slot = slot;
                self.owner[slot as usize].1 = frame;
            }
        }
        for slot in 0..self.owner.len() {
            let (key, drawn_at) = self.owner[slot];
            if drawn_at != 0 && drawn_at != frame {
                self.slot_of.remove(&key);
                self.owner[slot] = (0, 0);
                self.pool.give_back(slot as u32);
            }
        }
        let needed = self
            .drawn
            .iter()
            .filter(|&&i| self.tree[i as usize].slot == NONE)
            .count() as u32;
        if needed > self.pool.free_slots() {
            let capacity = (self.pool.capacity() * 2).max(self.pool.in_use() + needed);
            self.pool.grow(capacity);
            self.owner.resize(capacity as usize, (0, 0));
        }
        for d in 0..self.drawn.len() {
            let i = self.drawn[d] as usize;
            if self.tree[i].slot != NONE {
                continue;
            }
            let Some(slot) = self.pool.take() else {
                continue;
            };
            let t = self.tree[i];
            let tile = self.tile(t.bounds.tile);
            let (x, z) = t.node.origin();
            let step = 1u32 << (t.node.k - 1);
            let (xi, zi, s) = (x as i64, z as i64, i64::from(step));
            // The heights first (the pool is filled from them): the patch and a ring.
            let mut ring = [0.0f32; 25];
            for j in -1..=3i64 {
                for i in -1..=3i64 {
                    ring[((j + 1) * 5 + i + 1) as usize] =
                        Self::height_at(tile, self.tile_cells, xi + s * i, zi + s * j);
                }
            }
            let origin = GridPos::new(x as u32, z as u32);
            self.pool
                .fill_with(slot, origin, step, self.cell_size, |i, j| {
                    ring[((j.clamp(-1, 3) + 1) * 5 + i.clamp(-1, 3) + 1) as usize]
                });
            self.tree[i].slot = slot;
            self.slot_of.insert(t.node.key(), slot);
            self.owner[slot as usize] = (t.node.key(), frame);
            self.counters.slots_filled += 1;
        }
    }

    fn emit(&mut self) {
        let mut triangles = 0u64;
        for d in 0..self.drawn.len() {
            let i = self.drawn[d];
            let t = self.tree[i as usize];
            if t.slot == NONE {
                continue;
            }
            let skip = self.coarser_sides(i);
            triangles += (self.fans[skip as usize].len() / 3) as u64;
            let (x, z) = t.node.origin();
            let frustum = if t.planes == 0 {
                Containment::Inside
            } else {
                Containment::Intersecting
            };
            self.instances.push(PatchInstance {
                origin: GridPos::new(x as u32, z as u32),
                step: 1 << (t.node.k - 1),
                index_buffer: skip,
                level: t.node.k - 1,
                frustum,
                slot: t.slot,
            });
        }
        self.stats.triangles = triangles;
    }

    /// Drops the pyramids of tiles unused for [`KEEP_FRAMES`] frames, and the misses.
    fn forget_tiles(&mut self) {
        let frame = self.frame;
        let (slab, free) = (&mut self.slab, &mut self.free_slab);
        self.known_tiles.retain(|_, known| match *known {
            Known::Ready(index) => {
                let tile = &mut slab[index as usize];
                let keep = tile
                    .as_ref()
                    .is_some_and(|t| frame.wrapping_sub(t.used_at) < KEEP_FRAMES);
                if !keep {
                    *tile = None;
                    free.push(index);
                } else if let Some(t) = tile.as_mut()
                    && t.used_at != frame
                {
                    t.heights = None;
                }
                keep
            }
            Known::Missing { .. } => false,
        });
        self.counters.tiles_kept = self.slab.iter().filter(|t| t.is_some()).count() as u64;
    }
}

impl<S: TileSource + Send> LodAlgorithm for StreamedQuadtreeLod<S> {
    fn name(&self) -> &'static str {
        "streamed-quadtree"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        self.source.begin_frame();
        // Frames only need to differ from the last KEEP_FRAMES ones (wrapping differences)
        // and from 0, a free slot's mark.
        self.frame = self.frame.wrapping_add(1).max(1);
        self.builds_left = self.builds_per_frame;
        self.stats = SelectionStats::default();
        self.counters = StreamedQuadtreeStats::default();
        self.tree.clear();
        self.shapes.clear();
        self.worklist.clear();
        self.drawn.clear();
        self.instances.clear();
        let pass = Pass::culling(view, self.view_angle_aware);
        self.select_tree(&pass);
        self.drawn
            .extend((0..self.tree.len() as u32).filter(|&i| self.shapes[i as usize].state == LEAF));
        self.assign_slots();
        self.emit();
        self.forget_tiles();
        self.stats.nodes_drawn = self.drawn.len() as u64;
        self.stats.select_time = started.elapsed();
        let side = |cells: u64| (cells.min(u64::from(u32::MAX - 1)) as u32) + 1;
        Selection::Patches {
            vertices: GridVertices {
                stride: side(self.extent.0),
                rows: side(self.extent.1),
                shift: 0,
            },
            patch_side: 2,
            index_buffers: &self.fans,
            instances: &self.instances,
            morph: None,
            pool: Some(&self.pool),
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        let tiles: usize = self
            .slab
            .iter()
            .flatten()
            .map(|t| t.pyramid.memory_bytes())
            .sum();
        tiles
            + self.slab.capacity() * size_of::<Option<TileNodes>>()
            + self.known_tiles.capacity() * (size_of::<TileKey>() + size_of::<Known>())
            + self.tree.capacity() * size_of::<TreeNode>()
            + self.shapes.capacity() * size_of::<Shape>()
            + self.slot_of.capacity() * 12
            + self.owner.len() * size_of::<(u64, u32)>()
            + self.pool.memory_bytes()
            + (self.worklist.capacity() + self.drawn.capacity() + self.root_index.capacity()) * 4
            + self.instances.capacity() * size_of::<PatchInstance>()
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        out.extend(
            self.drawn
                .iter()
                .map(|&i| self.tree[i as usize].bounds.aabb),
        );
    }
}

impl<S: TileSource + Send> StreamingLod for StreamedQuadtreeLod<S> {
    type Source = S;

    fn source(&self) -> &S {
        &self.source
    }

    fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    fn stream_counts(&self) -> StreamCounts {
        StreamCounts {
            unit: "nodes",
            drawn: self.stats.nodes_drawn,
            held_back: self.counters.nodes_held_back,
            deferred: self.counters.tiles_deferred,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fans_are_counter_clockwise_and_skip_their_midpoints() {
        let fans = fan_buffers();
        assert_eq!(fans.len(), 16);
        for (skip, fan) in fans.iter().enumerate() {
            assert_eq!(fan.len() / 3, 8 - skip.count_ones() as usize);
            for t in fan.chunks_exact(3) {
                let p = [t[0], t[1], t[2]].map(|v| ((v % 3) as i32, (v / 3) as i32));
                // Counter-clockwise seen from above (y up, x east, z south): the cross
                // product's y is negative in (x, z) coordinates.
                let cross =
                    (p[1].0 - p[0].0) * (p[2].1 - p[0].1) - (p[1].1 - p[0].1) * (p[2].0 - p[0].0);
                assert!(cross < 0, "fan {skip}: {t:?}");
            }
            for (side, mid) in Side::ALL.into_iter().zip([1u32, 5, 7, 3]) {
                let skipped = skip >> side_bit(side) & 1 != 0;
                assert_eq!(fan.contains(&mid), !skipped, "fan {skip}, {side:?}");
            }
        }
    }
}
