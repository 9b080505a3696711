//! Fuzz target: any bytes, decoded as every format, must give a heightfield or an error,
//! never a panic, a hang or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use terralod_core::io::{ByteOrder, Format, LoadOptions, RgbEncoding, decode};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the options, so the fuzzer explores them as it does the bytes;
    // the rest is the file, tried as every format (signatures are not trusted).
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let encoding = match selector & 3 {
        0 => None,
        1 => Some(RgbEncoding::Gray),
        2 => Some(RgbEncoding::TerrainRgb),
        _ => Some(RgbEncoding::Rgb24),
    };
    let byte_order = if selector & 4 == 0 { ByteOrder::Little } else { ByteOrder::Big };
    // A small limit keeps each run fast and far below the fuzzer's memory limit; it is
    // what refuses lying headers.
    let options = LoadOptions {
        encoding,
        byte_order,
        max_samples: 1 << 20,
        ..LoadOptions::default()
    };
    for format in Format::ALL {
        let _ = decode(file, format, &options);
    }
});
