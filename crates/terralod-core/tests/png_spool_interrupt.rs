//! An interruption while a PNG is spooled (`PngFileSource::spool`, what `terralod import`
//! uses past `--max-samples`) stops the decode at the next row, not at the end of the
//! file, and removes the spool. Its own test binary: an interruption, once requested,
//! stays requested for the whole process.

mod io_common;

use io_common::*;
use std::cell::RefCell;
use terralod_core::io::LoadOptions;
use terralod_core::io::interrupt;
use terralod_core::tiles::{PngFileSource, TileError};

#[test]
fn an_interruption_stops_the_spool_at_the_next_row_and_removes_it() {
    let dir = scratch_dir("png-spool-interrupt");
    let (width, height) = (64, 100);
    let samples: Vec<u16> = (0..width * height).map(|i| (i % 977) as u16).collect();
    let path = dir.join("gray16.png");
    let bytes = png_bytes(
        width,
        height,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        &be_bytes(&samples),
    );
    std::fs::write(&path, bytes).expect("a writable scratch directory");
    // Reports come every 64 rows: the interruption arrives with the second (row 64). Only
    // a check made for each row stops the decode before its last row, 99; one made every
    // 64 rows, or none, lets it finish.
    let reports = RefCell::new(Vec::new());
    let result = PngFileSource::spool(&path, &LoadOptions::default(), &dir, &|done, _| {
        reports.borrow_mut().push(done);
        if done == 64 {
            interrupt::request();
        }
    });
    assert!(
        matches!(result, Err(TileError::Interrupted)),
        "{:?}",
        result.map(|_| ())
    );
    assert_eq!(reports.take(), [0, 64], "stopped before the next report");
    let left = spool_files(&dir);
    assert!(left.is_empty(), "spool left: {left:?}");
}
