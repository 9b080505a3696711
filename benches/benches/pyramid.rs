//! Pyramid build throughput (feature H4) on the 4097 × 2049 Grand Canyon data set.
//!
//! Run: `cargo bench -p terralod-benches --bench pyramid`. Criterion reports samples/s
//! ("elements"), counting the 4097 × 2049 data samples.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use terralod_core::heightfield::{Heightfield, Samples, WorldMapping};
use terralod_core::pyramid::Pyramid;

const GCANYON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/data/gcanyon_4097x2049_8bit.png"
);

/// Loads the 8-bit grey-as-RGB PNG with the png crate directly (red channel), 60 m spacing,
/// 10 m per unit, as the data README gives.
fn load_gcanyon() -> Option<Heightfield> {
    let file = std::fs::File::open(GCANYON).ok()?;
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .ok()?;
    let mut buf = vec![0; reader.output_buffer_size()?];
    let info = reader.next_frame(&mut buf).ok()?;
    let channels = info.color_type.samples();
    let values: Vec<u16> = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|px| u16::from(px[0]))
        .collect();
    Heightfield::new(info.width, info.height, Samples::U16(values))
        .ok()?
        .with_mapping(WorldMapping {
            cell_size: 60.0,
            height_scale: 10.0,
            height_offset: 0.0,
        })
        .ok()
}

fn pyramid_build(c: &mut Criterion) {
    let Some(field) = load_gcanyon() else {
        eprintln!("SKIPPED: {GCANYON} is absent");
        return;
    };
    let pyramid = Pyramid::build(&field);
    eprintln!(
        "gcanyon {} x {}: {} levels, {:.1} MiB of pyramid, root error {} m",
        field.width(),
        field.height(),
        pyramid.levels(),
        pyramid.memory_bytes() as f64 / (1024.0 * 1024.0),
        pyramid.node(0, 0, 0).error
    );
    let mut group = c.benchmark_group("pyramid");
    group.sample_size(10);
    group.throughput(Throughput::Elements(field.len() as u64));
    group.bench_function("build_gcanyon_4097x2049", |b| {
        b.iter(|| Pyramid::build(black_box(&field)))
    });
    group.finish();
}

criterion_group!(benches, pyramid_build);
criterion_main!(benches);
