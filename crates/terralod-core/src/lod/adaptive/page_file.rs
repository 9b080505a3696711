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
use super::tree::{PageData, RankWord, VertexHeights, WORD, check_blocks};
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
        slot_bytes(self.slots as usize, floats)
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
        Self::serve(file, dir, table, shape)
    }

    /// Starts the loader over `file`, whose pages lie where `table` says.
    fn serve(
        file: File,
        dir: &Path,
        table: Vec<Option<Entry>>,
        shape: PageShape,
    ) -> Result<PageSpool, PageError> {
        let write_error = |source| PageError::Write {
            dir: dir.to_path_buf(),
            source,
        };
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

/// Why a kept page file (`--page-file`) could not be used: the build then starts again
/// and replaces it, except for a file that is not a kept page file at all
/// ([`KeptFileError::NotKept`]), which is left alone and refused.
#[derive(Debug, thiserror::Error)]
pub enum KeptFileError {
    #[error("{path}: cannot read it: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}: not a kept page file (it would be replaced by one): remove it or name \
         another --page-file"
    )]
    NotKept { path: PathBuf },
    #[error("{path}: a kept page file of another format version")]
    Version { path: PathBuf },
    #[error("{path}: built from other tiles, another import or with other options")]
    OtherBuild { path: PathBuf },
    #[error("{path}: damaged: {problem}")]
    Damaged {
        path: PathBuf,
        problem: &'static str,
    },
    #[error("{path}: cannot serve its pages: {source}")]
    Serve {
        path: PathBuf,
        #[source]
        source: Box<PageError>,
    },
}

/// Bytes of a [`BuildKey`].
pub(super) const KEY_BYTES: usize = 48;

/// What identifies the build a kept file holds (the builder's version, the tiles' header
/// and block index, the import's time, the mapping, the build tolerance and page size), as
/// the caller packs them.
pub(super) type BuildKey = [u8; KEY_BYTES];

const KEPT_MAGIC: &[u8; 8] = b"TLAKEPT\0";
/// Magic, key, top offset and length, top CRC, pages, table CRC, footer CRC.
pub(super) const FOOTER_BYTES: usize = 8 + KEY_BYTES + 8 + 8 + 4 + 4 + 4 + 4;
const TABLE_ENTRY: usize = 16;

/// A kept page file written whole under a temporary name beside its path
/// ([`KeptWriter::finish`]), waiting to be renamed to it ([`PendingKept::keep`]) or, if
/// dropped, removed: so a build that fails, or stands in for a tile, leaves what was at
/// the path as it was.
#[derive(Debug)]
pub(super) struct PendingKept {
    temp: tempfile::TempPath,
    path: PathBuf,
}

impl PendingKept {
    /// Renames the file to its path, replacing what was there.
    pub fn keep(self) -> Result<(), PageError> {
        let path = self.path;
        self.temp.persist(&path).map_err(|e| PageError::Write {
            dir: path,
            source: e.error,
        })
    }
}

/// A kept page file being written: a temporary file beside its path, which the top, the
/// table and the footer follow ([`KeptWriter::finish`]).
pub(super) struct KeptWriter {
    file: tempfile::NamedTempFile,
    path: PathBuf,
    table: Vec<Option<Entry>>,
}

impl KeptWriter {
    /// Writes pages `0..pages` (`page(j)`, every one of them) to a new temporary file
    /// beside `path`.
    pub fn write(
        path: &Path,
        pages: usize,
        page: impl FnMut(usize) -> Option<PageData>,
        floats: bool,
    ) -> Result<KeptWriter, PageError> {
        let write_error = |source| PageError::Write {
            dir: path.to_path_buf(),
            source,
        };
        let beside = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // Readable by others, as the tiles are (the temporary file's default is private);
        // named after the file, so one left by a killed run is recognised.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let prefix = format!(".{}.", name.unwrap_or_default());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".partial");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
        let file = builder.tempfile_in(beside).map_err(write_error)?;
        let table = write_pages(file.as_file(), pages, page, floats).map_err(write_error)?;
        Ok(KeptWriter {
            file,
            path: path.to_path_buf(),
            table,
        })
    }

