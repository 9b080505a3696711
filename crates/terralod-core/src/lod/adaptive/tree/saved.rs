//! The top of a tree built page by page, as a kept page file stores it (`page_file`,
//! docs/ADAPTIVE_PAGING.md "Kept page files"): everything but the level shapes, which the
//! terrain's header gives (the caller passes them, and a top with another number of levels
//! is refused), so reading a kept tree back reads no tile.
//!
//! All values little-endian: `u64` slots, `u32` pages, `u32` levels, `u64` squares, `f32`
//! leaf error, `f32` cell size, the root's four corner heights (`f32`), the vertex height
//! codes and the box codes (seven `f64` each, [`HeightCodes::to_bytes`]); per slot its
//! record (12 bytes) and vertex heights (6 bytes of codes, or 12 of `f32` where the codes
//! are not exact); per 64 slots a rank word (`u64` bits, `u32` base); per block of four
//! slots its parent (`u32`); per page its slot count (`u32`); then per level the north
//! border's vertices and per level the west border's, each table a `u32` count and per
//! vertex its key (`u32`), drawn height (`f32`) and error code (`u16`).

use super::*;
use crate::lod::adaptive::page_file::{decode_slots, encode_slots, slot_bytes};

/// Bytes before the per-slot arrays.
const FIXED: usize = 8 + 4 + 4 + 8 + 4 + 4 + 16 + 56 + 56;

/// Bytes of one border vertex.
const BORDER_VERTEX: usize = 10;

impl SquareTree {
    /// Appends the top (every page out of the pool, no frames: as
    /// [`TreeBuilder::finish`] returns it) in the format of the module docs.
    pub fn encode_top(&self, out: &mut Vec<u8>) {
        debug_assert!(self.pages.iter().all(|p| p.first == NOT_RESIDENT));
        out.extend((self.slots() as u64).to_le_bytes());
        out.extend((self.pages.len() as u32).to_le_bytes());
        out.extend((self.levels.len() as u32).to_le_bytes());
        out.extend((self.squares as u64).to_le_bytes());
        out.extend(self.leaf_error.to_le_bytes());
        out.extend(self.cell_size.to_le_bytes());
        for corner in self.root_corners {
            out.extend(corner.to_le_bytes());
        }
        out.extend(self.heights.to_bytes());
        out.extend(self.boxes.to_bytes());
        let (records, heights) = (&self.records, &self.vertex_heights);
        encode_slots(records, heights, &self.rank, &self.parents, out);
        for page in &self.pages {
            out.extend(page.slots.to_le_bytes());
        }
        for table in self.north.iter().chain(&self.west) {
            out.extend((table.len() as u32).to_le_bytes());
            for (key, vertex) in table {
                out.extend(key.to_le_bytes());
                out.extend(vertex.height.to_le_bytes());
                out.extend(vertex.error.to_le_bytes());
            }
        }
    }

