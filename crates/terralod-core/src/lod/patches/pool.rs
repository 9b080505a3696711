//! The preallocated patch pool of algorithm P (P1): equal-size slots of vertex, normal and
//! colour data, allocated once, filled when a patch is assigned, reused through a free list.
//!
//! Each slot carries a fill generation so a renderer holding GPU copies of the slots
//! uploads a slot only when it was (re)filled since its last upload.

use crate::heightfield::{GridPos, Heightfield};
use crate::lod::sample_height;
use crate::rounding::round_to_i32;
use glam::Vec3;
use std::collections::TryReserveError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Source of [`PatchPool::id`]: every pool built in this process has its own.
static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// Most bytes of slot data [`PatchPool::try_with_height_range`] allocates: the capacity and
/// patch size come from the command line, and `(side + 1)²` vertices of 20 bytes times
/// the slots reach terabytes (the GPU copy of the slots is as large again).
pub const MAX_POOL_BYTES: u64 = 4 << 30;

/// Why a pool cannot be allocated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PoolError {
    #[error(
        "a patch pool of {slots} slots of {side} x {side} cells needs {bytes} bytes (at most \
         {limit}, and what memory grants): lower --pool-capacity or --patch-size",
        limit = MAX_POOL_BYTES
    )]
    TooLarge { slots: u32, side: u32, bytes: u64 },
}

/// One slot's contents as laid out in the pool: per vertex `(i, j)` of the patch (index
/// `j * (side + 1) + i`) a world position, a normal packed as four signed bytes (x, y, z, 0)
/// and an RGBA8 colour, as the article's per-patch vertex, normal and colour buffers.
#[derive(Debug)]
pub struct PatchPool {
    /// Unique in this process, so a GPU copy of another pool is never mistaken for this one.
    id: u64,
    /// Cells a patch side.
    side: u32,
    capacity: u32,
    positions: Vec<[f32; 3]>,
    normals: Vec<u32>,
    colours: Vec<u32>,
    /// Per slot, the value of `fills_ever` when it was last filled (0: never).
    generation: Vec<u64>,
    fills_ever: u64,
    /// Free slots, used as a stack (the most recently freed slot is reused first).
    free: Vec<u32>,
    /// World height range of the terrain, for the colour ramp.
    height_range: (f32, f32),
    /// Fills and their total time since the counters were last taken.
    fills: u64,
    fill_time: Duration,
}

impl PatchPool {
    /// Allocates `capacity` slots of patches of `side` cells a side (all free).
    pub fn new(side: u32, capacity: u32, field: &Heightfield) -> PatchPool {
        PatchPool::with_height_range(side, capacity, field.world_range())
    }

