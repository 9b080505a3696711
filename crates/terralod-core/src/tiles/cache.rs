//! The tile cache of a streamed terrain: tiles decoded to world heights on background
//! threads, kept under a memory budget, least recently used evicted first. No call waits on
//! the disk: a tile that is not resident is requested and `None` returned, so the selection
//! draws the coarser level meanwhile. The coarsest level is loaded at start and pinned, so
//! there is always something to draw. A missing or corrupt tile is reported once and never
//! requested again.
//!
//! A budget smaller than what the view wants does not thrash: the tiles used in the last
//! frame or this one are *in use*. A finished load evicts only tiles not in use, and is
//! dropped when every tile is; a load is queued only while the tiles in use, the pinned
//! ones and the loads under way leave room for it. So the view keeps what it draws and the
//! rest of it stays coarser (the tiles first asked for get the room: the streamed
//! selections walk depth first, so no priority by distance or error yet), instead of each
//! frame's loads evicting tiles the next frame asks for again.

use super::TileError;
use super::blocks::BlockBounds;
use super::format::TerrainHeader;
use super::read::TiledTerrain;
use crate::heightfield::Samples;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, mpsc};
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
    /// Queued loads dropped before they started because no frame asked for them since
    /// (the camera moved on); asked for again, they are queued again.
    pub requests_dropped: u64,
    /// `tile_heights` calls that found the tile resident, and those that did not.
    pub hits: u64,
    pub misses: u64,
    /// Bytes of tile files read by the loaders.
    pub bytes_read: u64,
    pub tiles_evicted: u64,
    /// Misses not queued because the tiles in use and the loads under way fill the budget,
    /// and finished loads dropped because every resident tile was in use.
    pub requests_over_budget: u64,
    pub loads_over_budget: u64,
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

/// The loads waiting for a loader thread, oldest first.
#[derive(Debug, Default)]
struct LoadQueue {
    keys: VecDeque<TileKey>,
    stop: bool,
}

/// The queue and the condition loaders wait on.
type SharedQueue = Arc<(Mutex<LoadQueue>, Condvar)>;

/// A memory-capped cache of a tiled terrain's tiles, as world heights.
#[derive(Debug)]
pub struct TileCache {
    terrain: Arc<TiledTerrain>,
    budget_bytes: u64,
    tile_bytes: u64,
    resident: HashMap<TileKey, Resident>,
    /// Resident tiles in use (pinned, or used in the last frame or this one).
    in_use: usize,
    /// Loads queued or running, with the last frame that asked for each.
    pending: HashMap<TileKey, u64>,
    failed: HashSet<TileKey>,
    reports: Vec<TileError>,
    frame: u64,
    queue: SharedQueue,
    loaded: mpsc::Receiver<Loaded>,
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
        let (done, loaded) = mpsc::channel::<Loaded>();
        let queue: SharedQueue = Arc::default();
        let mut loaders = Vec::new();
        for index in 0..loader_threads.max(1) {
            let (terrain, shared, done) = (terrain.clone(), queue.clone(), done.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("tile-loader-{index}"))
                .spawn(move || loader(&terrain, &shared, &done));
            match spawned {
                Ok(handle) => loaders.push(handle),
                Err(error) => {
                    stop_loaders(&queue, &mut loaders);
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
            in_use: resident.len(),
            resident,
            pending: HashMap::new(),
            failed: HashSet::new(),
            reports: Vec::new(),
            frame: 0,
            queue,
            loaded,
            loaders,
            stats,
        })
    }

