//! Loader throughput on the shared real data: PNG (8-bit RGB and 16-bit gray), GeoTIFF and
//! ESRI ASCII grid. Each set is skipped with a visible message when `../shared/data` lacks it.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use terralod_benches::shared_data;
use terralod_core::io::{LoadOptions, load};

const SETS: [(&str, &str); 4] = [
    ("png_rgb8_gcanyon_4097x2049", "gcanyon_4097x2049_8bit.png"),
    ("png_gray16_boulder_758", "srtm3_boulder_co_758.png"),
    ("geotiff_f32_dem_hills_333x218", "dem_hills_333x218_f32.tif"),
    ("ascii_grid_boulder_758", "srtm3_boulder_co_758.asc"),
];

fn loaders(c: &mut Criterion) {
    let options = LoadOptions::default();
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    for (name, file) in SETS {
        let Some(path) = shared_data(file) else {
            continue;
        };
        let samples = match load(&path, &options) {
            Ok(loaded) => loaded.heightfield.len() as u64,
            Err(error) => {
                eprintln!("SKIPPED: {error}");
                continue;
            }
        };
        group.throughput(Throughput::Elements(samples));
        group.bench_function(name, |b| {
            b.iter(|| load(&path, &options).map(|loaded| loaded.heightfield.len()))
        });
    }
    group.finish();
}

criterion_group!(benches, loaders);
criterion_main!(benches);
