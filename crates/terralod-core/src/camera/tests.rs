//! Tests of the camera, frustum and screen-space error against brute-force projection.

use super::*;
use glam::DVec4;
use proptest::prelude::*;

fn camera(eye: Vec3, target: Vec3) -> Camera {
    Camera::new(eye, target, 1.0, (1600, 900), 0.5, 5000.0).unwrap()
}

/// Projects a world point to pixels (origin top-left, y down) in f64, independently of the
/// code under test except for the matrix. `None` when behind the near plane.
fn to_pixels(camera: &Camera, point: Vec3) -> Option<(f64, f64)> {
    let m = camera.clip_from_world().as_dmat4();
    let clip: DVec4 = m * point.as_dvec3().extend(1.0);
    if clip.z < 0.0 || clip.w <= 0.0 {
        return None;
    }
    let (w, h) = (f64::from(camera.viewport.0), f64::from(camera.viewport.1));
    Some((
        (clip.x / clip.w + 1.0) * 0.5 * w,
        (1.0 - clip.y / clip.w) * 0.5 * h,
    ))
}

/// Clip coordinates in f64.
fn clip(camera: &Camera, point: Vec3) -> DVec4 {
    camera.clip_from_world().as_dmat4() * point.as_dvec3().extend(1.0)
}

/// Whether a point is in the view volume with a relative margin (positive: strictly).
fn in_view(camera: &Camera, point: Vec3, margin: f64) -> bool {
    let c = clip(camera, point);
    let m = margin * c.w.abs();
    c.w > 0.0
        && c.x >= -c.w + m
        && c.x <= c.w - m
        && c.y >= -c.w + m
        && c.y <= c.w - m
        && c.z >= m
        && c.z <= c.w - m
}

#[test]
fn new_rejects_unusable_cameras() {
    let (eye, target) = (Vec3::new(0.0, 10.0, 0.0), Vec3::new(5.0, 0.0, 5.0));
    assert!(Camera::new(eye, target, 1.0, (640, 480), 0.1, 100.0).is_ok());
    assert_eq!(
        Camera::new(eye, eye, 1.0, (640, 480), 0.1, 100.0),
        Err(CameraError::EyeAtTarget { eye })
    );
    assert!(Camera::new(eye, target, MIN_FOV_Y, (640, 480), 0.1, 100.0).is_ok());
    for fov_y in [0.0, -1.0, 0.99 * MIN_FOV_Y, std::f32::consts::PI, 4.0] {
        assert_eq!(
            Camera::new(eye, target, fov_y, (640, 480), 0.1, 100.0),
            Err(CameraError::FieldOfView { fov_y })
        );
    }
    for (near, far) in [(0.0, 10.0), (-1.0, 10.0), (10.0, 10.0), (10.0, 5.0)] {
        assert_eq!(
            Camera::new(eye, target, 1.0, (640, 480), near, far),
            Err(CameraError::DepthRange { near, far })
        );
    }
    assert_eq!(
        Camera::new(eye, target, 1.0, (0, 480), 0.1, 100.0),
        Err(CameraError::EmptyViewport {
            width: 0,
            height: 480
        })
    );
    assert!(matches!(
        Camera::new(eye, Vec3::NAN, 1.0, (640, 480), 0.1, 100.0),
        Err(CameraError::NonFinite { .. })
    ));
    assert!(matches!(
        Camera::new(eye, target, 1.0, (640, 480), 0.1, f32::INFINITY),
        Err(CameraError::NonFinite { .. })
    ));
    let message = CameraError::EmptyViewport {
        width: 0,
        height: 480,
    }
    .to_string();
    assert_eq!(message, "viewport 0 x 480 has no pixels");
}

