//! Algorithm P (article 003, Land-o-Rama): a quadtree of equal-size patches drawn from a
//! pool allocated at start, split and merged by the camera's distance only, balanced so
//! neighbours differ by at most one level, frustum-tested only when drawing.
//!
//! # Pool (P1)
//!
//! Every patch has `patch_side` cells a side (a power of two, default 32) whatever its
//! level: a patch of quadtree level `L` covers a pyramid node of `s` cells at step
//! `s / patch_side`. [`PatchPool`] allocates `capacity` slots at [`PatchesLod::new`], each
//! holding the article's vertex, normal and colour data for `(patch_side + 1)²` vertices,
//! filled when a slot is assigned to a patch and stamped with a new fill generation. Every
//! emitted [`PatchInstance`] names its slot and the selection lends the pool, so a renderer
//! keeps the slots in one GPU buffer and uploads a slot only when its generation changed
//! (the article's per-slot GPU buffers; `terralod-render` does this).
//!
//! # Split and merge (P2, P3)
//!
//! A leaf wants to split when the eye is closer to its box than `split_factor ×` its world
//! size (default 2, as the article found), plus `roughness ×` its drawn-error bound (0 by
//! default: distance only). Splitting returns the leaf's slot and fills four; merging
//! returns four and fills one. The wish only grows towards the root (a child's box lies in
//! its parent's, its size and error are smaller), so the tree every frame converges to is
//! unique: the smallest balanced tree that splits every node that wants it. Each
//! [`PatchesLod::select`] merges (finest first, until none is possible) and then splits
//! (until none is possible), so the tree depends on the current camera only, and a camera
//! that does not move causes no split or merge, whichever way it looks (P5).
//!
//! A near-plane rule makes the drawn points in view projectable (the oracle counts a
//! sample clipped when its drawn point is nearer than `near` while its true point is in
//! view): a drawn point is at most the patch's drawn-error bound `e` (see Error) from the
//! true point of the same sample, which lies in the patch's box (on a seam against a
//! coarser neighbour: the neighbour's bound and box). A point in view at depth `z` is at
//! most `z · c` from the eye, `c = sqrt(1 + tan²(fov_y/2) (1 + aspect²))`, so a leaf whose
//! box is farther than `(near + e) · c` from the eye can only draw its points in view at
//! depth ≥ near. Nearer leaves split. The rule reads the eye, fov, aspect and near only:
//! turning around still changes nothing.
//!
//! # Balance and seams (P4)
//!
//! Splitting a leaf next to a leaf one level coarser first splits that coarser leaf (and
//! so on up); all of them or none, after counting the pool's free slots (each split takes
//! three more). A merge is done only when no neighbour is then two levels finer. Each drawn
//! patch is five instances of the shared [`StitchedPatch`] buffers of its level 0: the
//! interior and one seam per side, the coarse variant against a coarser neighbour: every
//! shared edge has the same vertices on both sides.
//!
//! # Exhaustion (P7)
//!
//! A split that the free slots cannot pay for (with its forced splits) is refused: the
//! patch stays coarser, the tree stays balanced, [`PatchStats::refused_splits`] counts it
//! and [`PatchStats::exhausted`] stays set (the CLI says so once). Nothing allocates after
//! [`PatchesLod::new`]. The capacity is raised at start to what the coarsest balanced tree
//! needs, so the pool can always hold a complete tree.
//!
//! # Extent
//!
//! The drawn area is the data rounded up to whole finest patches
//! (`patch_side · ceil((width − 1) / patch_side)` columns, the same for rows): a node
//! reaching beyond it is always split, so at most `patch_side − 1` repeated columns and
//! rows are drawn beyond the data.
//!
//! # Error
//!
//! The selection is distance-driven: τ does not drive it ([`LodAlgorithm::error_bounded`]
//! is `false`). For [`View::world_error`]`(M)` a leaf splits while its drawn-error bound
//! exceeds `M`: every triangle of a patch at step `t` (interior or seam) lies inside one
//! pyramid node of `2t` cells, whose height range bounds how far the drawn surface is from
//! any sample under it. So without exhaustion the world-error selection is within `M`
//! everywhere (`lod_patches.rs` checks it with the oracle), but the trait cannot say so
//! per view.

mod pool;
mod tree;

pub use pool::{MAX_POOL_BYTES, PatchPool, PoolError};

