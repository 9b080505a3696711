//! The tile cache of a streamed terrain: tiles decoded to world heights on background
//! threads, kept under a memory budget, least recently used evicted first. No call waits on
//! the disk: a tile that is not resident is requested and `None` returned, so the selection
//! draws the coarser level meanwhile. The coarsest level is loaded at start and pinned, so
//! there is always something to draw. A missing or corrupt tile is reported once and never
//! requested again.

use super::TileError;
use super::blocks::BlockBounds;
use super::format::TerrainHeader;
use super::read::TiledTerrain;
use crate::heightfield::Samples;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A tile: `(level, tx, ty)`.
pub type TileKey = (u32, u32, u32);

/// Why a cache could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "a cache budget of {budget} bytes is too small: the coarsest level's tiles take \
         {pinned} bytes, and streaming needs room for at least one more tile ({needed} in all)"
    )]
    BudgetTooSmall {
        budget: u64,
        pinned: u64,
        needed: u64,
    },
    #[error("cannot load the coarsest level, which the cache keeps resident: {0}")]
    Pinned(#[source] TileError),
    #[error("cannot start a tile loader thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// What the cache did so far; times are the longest single calls (no frame may wait on
/// I/O, so these stay far below a frame).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CacheStats {
    pub resident_tiles: usize,
    /// Decoded bytes of the resident tiles (what the budget counts).
    pub resident_bytes: u64,
    pub peak_bytes: u64,
    /// Loads integrated (successful), and tiles that failed to load.
    pub loads_finished: u64,
    pub failures: u64,
    /// Background loads queued (each tile once while it is pending).
    pub requests: u64,
    /// `tile_heights` calls that found the tile resident, and those that did not.
    pub hits: u64,
    pub misses: u64,
    /// Bytes of tile files read by the loaders.
    pub bytes_read: u64,
    pub tiles_evicted: u64,
    pub longest_begin_frame: Duration,
    pub longest_tile_heights: Duration,
}

/// A resident tile.
#[derive(Debug)]
struct Resident {
    heights: Arc<[f32]>,
    /// The frame in which the tile was last used (or arrived).
    last_used: u64,
    pinned: bool,
}

/// What a loader thread sends back.
type Loaded = (TileKey, Result<Arc<[f32]>, TileError>);

/// A memory-capped cache of a tiled terrain's tiles, as world heights.
#[derive(Debug)]
pub struct TileCache {
    terrain: Arc<TiledTerrain>,
    budget_bytes: u64,
    tile_bytes: u64,
    resident: HashMap<TileKey, Resident>,
    pending: HashSet<TileKey>,
    failed: HashSet<TileKey>,
    reports: Vec<TileError>,
    frame: u64,
    requests: Option<mpsc::Sender<TileKey>>,
    loaded: mpsc::Receiver<Loaded>,
    stop: Arc<AtomicBool>,
    loaders: Vec<JoinHandle<()>>,
    stats: CacheStats,
}