#[test]
fn axes_are_orthonormal_and_never_roll() {
    let targets = [
        Vec3::new(10.0, 0.0, 3.0),
        Vec3::new(0.0, -50.0, 0.0),  // straight down
        Vec3::new(0.0, 50.0, 0.0),   // straight up
        Vec3::new(1e-4, -50.0, 0.0), // almost straight down
        Vec3::new(-3.0, 2.0, -7.0),
    ];
    for target in targets {
        let c = camera(Vec3::ZERO, target);
        let (f, u, r) = (c.forward(), c.up(), c.right());
        for v in [f, u, r] {
            assert!((v.length() - 1.0).abs() < 1e-5, "{target}: {v}");
        }
        assert!(f.dot(u).abs() < 1e-5 && f.dot(r).abs() < 1e-5 && u.dot(r).abs() < 1e-5);
        assert!(r.y.abs() < 1e-5, "the right axis is horizontal");
        assert!(u.y >= -1e-6, "the up axis points up");
        assert!(
            (r.cross(u) - (-f)).length() < 1e-5,
            "right-handed: x × y = z = −forward"
        );
    }
    // Straight down, north (−z, the image top) is at the top of the screen.
    let down = camera(Vec3::new(5.0, 100.0, 5.0), Vec3::new(5.0, 0.0, 5.0));
    assert_eq!(down.up(), Vec3::NEG_Z);
    assert_eq!(down.right(), Vec3::X);
    let north = to_pixels(&down, Vec3::new(5.0, 0.0, 0.0)).unwrap();
    let east = to_pixels(&down, Vec3::new(10.0, 0.0, 5.0)).unwrap();
    assert!(north.1 < 450.0 && (north.0 - 800.0).abs() < 1e-3);
    assert!(east.0 > 800.0 && (east.1 - 450.0).abs() < 1e-3);
}

#[test]
fn projection_follows_the_wgpu_conventions() {
    let c = camera(Vec3::new(0.0, 0.0, 10.0), Vec3::ZERO); // looking down −z
    let view = c.view_from_world();
    assert!((view.transform_point3(Vec3::ZERO) - Vec3::new(0.0, 0.0, -10.0)).length() < 1e-5);
    assert!(view.transform_point3(c.eye).length() < 1e-5);
    // Depth: near plane → 0, far plane → 1.
    let near = clip(&c, Vec3::new(0.0, 0.0, 10.0 - c.near));
    let far = clip(&c, Vec3::new(0.0, 0.0, 10.0 - c.far));
    assert!((near.z / near.w).abs() < 1e-5 && (far.z / far.w - 1.0).abs() < 1e-5);
    // The top edge of the field of view is at ndc y = 1; +x is to the right.
    let top = Vec3::new(0.0, 10.0 * (0.5 * c.fov_y).tan(), 0.0);
    let t = clip(&c, top);
    assert!((t.y / t.w - 1.0).abs() < 1e-5);
    let right = to_pixels(&c, Vec3::new(1.0, 0.0, 0.0)).unwrap();
    assert!(right.0 > 800.0);
    // k pixels per radian at the centre.
    let e = 0.01;
    let a = to_pixels(&c, Vec3::ZERO).unwrap();
    let b = to_pixels(&c, Vec3::new(0.0, e, 0.0)).unwrap();
    let measured = (b.1 - a.1).abs();
    assert!((measured / f64::from(c.screen_error(e, 10.0)) - 1.0).abs() < 1e-4);
    assert!((f64::from(c.pixels_per_radian()) - 900.0 / (2.0 * 0.5f64.tan())).abs() < 1e-2);
    // The distance is clamped to the near plane.
    assert_eq!(c.screen_error(1.0, 0.0), c.screen_error(1.0, c.near));
}

