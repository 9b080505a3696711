//! A8 step 3: algorithm A's pages on disk. The pages are written once, one after
//! another, to a *spool* file without a name (so it goes with the process, however
//! that ends; the table of where each page lies and its CRC-32 stays in memory, and
//! nothing is `fsync`ed), and read back on a loader thread when Update() asks for them, so
//! no update waits on the disk (docs/ADAPTIVE_PAGING.md).
//!
//! A page that cannot be read, fails its checksum or does not decode to a well-formed
//! subtree is reported ([`PageError`]) and never asked for again; its root stays a leaf.
//!
//! # The file
//!
//! A 16-byte header (`TLAPAGE\0`, the format version and the kind of vertex heights, as
//! little-endian `u32`s), then each page's bytes, little-endian, in the order of
//! [`PageData`]'s fields: per slot its record (12 bytes) and its three vertex heights (6
//! bytes of codes or 12 of `f32`), per 64 slots a rank word (the bits as `u64`, the base
//! as `u32`), per block of four slots its parent (`u32`). Bases and parents count from the
//! page's first slot.

use super::records::SquareRecord;
use super::tree::{OUTSIDE, PageData, RankWord, VertexHeights, WORD};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, mpsc};
use std::thread::JoinHandle;

/// Why pages could not be put on disk, or why one could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error(
        "algorithm adaptive holds no pages in frames (page_frames 0, a terrain without a \
         page, or frames too many for a pool): no page to keep on disk"
    )]
    NotPaged,
    #[error("cannot write the page spool in {dir}: {source}")]
    Write {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the page loader thread: {0}")]
    Spawn(#[source] io::Error),
    #[error(
        "page {page} of the page spool in {dir}: cannot read its {len} bytes at offset \
         {offset}: {source}"
    )]
    Read {
        dir: PathBuf,
        page: usize,
        offset: u64,
        len: usize,
        #[source]
        source: io::Error,
    },
    #[error(
        "page {page} of the page spool in {dir}: checksum {found:08x} where {expected:08x} \
         was written (the page is corrupt)"
    )]
    Checksum {
        dir: PathBuf,
        page: usize,
        expected: u32,
        found: u32,
    },
    #[error("page {page} of the page spool in {dir}: {problem}")]
    Malformed {
        dir: PathBuf,
        page: usize,
        problem: &'static str,
    },
    #[error("page {page} of the page spool in {dir}: the page loader stopped before reading it")]
    Stopped { dir: PathBuf, page: usize },
}

const MAGIC: &[u8; 8] = b"TLAPAGE\0";
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 16;

/// Bytes of one slot's vertex heights on disk.
fn height_bytes(floats: bool) -> usize {
    if floats { 12 } else { 6 }
}

/// Where a page lies in the file.
#[derive(Clone, Copy, Debug)]
struct Entry {
    offset: u64,
    slots: u32,
    crc: u32,
}

impl Entry {
    fn len(&self, floats: bool) -> usize {
        let slots = self.slots as usize;
        slots * (12 + height_bytes(floats)) + slots / WORD * 12 + slots / 4 * 4
    }
}

/// What the loader thread sends back: the page and what reading it gave.
pub(super) type Loaded = (u32, Result<PageData, PageError>);

/// Pages on disk and the thread that reads them.
#[derive(Debug)]
pub(super) struct PageSpool {
    /// The folder of the file (which has no name, so it goes with the process however
    /// that ends), for messages.
    dir: PathBuf,
    /// The file, for inspection and fault injection (the loader reads its own handle).
    file: File,
    requests: Option<mpsc::Sender<u32>>,
    /// In a mutex only so that the algorithm stays `Sync` (Render() shares it between
    /// threads); Update() takes from it through `&mut`, never locking.
    loaded: Mutex<mpsc::Receiver<Loaded>>,
    loader: Option<JoinHandle<()>>,
    /// Tells the loader to stop before its next read.
    stop: std::sync::Arc<AtomicBool>,
    /// Bytes of page files read so far (by the loader).
    bytes_read: std::sync::Arc<AtomicU64>,
}