impl TileCache {
    /// A cache of at most `budget_bytes` decoded bytes over `terrain`, loading on
    /// `loader_threads` threads (at least one). Loads the coarsest level now and pins it.
    pub fn new(
        terrain: Arc<TiledTerrain>,
        budget_bytes: u64,
        loader_threads: usize,
    ) -> Result<TileCache, CacheError> {
        let header = terrain.header();
        let side = u64::from(header.tile_side());
        let tile_bytes = side * side * std::mem::size_of::<f32>() as u64;
        let coarsest = header.levels.len() as u32 - 1;
        let top = header.levels[coarsest as usize];
        let pinned = top.tiles() * tile_bytes;
        let needed = pinned + tile_bytes;
        if budget_bytes < needed {
            return Err(CacheError::BudgetTooSmall {
                budget: budget_bytes,
                pinned,
                needed,
            });
        }
        let mut resident = HashMap::new();
        let mut bytes_read = 0;
        for ty in 0..top.tiles_y {
            for tx in 0..top.tiles_x {
                let heights = load(&terrain, (coarsest, tx, ty)).map_err(CacheError::Pinned)?;
                bytes_read += header.tile_file_len();
                resident.insert(
                    (coarsest, tx, ty),
                    Resident {
                        heights,
                        last_used: 0,
                        pinned: true,
                    },
                );
            }
        }
        let (requests, queue) = mpsc::channel::<TileKey>();
        let (done, loaded) = mpsc::channel::<Loaded>();
        let queue = Arc::new(Mutex::new(queue));
        let stop = Arc::new(AtomicBool::new(false));
        let mut loaders = Vec::new();
        for index in 0..loader_threads.max(1) {
            let (terrain, queue, done, stopped) =
                (terrain.clone(), queue.clone(), done.clone(), stop.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("tile-loader-{index}"))
                .spawn(move || loader(&terrain, &queue, &done, &stopped));
            match spawned {
                Ok(handle) => loaders.push(handle),
                Err(error) => {
                    stop.store(true, Ordering::Relaxed);
                    drop(requests);
                    for handle in loaders {
                        let _ = handle.join();
                    }
                    return Err(CacheError::Spawn(error));
                }
            }
        }
        let count = resident.len();
        let stats = CacheStats {
            resident_tiles: count,
            resident_bytes: count as u64 * tile_bytes,
            peak_bytes: count as u64 * tile_bytes,
            loads_finished: count as u64,
            bytes_read,
            ..CacheStats::default()
        };
        Ok(TileCache {
            terrain,
            budget_bytes,
            tile_bytes,
            resident,
            pending: HashSet::new(),
            failed: HashSet::new(),
            reports: Vec::new(),
            frame: 0,
            requests: Some(requests),
            loaded,
            stop,
            loaders,
            stats,
        })
    }

    pub fn header(&self) -> &TerrainHeader {
        self.terrain.header()
    }

    /// `B`, the block size of the terrain's block index.
    pub fn block_cells(&self) -> u32 {
        self.terrain.header().block_cells
    }

    /// The bounds of block `(bx, by)` of `level`, from the index (no tile needed).
    pub fn block_bounds(&self, level: u32, bx: u32, by: u32) -> BlockBounds {
        self.terrain.block_index().get(level, bx, by)
    }

    /// Decoded bytes of one tile (what the budget counts per tile).
    pub fn tile_bytes(&self) -> u64 {
        self.tile_bytes
    }

    /// The tile's world heights (`(N + 1)²`, row-major) if resident, marking it used this
    /// frame; otherwise `None`, and the tile is queued for a background load (once; never
    /// again after it failed). Never waits on I/O.
    pub fn tile_heights(&mut self, key: TileKey) -> Option<Arc<[f32]>> {
        let start = Instant::now();
        let found = match self.resident.get_mut(&key) {
            Some(tile) => {
                tile.last_used = self.frame;
                self.stats.hits += 1;
                Some(tile.heights.clone())
            }
            None => {
                self.stats.misses += 1;
                if !self.failed.contains(&key) && self.pending.insert(key) {
                    self.stats.requests += 1;
                    let sent = self
                        .requests
                        .as_ref()
                        .is_some_and(|requests| requests.send(key).is_ok());
                    if !sent {
                        // Every loader has stopped (only while dropping): nothing is pending.
                        self.pending.remove(&key);
                    }
                }
                None
            }
        };
        self.stats.longest_tile_heights = self.stats.longest_tile_heights.max(start.elapsed());
        found
    }

    /// Starts a frame: integrates the loads that finished (without waiting for any),
    /// evicting the least recently used unpinned tiles to stay within the budget. Tiles used
    /// in the frame that starts are never evicted (none is used yet when it runs).
    pub fn begin_frame(&mut self) {
        let start = Instant::now();
        self.frame += 1;
        let mut eviction_order: Option<Vec<(u64, TileKey)>> = None;
        while let Ok((key, result)) = self.loaded.try_recv() {
            self.pending.remove(&key);
            match result {
                Ok(heights) => {
                    self.stats.bytes_read += self.terrain.header().tile_file_len();
                    self.stats.loads_finished += 1;
                    if self.resident.contains_key(&key) {
                        continue;
                    }
                    self.make_room(&mut eviction_order);
                    self.resident.insert(
                        key,
                        Resident {
                            heights,
                            // As if used in the frame that asked for it: newest first in line.
                            last_used: self.frame - 1,
                            pinned: false,
                        },
                    );
                    let bytes = self.resident.len() as u64 * self.tile_bytes;
                    self.stats.peak_bytes = self.stats.peak_bytes.max(bytes);
                }
                Err(error) => {
                    self.stats.failures += 1;
                    if self.failed.insert(key) {
                        self.reports.push(error);
                    }
                }
            }
        }
        self.stats.resident_tiles = self.resident.len();
        self.stats.resident_bytes = self.resident.len() as u64 * self.tile_bytes;
        self.stats.longest_begin_frame = self.stats.longest_begin_frame.max(start.elapsed());
    }