    /// The top [`SquareTree::encode_top`] wrote, with `levels` (those of the terrain it
    /// was built from), checked to be a tree of those levels: every length within the
    /// bytes before anything is allocated, every block's parent before it and pointing
    /// back, no block deeper than the levels, the page roots numbered in order with
    /// lengths of whole rank words, the border tables sorted within their levels, every
    /// height and code finite. So no walk of it can loop, leave the pool or read past a
    /// table.
    pub fn decode_top(bytes: &[u8], levels: Vec<LevelShape>) -> Result<SquareTree, &'static str> {
        let mut bytes = Cursor(bytes);
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
        let fixed = bytes.take(FIXED)?;
        let slots = u64::from_le_bytes(fixed[..8].try_into().expect("8 bytes"));
        let pages = u32_at(fixed, 8) as usize;
        let squares = u64::from_le_bytes(fixed[16..24].try_into().expect("8 bytes"));
        let f32_at = |i: usize| f32::from_le_bytes(fixed[i..i + 4].try_into().expect("4"));
        let leaf_error = f32_at(24);
        let cell_size = f32_at(28);
        let root_corners = [32, 36, 40, 44].map(f32_at);
        let codes = HeightCodes::from_bytes(fixed[48..104].try_into().expect("56 bytes"));
        let boxes = HeightCodes::from_bytes(fixed[104..160].try_into().expect("56 bytes"));
        let (Some(codes), Some(boxes)) = (codes, boxes) else {
            return Err("a height code is not finite");
        };
        if !(cell_size.is_finite() && cell_size > 0.0)
            || root_corners.iter().any(|h| !h.is_finite())
        {
            return Err("the cell size or a corner's height is not finite");
        }
        if u32_at(fixed, 12) as usize != levels.len() {
            return Err("the top has another number of levels than the terrain");
        }
        if slots == 0 || slots >= MAX_SLOTS as u64 || !(slots as usize).is_multiple_of(WORD) {
            return Err("the top's slot count is not a whole number of rank words");
        }
        if !leaf_error.is_finite() || leaf_error < 0.0 {
            return Err("the leaf error is not a finite error");
        }
        let slots = slots as usize;
        let floats = !codes.exact();
        // Records, heights, rank words, parents and page lengths (slots < 2^31).
        let arrays = slot_bytes(slots, floats);
        if bytes.left() < arrays || (bytes.left() - arrays) / 4 < pages {
            return Err("the top is shorter than its counts say");
        }
        let PageData {
            records,
            heights: vertex_heights,
            rank,
            parents,
        } = decode_slots(bytes.take(arrays)?, slots, floats)?;
        let page_slots: Vec<u32> = bytes
            .take(pages * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        if page_slots
            .iter()
            .any(|&s| s == 0 || !(s as usize).is_multiple_of(WORD) || s as usize >= MAX_SLOTS)
        {
            return Err("a page's length is not a whole number of rank words");
        }
        check_blocks(&rank, &parents, 0, levels.len() as u32 - 1, pages)?;
        let mut tables = Vec::with_capacity(2 * levels.len());
        for t in 0..2 * levels.len() {
            let count = u32::from_le_bytes(bytes.take(4)?.try_into().expect("4 bytes")) as usize;
            if bytes.left() / BORDER_VERTEX < count {
                return Err("the top is shorter than its counts say");
            }
            let shape = levels[t % levels.len()];
            let side = if t < levels.len() { shape.nx } else { shape.nz };
            let mut table = Vec::with_capacity(count);
            for v in bytes
                .take(count * BORDER_VERTEX)?
                .chunks_exact(BORDER_VERTEX)
            {
                let key = u32_at(v, 0);
                let height = f32::from_le_bytes(v[4..8].try_into().expect("4 bytes"));
                let error = u16::from_le_bytes([v[8], v[9]]);
                let after = table.last().is_none_or(|&(last, _)| key > last);
                if key >= side || !after || !height.is_finite() {
                    return Err("a border table is out of order or off its level");
                }
                table.push((key, BorderVertex { height, error }));
            }
            tables.push(table);
        }
        if bytes.left() > 0 {
            return Err("the top is longer than its counts say");
        }
        let west = tables.split_off(levels.len());
        let finest = levels[levels.len() - 1];
        Ok(SquareTree {
            records,
            vertex_heights,
            parents,
            rank,
            pages: page_slots
                .into_iter()
                .map(|slots| Page {
                    first: NOT_RESIDENT,
                    slots,
                })
                .collect(),
            extent: (finest.nx * finest.size, finest.nz * finest.size),
            levels,
            heights: codes,
            boxes,
            north: tables,
            west,
            root_corners,
            cell_size,
            squares: squares
                .try_into()
                .map_err(|_| "the square count is too large")?,
            leaf_error,
        })
    }
}

impl SquareTree {
    /// The page roots of a top read back (by [`SquareTree::decode_top`]), in the page
    /// table's order, found by a walk from the root that checks what paging assumes of a
    /// top and a file could contradict: every square reached lies on its level's grid,
    /// every square with children in the top lies above `level` (the page roots' level),
    /// every square whose children are a page lies on it.
    pub fn page_roots_on(&self, level: u32) -> Result<Vec<Sq>, &'static str> {
        self.walk_top(|sq, below| {
            if !self.levels[sq.level as usize].present(sq.ix, sq.iz) {
                return Err("a square of the top lies off its level's grid");
            }
            let misplaced = match below {
                Below::Nothing => false,
                Below::Children => sq.level >= level,
                Below::Page => sq.level != level,
            };
            if misplaced {
                return Err("the top's squares with children are not above the page roots");
            }
            Ok(())
        })
    }
}

/// The bytes not read yet.
struct Cursor<'b>(&'b [u8]);

