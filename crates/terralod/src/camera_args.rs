//! Camera flags shared by every command that looks at a terrain: `--eye --target --fov-y
//! --size --near --far`.

use crate::terrain_args::parse_size;
use anyhow::{Context, bail};
use clap::Args;
use glam::Vec3;
use terralod_core::camera::MIN_FOV_Y;
use terralod_core::{Camera, CameraError, Heightfield};

/// A perspective camera (feature H5). Angles in degrees, distances in world units.
#[derive(Debug, Args)]
pub struct CameraArgs {
    /// Eye position in world coordinates, as X,Y,Z (y is up).
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true)]
    pub eye: Option<Vec3>,
    /// Point looked at, as X,Y,Z.
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true)]
    pub target: Option<Vec3>,
    /// Vertical field of view in degrees.
    #[arg(long, default_value_t = 60.0, allow_negative_numbers = true, value_parser = parse_fov_y)]
    pub fov_y: f32,
    /// Viewport in pixels, as WxH; screen tolerances are pixels of its height.
    #[arg(long, value_name = "WxH", value_parser = parse_viewport, default_value = "1920x1080")]
    pub size: (u32, u32),
    /// Near plane distance.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub near: f32,
    /// Far plane distance. Default: far enough to see the whole terrain.
    #[arg(long, allow_negative_numbers = true)]
    pub far: Option<f32>,
}

impl CameraArgs {
    /// Whether any camera flag that has no default was given.
    pub fn any_given(&self) -> bool {
        self.eye.is_some() || self.target.is_some() || self.far.is_some()
    }

    /// The camera for `field`, validated; `--eye` and `--target` are required.
    pub fn camera(&self, field: &Heightfield) -> anyhow::Result<Camera> {
        let (Some(eye), Some(target)) = (self.eye, self.target) else {
            bail!("--eye and --target are both required for a view-dependent selection");
        };
        self.camera_at(field, eye, target).map_err(|error| {
            // The flags are named when they made the camera invalid, not for the terrain.
            if error.is::<CameraError>() {
                error.context("--eye/--target/--fov-y/--size/--near/--far")
            } else {
                error
            }
        })
    }

    /// A camera at `eye` looking at `target` (a pose of a camera path) with the lens,
    /// viewport and planes of these flags.
    pub fn camera_at(
        &self,
        field: &Heightfield,
        eye: Vec3,
        target: Vec3,
    ) -> anyhow::Result<Camera> {
        let far = match self.far {
            Some(far) => far,
            None => checked_far(field, eye, self.near)?,
        };
        Ok(Camera::new(
            eye,
            target,
            self.fov_y.to_radians(),
            self.size,
            self.near,
            far,
        )?)
    }
}

impl CameraArgs {
    /// The camera given by the flags, or, when neither `--eye` nor `--target` is given, a
    /// view of the whole terrain from above its southern edge.
    pub fn camera_or_default(&self, field: &Heightfield) -> anyhow::Result<Camera> {
        if self.eye.is_some() || self.target.is_some() {
            return self.camera(field);
        }
        let (eye, target) = overview(field);
        let far = match self.far {
            Some(far) => far,
            None => checked_far(field, eye, self.near)?,
        };
        Camera::new(
            eye,
            target,
            self.fov_y.to_radians(),
            self.size,
            self.near,
            far,
        )
        .context("--fov-y/--size/--near/--far")
    }
}

/// A second camera the LOD selects for while the image is drawn from the first: the
/// articles' "frozen camera" view of culling and LOD from outside.
#[derive(Debug, Args)]
pub struct FrozenCameraArgs {
    /// Select the LOD for a camera frozen at this eye (its frustum is drawn).
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true,
          requires = "lod_target")]
    pub lod_eye: Option<Vec3>,
    /// Target of the frozen LOD camera.
    #[arg(long, value_name = "X,Y,Z", value_parser = parse_vec3, allow_hyphen_values = true,
          requires = "lod_eye")]
    pub lod_target: Option<Vec3>,
}

impl FrozenCameraArgs {
    /// The frozen camera, with the lens, viewport and planes of `like`; None when not given.
    pub fn camera(&self, like: &Camera) -> anyhow::Result<Option<Camera>> {
        let (Some(eye), Some(target)) = (self.lod_eye, self.lod_target) else {
            return Ok(None);
        };
        Camera::new(eye, target, like.fov_y, like.viewport, like.near, like.far)
            .context("--lod-eye/--lod-target")
            .map(Some)
    }
}

/// Eye and target of a three-quarter view of the whole terrain: from beyond its southern
/// edge (rows grow southwards), above the highest point, looking north over the middle.
pub fn overview(field: &Heightfield) -> (Vec3, Vec3) {
    let (w, d) = field.world_size();
    let (lo, hi) = field.world_range();
    let span = w.max(d);
    let eye = Vec3::new(w * 0.32, hi + 0.28 * span, d + 0.22 * span);
    let target = Vec3::new(w * 0.52, lo + 0.3 * (hi - lo), d * 0.42);
    (eye, target)
}

