//! End-to-end tests of `terralod import` and `terralod info DIR`.

use std::path::Path;
use std::process::{Command, Output};

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

fn ok(args: &[&str]) -> String {
    let output = terralod(args);
    assert!(
        output.status.success(),
        "terralod {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs a command that must fail with exit code 1 and one error line naming `needle`.
fn fails_naming(args: &[&str], needle: &str) {
    let output = terralod(args);
    assert_eq!(output.status.code(), Some(1), "terralod {args:?}");
    let message = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {message}");
    assert!(
        lines[0].starts_with("error: ") && message.contains(needle),
        "{message}"
    );
}

fn last_json(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().expect("some output");
    serde_json::from_str(line).expect("the last line is JSON")
}

/// `terralod import FILE --tile-size 16 FLAGS --out OUT`'s JSON summary.
fn import_file(file: &str, out: &Path, flags: &[&str]) -> serde_json::Value {
    let mut args = vec!["import", file, "--tile-size", "16"];
    args.extend(flags);
    args.extend(["--out", out.to_str().expect("UTF-8")]);
    last_json(&ok(&args))
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Whether two directories hold the same files, byte for byte.
fn assert_same_directories(expected: &Path, actual: &Path) {
    let (expected, actual) = (
        terralod_testkit::directory_files(expected),
        terralod_testkit::directory_files(actual),
    );
    assert_eq!(expected.len(), actual.len());
    assert!(expected == actual, "the two imports differ");
}

#[test]
fn import_generates_tiles_reports_json_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("tiles");
    let out_arg = out.to_str().expect("a UTF-8 path");
    let args = [
        "import",
        "--generate-size",
        "65",
        "--seed",
        "3",
        "--tile-size",
        "16",
        "--block-size",
        "4",
        "--height-scale",
        "2",
        "--out",
        out_arg,
    ];
    let summary = last_json(&ok(&args));
    assert_eq!(summary["width"], 65);
    assert_eq!(summary["levels"], 3);
    assert_eq!(summary["tiles"], 16 + 4 + 1);
    assert_eq!(summary["samples"], 65 * 65);
    assert!(summary["samples_per_second"].as_f64().expect("a number") > 0.0);
    assert!(out.join("terrain.tlod").is_file());
    assert!(out.join("2/0/0.tile").is_file());

    let info = last_json(&ok(&["info", "--json", out_arg]));
    assert_eq!(info["tile_cells"], 16);
    assert_eq!(info["block_cells"], 4);
    assert!(out.join("blocks.tlod").is_file());
    assert_eq!(info["height_scale"], 2.0);
    assert_eq!(info["tiles"], 21);
    assert!(ok(&["info", out_arg]).contains("level 2"));
    // The mapping flags apply to a directory as the other commands apply them.
    let mapped = last_json(&ok(&[
        "info",
        "--json",
        out_arg,
        "--cell-size",
        "5",
        "--height-scale",
        "4",
        "--height-offset",
        "-7",
    ]));
    assert_eq!(mapped["cell_size"], 5.0);
    assert_eq!(
        (
            mapped["height_scale"].clone(),
            mapped["height_offset"].clone()
        ),
        (4.0.into(), (-7.0).into())
    );
    let span =
        |j: &serde_json::Value| j["world_max"].as_f64().unwrap() - j["world_min"].as_f64().unwrap();
    assert!(
        (span(&mapped) / span(&info) - 2.0).abs() < 1e-3,
        "{mapped} against {info}"
    );
    // The file flags mean nothing for a directory.
    fails_naming(
        &["info", out_arg, "--raw-size", "8x8"],
        "--raw-size does not apply to an imported directory",
    );

    fails_naming(&args, "not empty");
    let mut forced = args.to_vec();
    forced.push("--force");
    ok(&forced);

    // An output that is the source, or holds it, is refused before `--force` clears it,
    // and the source is left as it was.
    let header = std::fs::read(out.join("terrain.tlod")).expect("written");
    let inner = out.join("inner.f32");
    std::fs::write(&inner, vec![0u8; 16 * 4]).expect("writable");
    let inner_arg = inner.to_str().expect("UTF-8");
    for source in [
        &["import", out_arg][..],
        &["import", inner_arg, "--raw-size", "4x4"],
    ] {
        let mut command = source.to_vec();
        command.extend(["--out", out_arg, "--force"]);
        fails_naming(&command, "which this import reads");
    }
    assert_eq!(
        std::fs::read(out.join("terrain.tlod")).expect("kept"),
        header
    );
    std::fs::remove_file(&inner).expect("removable");

    // A directory without its header is an unfinished import.
    std::fs::remove_file(out.join("terrain.tlod")).expect("removable");
    fails_naming(&["info", out_arg], "import that did not finish");
}

#[test]
fn import_refuses_bad_flags_with_one_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("t");
    let out_arg = out.to_str().expect("a UTF-8 path");
    // A size that is no power of two in range is a bad flag (exit 2, as clap's), a block
    // larger than the tile a bad combination (exit 1).
    for (size, flag) in [
        ("12", "--tile-size"),
        ("8192", "--tile-size"),
        ("3", "--block-size"),
    ] {
        let output = terralod(&[
            "import",
            "--generate-size",
            "33",
            flag,
            size,
            "--out",
            out_arg,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag} {size}: {stderr}");
        assert!(
            stderr.contains("not a power of two from 2 to 4096"),
            "{stderr}"
        );
    }
    assert!(!out.exists());
    fails_naming(
        &[
            "import",
            "--generate-size",
            "33",
            "--tile-size",
            "16",
            "--block-size",
            "32",
            "--out",
            out_arg,
        ],
        "not a power of two in 2 ..= 16 (the tile size)",
    );
    // The largest accepted size: terabytes of tiles and more statistics than memory.
    // Refused before anything is written (it used to be killed for memory in seconds,
    // leaving a folder of empty directories).
    let started = std::time::Instant::now();
    fails_naming(
        &["import", "--generate-size", "4194305", "--out", out_arg],
        "GB",
    );
    assert!(started.elapsed().as_secs() < 30);
    assert!(!out.exists());
    // Over an earlier import with --force, the refusal comes before the old header goes.
    ok(&["import", "--generate-size", "33", "--out", out_arg]);
    fails_naming(
        &[
            "import",
            "--generate-size",
            "4194305",
            "--force",
            "--out",
            out_arg,
        ],
        "GB",
    );
    ok(&["info", out_arg]);
    std::fs::remove_dir_all(&out).expect("removable");
    let file = dir.path().join("x.png");
    std::fs::write(&file, b"not a png").expect("writable");
    fails_naming(
        &[
            "import",
            file.to_str().expect("UTF-8"),
            "--generate-size",
            "33",
            "--out",
            out_arg,
        ],
        "--generate-size",
    );
}

#[test]
fn import_of_a_real_geotiff_round_trips() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/dem_hills_333x218_f32.tif");
    if !path.exists() {
        eprintln!("SKIPPED: {} is absent", path.display());
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("hills");
    let summary = last_json(&ok(&[
        "import",
        path.to_str().expect("UTF-8"),
        "--tile-size",
        "64",
        "--out",
        out.to_str().expect("UTF-8"),
    ]));
    assert_eq!(
        (summary["width"].clone(), summary["height"].clone()),
        (333.into(), 218.into())
    );
    let source = terralod_core::load(&path, &terralod_core::LoadOptions::default())
        .expect("loads")
        .heightfield;
    let terrain = terralod_core::tiles::TiledTerrain::open(&out).expect("opens");
    let level0 = terrain.to_heightfield(0, u64::MAX).expect("assembles");
    assert_eq!(level0.samples(), source.samples());
}

/// Every command that takes a terrain takes an imported directory: its finest level, with
/// the mapping it was imported with (flags still override it). The directory's mesh is the
/// file's mesh; an unfinished directory is refused with its name.
#[test]
fn commands_take_an_imported_directory_as_they_take_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("terrain.f32");
    let (width, height) = (49u32, 37u32);
    let mut bytes = Vec::new();
    for row in 0..height {
        for col in 0..width {
            let (x, z) = (col as f32 * 0.3, row as f32 * 0.2);
            let value = 40.0 * x.sin() * z.cos() + 3.0 * (col % 5) as f32;
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    std::fs::write(&file, bytes).expect("writable");
    let file_arg = file.to_str().expect("a UTF-8 path");
    let tiles = dir.path().join("tiles");
    let tiles_arg = tiles.to_str().expect("a UTF-8 path");
    let mapping = [
        "--cell-size",
        "10",
        "--height-scale",
        "2",
        "--height-offset",
        "-5",
    ];
    let mut import = vec![
        "import",
        file_arg,
        "--raw-size",
        "49x37",
        "--tile-size",
        "16",
    ];
    import.extend_from_slice(&mapping);
    import.extend_from_slice(&["--out", tiles_arg]);
    ok(&import);

    let mut from_file = vec!["mesh", file_arg, "--raw-size", "49x37", "--max-error", "1"];
    from_file.extend_from_slice(&mapping);
    let from_dir = ["mesh", tiles_arg, "--max-error", "1"];
    let (a, b) = (last_json(&ok(&from_file)), last_json(&ok(&from_dir)));
    assert_eq!(a["vertices"], b["vertices"]);
    assert_eq!(a["triangles"], b["triangles"]);
    // The flags override the imported mapping: a 10x flatter terrain needs fewer vertices.
    let flatter = last_json(&ok(&[
        "mesh",
        tiles_arg,
        "--max-error",
        "1",
        "--height-scale",
        "0.2",
    ]));
    assert!(flatter["vertices"].as_u64() < b["vertices"].as_u64());

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("writable");
    let empty_arg = empty.to_str().expect("a UTF-8 path");
    fails_naming(&["mesh", empty_arg, "--max-error", "1"], "no header file");
    let output = terralod(&["mesh", empty_arg, "--max-error", "1"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains(empty_arg));
}

/// A raw `f32` file with a hole (a NaN sample) that fits in memory is imported through
/// the whole-file loader, which fills it as `mesh` does: the directory's mesh is the
/// file's, byte for byte; past `--max-samples` the windowed read refuses the hole.
#[test]
fn a_raw_file_with_a_hole_imports_filled_as_the_commands_load_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let raw = dir.path().join("holed.f32");
    let (width, height) = (33u32, 21u32);
    let mut values: Vec<f32> = (0..width * height)
        .map(|i| ((i * 37 % 500) as f32 * 0.7).sin() * 40.0 + (i % width) as f32)
        .collect();
    values[(7 * width + 11) as usize] = f32::NAN;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).expect("writable");
    let (raw_arg, out) = (raw.to_str().expect("UTF-8"), dir.path().join("tiles"));
    let out_arg = out.to_str().expect("UTF-8");
    let import = |extra: &[&str]| {
        let mut args = vec!["import", raw_arg, "--raw-size", "33x21", "--tile-size", "8"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", out_arg]);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let refused = import(&["--max-samples", "500"]);
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    fails_naming(&refused, "not a finite number");
    let args = import(&[]);
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mesh = |terrain: &str, name: &str, raw_size: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec!["mesh", terrain, "--max-error", "0.5", "--out"];
        let path_arg = path.to_str().expect("UTF-8").to_owned();
        args.push(&path_arg);
        args.extend_from_slice(raw_size);
        ok(&args);
        std::fs::read(&path).expect("written")
    };
    assert_eq!(
        mesh(raw_arg, "file.obj", &["--raw-size", "33x21"]),
        mesh(out_arg, "dir.obj", &[])
    );
}

#[test]
fn a_raw_file_imports_by_windows_with_the_same_samples_as_its_loaded_form() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let raw = dir.path().join("field.r16");
    let (width, height) = (41u32, 23u32);
    let values: Vec<u16> = (0..width * height)
        .map(|i| (i * 37 % 5000) as u16)
        .collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).expect("writable");
    let (raw_arg, out) = (raw.to_str().expect("UTF-8"), dir.path().join("tiles"));
    let out_arg = out.to_str().expect("UTF-8");
    let summary = last_json(&ok(&[
        "import",
        raw_arg,
        "--raw-size",
        "41x23",
        "--tile-size",
        "8",
        "--out",
        out_arg,
    ]));
    assert_eq!(summary["width"], 41);
    assert_eq!(summary["sample_type"], "u16");
    let info = last_json(&ok(&["info", "--json", out_arg]));
    assert_eq!(
        info["block_cells"], 8,
        "the default block size, capped at the tile size"
    );
    // The imported finest level holds the file's samples: `info` of the file and of the
    // directory agree on the range.
    let file_info = last_json(&ok(&["info", "--json", "--raw-size", "41x23", raw_arg]));
    assert_eq!(info["world_min"], file_info["world_min"]);
    assert_eq!(info["world_max"], file_info["world_max"]);
    // A size the file does not have is refused before anything is written.
    fails_naming(
        &[
            "import",
            raw_arg,
            "--raw-size",
            "40x23",
            "--out",
            out_arg,
            "--force",
        ],
        "bytes",
    );
}

/// A GeoTIFF of `width × height` `f32` samples in strips of 5 rows, with a nodata tag.
fn stripped_geotiff(path: &Path, (width, height): (u32, u32), height_at: impl Fn(u32, u32) -> f32) {
    use tiff::encoder::{TiffEncoder, colortype};
    let heights: Vec<f32> = (0..height)
        .flat_map(|r| (0..width).map(move |c| (c, r)))
        .map(|(c, r)| height_at(c, r))
        .collect();
    let file = std::fs::File::create(path).expect("writable");
    let mut encoder = TiffEncoder::new(file).expect("an encoder");
    let mut image = encoder
        .new_image::<colortype::Gray32Float>(width, height)
        .expect("an image");
    image.rows_per_strip(5).expect("rows per strip");
    image
        .encoder()
        .write_tag(tiff::tags::Tag::GdalNodata, "-9999")
        .expect("a tag");
    image.write_data(&heights).expect("written");
}

/// A GeoTIFF past `--max-samples` is imported by windows, never loaded whole: the same
/// directory as the import of the loaded file; a hole, which only the loader fills, is
/// refused with its position.
#[test]
fn a_geotiff_past_max_samples_imports_by_windows_as_the_loaded_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tif = dir.path().join("field.tif");
    stripped_geotiff(&tif, (129, 97), |c, r| {
        ((c * 7919 + r * 104_729) % 3001) as f32 * 0.5
    });
    let tif_arg = tif.to_str().expect("UTF-8");
    let (whole, windows) = (dir.path().join("whole"), dir.path().join("windows"));
    import_file(tif_arg, &whole, &["--height-scale", "2"]);
    // Loading needs room for all 12,513 samples; 1,000 makes the import read windows.
    fails_naming(&["info", tif_arg, "--max-samples", "1000"], "--max-samples");
    let summary = import_file(
        tif_arg,
        &windows,
        &["--height-scale", "2", "--max-samples", "1000"],
    );
    assert_eq!(
        (summary["width"].clone(), summary["height"].clone()),
        (129.into(), 97.into())
    );
    assert_same_directories(&whole, &windows);

    let holed = dir.path().join("holed.tif");
    stripped_geotiff(&holed, (129, 97), |c, r| {
        if (c, r) == (70, 41) { -9999.0 } else { 1.0 }
    });
    fails_naming(
        &[
            "import",
            holed.to_str().expect("UTF-8"),
            "--max-samples",
            "1000",
            "--out",
            dir.path().join("holed").to_str().expect("UTF-8"),
        ],
        "column 70, row 41",
    );
}

