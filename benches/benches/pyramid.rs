//! Pyramid build throughput (feature H4) on the 4097 × 2049 Grand Canyon data set.
//!
//! Run: `cargo bench -p terralod-benches --bench pyramid`. Criterion reports samples/s
//! ("elements"), counting the 4097 × 2049 data samples.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use terralod_benches::load_gcanyon;
use terralod_core::pyramid::Pyramid;

fn pyramid_build(c: &mut Criterion) {
    let Some(field) = load_gcanyon() else {
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
