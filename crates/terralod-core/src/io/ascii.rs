//! ESRI ASCII grids (`.asc`): a header of `key value` lines (ncols, nrows,
//! xllcorner|xllcenter, yllcorner|yllcenter, cellsize or dx/dy, optional NODATA_value; keys
//! case-insensitive, any order), then ncols × nrows whitespace-separated values, first row
//! north.
//!
//! The claimed size is checked before allocating, values are counted before they are
//! parsed (too few or too many is an error), and parsing runs in parallel over chunks of the
//! text without allocating per value.

use super::{
    Format, Hints, LoadOptions, Loaded, Problem, SourceInfo, check_claimed_size, degrees_to_metres,
    field_from_f32, finish, looks_geographic,
};
use rayon::prelude::*;

/// Header keys, lower case.
const KEYS: [&str; 10] = [
    "ncols",
    "nrows",
    "xllcorner",
    "xllcenter",
    "yllcorner",
    "yllcenter",
    "cellsize",
    "dx",
    "dy",
    "nodata_value",
];

/// Text per parallel parsing task: large enough that scheduling costs nothing.
const CHUNK_BYTES: usize = 1 << 20;

/// Whether a word is an ASCII grid header key (used to recognise the format).
pub(super) fn is_header_key(word: &[u8]) -> bool {
    KEYS.iter()
        .any(|key| key.as_bytes().eq_ignore_ascii_case(word))
}

#[derive(Debug, Default)]
struct Header {
    columns: Option<u64>,
    rows: Option<u64>,
    x: Option<(f64, bool)>,
    y: Option<(f64, bool)>,
    cell_size: Option<f64>,
    dx: Option<f64>,
    dy: Option<f64>,
    nodata: Option<f64>,
}

pub(super) fn decode(text: &[u8], options: &LoadOptions, hints: &Hints) -> Result<Loaded, Problem> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    let (header, body) = parse_header(text)?;
    let missing = |key: &str| Problem::AsciiHeader {
        line: 1,
        detail: format!("required key {key} is missing"),
    };
    let columns = header.columns.ok_or_else(|| missing("ncols"))?;
    let rows = header.rows.ok_or_else(|| missing("nrows"))?;
    let (dx, dy) = match (header.cell_size, header.dx, header.dy) {
        (Some(size), _, _) => (size, size),
        (None, Some(dx), Some(dy)) => (dx, dy),
        _ => return Err(missing("cellsize (or dx and dy)")),
    };
    let (width, height) = check_claimed_size(columns, rows, options)?;
    let expected = u64::from(width) * u64::from(height);

    let values = parse_values(body, expected, columns, CHUNK_BYTES)?;

    let nodata = header.nodata.map(|n| n as f32);
    let field = field_from_f32(width, height, values, nodata)?;
    let mut source = SourceInfo::new(Format::AsciiGrid, "f32");
    source.nodata_value = header.nodata;
    let (spacing, note, crs) = spacing(&header, dx, dy, columns, rows, hints);
    source.spacing_m = spacing;
    source.spacing_note = Some(note);
    source.crs = crs;
    finish(field, source)
}

/// Counts the values (an error unless there are exactly `expected`), then parses them in
/// parallel, each chunk of about `chunk_bytes` of text into its own part of the output.
fn parse_values(
    body: &[u8],
    expected: u64,
    columns: u64,
    chunk_bytes: usize,
) -> Result<Vec<f32>, Problem> {
    let chunks = split_at_whitespace(body, chunk_bytes);
    let counts: Vec<usize> = chunks.par_iter().map(|chunk| count_tokens(chunk)).collect();
    let actual: u64 = counts.iter().map(|&n| n as u64).sum();
    if actual != expected {
        return Err(Problem::ValueCount { expected, actual });
    }
    let mut values = vec![0f32; counts.iter().sum()];
    let mut jobs = Vec::with_capacity(chunks.len());
    let mut rest = values.as_mut_slice();
    let mut first_index = 0usize;
    for (chunk, &count) in chunks.iter().zip(&counts) {
        let (slice, tail) = rest.split_at_mut(count);
        jobs.push((*chunk, slice, first_index));
        rest = tail;
        first_index += count;
    }
    jobs.into_par_iter()
        .try_for_each(|(chunk, slice, first)| parse_chunk(chunk, slice, first, columns))?;
    Ok(values)
}