/// A PNG past `--max-samples` is decoded once into a spool beside the output and imported
/// by windows from it: the same directory as the import of the loaded file, the mapping
/// flags applied, and no spool left behind, also when the import fails.
#[test]
fn a_png_past_max_samples_imports_through_a_spool_as_the_loaded_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let png = dir.path().join("field.png");
    let png_arg = png.to_str().expect("UTF-8");
    ok(&["generate", "--size", "129", "--seed", "3", "--out", png_arg]);
    let (whole, spooled) = (dir.path().join("whole"), dir.path().join("spooled"));
    let mapping = ["--cell-size", "30", "--height-scale", "0.5"];
    import_file(png_arg, &whole, &mapping);
    fails_naming(&["info", png_arg, "--max-samples", "1000"], "--max-samples");
    let summary = import_file(
        png_arg,
        &spooled,
        &[&mapping[..], &["--max-samples", "1000"]].concat(),
    );
    assert_eq!(
        (summary["width"].clone(), summary["height"].clone()),
        (129.into(), 129.into())
    );
    assert_same_directories(&whole, &spooled);
    assert_eq!(
        names_in(dir.path()),
        ["field.png", "spooled", "whole"],
        "no spool is left"
    );

    // A non-empty output without --force is refused before the PNG is read: a damaged
    // PNG then fails on the output, not on its damage.
    let bytes = std::fs::read(&png).expect("readable");
    let cut = dir.path().join("cut.png");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("writable");
    fails_naming(
        &[
            "import",
            cut.to_str().expect("UTF-8"),
            "--max-samples",
            "1000",
            "--out",
            whole.to_str().expect("UTF-8"),
        ],
        "--force",
    );
    std::fs::remove_file(&cut).expect("removable");
    // Raw-file flags do not apply to a PNG, spooled or not.
    for flag in [["--raw-size", "129x129"], ["--byte-order", "big"]] {
        let out = dir.path().join("never");
        let mut args = vec!["import", png_arg, "--max-samples", "1000"];
        args.extend(flag);
        args.extend(["--out", out.to_str().expect("UTF-8")]);
        fails_naming(&args, flag[0]);
    }
    assert_eq!(
        names_in(dir.path()),
        ["field.png", "spooled", "whole"],
        "no spool is left"
    );
}