/// What the loader had for [`PageSpool::receive`].
pub(super) enum Received {
    Page(Loaded),
    Nothing,
    /// The loader has stopped: nothing more will come.
    Stopped,
}

/// What decoding needs to know of the tree besides the page: the kind of vertex heights
/// and how many levels a page may have below its root.
#[derive(Clone, Copy, Debug)]
pub(super) struct PageShape {
    pub floats: bool,
    pub depth: u32,
}

impl PageSpool {
    /// Writes pages `0..pages` (`page(j)`, `None` for a page never read back) to a new
    /// unnamed file in `dir`, one at a time, and starts the loader.
    pub fn write(
        dir: &Path,
        pages: usize,
        page: impl FnMut(usize) -> Option<PageData>,
        shape: PageShape,
    ) -> Result<PageSpool, PageError> {
        let write_error = |source| PageError::Write {
            dir: dir.to_path_buf(),
            source,
        };
        let file = tempfile::tempfile_in(dir).map_err(write_error)?;
        let table = write_pages(&file, pages, page, shape.floats).map_err(write_error)?;
        let (requests, asked) = mpsc::channel::<u32>();
        let (done, loaded) = mpsc::channel::<Loaded>();
        let bytes_read = std::sync::Arc::new(AtomicU64::new(0));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let reader = Reader {
            file: file.try_clone().map_err(write_error)?,
            dir: dir.to_path_buf(),
            table,
            shape,
            bytes_read: bytes_read.clone(),
        };
        let loader = std::thread::Builder::new()
            .name("page-loader".into())
            .spawn(move || {
                for j in asked {
                    if stopped.load(Ordering::Relaxed)
                        || done.send((j, reader.read(j as usize))).is_err()
                    {
                        break;
                    }
                }
            })
            .map_err(PageError::Spawn)?;
        Ok(PageSpool {
            dir: dir.to_path_buf(),
            file,
            requests: Some(requests),
            loaded: Mutex::new(loaded),
            loader: Some(loader),
            stop,
            bytes_read,
        })
    }

    /// The folder the file is in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file the pages are in.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Asks the loader for page `j`.
    pub fn request(&self, j: u32) {
        if let Some(requests) = &self.requests {
            // A loader that stopped is seen by `receive`.
            let _ = requests.send(j);
        }
    }

    /// A page the loader has read, waiting for one if `wait`.
    pub fn receive(&mut self, wait: bool) -> Received {
        let loaded = self.loaded.get_mut().unwrap_or_else(|e| e.into_inner());
        let result = if wait {
            loaded.recv().map_err(|_| mpsc::TryRecvError::Disconnected)
        } else {
            loaded.try_recv()
        };
        match result {
            Ok(page) => Received::Page(page),
            Err(mpsc::TryRecvError::Empty) => Received::Nothing,
            Err(mpsc::TryRecvError::Disconnected) => Received::Stopped,
        }
    }

    /// The error of a page the loader will not read, having stopped.
    pub fn stopped(&self, page: usize) -> PageError {
        PageError::Stopped {
            dir: self.dir.clone(),
            page,
        }
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }
}

impl Drop for PageSpool {
    /// Stops the loader (after the read it is in, leaving the requests queued); the file,
    /// unnamed, goes with its last handle.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.requests = None;
        if let Some(loader) = self.loader.take() {
            let _ = loader.join();
        }
    }
}

/// Writes the header and the pages to `file`; returns each page's entry.
fn write_pages(
    file: &File,
    pages: usize,
    mut page: impl FnMut(usize) -> Option<PageData>,
    floats: bool,
) -> io::Result<Vec<Option<Entry>>> {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    out.write_all(&u32::from(floats).to_le_bytes())?;
    let mut offset = HEADER_BYTES;
    let mut table = Vec::with_capacity(pages);
    let mut bytes = Vec::new();
    for j in 0..pages {
        let Some(page) = page(j) else {
            table.push(None);
            continue;
        };
        bytes.clear();
        encode(&page, &mut bytes);
        out.write_all(&bytes)?;
        table.push(Some(Entry {
            offset,
            slots: page.records.len() as u32,
            crc: crc32fast::hash(&bytes),
        }));
        offset += bytes.len() as u64;
    }
    out.flush()?;
    Ok(table)
}