    /// Appends `top` (the tree's top, [`SquareTree::encode_top`](super::tree)), the page
    /// table and the footer, syncs the file and starts the loader over it; the file keeps
    /// its temporary name until [`PendingKept::keep`].
    pub fn finish(
        self,
        top: &[u8],
        key: &BuildKey,
        shape: PageShape,
    ) -> Result<(PageSpool, PendingKept), PageError> {
        let path = self.path;
        let write_error = |source| PageError::Write {
            dir: path.clone(),
            source,
        };
        let mut file = self.file;
        let top_offset = file.as_file().seek(SeekFrom::End(0)).map_err(write_error)?;
        let mut table = Vec::with_capacity(self.table.len() * TABLE_ENTRY);
        for entry in &self.table {
            let Some(entry) = entry else {
                return Err(write_error(io::Error::other("a page was not written")));
            };
            table.extend(entry.offset.to_le_bytes());
            table.extend(entry.slots.to_le_bytes());
            table.extend(entry.crc.to_le_bytes());
        }
        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        footer.extend_from_slice(KEPT_MAGIC);
        footer.extend_from_slice(key);
        footer.extend(top_offset.to_le_bytes());
        footer.extend((top.len() as u64).to_le_bytes());
        footer.extend(crc32fast::hash(top).to_le_bytes());
        footer.extend((self.table.len() as u32).to_le_bytes());
        footer.extend(crc32fast::hash(&table).to_le_bytes());
        footer.extend(crc32fast::hash(&footer).to_le_bytes());
        let out = file.as_file_mut();
        out.write_all(top)
            .and_then(|()| out.write_all(&table))
            .and_then(|()| out.write_all(&footer))
            .and_then(|()| out.sync_all())
            .map_err(write_error)?;
        let (file, temp) = file.into_parts();
        let spool = PageSpool::serve(file, &path, self.table, shape)?;
        Ok((spool, PendingKept { temp, path }))
    }
}

/// A kept page file opened and checked up to its pages: its top's bytes, and the table
/// of its pages to serve once the top is known ([`OpenedKept::serve`]).
pub(super) struct OpenedKept {
    file: File,
    path: PathBuf,
    table: Vec<Option<Entry>>,
    /// Where the top begins: the pages lie before it.
    top_offset: u64,
    pub top: Vec<u8>,
}