#[test]
fn frustum_planes_are_normalised_and_inward() {
    let c = camera(Vec3::new(3.0, 20.0, 40.0), Vec3::new(0.0, 0.0, 0.0));
    let frustum = c.frustum();
    for p in frustum.planes {
        assert!((p.truncate().length() - 1.0).abs() < 1e-5);
    }
    assert!(frustum.contains_point(c.target));
    assert!(!frustum.contains_point(c.eye - c.forward()));
    // The near plane's distance is measured in world units.
    let ahead = c.eye + c.forward() * (c.near + 2.0);
    assert!((frustum.distance(4, ahead) - 2.0).abs() < 1e-3);
    let at_target = Aabb::new(c.target - Vec3::ONE, c.target + Vec3::ONE);
    assert_eq!(frustum.classify(&at_target), Containment::Inside);
    let behind = Aabb::new(
        c.eye + Vec3::new(-1.0, -1.0, 5.0),
        c.eye + Vec3::new(1.0, 1.0, 7.0),
    );
    assert_eq!(frustum.classify(&behind), Containment::Outside);
    let around_eye = Aabb::new(c.eye - Vec3::splat(5.0), c.eye + Vec3::splat(5.0));
    assert_eq!(frustum.classify(&around_eye), Containment::Intersecting);
    // Poking through the near plane by a little is not inside.
    let f = c.forward();
    let straddle = Aabb::new(c.eye + f * (c.near - 0.1), c.eye + f * (c.near + 1.0));
    let straddle = Aabb::new(
        straddle.min.min(straddle.max),
        straddle.min.max(straddle.max),
    );
    assert_eq!(frustum.classify(&straddle), Containment::Intersecting);
    let huge = Aabb::new(Vec3::splat(-1e4), Vec3::splat(1e4));
    assert_eq!(frustum.classify(&huge), Containment::Intersecting);
}

#[test]
fn box_distances_match_brute_force() {
    let aabb = Aabb::new(Vec3::new(-1.0, 2.0, 3.0), Vec3::new(4.0, 5.0, 9.0));
    for point in [
        Vec3::new(0.0, 3.0, 4.0),
        Vec3::new(-5.0, 3.0, 4.0),
        Vec3::new(10.0, -2.0, 20.0),
        Vec3::new(4.0, 7.0, 0.0),
    ] {
        // The nearest point is the clamp of `point` to the box.
        let nearest = point.clamp(aabb.min, aabb.max);
        let d = point - nearest;
        assert!((aabb.distance_to(point) - d.length()).abs() < 1e-5);
        assert_eq!(aabb.distance_linf_to(point), d.abs().max_element());
        assert_eq!(aabb.distance_l1_to(point), d.abs().element_sum());
        assert!(aabb.distance_linf_to(point) <= aabb.distance_to(point) + 1e-6);
        assert!(aabb.distance_to(point) <= aabb.distance_l1_to(point) + 1e-6);
        assert_eq!(aabb.contains(point), aabb.distance_to(point) == 0.0);
    }
    let c = camera(Vec3::new(10.0, 0.0, 0.0), Vec3::ZERO);
    assert!((c.distance_to_aabb(&aabb) - aabb.distance_to(c.eye)).abs() < 1e-6);
}

#[test]
fn the_bound_is_the_articles_up_axis_projection_at_the_centre() {
    for target_y in [-30.0, -5.0, 0.0, 8.0] {
        let c = camera(Vec3::new(0.0, 20.0, 50.0), Vec3::new(0.0, target_y, 0.0));
        let projector = c.error_projector();
        let e = 1e-3;
        let p = c.eye + c.forward() * 40.0;
        let segment = Aabb::new(p, p + Vec3::new(0.0, e, 0.0));
        let article = e * Vec3::Y.dot(c.up()).abs() * c.pixels_per_radian() / 40.0;
        let bound = projector.vertical_error_bound(e, &segment);
        assert!((bound / article - 1.0).abs() < 1e-3, "{bound} vs {article}");
        let a = to_pixels(&c, segment.min).unwrap();
        let b = to_pixels(&c, segment.max).unwrap();
        let measured = (a.0 - b.0).hypot(a.1 - b.1);
        assert!((measured / f64::from(article) - 1.0).abs() < 1e-2);
    }
}