/// Parses header lines up to the first line that starts with a value.
fn parse_header(text: &[u8]) -> Result<(Header, &[u8]), Problem> {
    let mut header = Header::default();
    let mut offset = 0;
    let mut line_number = 0;
    while offset < text.len() {
        let end = text[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |n| offset + n + 1);
        let line = &text[offset..end];
        line_number += 1;
        let mut words = line
            .split(u8::is_ascii_whitespace)
            .filter(|w| !w.is_empty());
        let Some(key) = words.next() else {
            offset = end;
            continue;
        };
        if !key[0].is_ascii_alphabetic() || is_number(key) {
            break;
        }
        let error = |detail: String| Problem::AsciiHeader {
            line: line_number,
            detail,
        };
        let key_text = String::from_utf8_lossy(key).to_ascii_lowercase();
        if !is_header_key(key) {
            return Err(error(format!("unknown key {key_text:?}")));
        }
        let value = words
            .next()
            .ok_or_else(|| error(format!("key {key_text} has no value")))?;
        if words.next().is_some() {
            return Err(error(format!("key {key_text} has more than one value")));
        }
        let number = std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() || key_text == "nodata_value")
            .ok_or_else(|| {
                error(format!(
                    "value {:?} of {key_text} is not a number",
                    String::from_utf8_lossy(value)
                ))
            })?;
        let count = |v: f64| {
            (v >= 0.0 && v.fract() == 0.0 && v < 1e19)
                .then_some(v as u64)
                .ok_or_else(|| error(format!("{key_text} {v} is not a whole number of samples")))
        };
        let positive = |v: f64| {
            (v > 0.0)
                .then_some(v)
                .ok_or_else(|| error(format!("{key_text} {v} must be positive")))
        };
        let duplicate = || error(format!("key {key_text} appears twice"));
        let slot_was_set = match key_text.as_str() {
            "ncols" => header.columns.replace(count(number)?).is_some(),
            "nrows" => header.rows.replace(count(number)?).is_some(),
            "xllcorner" => header.x.replace((number, false)).is_some(),
            "xllcenter" => header.x.replace((number, true)).is_some(),
            "yllcorner" => header.y.replace((number, false)).is_some(),
            "yllcenter" => header.y.replace((number, true)).is_some(),
            "cellsize" => header.cell_size.replace(positive(number)?).is_some(),
            "dx" => header.dx.replace(positive(number)?).is_some(),
            "dy" => header.dy.replace(positive(number)?).is_some(),
            _ => header.nodata.replace(number).is_some(),
        };
        if slot_was_set {
            return Err(duplicate());
        }
        offset = end;
    }
    Ok((header, &text[offset..]))
}

/// Whether a word reads as a number (so a data row starting with `nan` or `inf` is data).
fn is_number(word: &[u8]) -> bool {
    std::str::from_utf8(word).is_ok_and(|w| w.parse::<f64>().is_ok())
}

/// Splits text into chunks of about `target` bytes, each ending at whitespace so no value is
/// cut in two.
fn split_at_whitespace(text: &[u8], target: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::with_capacity(text.len() / target + 1);
    let mut rest = text;
    while rest.len() > target {
        let cut = rest[target..]
            .iter()
            .position(u8::is_ascii_whitespace)
            .map_or(rest.len(), |n| target + n);
        let (chunk, tail) = rest.split_at(cut);
        chunks.push(chunk);
        rest = tail;
    }
    chunks.push(rest);
    chunks
}

fn count_tokens(text: &[u8]) -> usize {
    let mut count = 0;
    let mut in_token = false;
    for &b in text {
        let is_space = b.is_ascii_whitespace();
        count += usize::from(!is_space && !in_token);
        in_token = !is_space;
    }
    count
}

fn parse_chunk(
    chunk: &[u8],
    out: &mut [f32],
    first_index: usize,
    columns: u64,
) -> Result<(), Problem> {
    let tokens = chunk
        .split(u8::is_ascii_whitespace)
        .filter(|t| !t.is_empty());
    for (i, (token, slot)) in tokens.zip(out.iter_mut()).enumerate() {
        *slot = parse_value(token).ok_or_else(|| {
            let index = (first_index + i) as u64;
            Problem::AsciiValue {
                col: index % columns,
                row: index / columns,
                token: String::from_utf8_lossy(&token[..token.len().min(40)]).into_owned(),
            }
        })?;
    }
    Ok(())
}