/// Appends the page's bytes (see the module docs).
fn encode(page: &PageData, out: &mut Vec<u8>) {
    for record in &page.records {
        out.extend_from_slice(&record.to_bytes());
    }
    match &page.heights {
        VertexHeights::Codes(v) => v.iter().flatten().for_each(|c| out.extend(c.to_le_bytes())),
        VertexHeights::Floats(v) => v.iter().flatten().for_each(|h| out.extend(h.to_le_bytes())),
    }
    for word in &page.rank {
        out.extend(word.bits.to_le_bytes());
        out.extend(word.base.to_le_bytes());
    }
    for parent in &page.parents {
        out.extend(parent.to_le_bytes());
    }
}

/// The loader's side: the file and its table.
struct Reader {
    file: File,
    dir: PathBuf,
    table: Vec<Option<Entry>>,
    shape: PageShape,
    bytes_read: std::sync::Arc<AtomicU64>,
}

impl Reader {
    fn read(&self, page: usize) -> Result<PageData, PageError> {
        let malformed = |problem| PageError::Malformed {
            dir: self.dir.clone(),
            page,
            problem,
        };
        let entry = self
            .table
            .get(page)
            .copied()
            .flatten()
            .ok_or_else(|| malformed("the page was not written to the file"))?;
        let len = entry.len(self.shape.floats);
        let mut bytes = vec![0; len];
        (&self.file)
            .seek(SeekFrom::Start(entry.offset))
            .and_then(|_| (&self.file).read_exact(&mut bytes))
            .map_err(|source| PageError::Read {
                dir: self.dir.clone(),
                page,
                offset: entry.offset,
                len,
                source,
            })?;
        self.bytes_read.fetch_add(len as u64, Ordering::Relaxed);
        let found = crc32fast::hash(&bytes);
        if found != entry.crc {
            return Err(PageError::Checksum {
                dir: self.dir.clone(),
                page,
                expected: entry.crc,
                found,
            });
        }
        decode(&bytes, entry.slots as usize, self.shape).map_err(malformed)
    }
}