#[test]
fn the_nominal_error_is_not_a_bound_off_axis() {
    // A level camera: a vertical error near the top-right corner of the screen moves about
    // d / z = 1.5 times what the nominal error at its distance d says.
    let c = camera(Vec3::new(0.0, 0.0, 100.0), Vec3::ZERO);
    let tan_y = (0.5 * c.fov_y).tan();
    let (x, y) = (0.95 * tan_y * c.aspect() * 100.0, 0.95 * tan_y * 100.0);
    let p = Vec3::new(x, y - 0.5, 0.0);
    let q = p + Vec3::new(0.0, 0.5, 0.0);
    let (a, b) = (to_pixels(&c, p).unwrap(), to_pixels(&c, q).unwrap());
    let measured = (a.0 - b.0).hypot(a.1 - b.1);
    let nominal = f64::from(c.screen_error(0.5, c.eye.distance(p)));
    assert!(measured > 1.4 * nominal, "{measured} vs {nominal}");
    let bound = c
        .error_projector()
        .vertical_error_bound(0.5, &Aabb::new(p, q));
    assert!(f64::from(bound) * (1.0 + 1e-4) >= measured); // equal here, up to rounding
    // Looking straight down, the article's up-axis projection is 0, yet an error at the
    // screen edge moves k · e · ρ / z² pixels.
    let c = camera(Vec3::new(0.0, 100.0, 0.0), Vec3::ZERO);
    assert!(Vec3::Y.dot(c.up()).abs() < 1e-6);
    let p = Vec3::new(0.0, 0.0, -0.95 * 100.0 * tan_y);
    let q = p + Vec3::new(0.0, 1.0, 0.0);
    let (a, b) = (to_pixels(&c, p).unwrap(), to_pixels(&c, q).unwrap());
    let measured = (a.0 - b.0).hypot(a.1 - b.1);
    assert!(measured > 4.0);
    let bound = c
        .error_projector()
        .vertical_error_bound(1.0, &Aabb::new(p, q));
    assert!(f64::from(bound) * (1.0 + 1e-4) >= measured && f64::from(bound) < 1.1 * measured);
}

fn arbitrary_camera() -> impl Strategy<Value = Camera> {
    (
        prop::array::uniform3(-200.0f32..200.0),
        prop::array::uniform3(-200.0f32..200.0),
        0.2f32..2.8,
        (16u32..2000, 16u32..2000),
        0.05f32..5.0,
        10.0f32..1e4,
    )
        .prop_filter_map(
            "eye equals target",
            |(eye, target, fov, viewport, near, ratio)| {
                Camera::new(eye.into(), target.into(), fov, viewport, near, near * ratio).ok()
            },
        )
}

