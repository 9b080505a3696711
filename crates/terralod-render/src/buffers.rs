//! GPU buffers that are reused from frame to frame and only grow, so a warmed-up frame
//! creates no buffer.

/// A buffer with a usage, recreated (doubled) only when a write does not fit.
#[derive(Debug)]
pub struct GrowingBuffer {
    buffer: wgpu::Buffer,
    label: &'static str,
    usage: wgpu::BufferUsages,
    created: u64,
}

/// Storage bindings must not be empty; every buffer starts with this many bytes.
const MIN_SIZE: u64 = 256;

impl GrowingBuffer {
    pub fn new(device: &wgpu::Device, label: &'static str, usage: wgpu::BufferUsages) -> Self {
        GrowingBuffer {
            buffer: create(device, label, usage, MIN_SIZE),
            label,
            usage,
            created: 0,
        }
    }

    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Buffers created to grow since this one was made.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Writes `data` at offset 0. Returns true when the buffer had to be replaced (the
    /// caller rebinds it).
    pub fn write(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, data: &[u8]) -> bool {
        let needed = (data.len() as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let grown = needed > self.buffer.size();
        if grown {
            let size = needed.max(self.buffer.size() * 2);
            self.buffer = create(device, self.label, self.usage, size);
            self.created += 1;
        }
        if (data.len() as u64).is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
            queue.write_buffer(&self.buffer, 0, data);
        } else {
            // Only line and index data reach here, always whole 4-byte words; pad anyway.
            let mut padded = data.to_vec();
            padded.resize(needed as usize, 0);
            queue.write_buffer(&self.buffer, 0, &padded);
        }
        grown
    }
}

fn create(
    device: &wgpu::Device,
    label: &'static str,
    usage: wgpu::BufferUsages,
    size: u64,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: false,
    })
}
