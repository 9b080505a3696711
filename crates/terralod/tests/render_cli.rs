//! End-to-end tests of `terralod render`: a frame of the built-in terrain with the
//! defaults, a colour texture that shows, and bad requests refused with one line and
//! nothing written. GPU runs skip visibly without an adapter unless
//! `TERRALOD_REQUIRE_GPU=1`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn terralod(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_terralod"))
        .args(args)
        .output()
        .expect("the terralod binary runs")
}

/// Runs a render that must succeed; `None` (after a SKIPPED line) when there is no adapter.
fn render_ok(test: &str, args: &[&str]) -> Option<serde_json::Value> {
    let mut all = vec!["render"];
    all.extend_from_slice(args);
    let output = terralod(&all);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success()
        && stderr.contains("no GPU adapter")
        && std::env::var("TERRALOD_REQUIRE_GPU").as_deref() != Ok("1")
    {
        eprintln!("SKIPPED: {test}: {}", stderr.trim());
        return None;
    }
    assert!(output.status.success(), "terralod {all:?}: {stderr}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    Some(serde_json::from_str(text.lines().last().expect("a JSON line")).expect("valid JSON"))
}

fn mean_rgb(path: &Path) -> [f64; 3] {
    let image = image::open(path).expect("a PNG").to_rgb8();
    let mut sum = [0.0; 3];
    for p in image.pixels() {
        for c in 0..3 {
            sum[c] += f64::from(p[c]);
        }
    }
    let n = f64::from(image.width() * image.height());
    sum.map(|s| s / n)
}

#[test]
fn the_default_render_is_a_picture_of_terrain_and_sky() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("frame.png");
    let out_text = out.to_str().unwrap();
    let Some(summary) = render_ok("default render", &["--size", "320x180", "--out", out_text])
    else {
        return;
    };
    assert_eq!(summary["algorithm"], "quadtree");
    assert!(summary["triangles"].as_u64().unwrap() > 1000);
    let image = image::open(&out).unwrap().to_rgb8();
    assert_eq!(image.dimensions(), (320, 180));
    // Sky at the top (bluish), terrain at the bottom (not), many distinct colours.
    let top = image.get_pixel(160, 2);
    let bottom = image.get_pixel(160, 170);
    assert!(top[2] > top[0], "the top row is not sky: {top:?}");
    assert_ne!(top, bottom);
    let distinct: std::collections::HashSet<[u8; 3]> = image.pixels().map(|p| p.0).collect();
    assert!(distinct.len() > 500, "only {} colours", distinct.len());
}