/// `--out .` from inside an empty folder: the spool goes beside the output, not into it
/// (which would make the output non-empty), and nothing is left but the import.
#[test]
fn a_spooled_import_into_the_current_folder_keeps_its_spool_outside() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let png = dir.path().join("field.png");
    ok(&[
        "generate",
        "--size",
        "65",
        "--out",
        png.to_str().expect("UTF-8"),
    ]);
    let out = dir.path().join("tiles");
    std::fs::create_dir(&out).expect("writable");
    let output = Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args([
            "import",
            png.to_str().expect("UTF-8"),
            "--max-samples",
            "1000",
            "--tile-size",
            "16",
            "--out",
            ".",
        ])
        .current_dir(&out)
        .output()
        .expect("the terralod binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.join("terrain.tlod").is_file(), "the header is written");
    let spools = |folder: &Path| {
        names_in(folder)
            .iter()
            .filter(|name| name.contains("spool"))
            .count()
    };
    assert_eq!((spools(dir.path()), spools(&out)), (0, 0));
}

/// A failed import leaves the output as it found it (a directory it made is removed, an
/// empty one stays empty), and heights whose span overflows `f32` are refused before any
/// header is written (they used to import, then fail every reader on the block index).
#[test]
fn a_failed_import_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let raw = |name: &str, values: &[f32]| {
        let path = dir.path().join(name);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&path, bytes).expect("writable");
        path.to_str().expect("UTF-8").to_owned()
    };
    let mut values = vec![1.0f32; 64];
    values[37] = f32::INFINITY;
    let infinite = raw("inf.f32", &values);
    let huge: Vec<f32> = (0..64).map(|i| if i < 32 { 3e38 } else { -3e38 }).collect();
    let huge = raw("huge.f32", &huge);
    let made = dir.path().join("made");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("writable");
    for (source, needle) in [
        (&infinite, "infinities are errors"),
        (&huge, "cannot be indexed in f32"),
    ] {
        for out in [&made, &empty] {
            fails_naming(
                &[
                    "import",
                    source,
                    "--raw-size",
                    "8x8",
                    "--tile-size",
                    "2",
                    "--out",
                    out.to_str().expect("UTF-8"),
                ],
                needle,
            );
        }
        assert!(
            !made.exists(),
            "{source}: the directory made by the import stays"
        );
        let left: Vec<_> = std::fs::read_dir(&empty).expect("still there").collect();
        assert!(
            left.is_empty(),
            "{source}: {left:?} left in the empty directory"
        );
    }
    // Forced over a finished import: the earlier import is gone, and so is every file of
    // the failed one (it used to stay, headerless); the user's own file stays.
    let forced = dir.path().join("forced");
    let forced_arg = forced.to_str().expect("UTF-8");
    ok(&[
        "import",
        "--generate-size",
        "33",
        "--tile-size",
        "8",
        "--out",
        forced_arg,
    ]);
    std::fs::write(forced.join("notes.txt"), b"keep me").expect("writable");
    fails_naming(
        &[
            "import",
            &infinite,
            "--raw-size",
            "8x8",
            "--tile-size",
            "2",
            "--out",
            forced_arg,
            "--force",
        ],
        "infinities are errors",
    );
    let left: Vec<String> = std::fs::read_dir(&forced)
        .expect("still there")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        ["notes.txt"],
        "a failed forced import leaves only the user's file"
    );
}

