//! SRTM `.hgt` tiles: n × n big-endian i16 samples (1201² for 3″, 3601² for 1″), row 0
//! north, −32768 marking voids. The tile's south-west corner is in its name (`N40W106.hgt`),
//! which gives the latitude for the metric spacing.

use super::raw::read_samples;
use super::{
    Format, Hints, LoadOptions, Loaded, Problem, SourceInfo, check_claimed_size, degrees_to_metres,
    exact_square_root, field_with_holes, finish,
};
use crate::heightfield::Samples;
use std::io::Read;

/// The value SRTM uses for voids.
pub const HGT_VOID: i16 = -32768;

pub(super) fn decode<R: Read>(
    reader: R,
    length: u64,
    options: &LoadOptions,
    hints: &Hints,
) -> Result<Loaded, Problem> {
    let not_square = Problem::HgtNotSquare { bytes: length };
    if !length.is_multiple_of(2) {
        return Err(not_square);
    }
    let side = exact_square_root(length / 2).ok_or(not_square)?;
    let (width, height) = check_claimed_size(side, side, options)?;
    let count = width as usize * height as usize;
    let values = read_samples(reader, count, i16::from_be_bytes)?;
    let holes = values
        .contains(&HGT_VOID)
        .then(|| values.iter().map(|&v| v == HGT_VOID).collect());
    let field = field_with_holes(width, height, Samples::I16(values), holes)?;

    let mut source = SourceInfo::new(Format::Hgt, "i16");
    source.nodata_value = Some(f64::from(HGT_VOID));
    source.crs = Some("geographic (WGS84)".to_owned());
    let step_degrees = 1.0 / f64::from(side as u32 - 1);
    match hints.file_name.as_deref().and_then(tile_origin) {
        Some((south, west)) => {
            let centre = f64::from(south) + 0.5;
            source.spacing_m = degrees_to_metres(step_degrees, step_degrees, centre);
            source.spacing_note = Some(format!(
                "{:.2} arc-seconds, tile {}{:02}{}{:03}, at centre latitude {centre:.3}",
                step_degrees * 3600.0,
                if south < 0 { 'S' } else { 'N' },
                south.unsigned_abs(),
                if west < 0 { 'W' } else { 'E' },
                west.unsigned_abs(),
            ));
        }
        None => {
            source.spacing_note = Some(format!(
                "{:.2} arc-seconds; no tile name like N40W106.hgt gives the latitude, \
                 cell size left at 1",
                step_degrees * 3600.0
            ));
        }
    }
    finish(field, source)
}

/// Latitude of the south edge and longitude of the west edge from a tile name such as
/// `N40W106.hgt` or `s23e047.SRTMGL1.hgt`.
pub(super) fn tile_origin(file_name: &str) -> Option<(i32, i32)> {
    let name = file_name.as_bytes();
    if name.len() < 7 {
        return None;
    }
    let digits = |bytes: &[u8]| -> Option<i32> {
        bytes.iter().try_fold(0i32, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + i32::from(b - b'0'))
        })
    };
    let latitude = digits(&name[1..3])?;
    let longitude = digits(&name[4..7])?;
    let latitude = match name[0].to_ascii_uppercase() {
        b'N' => latitude,
        b'S' => -latitude,
        _ => return None,
    };
    let longitude = match name[3].to_ascii_uppercase() {
        b'E' => longitude,
        b'W' => -longitude,
        _ => return None,
    };
    ((-90..90).contains(&latitude) && (-180..=180).contains(&longitude))
        .then_some((latitude, longitude))
}

#[cfg(test)]
mod tests {
    use super::tile_origin;

    #[test]
    fn tile_names_give_the_south_west_corner() {
        assert_eq!(tile_origin("N40W106.hgt"), Some((40, -106)));
        assert_eq!(tile_origin("s23e047.SRTMGL1.hgt"), Some((-23, 47)));
        assert_eq!(tile_origin("N00E000.hgt"), Some((0, 0)));
        assert_eq!(tile_origin("N90E000.hgt"), None);
        assert_eq!(tile_origin("X40W106.hgt"), None);
        assert_eq!(tile_origin("N4aW106.hgt"), None);
        assert_eq!(tile_origin("tile.hgt"), None);
        assert_eq!(tile_origin("N40"), None);
        assert_eq!(tile_origin("Né0W106"), None);
    }
}