#[test]
fn a_colour_texture_colours_the_terrain() {
    let dir = tempfile::tempdir().unwrap();
    let texture = dir.path().join("red.png");
    image::RgbImage::from_pixel(8, 8, image::Rgb([220, 30, 30]))
        .save(&texture)
        .unwrap();
    let plain = dir.path().join("plain.png");
    let red = dir.path().join("red-frame.png");
    let common = ["--size", "160x90", "--no-fog"];
    let Some(_) = render_ok(
        "texture render",
        &[&common[..], &["--out", plain.to_str().unwrap()]].concat(),
    ) else {
        return;
    };
    render_ok(
        "texture render",
        &[
            &common[..],
            &[
                "--texture",
                texture.to_str().unwrap(),
                "--out",
                red.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    let (a, b) = (mean_rgb(&plain), mean_rgb(&red));
    assert!(
        b[0] - b[1] > a[0] - a[1] + 20.0,
        "plain {a:?}, textured {b:?}"
    );
}

/// The padding some algorithms draw past the data (bintree's 2^k + 1 square repeats the
/// border samples) is not shown: looking down on where a 33 × 17 terrain's padding lies,
/// the centre of the picture is sky, while the data beside it is drawn (red, from a
/// colour texture).
#[test]
fn ground_past_the_data_is_not_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("strip.f32");
    let bytes: Vec<u8> = (0..33 * 17)
        .flat_map(|i: u32| (((i % 33) as f32 * 0.4).sin() * 5.0).to_le_bytes())
        .collect();
    std::fs::write(&raw, bytes).unwrap();
    let texture = dir.path().join("red.png");
    image::RgbImage::from_pixel(8, 8, image::Rgb([220, 30, 30]))
        .save(&texture)
        .unwrap();
    let out = dir.path().join("frame.png");
    // The data spans z 0 ..= 160; the view is centred on z = 240, in the padding.
    let Some(_) = render_ok(
        "padding render",
        &[
            raw.to_str().unwrap(),
            "--raw-size",
            "33x17",
            "--cell-size",
            "10",
            "--algo",
            "bintree",
            "--eye",
            "160,400,241",
            "--target",
            "160,0,240",
            "--texture",
            texture.to_str().unwrap(),
            "--no-fog",
            "--size",
            "160x90",
            "--out",
            out.to_str().unwrap(),
        ],
    ) else {
        return;
    };
    let image = image::open(&out).unwrap().to_rgb8();
    let red = |p: &image::Rgb<u8>| p[0] > 150 && p[2] < 100;
    let centre = image.get_pixel(80, 45);
    assert!(
        !red(centre) && centre[2] > centre[0],
        "padding drawn: {centre:?}"
    );
    let drawn = image.pixels().filter(|p| red(p)).count();
    assert!(drawn > 500, "the data is not drawn: {drawn} red pixels");
}

#[test]
fn bad_requests_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("frame.png");
    let out_text = out.to_str().unwrap();
    let garbage = dir.path().join("garbage.png");
    std::fs::write(&garbage, b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let missing = dir.path().join("missing.png");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["--out", "frame.jpg"], 1, "must be a .png"),
        (
            vec!["--algo", "nope", "--out", out_text],
            2,
            "unknown algorithm",
        ),
        (
            vec!["--texture", missing.to_str().unwrap(), "--out", out_text],
            1,
            "missing.png",
        ),
        (
            vec!["--texture", garbage.to_str().unwrap(), "--out", out_text],
            1,
            "garbage.png",
        ),
        (vec!["--size", "0x10", "--out", out_text], 2, "positive"),
        (
            vec!["--lod-eye", "1,2,3", "--out", out_text],
            2,
            "--lod-target",
        ),
        (
            vec!["--pixel-error", "1", "--max-error", "2", "--out", out_text],
            2,
            "cannot be used with",
        ),
        (
            vec!["--pixel-error", "nan", "--out", out_text],
            2,
            "pixel-error",
        ),
        // Frustum shades are per patch: over triangles everything looked "inside".
        (
            vec!["--color-by", "frustum", "--out", out_text],
            1,
            "algorithm quadtree draws triangles",
        ),
    ];
    for (args, code, message) in cases {
        let mut all = vec!["render"];
        all.extend_from_slice(&args);
        let output = terralod(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // The terrain file itself as --out (its heights would be replaced by the picture).
    let terrain = dir.path().join("terrain.png");
    let pixels: Vec<u8> = (0..33 * 33).map(|i| (i % 251) as u8).collect();
    image::save_buffer(&terrain, &pixels, 33, 33, image::ColorType::L8).unwrap();
    let before = std::fs::read(&terrain).unwrap();
    let terrain = terrain.to_str().unwrap();
    let output = terralod(&["render", terrain, "--out", terrain, "--size", "32x32"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("which this command reads"), "{stderr}");
    assert_eq!(std::fs::read(terrain).unwrap(), before);
    // The same for the texture.
    let output = terralod(&[
        "render",
        "--texture",
        terrain,
        "--out",
        terrain,
        "--size",
        "32x32",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("which this command reads"), "{stderr}");
    assert_eq!(std::fs::read(terrain).unwrap(), before);
}

/// `--algo streamed` over an imported directory streams its tiles (settled before the
/// frame) and draws the picture the same terrain gives when loaded from its file.
#[test]
fn a_streamed_directory_renders_as_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("terrain.f32");
    let (width, height) = (97u32, 81u32);
    let mut bytes = Vec::new();
    for row in 0..height {
        for col in 0..width {
            let (x, z) = (col as f32, row as f32);
            let value = 30.0 * (x * 0.09).sin() * (z * 0.11).cos() + 0.2 * x;
            bytes.extend_from_slice(&value.to_le_bytes());
        }
    }
    std::fs::write(&file, bytes).unwrap();
    let tiles = dir.path().join("tiles");
    let output = terralod(&[
        "import",
        file.to_str().unwrap(),
        "--raw-size",
        "97x81",
        "--tile-size",
        "8",
        "--block-size",
        "8",
        "--cell-size",
        "3",
        "--out",
        tiles.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let camera = [
        "--eye",
        "-30,120,-30",
        "--target",
        "150,0,120",
        "--size",
        "160x120",
    ];
    let (a, b) = (dir.path().join("file.png"), dir.path().join("dir.png"));
    let mut from_file = vec![
        file.to_str().unwrap(),
        "--raw-size",
        "97x81",
        "--cell-size",
        "3",
        "--algo",
        "streamed",
        "--out",
        a.to_str().unwrap(),
    ];
    from_file.extend_from_slice(&camera);
    let Some(loaded) = render_ok("streamed render of a file", &from_file) else {
        return;
    };
    // --max-samples below the terrain's 7,857: loading the directory would be refused, so
    // this render can only succeed by streaming it.
    let mut from_dir = vec![
        tiles.to_str().unwrap(),
        "--algo",
        "streamed",
        "--max-samples",
        "1000",
        "--cache-mb",
        "1",
        "--out",
        b.to_str().unwrap(),
    ];
    from_dir.extend_from_slice(&camera);
    let streamed = render_ok("streamed render of a directory", &from_dir).unwrap();
    assert_eq!(loaded["triangles"], streamed["triangles"]);
    let (ma, mb) = (mean_rgb(&a), mean_rgb(&b));
    for c in 0..3 {
        assert!((ma[c] - mb[c]).abs() < 1.0, "{ma:?} against {mb:?}");
    }
}

/// `--algo adaptive --detail`: the renderer draws the finer vertices (here a plateau
/// 300 m above the terrain, on a grid four times finer), which the frame shows.
#[test]
fn a_detail_is_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let square = |name: &str, side: u32, value: &dyn Fn(u32, u32) -> f32| {
        let mut bytes = Vec::new();
        for row in 0..side {
            for col in 0..side {
                bytes.extend_from_slice(&value(col, row).to_le_bytes());
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let terrain = square("terrain.f32", 65, &|c, r| ((c * 13 + r * 7) % 11) as f32);
    let plateau = square("plateau.f32", 41, &|c, r| 300.0 + ((c + r) % 2) as f32);
    let camera = [
        "--cell-size",
        "10",
        "--algo",
        "adaptive",
        "--eye",
        "320,900,700",
        "--target",
        "320,0,320",
        "--size",
        "320x240",
    ];
    let mut frames = Vec::new();
    for with_detail in [false, true] {
        let out = dir.path().join(format!("frame{with_detail}.png"));
        let mut args = vec![terrain.as_str()];
        args.extend_from_slice(&camera);
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        if with_detail {
            args.extend_from_slice(&[
                "--detail",
                &plateau,
                "--detail-origin",
                "270,270",
                "--detail-cell-size",
                "2.5",
            ]);
        }
        let Some(summary) = render_ok("detail render", &args) else {
            return;
        };
        frames.push((
            summary["triangles"].as_u64().unwrap(),
            image::open(&out).unwrap().to_rgb8(),
        ));
    }
    assert!(frames[0].0 > 0 && frames[1].0 > 0);
    let changed = frames[0]
        .1
        .pixels()
        .zip(frames[1].1.pixels())
        .filter(|(a, b)| a.0.iter().zip(b.0).any(|(x, y)| x.abs_diff(y) > 8))
        .count();
    assert!(changed > 1000, "only {changed} pixels show the plateau");
}

/// `--texture` named a FIFO (the open blocked forever) or a device: the texture must be a
/// regular file, checked before anything opens it.
#[test]
fn a_texture_that_is_no_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("frame.png");
    let fifo = dir.path().join("texture.fifo");
    let mut textures = vec!["/dev/zero".to_string()];
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        textures.push(fifo.display().to_string());
    } else {
        eprintln!("SKIPPED: the FIFO case (no mkfifo)");
    }
    for texture in textures {
        let args = [
            "render",
            "--texture",
            &texture,
            "--out",
            out.to_str().unwrap(),
        ];
        let output = common::terralod_within_a_minute(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("not a regular file") && stderr.contains(&texture),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}

/// A terrain larger than the GPU's largest texture (the built-in 1025² terrain under a
/// limit of 512, set through `TERRALOD_MAX_TEXTURE_SIDE`): adaptive lists its vertices
/// and draws the picture it draws with full textures (normals from every 4th sample),
/// saying so on stderr; quadtree, which reads heights from the grid, is refused in one
/// line naming what draws, and nothing is written.
#[test]
fn a_terrain_larger_than_a_texture_renders_with_listed_vertices() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).display().to_string();
    let (full, small, refused) = (out("full.png"), out("small.png"), out("refused.png"));
    let args = |algo: &'static str, png: &str| {
        ["render", "--algo", algo, "--size", "320x180", "--out", png].map(String::from)
    };
    let run = |args: &[String], limit: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_terralod"));
        command.args(args);
        if let Some(limit) = limit {
            command.env("TERRALOD_MAX_TEXTURE_SIDE", limit);
        }
        command.output().expect("the terralod binary runs")
    };
    let Some(_) = render_ok(
        "larger than a texture",
        &args("adaptive", &full)
            .iter()
            .skip(1)
            .map(String::as_str)
            .collect::<Vec<_>>(),
    ) else {
        return;
    };
    let output = run(&args("adaptive", &small), Some("512"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("adaptive lists its vertices"), "{stderr}");
    let (a, b) = (mean_rgb(Path::new(&full)), mean_rgb(Path::new(&small)));
    assert!(
        (0..3).all(|c| (a[c] - b[c]).abs() < 2.0),
        "full textures {a:?}, decimated {b:?}"
    );
    let output = run(&args("quadtree", &refused), Some("512"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("XDG_RUNTIME_DIR"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("larger than this GPU's largest texture")
            && lines[0].contains("--algo adaptive"),
        "{stderr}"
    );
    assert!(!Path::new(&refused).exists());
}
