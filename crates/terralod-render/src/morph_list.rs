//! A frame's morphed vertices as the vertex shader reads them: `[vertex, height bits]`
//! pairs sorted by grid index, each vertex once, searched by bisection on the GPU.
//!
//! Algorithm A emits a morph per square that draws the vertex (an edge vertex twice,
//! always at the same height), in its tree's order: about 150 K entries a frame over the
//! Grand Canyon at 1920 × 1080. Copying, sorting (`sort_unstable`) and deduplicating them
//! took 2.1–2.3 ms a frame on the development machine, longer than the H100 took to draw
//! the frame. The keys are grid indices, below the grid's vertex count, so two counting
//! passes of at most 12 bits sort every grid up to 2^24 vertices (three up to 2^32), the
//! first pass reading the selection directly: 1.0–1.1 ms with the deduplication. On
//! synthetic keys, `radsort` (a general radix sort, four byte-wide passes) took twice this
//! sort's time (docs/BENCHMARKS.md, "GPU frame time of every algorithm").

use terralod_core::lod::MorphedHeight;

/// Widest digit of a pass: 4,096 counters (32 KB), the size of a first-level data cache.
const MAX_DIGIT_BITS: u32 = 12;

/// The sorted list and the buffers that make it, reused from frame to frame.
#[derive(Debug, Default)]
pub(crate) struct MorphList {
    sorted: Vec<[u32; 2]>,
    scratch: Vec<[u32; 2]>,
    counts: Vec<usize>,
}

impl MorphList {
    /// `morphs` sorted by vertex, each vertex's first entry kept, as `[vertex, height
    /// bits]` pairs. A least-significant-digit radix sort, stable: a vertex listed twice
    /// keeps the height it was first listed with.
    pub(crate) fn sort(&mut self, morphs: &[MorphedHeight]) -> &[[u32; 2]] {
        self.sorted.clear();
        let Some(largest) = morphs.iter().map(|m| m.vertex).max() else {
            return &self.sorted;
        };
        let bits = (u32::BITS - largest.leading_zeros()).max(1);
        let passes = bits.div_ceil(MAX_DIGIT_BITS);
        let digit_bits = bits.div_ceil(passes);
        let buckets = 1usize << digit_bits;
        let digit = move |vertex: u32, pass: u32| {
            // `pass · digit_bits < bits ≤ 32`: the shift is in range.
            ((vertex >> (pass * digit_bits)) as usize) & (buckets - 1)
        };
        // Every pass's counts in one read of the selection, then their starts.
        self.counts.clear();
        self.counts.resize(buckets * passes as usize, 0);
        for m in morphs {
            for pass in 0..passes {
                self.counts[pass as usize * buckets + digit(m.vertex, pass)] += 1;
            }
        }
        for counts in self.counts.chunks_exact_mut(buckets) {
            let mut start = 0;
            for count in counts {
                (*count, start) = (start, start + *count);
            }
        }
        // The first pass scatters from the selection; the others between the two
        // buffers, the last one into `sorted`.
        let (mut from, mut to) = if passes % 2 == 1 {
            (&mut self.scratch, &mut self.sorted)
        } else {
            (&mut self.sorted, &mut self.scratch)
        };
        to.resize(morphs.len(), [0; 2]);
        let starts = &mut self.counts[..buckets];
        for m in morphs {
            let at = &mut starts[digit(m.vertex, 0)];
            to[*at] = [m.vertex, m.height.to_bits()];
            *at += 1;
        }
        for pass in 1..passes {
            std::mem::swap(&mut from, &mut to);
            to.resize(morphs.len(), [0; 2]);
            let starts = &mut self.counts[pass as usize * buckets..][..buckets];
            for &entry in from.iter() {
                let at = &mut starts[digit(entry[0], pass)];
                to[*at] = entry;
                *at += 1;
            }
        }
        self.sorted.dedup_by_key(|m| m[0]);
        &self.sorted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the list must be: a stable sort by vertex, each vertex's first entry kept.
    fn expected(morphs: &[MorphedHeight]) -> Vec<[u32; 2]> {
        let mut pairs: Vec<[u32; 2]> = morphs
            .iter()
            .map(|m| [m.vertex, m.height.to_bits()])
            .collect();
        pairs.sort_by_key(|m| m[0]);
        pairs.dedup_by_key(|m| m[0]);
        pairs
    }

    #[test]
    fn morph_lists_are_sorted_stably_with_each_vertex_once() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 32) as u32
        };
        let mut list = MorphList::default();
        // Key ranges of one, two and three passes, the digit widths between, and the
        // largest key; lists reused across sizes (the buffers keep their lengths).
        for largest in [
            0,
            1,
            2,
            4095,
            4096,
            70_000,
            1 << 24,
            (1 << 24) + 1,
            u32::MAX,
        ] {
            for len in [0, 1, 2, 7, 1000, 20_000] {
                let morphs: Vec<MorphedHeight> = (0..len)
                    .map(|i| {
                        // The largest key first, so every range takes its passes.
                        let vertex = match largest {
                            _ if i == 0 => largest,
                            u32::MAX => next(),
                            _ => next() % (largest + 1),
                        };
                        // Heights differ between a vertex's entries, so keeping the
                        // wrong one shows.
                        MorphedHeight {
                            vertex,
                            height: next() as f32,
                        }
                    })
                    .collect();
                assert_eq!(
                    list.sort(&morphs),
                    expected(&morphs).as_slice(),
                    "largest {largest}, {len} morphs"
                );
            }
        }
    }
}
