//! Writers: 16-bit PNG with its quantization, raw f32, round trips through the loaders, and
//! atomic replacement (no half-written or temporary file is ever left behind).

mod io_common;

use io_common::*;
use std::path::Path;
use terralod_core::io::{
    Format, LoadOptions, Quantization, WriteProblem, load, write_f32, write_file_atomically,
    write_png16,
};
use terralod_core::{Heightfield, Samples, WorldMapping};

/// Names in a folder, sorted: temporary files would show up here.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn u16_fields_are_written_sample_for_sample() {
    let dir = scratch_dir("png16-u16");
    let values = vec![0u16, 17, 65_535, 1_000, 2, 3];
    let field = Heightfield::new(3, 2, Samples::U16(values.clone()))
        .unwrap()
        .with_mapping(WorldMapping {
            cell_size: 2.0,
            height_scale: 0.1,
            height_offset: -5.0,
        })
        .unwrap();
    let path = dir.join("u16.png");
    let used = write_png16(&path, &field, Quantization::auto(&field)).unwrap();
    assert_eq!(
        used,
        Quantization {
            scale: f64::from(0.1f32),
            offset: -5.0
        }
    );
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.heightfield.samples(), &Samples::U16(values));
    assert_eq!(loaded.source.sample_type, "u16");
    assert_eq!(listing(&dir), ["u16.png"]);
}

#[test]
fn f32_fields_spread_over_the_16_bit_range() {
    let dir = scratch_dir("png16-f32");
    let heights: Vec<f32> = (0..64)
        .map(|i| 1547.0 + (i as f32 * 0.37).sin() * 900.0 + i as f32 * 3.1)
        .collect();
    let field = Heightfield::from_f32(8, 8, heights.clone()).unwrap();
    let quantization = Quantization::auto(&field);
    let path = dir.join("f32.png");
    let used = write_png16(&path, &field, quantization).unwrap();
    assert_eq!(used, quantization);
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let values = raw_values(&loaded);
    assert_eq!(values.iter().copied().fold(f32::INFINITY, f32::min), 0.0);
    assert_eq!(values.iter().copied().fold(0.0, f32::max), 65_535.0);
    for (&h, &v) in heights.iter().zip(&values) {
        let back = used.height(v as u16);
        assert!(
            (back - f64::from(h)).abs() <= used.scale / 2.0 + 1e-9,
            "{h} came back as {back}"
        );
    }
}

#[test]
fn i16_fields_are_lossless_with_the_auto_quantization() {
    let dir = scratch_dir("png16-i16");
    let values = vec![-32_768i16, -1, 0, 32_767];
    let field = Heightfield::new(2, 2, Samples::I16(values.clone())).unwrap();
    let path = dir.join("i16.png");
    let used = write_png16(&path, &field, Quantization::auto(&field)).unwrap();
    let loaded = load(&path, &LoadOptions::default()).unwrap();
    let back: Vec<f64> = raw_values(&loaded)
        .iter()
        .map(|&v| used.height(v as u16))
        .collect();
    assert_eq!(
        back,
        values.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()
    );
}

#[test]
fn a_quantization_that_does_not_fit_fails_and_leaves_nothing() {
    let dir = scratch_dir("png16-range");
    let field = Heightfield::from_f32(2, 2, vec![0.0, 10.0, 20.0, 70_000.0]).unwrap();
    let path = dir.join("out.png");
    std::fs::write(&path, b"previous contents").unwrap();
    let error = write_png16(
        &path,
        &field,
        Quantization {
            scale: 1.0,
            offset: 0.0,
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            error.problem,
            WriteProblem::OutOfRange { col: 1, row: 1, .. }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}: ", path.display()))
    );
    let error = write_png16(
        &path,
        &field,
        Quantization {
            scale: 0.0,
            offset: 0.0,
        },
    )
    .unwrap_err();
    assert!(
        matches!(error.problem, WriteProblem::InvalidQuantization { .. }),
        "{error}"
    );
    // The old file is untouched and no temporary file is left.
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    assert_eq!(listing(&dir), ["out.png"]);
}

#[test]
fn failed_writes_leave_no_temporary_file() {
    let dir = scratch_dir("atomic");
    let field = Heightfield::from_f32(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    // The target is a folder: refused before anything is written.
    let folder = dir.join("taken");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("inside"), b"x").unwrap();
    assert!(matches!(
        write_f32(&folder, &field).unwrap_err().problem,
        WriteProblem::IsFolder
    ));
    assert!(matches!(
        write_png16(&folder, &field, Quantization::auto(&field))
            .unwrap_err()
            .problem,
        WriteProblem::IsFolder
    ));
    assert_eq!(listing(&dir), ["taken"]);
    // The writer fails after some data were written: the temporary file goes too.
    let failed = write_file_atomically(&dir.join("out.obj"), |out| {
        out.write_all(b"v 0 0 0\n")?;
        Err(std::io::Error::other("the exporter failed"))
    })
    .unwrap_err();
    assert!(matches!(failed.problem, WriteProblem::Io(_)), "{failed}");
    assert_eq!(listing(&dir), ["taken"]);
    // A missing folder fails before anything is created.
    assert!(write_f32(&dir.join("no/such/folder/out.f32"), &field).is_err());
    assert_eq!(listing(&dir), ["taken"]);
}

