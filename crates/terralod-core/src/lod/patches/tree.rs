//! The quadtree of patches of algorithm P: one state per node of the patch levels, the
//! lookups balancing needs (which leaf covers a neighbour, whether a merge or a leaf would
//! leave neighbours two levels apart), nothing about cameras or the pool.

use crate::pyramid::Pyramid;

/// A node's state. Nodes below a leaf (or never reached) are absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NodeState {
    Absent,
    /// Drawn, holding a pool slot.
    Leaf,
    Split,
}

/// Neighbours of node `(ix, iz)` in the order of the stitched patch's sides: north (−z),
/// east (+x), south (+z), west (−x).
pub(super) const SIDE_OFFSETS: [(i32, i32); 4] = [(0, -1), (1, 0), (0, 1), (-1, 0)];

/// One patch level: the pyramid level of the same index.
#[derive(Debug)]
pub(super) struct TreeLevel {
    pub nodes_x: u32,
    pub nodes_z: u32,
    /// Cells per node side.
    pub size: u32,
    pub state: Vec<NodeState>,
    /// Pool slot of each leaf (meaningless for other states).
    pub slot: Vec<u32>,
}

impl TreeLevel {
    #[inline]
    pub fn index(&self, ix: u32, iz: u32) -> Option<usize> {
        (ix < self.nodes_x && iz < self.nodes_z)
            .then(|| iz as usize * self.nodes_x as usize + ix as usize)
    }
}

/// The patch quadtree. Level 0 is the pyramid's root; the finest patch level's nodes have
/// `patch_side` cells.
#[derive(Debug)]
pub(super) struct Tree {
    pub levels: Vec<TreeLevel>,
    /// Drawn extent in cells: the data rounded up to whole finest patches.
    pub extent: (u32, u32),
}

impl Tree {
    /// An empty tree (every node absent) over the pyramid's levels down to nodes of
    /// `patch_side` cells.
    pub fn new(pyramid: &Pyramid, patch_side: u32) -> Tree {
        let finest = (0..pyramid.levels())
            .rfind(|&l| pyramid.node_size(l) >= patch_side)
            .unwrap_or(0);
        let levels = (0..=finest)
            .map(|level| {
                let (nodes_x, nodes_z) = pyramid.nodes(level);
                let count = nodes_x as usize * nodes_z as usize;
                TreeLevel {
                    nodes_x,
                    nodes_z,
                    size: pyramid.node_size(level),
                    state: vec![NodeState::Absent; count],
                    slot: vec![0; count],
                }
            })
            .collect::<Vec<_>>();
        let last = &levels[finest];
        let extent = (last.nodes_x * last.size, last.nodes_z * last.size);
        Tree { levels, extent }
    }

    pub fn finest(&self) -> usize {
        self.levels.len() - 1
    }

    #[inline]
    pub fn state(&self, level: usize, ix: u32, iz: u32) -> Option<NodeState> {
        let l = &self.levels[level];
        l.index(ix, iz).map(|i| l.state[i])
    }

    #[inline]
    pub fn set_state(&mut self, level: usize, ix: u32, iz: u32, state: NodeState) {
        let l = &mut self.levels[level];
        if let Some(i) = l.index(ix, iz) {
            l.state[i] = state;
        }
    }

    pub fn slot(&self, level: usize, ix: u32, iz: u32) -> u32 {
        let l = &self.levels[level];
        l.index(ix, iz).map_or(0, |i| l.slot[i])
    }

    pub fn set_slot(&mut self, level: usize, ix: u32, iz: u32, slot: u32) {
        let l = &mut self.levels[level];
        if let Some(i) = l.index(ix, iz) {
            l.slot[i] = slot;
        }
    }

    /// Whether the node lies inside the drawn extent; a node reaching beyond it is never
    /// drawn (always split), so the drawn area is exactly the extent's rectangle.
    #[inline]
    pub fn whole(&self, level: usize, ix: u32, iz: u32) -> bool {
        let size = self.levels[level].size;
        (ix + 1) * size <= self.extent.0 && (iz + 1) * size <= self.extent.1
    }

    /// The same-level neighbour of `(ix, iz)` on `side` (see [`SIDE_OFFSETS`]), if stored.
    #[inline]
    pub fn neighbour(&self, level: usize, ix: u32, iz: u32, side: usize) -> Option<(u32, u32)> {
        let (dx, dz) = SIDE_OFFSETS[side];
        let nx = ix.checked_add_signed(dx)?;
        let nz = iz.checked_add_signed(dz)?;
        self.levels[level].index(nx, nz).map(|_| (nx, nz))
    }

    /// The level of the leaf covering the same-level position `(ix, iz)`, or `None` when
    /// that position is finer than `level` there (split) or not drawn at all. In a balanced
    /// tree next to a leaf of `level` it is `level` or `level − 1`.
    pub fn covering_leaf(&self, level: usize, ix: u32, iz: u32) -> Option<usize> {
        let (mut l, mut x, mut z) = (level, ix, iz);
        loop {
            match self.state(l, x, z)? {
                NodeState::Leaf => return Some(l),
                NodeState::Split => return None,
                NodeState::Absent => {
                    l = l.checked_sub(1)?;
                    x /= 2;
                    z /= 2;
                }
            }
        }
    }

    /// Whether a leaf of `level` at `(ix, iz)` (or the node there, were it merged) would
    /// touch a leaf two or more levels finer: its neighbour on some side is split and that
    /// neighbour's child along the shared edge is split too.
    pub fn finer_by_two_beside(&self, level: usize, ix: u32, iz: u32) -> bool {
        if level + 1 >= self.levels.len() {
            return false;
        }
        (0..4).any(|side| {
            let Some((nx, nz)) = self.neighbour(level, ix, iz, side) else {
                return false;
            };
            if self.state(level, nx, nz) != Some(NodeState::Split) {
                return false;
            }
            edge_children(nx, nz, (side + 2) % 4)
                .into_iter()
                .any(|(cx, cz)| self.state(level + 1, cx, cz) == Some(NodeState::Split))
        })
    }

    /// Number of leaves.
    pub fn leaves(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.state.iter().filter(|&&s| s == NodeState::Leaf).count())
            .sum()
    }

    pub fn memory_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.state.len() * (size_of::<NodeState>() + size_of::<u32>()))
            .sum()
    }
}

/// The two children of `(ix, iz)` along its side `side` (see [`SIDE_OFFSETS`]).
pub(super) fn edge_children(ix: u32, iz: u32, side: usize) -> [(u32, u32); 2] {
    let (x, z) = (2 * ix, 2 * iz);
    match side {
        0 => [(x, z), (x + 1, z)],
        1 => [(x + 1, z), (x + 1, z + 1)],
        2 => [(x, z + 1), (x + 1, z + 1)],
        _ => [(x, z), (x, z + 1)],
    }
}

/// The four children of `(ix, iz)`.
pub(super) fn children(ix: u32, iz: u32) -> [(u32, u32); 4] {
    let (x, z) = (2 * ix, 2 * iz);
    [(x, z), (x + 1, z), (x, z + 1), (x + 1, z + 1)]
}