use super::stitched_patch::{SeamNeighbour, Side, StitchedPatch};
use super::{GridVertices, LodAlgorithm, PatchInstance, Selection, SelectionStats, View};
use crate::camera::{Aabb, Containment};
use crate::heightfield::{GridPos, Heightfield};
use crate::pyramid::Pyramid;
use glam::Vec3;
use std::time::{Duration, Instant};
use tree::{NodeState, Tree, children};

/// Default pool capacity: the default `bench` flight over the 4097 × 2049 Grand Canyon set
/// (60 m cells) peaks at 293 patches of 32 cells at the default factor (docs/BENCHMARKS.md),
/// so 1024 leaves 3.5 × headroom for lower flights and rougher or larger terrains; its
/// slots are 22 MB of CPU data (20 bytes per vertex, 1089 vertices per slot).
pub const DEFAULT_POOL_CAPACITY: u32 = 1024;

/// Options of algorithm P, with the article's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PatchOptions {
    /// Slots allocated at start (raised to what the coarsest balanced tree needs).
    pub pool_capacity: u32,
    /// Cells per patch side: rounded up to a power of two, at least 2, at most the padded
    /// grid's side.
    pub patch_size: u32,
    /// Split when the eye is closer than this many patch world sizes (the article: 2).
    pub split_factor: f32,
    /// World distance added to the split distance per world unit of the patch's
    /// drawn-error bound (0: distance only, as the article).
    pub roughness: f32,
}

impl Default for PatchOptions {
    fn default() -> Self {
        PatchOptions {
            pool_capacity: DEFAULT_POOL_CAPACITY,
            patch_size: 32,
            split_factor: 2.0,
            roughness: 0.0,
        }
    }
}

impl PatchOptions {
    pub fn with_pool_capacity(mut self, capacity: u32) -> Self {
        self.pool_capacity = capacity;
        self
    }

    pub fn with_patch_size(mut self, cells: u32) -> Self {
        self.patch_size = cells;
        self
    }

    pub fn with_split_factor(mut self, factor: f32) -> Self {
        self.split_factor = factor;
        self
    }

    pub fn with_roughness(mut self, weight: f32) -> Self {
        self.roughness = weight;
        self
    }
}

/// Pool and tree statistics of one frame of algorithm P.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct PatchStats {
    pub capacity: u32,
    pub in_use: u32,
    /// Most slots in use at the end of any frame so far.
    pub peak_in_use: u32,
    /// Splits this frame, forced ones included.
    pub splits: u32,
    /// Of those, splits done only to keep neighbours within one level.
    pub forced_splits: u32,
    pub merges: u32,
    /// Patches filled this frame.
    pub fills: u32,
    /// Mean fill time per patch this frame (zero without fills).
    #[serde(serialize_with = "serialize_us")]
    pub fill_time_per_patch: Duration,
    /// Wanted splits refused this frame because the pool was exhausted.
    pub refused_splits: u32,
    /// Whether any split was ever refused.
    pub exhausted: bool,
}

fn serialize_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

/// What decides a split this frame.
#[derive(Clone, Copy, Debug)]
enum SplitRule {
    Distance {
        eye: Vec3,
        factor: f32,
        roughness: f32,
        near: f32,
        /// `c` of the near-plane rule (module docs).
        reach: f32,
    },
    WorldError(f32),
}

/// A drawn leaf, for [`LodAlgorithm::drawn_boxes`].
#[derive(Clone, Copy, Debug)]
struct DrawnLeaf {
    level: u8,
    ix: u32,
    iz: u32,
}

/// Algorithm P. Borrows the heightfield and pyramid; owns the tree, pool and buffers.
#[derive(Debug)]
pub struct PatchesLod<'a> {
    field: &'a Heightfield,
    pyramid: &'a Pyramid,
    options: PatchOptions,
    patch_side: u32,
    tree: Tree,
    pool: PatchPool,
    /// Per level, per node: bound of the vertical error of the node drawn as a patch.
    drawn_error: Vec<Vec<f32>>,
    stitched: StitchedPatch,
    vertices: GridVertices,
    instances: Vec<PatchInstance>,
    drawn: Vec<DrawnLeaf>,
    /// Splits to do together (a wanted one and the ones balance forces).
    work: Vec<(usize, u32, u32)>,
    frame: PatchStats,
    stats: SelectionStats,
}