    /// Evicts least recently used unpinned tiles until one more tile fits in the budget.
    /// The order is computed once per frame, only when an eviction is needed.
    fn make_room(&mut self, order: &mut Option<Vec<(u64, TileKey)>>) {
        while (self.resident.len() as u64 + 1) * self.tile_bytes > self.budget_bytes {
            let order = order.get_or_insert_with(|| {
                let mut order: Vec<(u64, TileKey)> = self
                    .resident
                    .iter()
                    .filter(|(_, tile)| !tile.pinned)
                    .map(|(key, tile)| (tile.last_used, *key))
                    .collect();
                // Oldest last, so `pop` takes it.
                order.sort_unstable_by(|a, b| b.cmp(a));
                order
            });
            // `new` checked that the budget holds the pinned tiles and one more, so an
            // unpinned tile is always there to evict while over the budget.
            let Some((_, key)) = order.pop() else {
                return;
            };
            if self.resident.remove(&key).is_some() {
                self.stats.tiles_evicted += 1;
            }
        }
    }

    /// The errors of the tiles that failed to load since the last call, each tile once.
    pub fn take_reports(&mut self) -> Vec<TileError> {
        std::mem::take(&mut self.reports)
    }

    /// Loads queued or running.
    pub fn pending_loads(&self) -> usize {
        self.pending.len()
    }

    /// Whether `key` is resident (without marking it used).
    pub fn is_resident(&self, key: TileKey) -> bool {
        self.resident.contains_key(&key)
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }
}

impl Drop for TileCache {
    /// Stops the loaders: queued loads are dropped, a running one finishes, then they exit.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.requests = None;
        for handle in self.loaders.drain(..) {
            let _ = handle.join();
        }
    }
}

/// A loader thread: takes keys from the queue until it closes or the cache stops.
fn loader(
    terrain: &TiledTerrain,
    queue: &Mutex<mpsc::Receiver<TileKey>>,
    done: &mpsc::Sender<Loaded>,
    stop: &AtomicBool,
) {
    loop {
        let next = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(key) = next else { return };
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if done.send((key, load(terrain, key))).is_err() {
            return;
        }
    }
}

/// Reads and checks one tile and decodes it to world heights.
fn load(terrain: &TiledTerrain, (level, tx, ty): TileKey) -> Result<Arc<[f32]>, TileError> {
    let tile = terrain.read_tile(level, tx, ty)?;
    let mapping = terrain.header().mapping;
    let heights: Arc<[f32]> = match &tile.samples {
        Samples::U16(values) => values
            .iter()
            .map(|&v| mapping.world_y(f32::from(v)))
            .collect(),
        Samples::I16(values) => values
            .iter()
            .map(|&v| mapping.world_y(f32::from(v)))
            .collect(),
        Samples::F32(values) => values.iter().map(|&v| mapping.world_y(v)).collect(),
    };
    Ok(heights)
}

/// The disk cache is what the streamed selection reads on an imported directory.
impl super::source::TileSource for TileCache {
    fn header(&self) -> &TerrainHeader {
        TileCache::header(self)
    }

    fn block_cells(&self) -> u32 {
        TileCache::block_cells(self)
    }

    fn block_bounds(&self, level: u32, bx: u32, by: u32) -> BlockBounds {
        TileCache::block_bounds(self, level, bx, by)
    }

    fn tile_heights(&mut self, key: TileKey) -> Option<Arc<[f32]>> {
        TileCache::tile_heights(self, key)
    }

    fn begin_frame(&mut self) {
        TileCache::begin_frame(self)
    }
}