#[test]
fn write_f32_round_trips_through_the_raw_loader() {
    let dir = scratch_dir("f32");
    let cases = [
        Heightfield::from_f32(3, 2, vec![-1.5, 0.0, 1e-7, 8848.86, -430.5, 1e30]).unwrap(),
        Heightfield::new(3, 2, Samples::U16(vec![0, 1, 2, 65_535, 4, 5])).unwrap(),
        Heightfield::new(3, 2, Samples::I16(vec![-32_768, 1, 2, 32_767, 4, 5])).unwrap(),
    ];
    for (i, field) in cases.iter().enumerate() {
        let path = dir.join(format!("field{i}.f32"));
        write_f32(&path, field).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 6 * 4);
        let loaded = load(&path, &LoadOptions::default().with_raw_size(3, 2)).unwrap();
        assert_eq!(loaded.source.format, Format::RawF32);
        let expected: Vec<f32> = (0..6).map(|s| field.samples().get(s)).collect();
        assert_eq!(loaded.heightfield.samples(), &Samples::F32(expected));
        // Writing again replaces the file atomically.
        write_f32(&path, field).unwrap();
    }
    assert_eq!(listing(&dir), ["field0.f32", "field1.f32", "field2.f32"]);
}

#[test]
fn boulder_survives_a_png16_round_trip_unchanged() {
    let Some(path) = shared_data("srtm3_boulder_co_758.png") else {
        return;
    };
    let original = load(&path, &LoadOptions::default()).unwrap();
    let dir = scratch_dir("boulder");
    let copy = dir.join("copy.png");
    let used = write_png16(
        &copy,
        &original.heightfield,
        Quantization::auto(&original.heightfield),
    )
    .unwrap();
    assert_eq!(
        used,
        Quantization {
            scale: 1.0,
            offset: 0.0
        }
    );
    let reloaded = load(&copy, &LoadOptions::default()).unwrap();
    assert_eq!(
        reloaded.heightfield.samples(),
        original.heightfield.samples()
    );
}

#[test]
fn decimal_quantization_picks_a_readable_step_that_fits() {
    use terralod_core::io::Quantization;
    let q = Quantization::decimal(0.0, 2500.0);
    assert_eq!((q.scale, q.offset), (0.05, 0.0));
    let q = Quantization::decimal(1547.3, 4320.0);
    assert_eq!(q.scale, 0.05);
    assert!(q.offset <= 1547.3 && (4320.0 - q.offset) / q.scale <= 65535.0);
    assert_eq!(Quantization::decimal(-10.0, 60000.0).scale, 1.0);
    assert_eq!(Quantization::decimal(5.0, 5.0).scale, 0.001);
}

#[cfg(unix)]
#[test]
fn written_files_are_ordinary_files_not_private_temporaries() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.f32");
    let field = terralod_core::Heightfield::from_f32(2, 2, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    terralod_core::io::write_f32(&path, &field).unwrap();
    let ordinary = dir.path().join("ordinary");
    std::fs::write(&ordinary, b"x").unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&path),
        mode(&ordinary),
        "same permissions as any file created here"
    );
}

/// A device is written in place, not replaced by a renamed temporary file (as root,
/// `/dev/full` used to become a regular file), and its errors are reported.
#[cfg(unix)]
#[test]
fn devices_are_written_in_place() {
    use terralod_core::io::write_file_atomically;
    let null = Path::new("/dev/null");
    if !null.exists() {
        eprintln!("SKIPPED: devices_are_written_in_place: no /dev/null");
        return;
    }
    write_file_atomically(null, |out| out.write_all(b"nothing")).expect("/dev/null takes it");
    assert!(
        !std::fs::metadata(null).unwrap().is_file(),
        "/dev/null was replaced"
    );
    let full = Path::new("/dev/full");
    if full.exists() {
        let error = write_file_atomically(full, |out| out.write_all(&[0u8; 1 << 17]))
            .expect_err("/dev/full has no space");
        assert!(error.to_string().contains("/dev/full"), "{error}");
        assert!(
            !std::fs::metadata(full).unwrap().is_file(),
            "/dev/full was replaced"
        );
    }
}

/// A named pipe no process reads is refused at once (opening it to write would wait for a
/// reader for ever, deaf to signals); with a reader, everything written reaches it.
#[cfg(unix)]
#[test]
fn pipes_without_a_reader_are_refused_and_pipes_with_one_are_written() {
    use std::io::Read;
    let dir = scratch_dir("fifo-output");
    let pipe = dir.join("out.bin");
    if !make_fifo(&pipe, "pipes_without_a_reader_are_refused") {
        return;
    }
    let started = std::time::Instant::now();
    let error = write_file_atomically(&pipe, |out| out.write_all(b"lost"))
        .expect_err("no process reads the pipe");
    assert!(matches!(error.problem, WriteProblem::NoReader), "{error}");
    assert!(error.to_string().contains("out.bin"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let reader = {
        let pipe = pipe.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            std::fs::File::open(&pipe)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .expect("the pipe reads");
            bytes
        })
    };
    // The reader opens the pipe when it runs: wait until it has (a write then succeeds).
    let payload = vec![7u8; 300_000];
    let mut written = false;
    for _ in 0..500 {
        match write_file_atomically(&pipe, |out| out.write_all(&payload)) {
            Ok(()) => {
                written = true;
                break;
            }
            Err(e) if matches!(e.problem, WriteProblem::NoReader) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written, "the reader never opened the pipe");
    assert_eq!(reader.join().expect("the reader ends"), payload);
    assert!(
        std::fs::metadata(&pipe).is_ok_and(|m| !m.is_file()),
        "the pipe was replaced"
    );
}
