//! Algorithm P's patch pool on the GPU (P1): one storage buffer of `capacity × vertices
//! per slot` vertices, created when a pool is first drawn, and a slot uploaded only when
//! the pool (re)filled it since its last upload (its fill generation changed).
//!
//! Layout, in 32-bit words, for `n = capacity × vertices per slot` vertices: the pool's
//! three arrays back to back, as the pool holds them: `n × 3` f32 world positions, then
//! `n` packed normals (signed bytes x, y, z, 0), then `n` RGBA8 colours. Slot `s`'s
//! vertex `v` is vertex `s × vertices per slot + v` of each array.

use terralod_core::lod::PatchPool;

/// Bytes of one vertex on the GPU: position (12), normal (4), colour (4).
pub const SLOT_VERTEX_BYTES: u64 = 20;

/// Storage bindings must not be empty: the buffer before any pool is drawn.
const PLACEHOLDER_BYTES: u64 = 256;

/// What one [`GpuSlots::sync`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotUpload {
    pub slots: u32,
    pub bytes: u64,
    /// The buffer was replaced: the caller rebinds it.
    pub rebind: bool,
}

/// The GPU copy of one pool's slots.
#[derive(Debug)]
pub struct GpuSlots {
    buffer: wgpu::Buffer,
    /// The pool copied (0: none yet; pool ids start at 1).
    pool_id: u64,
    capacity: u32,
    vertices_per_slot: u32,
    /// Per slot, the fill generation uploaded (0: never uploaded).
    uploaded: Vec<u64>,
    created: u64,
}

impl GpuSlots {
    pub fn new(device: &wgpu::Device) -> GpuSlots {
        GpuSlots {
            buffer: create(device, PLACEHOLDER_BYTES),
            pool_id: 0,
            capacity: 0,
            vertices_per_slot: 0,
            uploaded: Vec::new(),
            created: 0,
        }
    }

    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Buffers created for pools since this was made.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// `n`: vertices of all slots (where the normals start, in positions' words / 3).
    pub fn total_vertices(&self) -> u32 {
        self.capacity * self.vertices_per_slot
    }

    pub fn vertices_per_slot(&self) -> u32 {
        self.vertices_per_slot
    }

    /// Bytes the buffer needs for `pool`.
    pub fn bytes_for(pool: &PatchPool) -> u64 {
        u64::from(pool.capacity()) * u64::from(pool.vertices_per_slot()) * SLOT_VERTEX_BYTES
    }

    /// Brings the GPU copy up to date with `pool`: creates the buffer when this pool is
    /// new and its size differs from the buffer's (once per pool), then uploads every slot
    /// whose fill generation differs from the uploaded one, a run of consecutive slots
    /// in one write per array. `None` when the pool does not fit one storage binding
    /// (the caller draws from the height texture instead).
    /// Whether `pool` fits in one storage binding of `device` (else [`GpuSlots::sync`]
    /// leaves it out and its patches are drawn from the grid).
    pub fn fits(device: &wgpu::Device, pool: &PatchPool) -> bool {
        let size = Self::bytes_for(pool);
        let limits = device.limits();
        size <= limits.max_storage_buffer_binding_size
            && size <= limits.max_buffer_size
            && u64::from(pool.capacity()) * u64::from(pool.vertices_per_slot()) * 5
                <= u64::from(u32::MAX)
    }

    pub fn sync(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        pool: &PatchPool,
    ) -> Option<SlotUpload> {
        if !Self::fits(device, pool) {
            return None;
        }
        let size = Self::bytes_for(pool);
        let mut upload = SlotUpload::default();
        if self.pool_id != pool.id() {
            if self.capacity != pool.capacity()
                || self.vertices_per_slot != pool.vertices_per_slot()
            {
                self.buffer = create(device, size.max(PLACEHOLDER_BYTES));
                self.created += 1;
                upload.rebind = true;
            }
            self.pool_id = pool.id();
            self.capacity = pool.capacity();
            self.vertices_per_slot = pool.vertices_per_slot();
            self.uploaded.clear();
            self.uploaded.resize(self.capacity as usize, 0);
        }
        let mut slot = 0;
        while slot < self.capacity {
            if pool.generation(slot) == self.uploaded[slot as usize] {
                slot += 1;
                continue;
            }
            let first = slot;
            while slot < self.capacity && pool.generation(slot) != self.uploaded[slot as usize] {
                self.uploaded[slot as usize] = pool.generation(slot);
                slot += 1;
            }
            upload.bytes += self.write_run(queue, pool, first..slot);
            upload.slots += slot - first;
        }
        Some(upload)
    }

    /// Writes slots `run` of every array; returns the bytes written.
    fn write_run(&self, queue: &wgpu::Queue, pool: &PatchPool, run: std::ops::Range<u32>) -> u64 {
        let n = u64::from(self.total_vertices());
        let first_vertex = u64::from(run.start) * u64::from(self.vertices_per_slot);
        let positions = pool.slot_positions(run.clone());
        let normals = pool.slot_normals(run.clone());
        let colours = pool.slot_colours(run);
        queue.write_buffer(
            &self.buffer,
            first_vertex * 12,
            bytemuck::cast_slice(positions),
        );
        queue.write_buffer(
            &self.buffer,
            n * 12 + first_vertex * 4,
            bytemuck::cast_slice(normals),
        );
        queue.write_buffer(
            &self.buffer,
            n * 16 + first_vertex * 4,
            bytemuck::cast_slice(colours),
        );
        (std::mem::size_of_val(positions)
            + std::mem::size_of_val(normals)
            + std::mem::size_of_val(colours)) as u64
    }
}

fn create(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("patch pool slots"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}