    /// [`PatchPool::with_height_range`], refused with [`PoolError::TooLarge`] instead of
    /// aborting the process when the slots take more than [`MAX_POOL_BYTES`] or the
    /// allocator refuses them (the capacity and side may come straight from user input).
    pub fn try_with_height_range(
        side: u32,
        capacity: u32,
        height_range: (f32, f32),
    ) -> Result<PatchPool, PoolError> {
        let bytes = PatchPool::bytes_for(side, capacity).unwrap_or(u64::MAX);
        let too_large = PoolError::TooLarge {
            slots: capacity,
            side,
            bytes,
        };
        if bytes > MAX_POOL_BYTES {
            return Err(too_large);
        }
        // Within the limit, so no product below overflows.
        let total = (side as usize + 1) * (side as usize + 1) * capacity as usize;
        let slots = capacity as usize;
        let (Ok(positions), Ok(normals), Ok(colours), Ok(generation), Ok(mut free)) = (
            zeroed(total, [0.0; 3]),
            zeroed(total, 0),
            zeroed(total, 0),
            zeroed(slots, 0),
            zeroed(slots, 0),
        ) else {
            return Err(too_large);
        };
        free.clear();
        free.extend((0..capacity).rev());
        Ok(PatchPool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            side,
            capacity,
            positions,
            normals,
            colours,
            generation,
            fills_ever: 0,
            free,
            height_range,
            fills: 0,
            fill_time: Duration::ZERO,
        })
    }

    /// Bytes of the slots of a pool of `capacity` patches of `side` cells (what
    /// [`PatchPool::memory_bytes`] reports once allocated); `None` beyond `u64`.
    pub fn bytes_for(side: u32, capacity: u32) -> Option<u64> {
        let side = u64::from(side).checked_add(1)?;
        let per_vertex = (size_of::<[f32; 3]>() + 2 * size_of::<u32>()) as u64;
        let per_slot = side
            .checked_mul(side)?
            .checked_mul(per_vertex)?
            .checked_add((size_of::<u64>() + size_of::<u32>()) as u64)?;
        per_slot.checked_mul(u64::from(capacity))
    }

    /// [`PatchPool::new`] for a terrain known by its world height range only (the colour
    /// ramp's ends), as a streamed terrain is.
    pub fn with_height_range(side: u32, capacity: u32, height_range: (f32, f32)) -> PatchPool {
        let per_slot = ((side + 1) * (side + 1)) as usize;
        let total = per_slot * capacity as usize;
        PatchPool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            side,
            capacity,
            positions: vec![[0.0; 3]; total],
            normals: vec![0; total],
            colours: vec![0; total],
            generation: vec![0; capacity as usize],
            fills_ever: 0,
            free: (0..capacity).rev().collect(),
            height_range,
            fills: 0,
            fill_time: Duration::ZERO,
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Identifies this pool among all pools built in this process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Cells a patch side.
    pub fn side(&self) -> u32 {
        self.side
    }

    /// Vertices per slot: `(side + 1)²`, local vertex `(i, j)` at `j * (side + 1) + i`.
    pub fn vertices_per_slot(&self) -> u32 {
        (self.side + 1) * (self.side + 1)
    }

    /// Fill generation of `slot`: changes whenever the slot is filled, never repeats in a
    /// pool, 0 before its first fill. A GPU copy made at generation `g` is current while
    /// the slot's generation is still `g`.
    pub fn generation(&self, slot: u32) -> u64 {
        self.generation.get(slot as usize).copied().unwrap_or(0)
    }

    /// World positions of the vertices of `slots` (consecutive slots back to back;
    /// clamped to the capacity).
    pub fn slot_positions(&self, slots: std::ops::Range<u32>) -> &[[f32; 3]] {
        &self.positions[self.slot_range(slots)]
    }

    /// Packed normals of the vertices of `slots` (see [`PatchPool::normal`]).
    pub fn slot_normals(&self, slots: std::ops::Range<u32>) -> &[u32] {
        &self.normals[self.slot_range(slots)]
    }

    /// RGBA8 colours of the vertices of `slots` (see [`PatchPool::colour`]).
    pub fn slot_colours(&self, slots: std::ops::Range<u32>) -> &[u32] {
        &self.colours[self.slot_range(slots)]
    }

    fn slot_range(&self, slots: std::ops::Range<u32>) -> std::ops::Range<usize> {
        let per_slot = self.per_slot();
        let end = slots.end.min(self.capacity) as usize;
        let start = (slots.start as usize).min(end);
        start * per_slot..end * per_slot
    }

    /// Slots in use.
    /// Grows to `capacity` slots (never shrinks), keeping every slot's patch and every free
    /// slot: the new slots are free. The pool gets a new id, so a GPU copy of it is made
    /// again, but no patch is filled again.
    pub fn grow(&mut self, capacity: u32) {
        if capacity <= self.capacity {
            return;
        }
        let total = self.per_slot() * capacity as usize;
        self.positions.resize(total, [0.0; 3]);
        self.normals.resize(total, 0);
        self.colours.resize(total, 0);
        self.generation.resize(capacity as usize, 0);
        // The old free slots stay on top of the stack (taken first), the new ones below
        // them, lowest first; room for every slot, so `give_back` never grows the list.
        let mut free = Vec::with_capacity(capacity as usize);
        free.extend((self.capacity..capacity).rev());
        free.extend_from_slice(&self.free);
        self.free = free;
        self.capacity = capacity;
        self.id = NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed);
    }

    pub fn in_use(&self) -> u32 {
        self.capacity - self.free.len() as u32
    }

    pub fn free_slots(&self) -> u32 {
        self.free.len() as u32
    }

    /// Takes a free slot (`None` when the pool is exhausted).
    pub fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot to the pool. The free list was allocated for every slot, so this
    /// never grows it.
    pub fn give_back(&mut self, slot: u32) {
        debug_assert!(self.free.len() < self.capacity as usize);
        self.free.push(slot);
    }

    /// Vertices per slot.
    fn per_slot(&self) -> usize {
        ((self.side + 1) * (self.side + 1)) as usize
    }

    /// Fills `slot` with the patch whose local vertex `(i, j)` is grid position
    /// `origin + step · (i, j)`: heights from the samples (border repeated beyond the data),
    /// normals by central differences at the patch's step, colours from a height and slope
    /// ramp. Timed, for the fill-cost statistics.
    pub fn fill(&mut self, slot: u32, field: &Heightfield, origin: GridPos, step: u32) {
        let at = |i: i64, j: i64| {
            let col = (i64::from(origin.col) + i64::from(step) * i).max(0) as u32;
            let row = (i64::from(origin.row) + i64::from(step) * j).max(0) as u32;
            sample_height(field, GridPos::new(col, row))
        };
        self.fill_with(slot, origin, step, field.mapping().cell_size, at);
    }

    /// Fills `slot` as [`PatchPool::fill`] does, with the heights of local vertex `(i, j)`
    /// from `height(i, j)`, for `i, j` in `-1 ..= side + 1` (the ring outside the patch
    /// serves the normals; the caller clamps it to the data it has). Positions are
    /// `x = col · cell_size`, `z = row · cell_size` of grid position `origin + step · (i, j)`.
    pub fn fill_with(
        &mut self,
        slot: u32,
        origin: GridPos,
        step: u32,
        cell_size: f32,
        height: impl Fn(i64, i64) -> f32,
    ) {
        let started = Instant::now();
        let per_slot = self.per_slot();
        let start = slot as usize * per_slot;
        let cell = cell_size;
        let (lo, hi) = self.height_range;
        let span = (hi - lo).max(f32::MIN_POSITIVE);
        let n = self.side + 1;
        let run = 2.0 * step as f32 * cell;
        for j in 0..n {
            for i in 0..n {
                let (li, lj) = (i64::from(i), i64::from(j));
                let col = origin.col + step * i;
                let row = origin.row + step * j;
                let h = height(li, lj);
                let (west, east) = (height(li - 1, lj), height(li + 1, lj));
                let (north, south) = (height(li, lj - 1), height(li, lj + 1));
                let normal = Vec3::new((west - east) / run, 1.0, (north - south) / run)
                    .normalize_or(Vec3::Y);
                let k = start + (j * n + i) as usize;
                self.positions[k] = [col as f32 * cell, h, row as f32 * cell];
                self.normals[k] = pack_normal(normal);
                self.colours[k] = ramp_colour((h - lo) / span, normal.y);
            }
        }
        self.fills_ever += 1;
        self.generation[slot as usize] = self.fills_ever;
        self.fills += 1;
        self.fill_time += started.elapsed();
    }

    /// World position of vertex `(i, j)` of `slot`, as filled.
    pub fn position(&self, slot: u32, i: u32, j: u32) -> Vec3 {
        Vec3::from(self.positions[self.vertex_index(slot, i, j)])
    }

    /// Packed normal of vertex `(i, j)` of `slot` (signed bytes x, y, z, 0 from the low end).
    pub fn normal(&self, slot: u32, i: u32, j: u32) -> u32 {
        self.normals[self.vertex_index(slot, i, j)]
    }

    /// RGBA8 colour of vertex `(i, j)` of `slot` (red in the low byte).
    pub fn colour(&self, slot: u32, i: u32, j: u32) -> u32 {
        self.colours[self.vertex_index(slot, i, j)]
    }

    fn vertex_index(&self, slot: u32, i: u32, j: u32) -> usize {
        slot as usize * self.per_slot() + (j * (self.side + 1) + i) as usize
    }

    /// Fills since the last call and their total time; resets both.
    pub fn take_fill_counters(&mut self) -> (u64, Duration) {
        let counters = (self.fills, self.fill_time);
        self.fills = 0;
        self.fill_time = Duration::ZERO;
        counters
    }

    /// Bytes of the slots and the free list.
    pub fn memory_bytes(&self) -> usize {
        self.positions.len() * size_of::<[f32; 3]>()
            + (self.normals.len() + self.colours.len() + self.free.capacity()) * size_of::<u32>()
            + self.generation.len() * size_of::<u64>()
    }
}