impl<'b> Cursor<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], &'static str> {
        if self.0.len() < n {
            return Err("the top is shorter than its counts say");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn left(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-bit (or `f32`) field with detail everywhere, so every page has children.
    fn field(float: bool) -> Heightfield {
        let (w, h) = (65u32, 49u32);
        let value = |i: u32| ((i.wrapping_mul(2_654_435_761) >> 7) % 300) as u16 + 500;
        let samples = if float {
            Samples::F32((0..w * h).map(|i| f32::from(value(i)) + 0.25).collect())
        } else {
            Samples::U16((0..w * h).map(value).collect())
        };
        Heightfield::new(w, h, samples).expect("a valid field")
    }

    /// The top of `field`'s tree with pages of 8 cells, as a build on disk finishes it.
    fn top(source: &FieldSource<'_>) -> SquareTree {
        let builder = TreeBuilder::new(source, 0.0, 8, Budget::UNLIMITED).expect("built");
        let summaries: Vec<_> = (0..builder.pages())
            .map(|j| builder.page(j).expect("a page").summary)
            .collect();
        builder.finish(&summaries)
    }

    #[test]
    fn tops_decode_to_what_was_encoded() {
        for float in [false, true] {
            let field = field(float);
            let pyramid = Pyramid::build(&field);
            let source = FieldSource::new(&field, &pyramid);
            let top = top(&source);
            assert!(top.pages.len() > 4 && top.float_heights() == float);
            let mut bytes = Vec::new();
            top.encode_top(&mut bytes);
            assert!(SquareTree::decode_top(&bytes, source.shapes()) == Ok(top));
        }
    }

    /// What paging assumes of a top read back: squares with children in the top above
    /// the page roots' level, page roots on it, every square on its level's grid.
    #[test]
    fn tops_are_checked_against_the_page_level() {
        let field = field(false);
        let pyramid = Pyramid::build(&field);
        let source = FieldSource::new(&field, &pyramid);
        let top = top(&source);
        let level = top
            .levels
            .iter()
            .position(|l| l.size == 8)
            .expect("8-cell squares");
        let level = level as u32;
        assert_eq!(top.page_roots_on(level), Ok(top.page_roots()));
        let wrong = Err("the top's squares with children are not above the page roots");
        assert_eq!(top.page_roots_on(level - 1), wrong);
        assert_eq!(top.page_roots_on(level + 1), wrong);
        let mut narrow = top.clone();
        narrow.levels[level as usize].nz -= 1;
        assert_eq!(
            narrow.page_roots_on(level),
            Err("a square of the top lies off its level's grid")
        );
    }

    #[test]
    fn tops_that_are_not_trees_of_the_terrain_are_refused() {
        let field = field(false);
        let pyramid = Pyramid::build(&field);
        let source = FieldSource::new(&field, &pyramid);
        let top = top(&source);
        let page_word = top
            .rank
            .iter()
            .position(|w| w.bits != 0 && w.base >= PAGE_ROOTS)
            .expect("a word of page roots");
        let child_word = top
            .rank
            .iter()
            .position(|w| w.bits != 0 && w.base < PAGE_ROOTS)
            .expect("a word with children in the top");
        type Spoil = Box<dyn Fn(&mut SquareTree)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (
                Box::new(|t| t.parents[0] = 0),
                "the first block's parent is not outside the subtree",
            ),
            (
                Box::new(|t| t.parents[1] = 40),
                "a block's parent does not come before it",
            ),
            (
                Box::new(move |t| t.rank[child_word].base = t.slots() as u32),
                "a rank word's children lie outside the subtree",
            ),
            (
                Box::new(move |t| t.rank[child_word].base += 4),
                "a rank word and the blocks' parents disagree",
            ),
            (
                Box::new(move |t| t.rank[page_word].base += 1),
                "the page roots are not numbered in order",
            ),
            (
                Box::new(|t| t.pages.push(t.pages[0])),
                "the page table has pages no root leads to",
            ),
            (
                Box::new(|t| t.pages[0].slots = 65),
                "a page's length is not a whole number of rank words",
            ),
            (
                Box::new(|t| t.north[2].reverse()),
                "a border table is out of order or off its level",
            ),
            (
                Box::new(|t| {
                    let vertex = t.west[1][0].1;
                    t.west[1].push((1 << 20, vertex));
                }),
                "a border table is out of order or off its level",
            ),
            (
                Box::new(|t| t.leaf_error = f32::NAN),
                "the leaf error is not a finite error",
            ),
            (
                Box::new(|t| t.root_corners[3] = f32::NAN),
                "the cell size or a corner's height is not finite",
            ),
        ];
        for (spoil, problem) in cases {
            let mut spoilt = top.clone();
            spoil(&mut spoilt);
            let mut bytes = Vec::new();
            spoilt.encode_top(&mut bytes);
            assert_eq!(
                SquareTree::decode_top(&bytes, source.shapes()).err(),
                Some(problem)
            );
        }
        let mut bytes = Vec::new();
        top.encode_top(&mut bytes);
        let short = "the top is shorter than its counts say";
        for cut in [0, 10, FIXED, bytes.len() / 2, bytes.len() - 1] {
            assert_eq!(
                SquareTree::decode_top(&bytes[..cut], source.shapes()).err(),
                Some(short)
            );
        }
        bytes[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(SquareTree::decode_top(&bytes, source.shapes()).is_err());
        let mut longer = Vec::new();
        top.encode_top(&mut longer);
        longer.push(0);
        assert_eq!(
            SquareTree::decode_top(&longer, source.shapes()).err(),
            Some("the top is longer than its counts say")
        );
        // Over another terrain: another number of levels.
        let small = Heightfield::new(9, 9, Samples::U16(vec![7; 81])).expect("a valid field");
        let small_pyramid = Pyramid::build(&small);
        let other = FieldSource::new(&small, &small_pyramid);
        longer.pop();
        assert_eq!(
            SquareTree::decode_top(&longer, other.shapes()).err(),
            Some("the top has another number of levels than the terrain")
        );
        // A vertex height that is not finite, in a tree of `f32` heights.
        let field = self::field(true);
        let pyramid = Pyramid::build(&field);
        let source = FieldSource::new(&field, &pyramid);
        let mut top = self::top(&source);
        if let VertexHeights::Floats(v) = &mut top.vertex_heights {
            v[0][0] = f32::INFINITY;
        }
        let mut bytes = Vec::new();
        top.encode_top(&mut bytes);
        assert_eq!(
            SquareTree::decode_top(&bytes, source.shapes()).err(),
            Some("a vertex height is not finite")
        );
    }
}
