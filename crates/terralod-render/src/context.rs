//! The GPU context: instance, adapter, device and queue, headless or for a window surface.

use crate::RenderError;
use std::sync::{Arc, Mutex};

/// What the renderer runs on, in words (for logs, the HUD and benchmark records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
}

impl std::fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}{})",
            self.name,
            self.backend,
            self.device_type,
            if self.driver.is_empty() {
                String::new()
            } else {
                format!(", {}", self.driver)
            }
        )
    }
}

/// One device and its queue. Cheap to pass by reference; the renderer borrows it.
#[derive(Debug)]
pub struct GpuContext {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The first GPU error nobody caught (wgpu's default handler would panic).
    uncaptured: Arc<Mutex<Option<String>>>,
}

impl GpuContext {
    /// A new instance with the backends the environment allows (`WGPU_BACKEND` and friends).
    pub fn new_instance() -> wgpu::Instance {
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
    }

    /// A context without a window: for `render`, tests and benchmarks.
    pub fn headless() -> Result<GpuContext, RenderError> {
        Self::with_instance(Self::new_instance(), None)
    }

    /// A context whose adapter can present to `surface` (created from `instance`).
    pub fn for_surface(
        instance: wgpu::Instance,
        surface: &wgpu::Surface<'_>,
    ) -> Result<GpuContext, RenderError> {
        Self::with_instance(instance, Some(surface))
    }

    fn with_instance(
        instance: wgpu::Instance,
        surface: Option<&wgpu::Surface<'_>>,
    ) -> Result<GpuContext, RenderError> {
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            compatible_surface: surface,
            ..Default::default()
        }))
        .map_err(|e| RenderError::NoAdapter(e.to_string()))?;
        let needed = wgpu::DownlevelFlags::VERTEX_STORAGE;
        if !adapter.get_downlevel_capabilities().flags.contains(needed) {
            return Err(RenderError::Unsupported(format!(
                "{}: storage buffers in vertex shaders are not supported",
                adapter.get_info().name
            )));
        }
        // The adapter's own limits: a 4097-wide height texture and index buffers of
        // millions of triangles need more than the portable defaults.
        // Timestamps measure GPU frame time where the adapter has them; nothing needs them.
        let optional = wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("terralod"),
            required_features: adapter.features() & optional,
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| RenderError::Device(e.to_string()))?;
        let uncaptured = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            if let Ok(mut slot) = slot.lock() {
                slot.get_or_insert_with(|| error.to_string());
            }
        }));
        Ok(GpuContext {
            instance,
            adapter,
            device,
            queue,
            uncaptured,
        })
    }

    pub fn summary(&self) -> AdapterSummary {
        let info = self.adapter.get_info();
        AdapterSummary {
            name: info.name,
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: [info.driver, info.driver_info]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// The largest side of the terrain's textures: the device's limit, or less when the
    /// environment variable `TERRALOD_MAX_TEXTURE_SIDE` says so (to exercise terrains
    /// larger than a texture on small data; values below 2 are ignored).
    pub fn max_texture_side(&self) -> u32 {
        let device = self.device.limits().max_texture_dimension_2d;
        std::env::var("TERRALOD_MAX_TEXTURE_SIDE")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&side| side >= 2)
            .map_or(device, |side| side.min(device))
    }

    /// Waits until the GPU has finished everything submitted; reports any GPU error
    /// raised since the last check.
    pub fn wait_idle(&self) -> Result<(), RenderError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| RenderError::Device(e.to_string()))?;
        self.check_errors()
    }

    /// The first GPU error raised since the last check, if any.
    pub fn check_errors(&self) -> Result<(), RenderError> {
        match self.uncaptured.lock().ok().and_then(|mut e| e.take()) {
            Some(error) => Err(RenderError::Device(error)),
            None => Ok(()),
        }
    }
}