impl<'a> PatchesLod<'a> {
    /// Builds the tree's coarsest balanced state and the pool; `pyramid` must be the
    /// pyramid of `field`.
    ///
    /// # Panics
    ///
    /// When the pool is refused ([`PatchesLod::try_new`] reports it instead).
    pub fn new(field: &'a Heightfield, pyramid: &'a Pyramid, options: PatchOptions) -> Self {
        Self::try_new(field, pyramid, options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`PatchesLod::new`], with a pool (and the per-frame lists sized from its capacity)
    /// too large for [`MAX_POOL_BYTES`] or for memory refused with [`PoolError::TooLarge`]
    /// instead of aborting: the capacity and patch size are user input.
    pub fn try_new(
        field: &'a Heightfield,
        pyramid: &'a Pyramid,
        options: PatchOptions,
    ) -> Result<Self, PoolError> {
        let padded_cells = pyramid.padded_side() - 1;
        let patch_side = options
            .patch_size
            .max(2)
            .checked_next_power_of_two()
            .unwrap_or(u32::MAX)
            .min(padded_cells)
            .min(1 << super::stitched_patch::MAX_LOG2_SIDE);
        let stitched = StitchedPatch::clamped(patch_side.trailing_zeros());
        let mut tree = Tree::new(pyramid, patch_side);
        init_tree(&mut tree, 0, 0, 0);
        balance_initial(&mut tree);
        let needed = tree.leaves() as u32;
        let capacity = options.pool_capacity.max(needed).max(1);
        let mut pool = PatchPool::try_with_height_range(patch_side, capacity, field.world_range())?;
        let (mut instances, mut drawn) = (Vec::new(), Vec::new());
        instances
            .try_reserve_exact(5 * capacity as usize)
            .and_then(|()| drawn.try_reserve_exact(capacity as usize))
            .map_err(|_| PoolError::TooLarge {
                slots: capacity,
                side: patch_side,
                bytes: pool.memory_bytes() as u64,
            })?;
        let drawn_error = drawn_errors(pyramid, &tree, patch_side);
        let levels = tree.levels.len();
        let mut lod = PatchesLod {
            field,
            pyramid,
            options,
            patch_side,
            vertices: GridVertices {
                stride: tree.extent.0 + 1,
                rows: tree.extent.1 + 1,
                shift: 0,
            },
            tree,
            pool: PatchPool::new(patch_side, 0, field),
            drawn_error,
            stitched,
            instances,
            drawn,
            work: Vec::with_capacity(16 * levels + 16),
            frame: PatchStats::default(),
            stats: SelectionStats::default(),
        };
        for level in 0..levels {
            let (nx, nz) = (
                lod.tree.levels[level].nodes_x,
                lod.tree.levels[level].nodes_z,
            );
            for iz in 0..nz {
                for ix in 0..nx {
                    if lod.tree.state(level, ix, iz) == Some(NodeState::Leaf)
                        && let Some(slot) = pool.take()
                    {
                        pool.fill(slot, field, lod.origin(level, ix, iz), lod.step(level));
                        lod.tree.set_slot(level, ix, iz, slot);
                    }
                }
            }
        }
        pool.take_fill_counters();
        lod.pool = pool;
        lod.frame.capacity = capacity;
        lod.frame.in_use = lod.pool.in_use();
        lod.frame.peak_in_use = lod.frame.in_use;
        Ok(lod)
    }

    /// The vertex buffer the selection indexes.
    pub fn grid_vertices(&self) -> GridVertices {
        self.vertices
    }

    /// Cells per patch side, as used (see [`PatchOptions::patch_size`]).
    pub fn patch_side(&self) -> u32 {
        self.patch_side
    }

    /// The pool, for the per-slot vertex, normal and colour data.
    pub fn pool(&self) -> &PatchPool {
        &self.pool
    }

    /// Pool and tree statistics of the last frame.
    pub fn patch_stats(&self) -> &PatchStats {
        &self.frame
    }

    fn origin(&self, level: usize, ix: u32, iz: u32) -> GridPos {
        let size = self.tree.levels[level].size;
        GridPos::new(ix * size, iz * size)
    }

    fn step(&self, level: usize) -> u32 {
        self.tree.levels[level].size / self.patch_side
    }

    fn rule(&self, view: &View) -> SplitRule {
        match (view.camera(), view.tolerance()) {
            (Some(camera), _) => {
                let tan = (0.5 * camera.fov_y).tan();
                let aspect = camera.aspect();
                SplitRule::Distance {
                    eye: camera.eye,
                    factor: self.options.split_factor.max(0.0),
                    roughness: self.options.roughness.max(0.0),
                    near: camera.near,
                    reach: (1.0 + tan * tan * (1.0 + aspect * aspect)).sqrt(),
                }
            }
            (None, super::Tolerance::WorldError(m)) | (None, super::Tolerance::Pixels(m)) => {
                SplitRule::WorldError(m)
            }
        }
    }

    fn aabb(&self, level: usize, ix: u32, iz: u32) -> Aabb {
        self.pyramid.aabb(level, ix, iz, &self.pyramid.mapping())
    }

    /// Whether the leaf `(ix, iz)` of `level` wants to split (module docs).
    fn wants_split(&self, rule: &SplitRule, level: usize, ix: u32, iz: u32) -> bool {
        if level >= self.tree.finest() {
            return false;
        }
        let l = &self.tree.levels[level];
        if l.index(ix, iz).is_none() {
            return false;
        }
        let error = l.index(ix, iz).map_or(0.0, |i| self.drawn_error[level][i]);
        match *rule {
            SplitRule::WorldError(max) => error > max,
            SplitRule::Distance {
                eye,
                factor,
                roughness,
                near,
                reach,
            } => {
                let distance = self.aabb(level, ix, iz).distance_to(eye);
                let world_size = l.size as f32 * self.pyramid.mapping().cell_size;
                if distance < factor * world_size + roughness * error {
                    return true;
                }
                // The near-plane rule, with a margin for the f32 arithmetic.
                distance <= (near + error) * reach * 1.001 + near
            }
        }
    }

    /// Merges, finest first, every split node that no longer wants to be split and whose
    /// merge keeps the tree balanced; returns the merges done.
    fn merge_pass(&mut self, rule: &SplitRule, level: usize, ix: u32, iz: u32) -> u32 {
        if self.tree.state(level, ix, iz) != Some(NodeState::Split) {
            return 0;
        }
        let mut merges = 0;
        for (cx, cz) in children(ix, iz) {
            if level < self.tree.finest() {
                merges += self.merge_pass(rule, level + 1, cx, cz);
            }
        }
        let leaf_children = children(ix, iz)
            .into_iter()
            .all(|(cx, cz)| self.tree.state(level + 1, cx, cz) == Some(NodeState::Leaf));
        if self.tree.whole(level, ix, iz)
            && leaf_children
            && !self.wants_split(rule, level, ix, iz)
            && !self.tree.finer_by_two_beside(level, ix, iz)
        {
            self.merge(level, ix, iz);
            merges += 1;
        }
        merges
    }

    fn merge(&mut self, level: usize, ix: u32, iz: u32) {
        for (cx, cz) in children(ix, iz) {
            let slot = self.tree.slot(level + 1, cx, cz);
            self.pool.give_back(slot);
            self.tree.set_state(level + 1, cx, cz, NodeState::Absent);
        }
        // Four slots were just returned.
        if let Some(slot) = self.pool.take() {
            self.pool.fill(
                slot,
                self.field,
                self.origin(level, ix, iz),
                self.step(level),
            );
            self.tree.set_slot(level, ix, iz, slot);
        }
        self.tree.set_state(level, ix, iz, NodeState::Leaf);
        self.frame.merges += 1;
    }

    /// Splits every leaf that wants it (with the splits balance forces), coarsest first;
    /// returns the splits done.
    fn split_pass(&mut self, rule: &SplitRule, level: usize, ix: u32, iz: u32) -> u32 {
        let mut splits = 0;
        match self.tree.state(level, ix, iz) {
            Some(NodeState::Leaf) => {
                if !self.wants_split(rule, level, ix, iz) {
                    return 0;
                }
                splits += self.split_balanced(level, ix, iz);
                if splits == 0 {
                    return 0;
                }
            }
            Some(NodeState::Split) => {}
            _ => return 0,
        }
        for (cx, cz) in children(ix, iz) {
            splits += self.split_pass(rule, level + 1, cx, cz);
        }
        splits
    }

    /// Splits the leaf `(ix, iz)` of `level` and every coarser leaf that must split first so
    /// neighbours stay within one level, or nothing when the pool cannot pay for all of
    /// them. Returns the splits done.
    fn split_balanced(&mut self, level: usize, ix: u32, iz: u32) -> u32 {
        self.work.clear();
        self.work.push((level, ix, iz));
        let mut next = 0;
        while next < self.work.len() {
            let (l, x, z) = self.work[next];
            next += 1;
            if l == 0 {
                continue;
            }
            for side in 0..4 {
                let Some((nx, nz)) = self.tree.neighbour(l, x, z, side) else {
                    continue;
                };
                if self.tree.state(l, nx, nz) != Some(NodeState::Absent) {
                    continue;
                }
                let coarser = (l - 1, nx / 2, nz / 2);
                if self.tree.state(coarser.0, coarser.1, coarser.2) != Some(NodeState::Leaf)
                    || self.work.contains(&coarser)
                {
                    continue;
                }
                if self.work.len() == self.work.capacity() {
                    // Never grow: refuse (a balanced tree never needs this many).
                    self.refuse();
                    return 0;
                }
                self.work.push(coarser);
            }
        }
        if (self.pool.free_slots() as usize) < 3 * self.work.len() {
            self.refuse();
            return 0;
        }
        self.work.sort_unstable_by_key(|w| w.0);
        let count = self.work.len();
        for k in 0..count {
            let (l, x, z) = self.work[k];
            self.split(l, x, z);
        }
        self.frame.forced_splits += count as u32 - 1;
        count as u32
    }

    fn refuse(&mut self) {
        self.frame.refused_splits += 1;
        self.frame.exhausted = true;
    }

    /// Splits a leaf (the caller checked that three more slots are free).
    fn split(&mut self, level: usize, ix: u32, iz: u32) {
        self.pool.give_back(self.tree.slot(level, ix, iz));
        self.tree.set_state(level, ix, iz, NodeState::Split);
        for (cx, cz) in children(ix, iz) {
            if let Some(slot) = self.pool.take() {
                self.pool.fill(
                    slot,
                    self.field,
                    self.origin(level + 1, cx, cz),
                    self.step(level + 1),
                );
                self.tree.set_slot(level + 1, cx, cz, slot);
            }
            self.tree.set_state(level + 1, cx, cz, NodeState::Leaf);
        }
        self.frame.splits += 1;
    }

    /// Brings the tree to the state the rule converges to (module docs).
    fn update(&mut self, rule: &SplitRule) {
        while self.merge_pass(rule, 0, 0, 0) > 0 {}
        loop {
            // Refusals of the last pass only: each wanted leaf counted once.
            self.frame.refused_splits = 0;
            if self.split_pass(rule, 0, 0, 0) == 0 {
                break;
            }
        }
    }

    /// Lists the drawn leaves' instances (frustum-tested when the view culls).
    fn emit(&mut self, view: &View, level: usize, ix: u32, iz: u32) {
        self.stats.nodes_visited += 1;
        match self.tree.state(level, ix, iz) {
            Some(NodeState::Split) => {
                for (cx, cz) in children(ix, iz) {
                    self.emit(view, level + 1, cx, cz);
                }
            }
            Some(NodeState::Leaf) => {
                let frustum = match view.frustum() {
                    Some(f) => f.classify(&self.aabb(level, ix, iz)),
                    None => Containment::Inside,
                };
                if frustum == Containment::Outside && view.cull() {
                    return;
                }
                let origin = self.origin(level, ix, iz);
                let step = self.step(level);
                let slot = self.tree.slot(level, ix, iz);
                let instance = |index_buffer| PatchInstance {
                    origin,
                    step,
                    index_buffer,
                    level: step.trailing_zeros(),
                    frustum,
                    slot,
                };
                self.instances.push(instance(self.stitched.interior(0)));
                for (side_index, side) in Side::ALL.into_iter().enumerate() {
                    let neighbour = self
                        .tree
                        .neighbour(level, ix, iz, side_index)
                        .and_then(|(nx, nz)| self.tree.covering_leaf(level, nx, nz));
                    let seam = if neighbour.is_some_and(|l| l < level) {
                        SeamNeighbour::Coarser
                    } else {
                        SeamNeighbour::Same
                    };
                    if let Some(buffer) = self.stitched.seam(0, side, seam) {
                        self.instances.push(instance(buffer));
                    }
                }
                self.drawn.push(DrawnLeaf {
                    level: level as u8,
                    ix,
                    iz,
                });
            }
            _ => {}
        }
    }
}

/// The coarsest tree before balancing: a node reaching beyond the drawn extent is split,
/// every other reached node is a leaf.
fn init_tree(tree: &mut Tree, level: usize, ix: u32, iz: u32) {
    if tree.state(level, ix, iz).is_none() {
        return;
    }
    if tree.whole(level, ix, iz) || level == tree.finest() {
        tree.set_state(level, ix, iz, NodeState::Leaf);
        return;
    }
    tree.set_state(level, ix, iz, NodeState::Split);
    for (cx, cz) in children(ix, iz) {
        init_tree(tree, level + 1, cx, cz);
    }
}

/// Splits leaves next to leaves two levels finer until there are none (start-up only).
fn balance_initial(tree: &mut Tree) {
    loop {
        let mut changed = false;
        for level in 0..tree.finest() {
            let (nx, nz) = (tree.levels[level].nodes_x, tree.levels[level].nodes_z);
            for iz in 0..nz {
                for ix in 0..nx {
                    if tree.state(level, ix, iz) == Some(NodeState::Leaf)
                        && tree.finer_by_two_beside(level, ix, iz)
                    {
                        tree.set_state(level, ix, iz, NodeState::Split);
                        for (cx, cz) in children(ix, iz) {
                            tree.set_state(level + 1, cx, cz, NodeState::Leaf);
                        }
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return;
        }
    }
}

/// Per level and node, the bound of the vertical error of the node drawn as a patch: the
/// largest height range of the pyramid nodes of twice the patch's step inside it, each of
/// which holds whole triangles of the patch (interior and seams). 0 on the finest level.
fn drawn_errors(pyramid: &Pyramid, tree: &Tree, patch_side: u32) -> Vec<Vec<f32>> {
    let finest = tree.finest();
    tree.levels
        .iter()
        .enumerate()
        .map(|(level, l)| {
            if level == finest {
                return vec![0.0; l.state.len()];
            }
            // Nodes of 2 · step = 2 · size / patch_side cells, `per` of them a side.
            let per = patch_side / 2;
            let block_level = level + patch_side.trailing_zeros() as usize - 1;
            let mut errors = vec![0.0f32; l.state.len()];
            for iz in 0..l.nodes_z {
                for ix in 0..l.nodes_x {
                    let mut worst = 0.0f32;
                    for bz in iz * per..(iz + 1) * per {
                        for bx in ix * per..(ix + 1) * per {
                            if let Some(b) = pyramid.get(block_level, bx, bz) {
                                worst = worst.max(b.max_y - b.min_y);
                            }
                        }
                    }
                    errors[iz as usize * l.nodes_x as usize + ix as usize] = worst;
                }
            }
            errors
        })
        .collect()
}

impl LodAlgorithm for PatchesLod<'_> {
    fn name(&self) -> &'static str {
        "patches"
    }

    fn select(&mut self, view: &View) -> Selection<'_> {
        let started = Instant::now();
        let rule = self.rule(view);
        let exhausted = self.frame.exhausted;
        let peak = self.frame.peak_in_use;
        self.frame = PatchStats {
            capacity: self.pool.capacity(),
            peak_in_use: peak,
            exhausted,
            ..PatchStats::default()
        };
        self.update(&rule);
        self.stats = SelectionStats::default();
        self.instances.clear();
        self.drawn.clear();
        self.emit(view, 0, 0, 0);
        let (fills, fill_time) = self.pool.take_fill_counters();
        self.frame.fills = fills as u32;
        if fills > 0 {
            self.frame.fill_time_per_patch = fill_time / fills as u32;
        }
        self.frame.in_use = self.pool.in_use();
        self.frame.peak_in_use = self.frame.peak_in_use.max(self.frame.in_use);
        let buffers = self.stitched.buffers();
        self.stats.triangles = self
            .instances
            .iter()
            .map(|p| {
                buffers
                    .get(p.index_buffer as usize)
                    .map_or(0, |b| b.len() / 3) as u64
            })
            .sum();
        self.stats.nodes_drawn = self.drawn.len() as u64;
        self.stats.patches = Some(self.frame);
        self.stats.select_time = started.elapsed();
        Selection::Patches {
            vertices: self.vertices,
            patch_side: self.patch_side,
            index_buffers: self.stitched.buffers(),
            instances: &self.instances,
            morph: None,
            pool: Some(&self.pool),
        }
    }

    fn stats(&self) -> &SelectionStats {
        &self.stats
    }

    fn state_bytes(&self) -> usize {
        self.tree.memory_bytes()
            + self.pool.memory_bytes()
            + self.drawn_error.iter().map(|e| e.len() * 4).sum::<usize>()
            + self.instances.capacity() * size_of::<PatchInstance>()
            + self.drawn.capacity() * size_of::<DrawnLeaf>()
    }

    fn error_bounded(&self) -> bool {
        false
    }

    fn drawn_boxes(&self, out: &mut Vec<Aabb>) {
        out.extend(
            self.drawn
                .iter()
                .map(|d| self.aabb(d.level as usize, d.ix, d.iz)),
        );
    }
}

#[cfg(test)]
mod tests;