impl OpenedKept {
    /// Opens the kept file at `path` if it holds the build `key` names: its footer, the
    /// key, the table's and the top's checksums (the top itself is checked by whoever
    /// decodes it, the pages as they are read).
    pub fn open(path: &Path, key: &BuildKey) -> Result<OpenedKept, KeptFileError> {
        let read_error = |source| KeptFileError::Read {
            path: path.to_path_buf(),
            source,
        };
        let damaged = |problem| KeptFileError::Damaged {
            path: path.to_path_buf(),
            problem,
        };
        let mut file = File::open(path).map_err(read_error)?;
        let len = file.metadata().map_err(read_error)?.len();
        if len == 0 {
            return Err(damaged("empty"));
        }
        // A file that does not begin as a page file is not ours to replace.
        let mut header = [0u8; HEADER_BYTES as usize];
        if len < HEADER_BYTES || file.read_exact(&mut header).is_err() || &header[..8] != MAGIC {
            return Err(KeptFileError::NotKept {
                path: path.to_path_buf(),
            });
        }
        if header[8..12] != VERSION.to_le_bytes() {
            return Err(KeptFileError::Version {
                path: path.to_path_buf(),
            });
        }
        let mut footer = [0u8; FOOTER_BYTES];
        if len < HEADER_BYTES + FOOTER_BYTES as u64 {
            return Err(damaged("cut short before its footer"));
        }
        file.seek(SeekFrom::End(-(FOOTER_BYTES as i64)))
            .and_then(|_| file.read_exact(&mut footer))
            .map_err(read_error)?;
        if &footer[..8] != KEPT_MAGIC {
            return Err(damaged("no footer: cut short, or of an older format"));
        }
        let u64_at = |i: usize| u64::from_le_bytes(footer[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(footer[i..i + 4].try_into().expect("4 bytes"));
        if crc32fast::hash(&footer[..FOOTER_BYTES - 4]) != u32_at(FOOTER_BYTES - 4) {
            return Err(damaged("the footer's checksum does not match"));
        }
        let after_key = 8 + KEY_BYTES;
        if footer[8..after_key] != key[..] {
            return Err(KeptFileError::OtherBuild {
                path: path.to_path_buf(),
            });
        }
        let (top_offset, top_len) = (u64_at(after_key), u64_at(after_key + 8));
        let (top_crc, pages) = (u32_at(after_key + 16), u32_at(after_key + 20) as u64);
        let table_crc = u32_at(after_key + 24);
        let table_len = pages * TABLE_ENTRY as u64;
        let end = top_offset
            .checked_add(top_len)
            .and_then(|e| e.checked_add(table_len))
            .and_then(|e| e.checked_add(FOOTER_BYTES as u64));
        if top_offset < HEADER_BYTES || end != Some(len) {
            return Err(damaged("its parts' lengths do not add up to the file's"));
        }
        let mut top = vec![0; top_len as usize];
        let mut table_bytes = vec![0; table_len as usize];
        file.seek(SeekFrom::Start(top_offset))
            .and_then(|_| file.read_exact(&mut top))
            .and_then(|()| file.read_exact(&mut table_bytes))
            .map_err(read_error)?;
        if crc32fast::hash(&top) != top_crc {
            return Err(damaged("the top's checksum does not match"));
        }
        if crc32fast::hash(&table_bytes) != table_crc {
            return Err(damaged("the page table's checksum does not match"));
        }
        let table = table_bytes
            .chunks_exact(TABLE_ENTRY)
            .map(|e| {
                Some(Entry {
                    offset: u64::from_le_bytes(e[..8].try_into().expect("8 bytes")),
                    slots: u32::from_le_bytes(e[8..12].try_into().expect("4 bytes")),
                    crc: u32::from_le_bytes(e[12..].try_into().expect("4 bytes")),
                })
            })
            .collect();
        Ok(OpenedKept {
            file,
            path: path.to_path_buf(),
            table,
            top_offset,
            top,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts the loader over the pages, once the top is decoded: each entry must have
    /// the length of its page in the top (`page_slots`, which the loader decodes it to)
    /// and lie after the one before it, before the top.
    pub fn serve(self, page_slots: &[u32], shape: PageShape) -> Result<PageSpool, KeptFileError> {
        let damaged = |problem| KeptFileError::Damaged {
            path: self.path.clone(),
            problem,
        };
        if page_slots.len() != self.table.len() {
            return Err(damaged("its page table and its top count other pages"));
        }
        let mut next = HEADER_BYTES;
        for (entry, &slots) in self.table.iter().flatten().zip(page_slots) {
            if entry.slots != slots {
                return Err(damaged("a page's length differs from its top's"));
            }
            let len = entry.len(shape.floats) as u64;
            if entry.offset != next || entry.offset + len > self.top_offset {
                return Err(damaged(
                    "its pages do not lie one after another before the top",
                ));
            }
            next += len;
        }
        PageSpool::serve(self.file, &self.path, self.table, shape).map_err(|source| {
            KeptFileError::Serve {
                path: self.path.clone(),
                source: Box::new(source),
            }
        })
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
    encode_slots(&page.records, &page.heights, &page.rank, &page.parents, out);
}

/// Appends a run of pool slots as a page stores them: records, vertex heights, rank
/// words, blocks' parents (a kept file's top stores its slots so too).
pub(super) fn encode_slots(
    records: &[SquareRecord],
    heights: &VertexHeights,
    rank: &[RankWord],
    parents: &[u32],
    out: &mut Vec<u8>,
) {
    for record in records {
        out.extend_from_slice(&record.to_bytes());
    }
    match heights {
        VertexHeights::Codes(v) => v.iter().flatten().for_each(|c| out.extend(c.to_le_bytes())),
        VertexHeights::Floats(v) => v.iter().flatten().for_each(|h| out.extend(h.to_le_bytes())),
    }
    for word in rank {
        out.extend(word.bits.to_le_bytes());
        out.extend(word.base.to_le_bytes());
    }
    for parent in parents {
        out.extend(parent.to_le_bytes());
    }
}

/// Bytes of `slots` slots as [`encode_slots`] writes them.
pub(super) fn slot_bytes(slots: usize, floats: bool) -> usize {
    slots * (12 + height_bytes(floats)) + slots / WORD * 12 + slots / 4 * 4
}

/// The slots [`encode_slots`] wrote (`bytes` exactly [`slot_bytes`] long), their vertex
/// heights checked to be finite; nothing else checked.
pub(super) fn decode_slots(
    bytes: &[u8],
    slots: usize,
    floats: bool,
) -> Result<PageData, &'static str> {
    debug_assert_eq!(bytes.len(), slot_bytes(slots, floats));
    let (records, rest) = bytes.split_at(slots * 12);
    let (heights, rest) = rest.split_at(slots * height_bytes(floats));
    let (rank, parents) = rest.split_at(slots / WORD * 12);
    let records = records
        .chunks_exact(12)
        .map(|c| SquareRecord::from_bytes(c.try_into().expect("12 bytes")))
        .collect();
    let heights = if floats {
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
    let rank = rank
        .chunks_exact(12)
        .map(|c| RankWord {
            bits: u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
            base: u32::from_le_bytes(c[8..].try_into().expect("4 bytes")),
        })
        .collect();
    let parents = parents
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Ok(PageData {
        records,
        heights,
        rank,
        parents,
    })
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
    let page = decode_slots(bytes, slots, shape.floats)?;
    check_blocks(&page.rank, &page.parents, 1, shape.depth, 0)?;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lod::adaptive::tree::OUTSIDE;

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
                "the first block's parent is not outside the subtree",
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
                "a rank word's children lie outside the subtree",
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
                "a block lies deeper than the tree's levels",
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
