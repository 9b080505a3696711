//! Criterion benchmarks of the procedural terrain (feature H3): the built-in 1025² terrain
//! and the 4097² size the performance target names (under 5 s on this project's 2-core
//! machines). `cargo bench -p terralod-benches --bench generate`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use terralod_core::generate::{GenerateOptions, generate};

fn generate_sizes(c: &mut Criterion) {
    let mut group = c.benchmark_group("generate");
    // Seconds per run at the top size: the fewest samples criterion accepts.
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for size in [257u32, 1025, 4097] {
        let options = GenerateOptions::default().with_size(size);
        group.throughput(Throughput::Elements(u64::from(size) * u64::from(size)));
        group.measurement_time(Duration::from_secs(if size > 1025 { 40 } else { 10 }));
        group.bench_with_input(BenchmarkId::from_parameter(size), &options, |b, options| {
            b.iter(|| generate(black_box(options)).expect("valid options"));
        });
    }
    group.finish();
}

criterion_group!(benches, generate_sizes);
criterion_main!(benches);