/// `n` copies of `value`, or the allocator's refusal.
fn zeroed<T: Clone>(n: usize, value: T) -> Result<Vec<T>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.resize(n, value);
    Ok(v)
}

/// A unit normal as four signed normalised bytes (x, y, z, 0), x in the low byte.
fn pack_normal(n: Vec3) -> u32 {
    let byte = |v: f32| (round_to_i32(v.clamp(-1.0, 1.0) * 127.0) as i8) as u8 as u32;
    byte(n.x) | byte(n.y) << 8 | byte(n.z) << 16
}

/// Colour of a vertex at relative height `t` (0 lowest, 1 highest) whose normal has
/// vertical component `up`: green lowlands, brown slopes and heights, white peaks, grey
/// rock on steep slopes.
fn ramp_colour(t: f32, up: f32) -> u32 {
    let t = t.clamp(0.0, 1.0);
    let low = Vec3::new(0.30, 0.45, 0.20);
    let mid = Vec3::new(0.50, 0.40, 0.28);
    let peak = Vec3::new(0.95, 0.95, 0.97);
    let ground = if t < 0.6 {
        low.lerp(mid, t / 0.6)
    } else {
        mid.lerp(peak, (t - 0.6) / 0.4)
    };
    let rock = Vec3::splat(0.45);
    let steep = ((0.9 - up) / 0.3).clamp(0.0, 1.0);
    let c = ground.lerp(rock, steep);
    let byte = |v: f32| round_to_i32(v.clamp(0.0, 1.0) * 255.0) as u32;
    byte(c.x) | byte(c.y) << 8 | byte(c.z) << 16 | 255 << 24
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_and_given_back_without_growing() {
        let field =
            Heightfield::from_f32(9, 9, (0..81).map(|i| i as f32).collect()).expect("valid field");
        let mut pool = PatchPool::new(4, 3, &field);
        let bytes = pool.memory_bytes();
        let taken: Vec<u32> = (0..3).filter_map(|_| pool.take()).collect();
        assert_eq!(taken.len(), 3);
        assert_eq!(pool.take(), None, "exhausted");
        assert_eq!(pool.in_use(), 3);
        for slot in taken {
            pool.give_back(slot);
        }
        assert_eq!(pool.in_use(), 0);
        assert_eq!(pool.memory_bytes(), bytes);
    }

    /// `--pool-capacity 1000000000` (or a large `--patch-size`) asked the allocator for
    /// terabytes and aborted the process: the size is checked, then allocated fallibly.
    #[test]
    fn a_pool_too_large_is_refused_not_allocated() {
        let range = (0.0, 1.0);
        for (side, capacity) in [(2, 1_000_000_000), (4096, u32::MAX), (1024, 1024)] {
            assert!(
                matches!(
                    PatchPool::try_with_height_range(side, capacity, range),
                    Err(PoolError::TooLarge { .. })
                ),
                "{side} x {capacity}"
            );
        }
        assert_eq!(PatchPool::bytes_for(u32::MAX, u32::MAX), None, "overflow");
        let error = PatchPool::try_with_height_range(2, 1_000_000_000, range).expect_err("huge");
        assert!(error.to_string().contains("--pool-capacity"), "{error}");
        let pool = PatchPool::try_with_height_range(4, 3, range).expect("small");
        let bytes = PatchPool::bytes_for(4, 3).expect("small");
        assert_eq!(pool.memory_bytes() as u64, bytes, "what the check counts");
        assert_eq!((pool.capacity(), pool.free_slots()), (3, 3));
        assert_eq!(pool.slot_positions(0..3).len(), 75);
    }

    #[test]
    fn a_fill_writes_the_patch_samples_normals_and_colours() {
        // Heights rise by 1 per column: normals lean towards −x, equally everywhere inside.
        let field = Heightfield::from_f32(9, 9, (0..81).map(|i| (i % 9) as f32).collect())
            .expect("valid field");
        let mut pool = PatchPool::new(2, 2, &field);
        let slot = pool.take().expect("a free slot");
        pool.fill(slot, &field, GridPos::new(4, 2), 2);
        for j in 0..3 {
            for i in 0..3 {
                let pos = GridPos::new(4 + 2 * i, 2 + 2 * j);
                let p = pool.position(slot, i, j);
                assert_eq!(
                    p,
                    Vec3::new(pos.col as f32, sample_height(&field, pos), pos.row as f32)
                );
                assert_eq!(pool.colour(slot, i, j) >> 24, 255);
            }
        }
        let expected = pack_normal(Vec3::new(-1.0, 1.0, 0.0).normalize());
        assert_eq!(pool.normal(slot, 0, 1), expected);
        assert_eq!(pool.take_fill_counters().0, 1);
        assert_eq!(pool.take_fill_counters().0, 0);
        // The slot's data as a renderer reads it.
        assert_eq!(pool.slot_positions(slot..slot + 1).len(), 9);
        assert_eq!(pool.slot_normals(slot..slot + 1)[3], expected);
        assert_eq!(
            pool.slot_colours(slot..slot + 1)[4],
            pool.colour(slot, 1, 1)
        );
        assert_eq!(pool.slot_colours(0..2).len(), 18, "two slots back to back");
    }

    #[test]
    fn a_fill_changes_the_slot_generation_and_no_other() {
        let field =
            Heightfield::from_f32(9, 9, (0..81).map(|i| i as f32).collect()).expect("valid field");
        let mut pool = PatchPool::new(2, 3, &field);
        assert!((0..3).all(|s| pool.generation(s) == 0));
        pool.fill(1, &field, GridPos::new(0, 0), 1);
        let first = pool.generation(1);
        assert_ne!(first, 0);
        assert_eq!((pool.generation(0), pool.generation(2)), (0, 0));
        pool.fill(1, &field, GridPos::new(2, 2), 1);
        assert_ne!(pool.generation(1), first, "a refill is a new generation");
        assert_ne!(PatchPool::new(2, 3, &field).id(), pool.id());
        assert!(pool.slot_positions(3..4).is_empty(), "out of range");
        assert_eq!(
            pool.slot_positions(2..9).len(),
            9,
            "clamped to the capacity"
        );
    }
}