/// The page `encode` wrote, checked to be a tree (so no walk of it can loop, go deeper
/// than the levels or leave it): every block's parent comes before it, every square with
/// children has its children's block within the page and pointing back to it, and no
/// block lies deeper than `shape.depth` levels below the root.
fn decode(bytes: &[u8], slots: usize, shape: PageShape) -> Result<PageData, &'static str> {
    let mut rest = bytes;
    let mut take = |n: usize| {
        let (head, tail) = rest.split_at(n);
        rest = tail;
        head
    };
    let records = take(slots * 12)
        .chunks_exact(12)
        .map(|c| SquareRecord::from_bytes(c.try_into().expect("12 bytes")))
        .collect();
    let heights = take(slots * height_bytes(shape.floats));
    let heights = if shape.floats {
        let values: Vec<f32> = heights
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if values.iter().any(|h| !h.is_finite()) {
            return Err("a vertex height is not finite");
        }
        VertexHeights::Floats(values.chunks_exact(3).map(|h| [h[0], h[1], h[2]]).collect())
    } else {
        let codes: Vec<u16> = heights
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        VertexHeights::Codes(codes.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    };
    let rank: Vec<RankWord> = take(slots / WORD * 12)
        .chunks_exact(12)
        .map(|c| RankWord {
            bits: u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
            base: u32::from_le_bytes(c[8..].try_into().expect("4 bytes")),
        })
        .collect();
    let parents: Vec<u32> = take(slots / 4 * 4)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    // Levels below the root of each block (0: unused), from its parent's.
    let mut depth = vec![0u32; parents.len()];
    for (b, &parent) in parents.iter().enumerate() {
        depth[b] = match parent {
            OUTSIDE => u32::from(b == 0),
            _ if b == 0 => return Err("the first block's parent is not the root"),
            p if (p as usize) < 4 * b => depth[p as usize / 4] + 1,
            _ => return Err("a block's parent does not come before it"),
        };
        if depth[b] > shape.depth {
            return Err("the page is deeper than the tree's levels");
        }
    }
    for (w, word) in rank.iter().enumerate() {
        if word.bits == 0 {
            continue;
        }
        let base = word.base as usize;
        let children = 4 * word.bits.count_ones() as usize;
        if !base.is_multiple_of(4) || base + children > slots {
            return Err("a rank word's children lie outside the page");
        }
        let mut bits = word.bits;
        for &parent in &parents[base / 4..(base + children) / 4] {
            let square = w * WORD + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if parent as usize != square {
                return Err("a rank word and the blocks' parents disagree");
            }
        }
    }
    Ok(PageData {
        records,
        heights,
        rank,
        parents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of two levels: the root's block (slot 0 with children), its children's
    /// block, padded to a rank word.
    fn small_page() -> PageData {
        let mut parents = vec![OUTSIDE; WORD / 4];
        parents[1] = 0;
        PageData {
            records: (0..WORD as u16)
                .map(|i| SquareRecord::new((i, i + 3), 0.5, 0.25, 0.125))
                .collect(),
            heights: VertexHeights::Codes((0..WORD as u16).map(|i| [i, i + 1, i + 2]).collect()),
            rank: vec![RankWord { bits: 1, base: 4 }],
            parents,
        }
    }

    const SHAPE: PageShape = PageShape {
        floats: false,
        depth: 2,
    };

    #[test]
    fn pages_decode_to_what_was_encoded() {
        let page = small_page();
        let mut bytes = Vec::new();
        encode(&page, &mut bytes);
        assert_eq!(
            bytes.len(),
            Entry {
                offset: 0,
                slots: WORD as u32,
                crc: 0
            }
            .len(false)
        );
        assert_eq!(decode(&bytes, WORD, SHAPE), Ok(page));
    }

    #[test]
    fn pages_that_are_not_trees_are_refused() {
        type Spoil = fn(&mut PageData);
        let cases: [(Spoil, &str); 7] = [
            (
                |p| p.parents[0] = 0,
                "the first block's parent is not the root",
            ),
            (
                |p| p.parents[1] = 9,
                "a block's parent does not come before it",
            ),
            (
                // The block of slot 5's children is block 1, before slot 5.
                |p| {
                    p.rank[0] = RankWord {
                        bits: 0b100000,
                        base: 4,
                    };
                    p.parents[1] = 5;
                },
                "a block's parent does not come before it",
            ),
            (
                |p| p.rank[0].base = WORD as u32,
                "a rank word's children lie outside the page",
            ),
            (
                |p| p.parents[1] = 1,
                "a rank word and the blocks' parents disagree",
            ),
            (
                |p| {
                    p.rank[0] = RankWord {
                        bits: 0b10001,
                        base: 4,
                    };
                    p.parents[2] = 4;
                },
                "the page is deeper than the tree's levels",
            ),
            (
                |p| {
                    p.heights = VertexHeights::Floats(vec![[f32::NAN, 0.0, 0.0]; WORD]);
                },
                "a vertex height is not finite",
            ),
        ];
        for (spoil, problem) in cases {
            let mut page = small_page();
            spoil(&mut page);
            let floats = matches!(page.heights, VertexHeights::Floats(_));
            let mut bytes = Vec::new();
            encode(&page, &mut bytes);
            let shape = PageShape { floats, ..SHAPE };
            assert_eq!(decode(&bytes, WORD, shape), Err(problem));
        }
    }
}
