//! Every WGSL shader parses and validates with naga: no GPU needed, so CI checks the
//! shaders on any machine.

#[test]
fn the_terrain_shader_validates() {
    let module = naga::front::wgsl::parse_str(terralod_render::SHADER_SOURCE)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(terralod_render::SHADER_SOURCE)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(terralod_render::SHADER_SOURCE)));
    let entry_points: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for expected in [
        "vs_triangles_indexed",
        "vs_triangles_pulled",
        "vs_patches_indexed",
        "vs_patches_pulled",
        "fs_terrain",
        "vs_sky",
        "fs_sky",
        "vs_lines",
        "fs_lines",
    ] {
        assert!(
            entry_points.contains(&expected),
            "missing entry point {expected}"
        );
    }
    drop(info);
}