/// Parses one value: integers of up to 7 digits directly (exact in `f32`), anything else
/// (decimals, exponents, `nan`) through the standard parser on the borrowed bytes.
fn parse_value(token: &[u8]) -> Option<f32> {
    let (negative, digits) = match token {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, token),
    };
    if !digits.is_empty() && digits.len() <= 7 && digits.iter().all(u8::is_ascii_digit) {
        let magnitude = digits
            .iter()
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0')) as f32;
        return Some(if negative { -magnitude } else { magnitude });
    }
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Metric spacing from the `.prj` sidecar when there is one, else from what the header's
/// numbers look like.
fn spacing(
    header: &Header,
    dx: f64,
    dy: f64,
    columns: u64,
    rows: u64,
    hints: &Hints,
) -> (Option<(f64, f64)>, String, Option<String>) {
    let centre_y = header.y.map(|(y, is_centre)| {
        let first_centre = if is_centre { y } else { y + dy / 2.0 };
        first_centre + (rows as f64 - 1.0) * dy / 2.0
    });
    let projection = hints.projection.as_deref().map(str::to_ascii_uppercase);
    let geographic_by_prj = projection
        .as_deref()
        .map(|p| !p.contains("PROJCS") && (p.contains("GEOGCS") || p.contains("GEOGRAPHIC")));
    let crs = projection.as_ref().map(|p| {
        let kind = if geographic_by_prj == Some(true) {
            "geographic"
        } else {
            "projected"
        };
        format!("{kind} (from the .prj sidecar, {} bytes)", p.len())
    });
    let geographic = match geographic_by_prj {
        Some(known) => known,
        None => match (header.x, header.y) {
            (Some((x, _)), Some((y, _))) => looks_geographic(x, y, dx, dy, columns, rows),
            _ => false,
        },
    };
    let source = if geographic_by_prj.is_some() {
        "per the .prj sidecar"
    } else {
        "no .prj sidecar"
    };
    if geographic {
        let Some(latitude) = centre_y else {
            return (
                None,
                format!("geographic ({source}) but no yllcorner; cell size left at 1"),
                crs,
            );
        };
        return match degrees_to_metres(dx, dy, latitude) {
            Some(spacing) => (
                Some(spacing),
                format!(
                    "cell size {dx} x {dy} degrees ({source}; geographic), at centre latitude {latitude:.3}"
                ),
                crs,
            ),
            None => (
                None,
                format!("geographic but latitude {latitude} is not usable; cell size left at 1"),
                crs,
            ),
        };
    }
    let metres_per_unit = projection.as_deref().map_or(1.0, |p| {
        if p.contains("US SURVEY FOOT") || p.contains("FOOT_US") {
            1200.0 / 3937.0
        } else if p.contains("FOOT") || p.contains("FEET") {
            0.3048
        } else {
            1.0
        }
    });
    let note = if geographic_by_prj.is_some() {
        format!("cell size {dx} x {dy} in the .prj sidecar's linear unit ({metres_per_unit} m)")
    } else {
        format!(
            "cell size {dx} x {dy}, assumed metres: no .prj sidecar and the header gives no units"
        )
    };
    (
        Some((dx * metres_per_unit, dy * metres_per_unit)),
        note,
        crs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_parsing_matches_one_chunk_for_any_chunk_size() {
        let body = b" 1 -2\t3.5\r\n4e2   5\n\n6 nan -7 +8 9.25 10 11\n";
        let whole = parse_values(body, 12, 4, usize::MAX).unwrap();
        assert_eq!(whole[..4], [1.0, -2.0, 3.5, 400.0]);
        assert!(whole[6].is_nan());
        for chunk_bytes in 1..body.len() {
            let chunked = parse_values(body, 12, 4, chunk_bytes).unwrap();
            let same = whole
                .iter()
                .zip(&chunked)
                .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
            assert!(same, "chunk size {chunk_bytes}: {chunked:?}");
            assert_eq!(
                split_at_whitespace(body, chunk_bytes).concat(),
                body.to_vec()
            );
        }
    }

    #[test]
    fn bad_values_are_located_in_any_chunk() {
        let body = b"1 2 3\n4 5 6\n7 8 oops\n";
        for chunk_bytes in [1, 4, 100] {
            let problem = parse_values(body, 9, 3, chunk_bytes).unwrap_err();
            assert!(
                matches!(&problem, Problem::AsciiValue { col: 2, row: 2, token } if token == "oops"),
                "{problem:?}"
            );
        }
        assert!(matches!(
            parse_values(body, 10, 3, 4),
            Err(Problem::ValueCount {
                expected: 10,
                actual: 9
            })
        ));
    }

    #[test]
    fn values_parse_like_the_standard_parser() {
        for token in [
            "0", "-0", "+12", "1234567", "12345678", "-9999", "1.5", "-3e-2", "NaN", "inf", "1e39",
        ] {
            let expected: f32 = token.parse().unwrap();
            let parsed = parse_value(token.as_bytes()).unwrap();
            assert!(
                parsed == expected || (parsed.is_nan() && expected.is_nan()),
                "{token}"
            );
        }
        for token in ["", "-", "+", "1,5", "0x10", "--1", "1e"] {
            assert_eq!(parse_value(token.as_bytes()), None, "{token:?}");
        }
    }
}