/// `info DIR --height-scale 1e38` printed infinite world heights and exited 0, where
/// `info FILE` and `mesh DIR` refuse the mapping.
#[test]
fn info_of_a_directory_refuses_a_mapping_that_overflows() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tiles = dir.path().join("tiles");
    let tiles_arg = tiles.to_str().expect("a UTF-8 path");
    ok(&[
        "import",
        "--generate-size",
        "33",
        "--tile-size",
        "16",
        "--out",
        tiles_arg,
    ]);
    ok(&["info", tiles_arg, "--height-scale", "2"]);
    for flags in [["--height-scale", "1e38"], ["--cell-size", "3e38"]] {
        let mut args = vec!["info", tiles_arg];
        args.extend_from_slice(&flags);
        fails_naming(&args, "the world mapping overflows f32");
        let mut args = vec!["mesh", tiles_arg, "--max-error", "1"];
        args.extend_from_slice(&flags);
        fails_naming(&args, "the world mapping overflows f32");
    }
}

/// An import's open files do not grow with its rows: each tile is closed once written and
/// opened again to be synced. Rows of 300 two-cell tiles under a limit of 128 open files
/// (the import kept up to 512 tiles open before; a version holding whole rows open needed
/// several rows' worth).
#[cfg(target_os = "linux")]
#[test]
fn an_import_of_wide_rows_stays_within_a_small_open_file_limit() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let raw = dir.path().join("wide.r16");
    let (width, height) = (601u32, 23u32);
    let bytes: Vec<u8> = (0..width * height)
        .flat_map(|i| ((i * 7919 % 4001) as u16).to_le_bytes())
        .collect();
    std::fs::write(&raw, bytes).expect("writable");
    let out = dir.path().join("tiles");
    // Rayon's threads each hold a tile being written: a few, whatever the machine.
    let output = Command::new("sh")
        .env("RAYON_NUM_THREADS", "4")
        .arg("-c")
        .arg("ulimit -n 128 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_terralod"))
        .args(["import", raw.to_str().expect("UTF-8")])
        .args(["--raw-size", "601x23", "--tile-size", "2", "--out"])
        .arg(&out)
        .output()
        .expect("sh runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = last_json(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(summary["tiles"], 4541, "every level's tiles");
    let info = last_json(&ok(&["info", "--json", out.to_str().expect("UTF-8")]));
    let file_info = last_json(&ok(&[
        "info",
        "--json",
        "--raw-size",
        "601x23",
        raw.to_str().expect("UTF-8"),
    ]));
    assert_eq!(info["world_max"], file_info["world_max"]);
}