/// A far plane beyond the farthest corner of the terrain's box seen from `eye`.
pub fn default_far(field: &Heightfield, eye: Vec3, near: f32) -> f32 {
    (farthest_corner(field, eye) * 1.01).max(2.0 * near)
}

/// The distance from `eye` to the farthest corner of the terrain's box.
fn farthest_corner(field: &Heightfield, eye: Vec3) -> f32 {
    let (w, d) = field.world_size();
    let (lo, hi) = field.world_range();
    let mut farthest = 0.0f32;
    for x in [0.0, w] {
        for y in [lo, hi] {
            for z in [0.0, d] {
                farthest = farthest.max(eye.distance(Vec3::new(x, y, z)));
            }
        }
    }
    farthest
}

/// [`default_far`], refused with the reason when it overflows `f32` (an eye or a terrain
/// extent too large for `f32` distances), which the camera would otherwise report as a
/// bad flag.
fn checked_far(field: &Heightfield, eye: Vec3, near: f32) -> anyhow::Result<f32> {
    // The terrain's part only: a near plane too large for f32 is the camera's to report.
    if !(farthest_corner(field, eye) * 1.01).is_finite() {
        let (w, d) = field.world_size();
        let (lo, hi) = field.world_range();
        bail!(
            "the distance from the eye {:?} to the farthest corner of the terrain ({w:e} x \
             {d:e} world units, heights {lo:e} ..= {hi:e}) overflows f32: give --far, an eye \
             nearer the terrain, or a smaller --cell-size or --height-scale",
            eye.to_array()
        );
    }
    Ok(default_far(field, eye, near))
}

/// Parses `--fov-y`, in degrees: the camera's own range check ([`MIN_FOV_Y`] to π
/// radians, excluded) done here, so the refusal speaks the flag's unit.
pub fn parse_fov_y(text: &str) -> Result<f32, String> {
    let degrees: f32 = text.parse().map_err(|e| format!("{e}"))?;
    let radians = degrees.to_radians();
    if (MIN_FOV_Y..std::f32::consts::PI).contains(&radians) {
        Ok(degrees)
    } else {
        // The bound rounded up, so every value shown inside it is accepted.
        let min = (MIN_FOV_Y.to_degrees() * 1e5).ceil() / 1e5;
        Err(format!("{degrees} degrees is outside [{min}, 180)"))
    }
}

/// Parses `X,Y,Z` (for example `100,2500,-30.5`).
pub fn parse_vec3(text: &str) -> Result<Vec3, String> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() != 3 {
        return Err(format!("expected X,Y,Z, like 100,2500,300, got '{text}'"));
    }
    let mut values = [0.0f32; 3];
    for (value, part) in values.iter_mut().zip(&parts) {
        *value = part
            .trim()
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("'{part}' in '{text}' is not a finite number"))?;
    }
    Ok(Vec3::from(values))
}

/// The widest viewport side taken: over twice a 16K display's width and more than any
/// GPU's largest render target, so a larger one is a typo, not a screen.
const MAX_VIEWPORT_SIDE: u32 = 32_768;

/// `WxH` of a viewport: positive, at most [`MAX_VIEWPORT_SIDE`] pixels a side.
pub fn parse_viewport(text: &str) -> Result<(u32, u32), String> {
    let (w, h) = parse_size(text)?;
    if w.max(h) > MAX_VIEWPORT_SIDE {
        return Err(format!(
            "a viewport side of {} pixels: at most {MAX_VIEWPORT_SIDE}",
            w.max(h)
        ));
    }
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::{parse_fov_y, parse_vec3, parse_viewport};
    use glam::Vec3;

    #[test]
    fn the_field_of_view_is_checked_in_degrees() {
        assert_eq!(parse_fov_y("60"), Ok(60.0));
        assert_eq!(
            parse_fov_y("0.00573"),
            Ok(0.00573),
            "the bound shown is accepted"
        );
        assert_eq!(parse_fov_y("179.9"), Ok(179.9));
        for bad in ["0.0001", "0", "-10", "180", "200", "nan", "inf"] {
            let message = parse_fov_y(bad).expect_err(bad);
            assert!(!message.contains("rad"), "{bad}: {message}");
        }
        assert_eq!(
            parse_fov_y("0.0001"),
            Err("0.0001 degrees is outside [0.00573, 180)".into())
        );
    }

    #[test]
    fn viewports_past_the_largest_side_are_refused() {
        assert_eq!(parse_viewport("32768x1"), Ok((32768, 1)));
        assert!(parse_viewport("100000x100000").is_err());
        assert!(parse_viewport("4294967295x4294967295").is_err());
        assert!(parse_viewport("0x10").is_err());
    }

    #[test]
    fn points_parse_and_refuse_garbage() {
        assert_eq!(parse_vec3("1,-2.5, 3"), Ok(Vec3::new(1.0, -2.5, 3.0)));
        assert!(parse_vec3("1,2").is_err());
        assert!(parse_vec3("1,2,3,4").is_err());
        assert!(parse_vec3("1,nan,3").is_err());
        assert!(parse_vec3("a,b,c").is_err());
    }
}