    /// The terrain the tiles come from.
    pub fn terrain(&self) -> &Arc<TiledTerrain> {
        &self.terrain
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
    /// again after it failed; not while the tiles in use and the loads under way fill the
    /// budget). Never waits on I/O.
    pub fn tile_heights(&mut self, key: TileKey) -> Option<Arc<[f32]>> {
        let start = Instant::now();
        let found = match self.resident.get_mut(&key) {
            Some(tile) => {
                if !tile.pinned && tile.last_used + 1 < self.frame {
                    self.in_use += 1;
                }
                tile.last_used = self.frame;
                self.stats.hits += 1;
                Some(tile.heights.clone())
            }
            None => {
                self.stats.misses += 1;
                let room = (self.in_use + self.pending.len() + 1) as u64 * self.tile_bytes
                    <= self.budget_bytes;
                if let Some(asked) = self.pending.get_mut(&key) {
                    *asked = self.frame;
                } else if self.failed.contains(&key) {
                    // Reported once; the coarser level stands in for good.
                } else if !room {
                    self.stats.requests_over_budget += 1;
                } else {
                    self.pending.insert(key, self.frame);
                    self.stats.requests += 1;
                    let (queue, wake) = &*self.queue;
                    if let Ok(mut queue) = queue.lock() {
                        queue.keys.push_back(key);
                        wake.notify_one();
                    }
                }
                None
            }
        };
        self.stats.longest_tile_heights = self.stats.longest_tile_heights.max(start.elapsed());
        found
    }

    /// Starts a frame: integrates the loads that finished (without waiting for any),
    /// evicting the least recently used tiles not in use to stay within the budget (a load
    /// with none to evict is dropped). Tiles used in the frame that ended stay.
    pub fn begin_frame(&mut self) {
        let start = Instant::now();
        self.frame += 1;
        let last = self.frame - 1;
        self.in_use = self
            .resident
            .values()
            .filter(|tile| tile.pinned || tile.last_used >= last)
            .count();
        self.drop_unwanted_requests();
        let mut eviction_order: Option<Vec<(u64, TileKey)>> = None;
        while let Ok((key, result)) = self.loaded.try_recv() {
            // The last frame that asked for it (a load can finish long after).
            let asked = self.pending.remove(&key).unwrap_or(0).min(last);
            match result {
                Ok(heights) => {
                    self.stats.bytes_read += self.terrain.header().tile_file_len();
                    self.stats.loads_finished += 1;
                    if self.resident.contains_key(&key) {
                        continue;
                    }
                    if !self.make_room(&mut eviction_order) {
                        self.stats.loads_over_budget += 1;
                        continue;
                    }
                    // As if used in the last frame that asked for it: in use when that was
                    // the frame that ended.
                    if asked == last {
                        self.in_use += 1;
                    }
                    self.resident.insert(
                        key,
                        Resident {
                            heights,
                            last_used: asked,
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

    /// Removes from the queue the loads that no frame asked for since the last
    /// `begin_frame` (the selection moved on); those already running finish.
    fn drop_unwanted_requests(&mut self) {
        let previous = self.frame - 1;
        let (queue, _) = &*self.queue;
        let Ok(mut queue) = queue.lock() else {
            return;
        };
        let pending = &mut self.pending;
        let before = queue.keys.len();
        queue.keys.retain(|key| {
            let wanted = pending.get(key).is_some_and(|&asked| asked >= previous);
            if !wanted {
                pending.remove(key);
            }
            wanted
        });
        self.stats.requests_dropped += (before - queue.keys.len()) as u64;
    }

    /// Evicts least recently used tiles not in use until one more tile fits in the budget;
    /// false when it does not fit (every resident tile is in use). The order is computed
    /// once per frame, only when an eviction is needed.
    fn make_room(&mut self, order: &mut Option<Vec<(u64, TileKey)>>) -> bool {
        let last = self.frame - 1;
        while (self.resident.len() as u64 + 1) * self.tile_bytes > self.budget_bytes {
            let order = order.get_or_insert_with(|| {
                let mut order: Vec<(u64, TileKey)> = self
                    .resident
                    .iter()
                    .filter(|(_, tile)| !tile.pinned && tile.last_used < last)
                    .map(|(key, tile)| (tile.last_used, *key))
                    .collect();
                // Oldest last, so `pop` takes it.
                order.sort_unstable_by(|a, b| b.cmp(a));
                order
            });
            let Some((_, key)) = order.pop() else {
                return false;
            };
            if self.resident.remove(&key).is_some() {
                self.stats.tiles_evicted += 1;
            }
        }
        true
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
        stop_loaders(&self.queue, &mut self.loaders);
    }
}

/// Empties the queue, tells every loader to stop and waits for them.
fn stop_loaders(queue: &SharedQueue, loaders: &mut Vec<JoinHandle<()>>) {
    let (lock, wake) = &**queue;
    if let Ok(mut queue) = lock.lock() {
        queue.keys.clear();
        queue.stop = true;
    }
    wake.notify_all();
    for handle in loaders.drain(..) {
        let _ = handle.join();
    }
}

/// A loader thread: takes the oldest queued key until the cache stops.
fn loader(terrain: &TiledTerrain, queue: &SharedQueue, done: &mpsc::Sender<Loaded>) {
    let (lock, wake) = &**queue;
    loop {
        let key = {
            let Ok(mut queue) = lock.lock() else { return };
            loop {
                if queue.stop {
                    return;
                }
                if let Some(key) = queue.keys.pop_front() {
                    break key;
                }
                queue = match wake.wait(queue) {
                    Ok(queue) => queue,
                    Err(_) => return,
                };
            }
        };
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