/// A box near the camera's target (so it is often in view, partly or wholly).
fn box_near(camera: &Camera, offset: [f32; 3], size: [f32; 3]) -> Aabb {
    let centre = camera.target + Vec3::from(offset);
    let half = Vec3::from(size) * 0.5;
    Aabb::new(centre - half, centre + half)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_nested_box_tested_against_its_parents_crossed_planes_classifies_alike(
        camera in arbitrary_camera(),
        offset in prop::array::uniform3(-150.0f32..150.0),
        size in prop::array::uniform3(1.0f32..120.0),
        from in prop::array::uniform3(0.01f32..=0.99),
        to in prop::array::uniform3(0.01f32..=0.99),
    ) {
        // A quadtree tests a child only against the planes its parent crosses. The child
        // keeps 1 % of the parent's size clear of its faces (at least 0.01 along any plane
        // normal, far above the rounding), so no plane can tell them apart by rounding.
        let parent = box_near(&camera, offset, size);
        let frustum = camera.frustum();
        let Some(crossed) = frustum.classify_planes(&parent, Frustum::ALL_PLANES) else {
            return Ok(());
        };
        let span = parent.max - parent.min;
        let (a, b) = (Vec3::from(from), Vec3::from(to));
        let child = Aabb::new(parent.min + span * a.min(b), parent.min + span * a.max(b));
        let masked = match frustum.classify_planes(&child, crossed) {
            None => Containment::Outside,
            Some(0) => Containment::Inside,
            Some(_) => Containment::Intersecting,
        };
        prop_assert_eq!(masked, frustum.classify(&child));
    }

    #[test]
    fn classify_never_culls_a_visible_point(
        camera in arbitrary_camera(),
        offset in prop::array::uniform3(-150.0f32..150.0),
        size in prop::array::uniform3(0.0f32..120.0),
    ) {
        let aabb = box_near(&camera, offset, size);
        let class = camera.frustum().classify(&aabb);
        let steps = [0.0, 0.25, 0.5, 0.75, 1.0];
        for fx in steps {
            for fy in steps {
                for fz in steps {
                    let p = aabb.min + (aabb.max - aabb.min) * Vec3::new(fx, fy, fz);
                    if in_view(&camera, p, 1e-4) {
                        prop_assert_ne!(class, Containment::Outside, "{:?} visible", p);
                    }
                    if class == Containment::Inside {
                        prop_assert!(in_view(&camera, p, -1e-4), "{:?} not in view", p);
                    }
                }
            }
        }
    }

    #[test]
    fn the_vertical_bound_holds_everywhere_in_a_box(
        camera in arbitrary_camera(),
        offset in prop::array::uniform3(-150.0f32..150.0),
        size in prop::array::uniform3(0.0f32..80.0),
        at in prop::array::uniform3(0.0f32..=1.0),
        other_y in 0.0f32..=1.0,
    ) {
        let aabb = box_near(&camera, offset, size);
        let p = aabb.min + (aabb.max - aabb.min) * Vec3::from(at);
        let q = Vec3::new(p.x, aabb.min.y + (aabb.max.y - aabb.min.y) * other_y, p.z);
        let error = (q.y - p.y).abs();
        if let (Some(a), Some(b)) = (to_pixels(&camera, p), to_pixels(&camera, q)) {
            let measured = (a.0 - b.0).hypot(a.1 - b.1);
            let bound = f64::from(camera.error_projector().vertical_error_bound(error, &aabb));
            prop_assert!(
                measured <= bound * (1.0 + 1e-3) + 1e-3,
                "measured {} px, bound {} px", measured, bound
            );
        }
    }
}

/// The widened frustum holds points up to the angle outside each side plane, and no
/// point beyond it: a ray from the eye turned from a frustum edge outwards by less than the
/// angle is inside, by more outside; near and far stay the camera's.
#[test]
fn the_widened_frustum_turns_each_side_out_by_its_angle() {
    let camera = Camera::new(
        Vec3::new(0.0, 10.0, 0.0),
        Vec3::new(100.0, 10.0, 0.0),
        60f32.to_radians(),
        (1600, 900),
        1.0,
        1000.0,
    )
    .expect("valid camera");
    let angle = 5f32.to_radians();
    let wide = camera.frustum_widened(angle);
    let (forward, right, up) = (camera.forward(), camera.right(), camera.up());
    let half_y = 0.5 * camera.fov_y;
    let half_x = (half_y.tan() * camera.aspect()).atan();
    let point = |axis: Vec3, half: f32, extra: f32| {
        let a = half + extra;
        camera.eye + (forward * a.cos() + axis * a.sin()) * 100.0
    };
    for (axis, half) in [
        (right, half_x),
        (-right, half_x),
        (up, half_y),
        (-up, half_y),
    ] {
        assert!(
            !camera
                .frustum()
                .contains_point(point(axis, half, 0.5 * angle))
        );
        assert!(wide.contains_point(point(axis, half, 0.9 * angle)));
        assert!(!wide.contains_point(point(axis, half, 1.1 * angle)));
    }
    assert!(!wide.contains_point(camera.eye + forward * 0.5));
    assert!(!wide.contains_point(camera.eye + forward * 1001.0));
    assert_eq!(camera.frustum_widened(0.0), camera.frustum());
}
