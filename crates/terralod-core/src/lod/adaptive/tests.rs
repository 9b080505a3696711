//! Unit tests of algorithm A: the state invariants after updates, and the incremental
//! state equal to a fresh instance's for the same view.

use super::paging::PAGES_PER_UPDATE;
use super::recorded::MAX_LINKED_LEVELS;
use super::records::{EAST, SOUTH};
use super::tree::{self, PageData};
use super::update::{ENABLED, enabled_children, mid_bit, parent_sides, ref_count};
use super::*;
use crate::camera::Camera;
use crate::heightfield::GridPos;
use crate::heightfield::Samples;
use crate::lod::MorphedHeight;
use crate::mesh::GridMesh;
use crate::test_support::lcg_values;
use glam::Vec3;

fn rough_field(width: u32, height: u32, seed: u64) -> Heightfield {
    let raw = lcg_values((width * height) as usize, seed, 400);
    Heightfield::new(width, height, Samples::U16(raw)).expect("valid field")
}

fn camera(eye: Vec3, target: Vec3) -> Camera {
    Camera::new(eye, target, 1.0, (640, 480), 0.5, 1e4).expect("valid camera")
}

/// Views along a walk over the terrain, plus a world-error view.
fn walk(field: &Heightfield, steps: usize) -> Vec<View> {
    let (w, d) = field.world_size();
    let mut views = Vec::new();
    for step in 0..steps {
        let t = step as f32 / steps as f32;
        let angle = t * std::f32::consts::TAU;
        let eye = Vec3::new(
            0.5 * w + 0.4 * w * angle.cos(),
            420.0 + 300.0 * (3.0 * angle).sin(),
            0.5 * d + 0.4 * d * angle.sin(),
        );
        let target = Vec3::new(w * t, 0.0, d * (1.0 - t));
        let tolerance = [0.5, 2.0, 8.0][step % 3];
        let view = View::screen(camera(eye, target), tolerance).expect("valid view");
        views.push(view.with_cull(step % 4 != 0));
    }
    views.push(View::world_error(30.0).expect("valid"));
    views
}

/// Every stored square with its position, parents before children.
fn all_squares(lod: &AdaptiveLod<'_>) -> Vec<Sq> {
    let tree = &lod.tree;
    let mut out = vec![Sq::ROOT];
    let mut next = 0;
    while next < out.len() {
        let sq = out[next];
        next += 1;
        if tree.has_children(sq.id) {
            let first = tree.first_child(sq.id);
            for k in 0..4 {
                if !tree.records[(first + k) as usize].is_outside() {
                    out.push(sq.child(first, k));
                }
            }
        }
    }
    out
}

/// Every enabled square has an enabled parent and enabled parent edge vertices; every
/// enabled edge vertex has its squares enabled and can be drawn; reference counts match.
fn check_invariants(lod: &AdaptiveLod<'_>) {
    let tree = &lod.tree;
    let mut counts = vec![[0u32; 4]; lod.state.len()];
    let squares = all_squares(lod);
    if lod.paging.is_none() {
        assert_eq!(squares.len(), tree.squares());
    }
    for &sq in &squares {
        let word = lod.state[sq.id as usize];
        for side in 0..4 {
            if lod.mid_enabled(sq, side, None) {
                assert!(word & ENABLED != 0, "shared vertex, disabled square");
                assert!(lod.owner(sq, side, None).is_some());
            }
        }
        for side in [EAST, SOUTH] {
            if word & mid_bit(side) != 0 {
                assert!(word & ENABLED != 0, "vertex of a disabled square");
                let n = tree.neighbour(sq.id, side);
                assert_ne!(n, tree::ABSENT, "an enabled vertex that cannot be drawn");
            }
        }
        let children = if word & ENABLED != 0 && tree.has_children(sq.id) {
            let first = tree.first_child(sq.id);
            (0..4)
                .filter(|&k| lod.state[(first + k) as usize] & ENABLED != 0)
                .fold(0, |bits, k| bits | 1 << k)
        } else {
            0
        };
        assert_eq!(enabled_children(word), children, "the sub-square bits");
        if word & ENABLED == 0 || sq.level == 0 {
            continue;
        }
        let parent = sq.parent(tree.parent(sq.id));
        assert!(lod.state[parent.id as usize] & ENABLED != 0);
        for side in parent_sides(sq.quadrant()) {
            assert!(lod.mid_enabled(parent, side, None));
            let (owner, owned) = lod.owner(parent, side, None).expect("drawable");
            counts[owner.id as usize][owned] += 1;
        }
    }
    for (id, count) in counts.iter().enumerate() {
        for (side, &n) in count.iter().enumerate() {
            assert_eq!(
                ref_count(lod.state[id], side),
                n,
                "reference count of square {id} side {side}"
            );
        }
    }
}

fn triangles(lod: &mut AdaptiveLod<'_>, view: &View) -> Vec<u32> {
    match lod.select(view) {
        Selection::Triangles { indices, .. } => indices.to_vec(),
        Selection::Patches { .. } | Selection::Listed { .. } => {
            unreachable!("algorithm A draws triangles by grid index")
        }
    }
}

#[test]
fn incremental_updates_equal_fresh_selections() {
    for (width, height, seed, tolerance) in [
        (65, 65, 1, 0.0),
        (40, 23, 2, 0.0),
        (3, 17, 3, 0.0),
        (2, 2, 4, 0.0),
        (65, 65, 1, 150.0),
        (40, 23, 2, 60.0),
    ] {
        let field = stepped_field(width, height, seed);
        let pyramid = Pyramid::build(&field);
        let options = AdaptiveOptions::default().with_build_tolerance(tolerance);
        let build = || AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let (mut walker, mut resetting) = (build(), build());
        for view in walk(&field, 30) {
            let incremental = triangles(&mut walker, &view);
            check_invariants(&walker);
            resetting.reset();
            assert_eq!(incremental, triangles(&mut resetting, &view), "after reset");
            assert_eq!(
                incremental,
                triangles(&mut build(), &view),
                "{width} x {height}, T {tolerance}"
            );
            assert!(!incremental.is_empty() || view.cull());
        }
    }
}

/// A8's pages: a pool split into a top and pages (each a page root's subtree in its own
/// run of slots from a fresh rank word, found through the page table) holds the same
/// squares and selects exactly what the pool without pages does, state carried along a
/// walk, for every page size.
#[test]
fn paged_pools_select_what_the_unpaged_pool_does() {
    for (width, height, seed, tolerance) in [
        (65, 65, 1, 0.0),
        (97, 41, 5, 0.0),
        (40, 23, 2, 60.0),
        (129, 129, 3, 0.0),
    ] {
        let field = stepped_field(width, height, seed);
        let pyramid = Pyramid::build(&field);
        let views = walk(&field, 24);
        let build = |cells| {
            let options = AdaptiveOptions::default()
                .with_build_tolerance(tolerance)
                .with_page_cells(cells);
            AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options)
        };
        let mut unpaged = build(0);
        assert!(unpaged.tree.pages().is_empty());
        let expected = selections(&mut unpaged, &views);
        let root = unpaged.tree.levels[0].size;
        for cells in (1..).map(|k| 1 << k).take_while(|&c| c <= root) {
            let mut paged = build(cells);
            let tree = &paged.tree;
            let case = format!("{width} x {height}, T {tolerance}, pages of {cells} cells");
            assert_eq!(tree.squares(), unpaged.squares(), "{case}");
            // Every page starts a rank word and holds its root's children first; every
            // block's parent is the square whose children it is.
            let parents: Vec<Sq> = all_squares(&paged)
                .into_iter()
                .filter(|sq| tree.has_children(sq.id))
                .collect();
            for sq in &parents {
                assert_eq!(tree.parent(tree.first_child(sq.id)), sq.id, "{case}");
            }
            let roots: Vec<u32> = parents
                .iter()
                .filter(|sq| tree.levels[sq.level as usize].size == cells)
                .map(|root| tree.first_child(root.id))
                .collect();
            let firsts: Vec<u32> = tree.pages().iter().map(|p| p.first).collect();
            assert_eq!(firsts, roots, "{case}");
            assert!(roots.iter().all(|first| first % 64 == 0), "{case}");
            // Squares of 2 cells are the finest and have no children.
            assert_eq!(roots.is_empty(), cells == 2, "{case}");
            assert_eq!(selections(&mut paged, &views), expected, "{case}");
            check_invariants(&paged);
        }
    }
}

/// A page refers to nothing outside its run but its root: moved elsewhere in the pool
/// (every page, in reverse order, past the old end; then packed back in reverse order),
/// with the runs it left scribbled over, the tree selects exactly what it did.
#[test]
fn moved_pages_select_what_they_did_in_place() {
    for (width, height, seed, cells) in [(129, 129, 3, 4), (97, 41, 5, 16), (129, 129, 6, 64)] {
        let field = stepped_field(width, height, seed);
        let pyramid = Pyramid::build(&field);
        let views = walk(&field, 24);
        let options = AdaptiveOptions::default().with_page_cells(cells);
        let mut in_place =
            AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let expected = selections(&mut in_place, &views);
        let mut tree = in_place.tree.clone();
        let pages = tree.pages().to_vec();
        assert!(pages.len() > 1, "{width} x {height}");
        let start = pages[0].first;
        let total: u32 = pages.iter().map(|p| p.slots).sum();
        assert_eq!(start + total, tree.slots() as u32);
        let moves: [&dyn Fn(usize) -> u32; 2] = [
            &|j| start + total + pages[j + 1..].iter().map(|p| p.slots).sum::<u32>(),
            &|j| start + pages[j + 1..].iter().map(|p| p.slots).sum::<u32>(),
        ];
        let roots = tree.page_roots();
        tree.grow(total as usize);
        for (round, to) in moves.iter().enumerate() {
            let detached: Vec<PageData> = (0..pages.len()).map(|j| tree.page_out(j)).collect();
            for (j, page) in detached.iter().enumerate() {
                tree.page_in(j, roots[j].id, page.view(), to(j));
            }
            let vacated = if round == 0 { start } else { start + total };
            tree.scribble(vacated, total);
            let mut moved =
                AdaptiveLod::from_tree(tree.clone(), LodOptions::default(), options, None);
            assert_eq!(
                selections(&mut moved, &views),
                expected,
                "{width} x {height}, round {round}"
            );
            check_invariants(&moved);
        }
    }
}

/// A8 step 2: with few frames for pages, pages come and go along a flight. After every
/// frame the state invariants hold (every enabled edge vertex can be drawn, so no
/// T-junction), and once an update holds nothing back the selection is the one without
/// paging; with a frame for every page, every view gets there.
#[test]
fn pages_in_frames_keep_the_mesh_whole_and_settle_to_the_unpaged_selection() {
    for (width, height, seed, cells, few, float) in [
        (129, 129, 3, 16, 20, false),
        (97, 41, 5, 8, 24, true),
        (129, 129, 6, 8, 40, false),
        // Pages reaching beyond the data (74 x 44 cells), which never leave.
        (75, 45, 7, 8, 30, false),
    ] {
        let field = stepped_field_as(width, height, seed, float);
        let pyramid = Pyramid::build(&field);
        let views = low_flight(&field);
        let options = AdaptiveOptions::default().with_page_cells(cells);
        let build =
            |options| AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let mut unpaged = build(options);
        let pages = unpaged.pages() as u32;
        for frames in [few, pages] {
            let case = format!("{width} x {height}, {cells}-cell pages, {frames} frames");
            let mut paged = build(options.with_page_frames(frames));
            let mut settled = 0;
            for (i, view) in views.iter().enumerate() {
                if i % 7 == 6 {
                    paged.reset();
                }
                let expected = selections(&mut unpaged, &[*view]);
                // Enough updates for the pages a view asks for, a few at a time.
                for _ in 0..48 {
                    let got = selections(&mut paged, &[*view]);
                    check_invariants(&paged);
                    let stats = paged.paging().expect("paged");
                    assert!(stats.resident <= stats.frames, "{case}");
                    if stats.held_back == 0 {
                        assert_eq!(got, expected, "{case}");
                        settled += 1;
                        break;
                    }
                }
            }
            let paging = paged.paging().expect("paged");
            if frames < pages {
                assert!(
                    paging.dropped > 0 && settled >= 10,
                    "{case}: {settled} settled"
                );
            } else {
                assert_eq!(paging.dropped, 0, "{case}");
                assert_eq!(settled, views.len(), "{case}");
            }
        }
    }
}

/// A8 step 3: pages read from disk (awaited before each update) give, frame by frame,
/// what pages kept in memory give: the same selections, pages copied in, dropped and
/// held back; the page file has no name in the folder, and the pages' memory goes
/// with the tree as built.
#[test]
fn pages_on_disk_select_what_pages_in_memory_do() {
    // Pages of 32 cells have rank words whose squares' children start before the
    // word's last square with children.
    for (width, height, seed, cells, frames, float) in [
        (129, 129, 3, 8, 20, false),
        (97, 41, 5, 8, 24, true),
        (257, 257, 4, 32, 12, false),
    ] {
        let field = stepped_field_as(width, height, seed, float);
        let pyramid = Pyramid::build(&field);
        let views = low_flight(&field);
        let options = AdaptiveOptions::default()
            .with_page_cells(cells)
            .with_page_frames(frames);
        let build = || AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let (mut memory, mut disk) = (build(), build());
        let dir = tempfile::tempdir().expect("a temporary directory");
        disk.spool_pages(dir.path()).expect("pages written");
        assert_eq!(disk.page_dir(), Some(dir.path()));
        assert!(disk.page_file().is_some() && memory.page_file().is_none());
        // The file has no name: nothing to leave behind, however the process ends.
        let names = || std::fs::read_dir(dir.path()).expect("readable").count();
        assert_eq!(names(), 0);
        assert!(disk.static_bytes() < memory.static_bytes());
        for view in &views {
            for _ in 0..4 {
                disk.await_pages();
                assert_eq!(
                    selections(&mut disk, &[*view]),
                    selections(&mut memory, &[*view])
                );
                let (d, m) = (
                    disk.paging().expect("paged"),
                    memory.paging().expect("paged"),
                );
                assert_eq!(
                    (d.copied_in, d.dropped, d.held_back, d.resident),
                    (m.copied_in, m.dropped, m.held_back, m.resident)
                );
            }
        }
        let (d, m) = (
            disk.paging().expect("paged"),
            memory.paging().expect("paged"),
        );
        assert!(d.on_disk && !m.on_disk);
        // Every page copied in was read (those that never leave were copied in before);
        // pages are read only for frames that can take them, so few are read and then
        // let go (when the view moves on before they are copied in).
        assert!(d.dropped > 0 && d.loaded >= d.copied_in, "{d:?}");
        assert!(d.loaded <= d.copied_in + d.frames, "{d:?}");
        assert!(d.bytes_read > 0 && d.failures == 0 && m.loaded == 0);
        assert!(disk.take_page_faults().is_empty());
        drop(disk);
        assert_eq!(names(), 0);
    }
}

/// With fewer frames than a view asks for, the pages nearest the camera get them first:
/// after the update that fills the frames, no page left waiting is nearer the eye than a
/// page copied in (without the ordering, pages go in the order the walk asked for them,
/// and this view leaves nearer ones waiting).
#[test]
fn the_nearest_pages_get_frames_first() {
    let field = stepped_field(129, 129, 3);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default()
        .with_page_cells(8)
        .with_page_frames(12);
    let mut lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let (w, d) = field.world_size();
    let eye = Vec3::new(w * 0.8, 1700.0, d * 0.7);
    let view =
        View::screen(camera(eye, Vec3::new(w * 0.1, 1000.0, d * 0.2)), 0.5).expect("valid view");
    lod.update(&view);
    let paging = lod.paging.as_ref().expect("paged");
    let (asked, roots, pinned) = paging.asked();
    let (asked, roots) = (asked.to_vec(), roots.to_vec());
    let pinned = pinned.iter().filter(|&&p| p).count();
    let distance = |tree: &SquareTree, j: u32| tree.aabb(roots[j as usize]).distance_to(eye);
    let free = lod.paging().expect("paged").frames - pinned;
    assert!(
        asked.len() > free.max(PAGES_PER_UPDATE),
        "{} asked",
        asked.len()
    );
    lod.update(&view);
    let distance = |j: u32| distance(&lod.tree, j);
    let resident = |j: u32| lod.tree.pages()[j as usize].first != tree::NOT_RESIDENT;
    let (copied, waiting): (Vec<u32>, Vec<u32>) = asked.iter().partition(|&&j| resident(j));
    assert!(!copied.is_empty() && !waiting.is_empty());
    let farthest_copied = copied.iter().map(|&j| distance(j)).fold(0.0, f32::max);
    let nearest_waiting = waiting
        .iter()
        .map(|&j| distance(j))
        .fold(f32::INFINITY, f32::min);
    assert!(
        farthest_copied <= nearest_waiting,
        "copied in up to {farthest_copied} m away, waiting from {nearest_waiting} m"
    );
}

/// Forced coarsening: with frames for far fewer pages than a low view across the terrain
/// asks for, the camera flies to the other corner. The pages refined for the first view
/// are released (their squares want nothing), coarsen and give their frames to the
/// ground under the camera, which gets refined; the state invariants hold every frame,
/// the mesh stops changing once settled, and the released pages are those beyond the
/// radius (but some with every neighbour in a frame). A view that fits in the frames then brings the radius back to infinity
/// and the unpaged selection.
#[test]
fn far_pages_coarsen_to_give_their_frames_to_nearer_ground() {
    let field = stepped_field(129, 129, 3);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default().with_page_cells(8);
    let mut unpaged = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let mut lod = AdaptiveLod::with_options(
        &field,
        &pyramid,
        LodOptions::default(),
        options.with_page_frames(20),
    );
    let (w, d) = field.world_size();
    let across = |from: f32, to: f32| {
        let eye = Vec3::new(w * from, 1150.0, d * from);
        let target = Vec3::new(w * to, 1000.0, d * to);
        View::screen(camera(eye, target), 0.5).expect("valid view")
    };
    let (first, second) = (across(0.9, 0.1), across(0.1, 0.9));
    let mut last = Vec::new();
    for (i, view) in std::iter::repeat_n(first, 60)
        .chain(std::iter::repeat_n(second, 150))
        .enumerate()
    {
        let got = selections(&mut lod, &[view]);
        check_invariants(&lod);
        if i >= 190 {
            assert_eq!(got, last, "the mesh still changes {} updates on", i - 60);
        }
        last = got;
    }
    // Then a view without an eye (which releases nothing, and measures no distance) and
    // the second view again: the same outcome within 25 updates. (Distances kept from an
    // eyeless update once released every page for 30 updates on the orbit of
    // `lod_alloc.rs`, which found it; here they happen to do no harm.)
    for round in 0..2 {
        if round == 1 {
            selections(&mut lod, &[View::world_error(30.0).expect("valid view")]);
            for _ in 0..25 {
                selections(&mut lod, &[second]);
                check_invariants(&lod);
            }
        }
        let paging = lod.paging.as_ref().expect("paged");
        let (_, roots, pinned) = paging.asked();
        let (roots, pinned) = (roots.to_vec(), pinned.to_vec());
        let held = paging.held();
        let eye = second.camera().expect("a camera").eye;
        let distance = |j: u32| lod.tree.aabb(roots[j as usize]).distance_to(eye);
        let stats = lod.paging().expect("paged");
        assert!(
            stats.held_back > 0,
            "the view fits in the frames: {stats:?}"
        );
        // The ground under the camera: its page and the eight around it are in frames and
        // kept, and its page is refined.
        let under = (0..roots.len() as u32)
            .find(|&j| {
                let b = lod.tree.aabb(roots[j as usize]);
                (b.min.x..=b.max.x).contains(&eye.x) && (b.min.z..=b.max.z).contains(&eye.z)
            })
            .expect("a page under the eye");
        let root = roots[under as usize];
        let beside = |j: u32| {
            let r = roots[j as usize];
            r.ix.abs_diff(root.ix) <= 1 && r.iz.abs_diff(root.iz) <= 1
        };
        for j in (0..roots.len() as u32).filter(|&j| beside(j)) {
            assert!(
                held.contains(&(j, false)) || pinned[j as usize],
                "page {j} beside the eye's is not kept in a frame: {held:?}"
            );
        }
        assert!(enabled_children(lod.state[root.id as usize]) != 0);
        // Released pages lie beyond the radius; pages kept lie within it, or have every
        // page around them in frames (refining them takes no frame).
        assert!(
            stats.radius.is_finite() && stats.dropped > 0 && stats.released > 0,
            "{stats:?}"
        );
        let resident = |k: usize| lod.tree.pages()[k].first != tree::NOT_RESIDENT;
        for &(j, released) in held.iter().filter(|&&(j, _)| !pinned[j as usize]) {
            let r = roots[j as usize];
            let around_in = (0..roots.len())
                .filter(|&k| roots[k].ix.abs_diff(r.ix) <= 1 && roots[k].iz.abs_diff(r.iz) <= 1)
                .all(resident);
            assert!(
                released == (distance(j) > stats.radius) || !released && around_in,
                "page {j} at {} m, released {released}, radius {} m",
                distance(j),
                stats.radius
            );
        }
    }
    // A view that fits: from the far corner, looking out of the terrain (9 pages).
    let corner = Vec3::new(w * 0.98, 1660.0, d * 0.98);
    let outwards = Vec3::new(w * 2.0, 1640.0, d * 2.0);
    let fits = View::screen(camera(corner, outwards), 0.5).expect("valid view");
    let expected = selections(&mut unpaged, &[fits]);
    for _ in 0..80 {
        selections(&mut lod, &[fits]);
        check_invariants(&lod);
    }
    let stats = lod.paging().expect("paged");
    assert_eq!((stats.held_back, stats.released), (0, 0), "{stats:?}");
    assert_eq!(lod.paging.as_ref().expect("paged").radius(), f32::INFINITY);
    assert_eq!(selections(&mut lod, &[fits]), expected);
}

/// Pages read in the background, never awaited: every frame keeps the state invariants,
/// and a view held still gets to the unpaged selection once its pages have arrived.
#[test]
fn pages_read_in_the_background_keep_the_mesh_whole() {
    let field = stepped_field(129, 129, 6);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default().with_page_cells(8);
    let mut unpaged = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let mut paged = AdaptiveLod::with_options(
        &field,
        &pyramid,
        LodOptions::default(),
        options.with_page_frames(40),
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    paged.spool_pages(dir.path()).expect("pages written");
    let views = walk(&field, 20);
    let mut settled = 0;
    for view in &views {
        let expected = selections(&mut unpaged, &[*view]);
        for _ in 0..2000 {
            let got = selections(&mut paged, &[*view]);
            check_invariants(&paged);
            if paged.paging().expect("paged").held_back == 0 {
                assert_eq!(got, expected);
                settled += 1;
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    let stats = paged.paging().expect("paged");
    assert!(
        settled >= 10 && stats.loaded > 0,
        "{settled} settled, {stats:?}"
    );
}

/// Fault injection: pages corrupted, or cut off, in the page file are each reported once
/// (a checksum or read error naming the file and the page) and never read again; the
/// other pages still come in, and the mesh stays whole.
#[test]
fn corrupt_or_missing_pages_are_reported_once_and_the_mesh_stays_whole() {
    let field = stepped_field(129, 129, 3);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default().with_page_cells(8);
    let pages =
        AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options).pages() as u32;
    let views = walk(&field, 30);
    for cut in [false, true] {
        let mut lod = AdaptiveLod::with_options(
            &field,
            &pyramid,
            LodOptions::default(),
            options.with_page_frames(pages),
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        lod.spool_pages(dir.path()).expect("pages written");
        let file = lod.page_file().expect("on disk");
        let len = file.metadata().expect("metadata").len();
        if cut {
            file.set_len(len / 2).expect("cut");
        } else {
            use std::os::unix::fs::FileExt;
            for k in 1..8 {
                file.write_all_at(&[0xa5; 3], len * k / 8).expect("spoilt");
            }
        }
        // The flight twice, so pages that failed are asked for again (and must not be
        // read or reported again).
        let mut faults = Vec::new();
        for view in views.iter().chain(&views) {
            for _ in 0..8 {
                lod.await_pages();
                lod.select(view);
                check_invariants(&lod);
                faults.extend(lod.take_page_faults());
            }
        }
        let stats = lod.paging().expect("paged");
        assert!(
            !faults.is_empty() && stats.loaded > 0,
            "cut {cut}: {stats:?}"
        );
        assert_eq!(faults.len(), stats.failures);
        let mut failed: Vec<usize> = faults
            .iter()
            .map(|fault| match fault {
                PageError::Checksum { page, dir: d, .. } if !cut => (*page, d),
                PageError::Read { page, dir: d, .. } if cut => (*page, d),
                other => panic!("cut {cut}: {other}"),
            })
            .map(|(page, d)| {
                assert_eq!(d, dir.path());
                page
            })
            .collect();
        failed.sort_unstable();
        failed.dedup();
        assert_eq!(failed.len(), faults.len(), "a page reported twice");
        let message = faults[0].to_string();
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
    }
}

/// Pages cannot go to a folder that does not exist: the error names it, the pages stay
/// in memory and the algorithm goes on; without frames there is nothing to spool.
#[test]
fn pages_that_cannot_be_written_stay_in_memory() {
    let field = stepped_field(65, 65, 2);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default().with_page_cells(8);
    let mut unpaged = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let nowhere = std::path::Path::new("/nonexistent/terralod");
    assert!(matches!(
        unpaged.spool_pages(nowhere),
        Err(PageError::NotPaged)
    ));
    let mut paged = AdaptiveLod::with_options(
        &field,
        &pyramid,
        LodOptions::default(),
        options.with_page_frames(10),
    );
    let error = paged.spool_pages(nowhere).expect_err("no such folder");
    assert!(
        error.to_string().contains("/nonexistent/terralod"),
        "{error}"
    );
    assert!(paged.page_file().is_none());
    let views = walk(&field, 5);
    for view in &views {
        for _ in 0..8 {
            paged.select(view);
            check_invariants(&paged);
        }
    }
    assert!(paged.paging().expect("paged").copied_in > 0);
}

/// A low flight across the terrain and back, looking ahead and down, then a walk.
fn low_flight(field: &Heightfield) -> Vec<View> {
    let (w, d) = field.world_size();
    let mut views: Vec<View> = (0..40)
        .map(|step| {
            let t = (step as f32 / 20.0).min(2.0 - step as f32 / 20.0);
            let eye = Vec3::new(w * (0.05 + 0.9 * t), 1040.0 + 20.0 * t, d * (0.1 + 0.8 * t));
            let ahead = 1.0 - 2.0 * (step / 20) as f32;
            let target = eye + Vec3::new(w * 0.3 * ahead, -60.0, d * 0.2);
            View::screen(camera(eye, target), 0.5).expect("valid view")
        })
        .collect();
    views.extend(walk(field, 10));
    views
}

/// [`stepped_field`], or with `float` its copy in `f32` samples a fraction off its
/// integers.
fn stepped_field_as(width: u32, height: u32, seed: u64, float: bool) -> Heightfield {
    let field = stepped_field(width, height, seed);
    if !float {
        return field;
    }
    let raw = (0..height)
        .flat_map(|r| (0..width).map(move |c| (c, r)))
        .map(|(c, r)| field.raw(c, r) + 0.375)
        .collect();
    Heightfield::new(width, height, Samples::F32(raw)).expect("valid field")
}

/// Rough patches on flat and tilted ground (16-bit), so the sparse tree has leaves at
/// every level.
fn stepped_field(width: u32, height: u32, seed: u64) -> Heightfield {
    let noise = lcg_values((width * height) as usize, seed, 400);
    let raw = (0..width * height)
        .map(|i| {
            let (c, r) = (i % width, i / width);
            let rough = (c / 8 + r / 8 + seed as u32).is_multiple_of(3);
            let ground = if c < width / 2 {
                1000
            } else {
                1000 + 5 * c as u16
            };
            ground + if rough { noise[i as usize] } else { 0 }
        })
        .collect();
    Heightfield::new(width, height, Samples::U16(raw)).expect("valid field")
}

/// Selections and drawn heights of one instance along `views`.
fn selections(lod: &mut AdaptiveLod<'_>, views: &[View]) -> Vec<(Vec<u32>, Vec<MorphedHeight>)> {
    views
        .iter()
        .map(|view| match lod.select(view) {
            Selection::Triangles {
                indices, morphs, ..
            } => (indices.to_vec(), morphs.to_vec()),
            Selection::Patches { .. } | Selection::Listed { .. } => {
                unreachable!("algorithm A draws triangles by grid index")
            }
        })
        .collect()
}

/// With build tolerance 0 the sparse tree drops only squares below which nothing has an
/// error, so it selects exactly what the full tree (every square of the pyramid) selects,
/// triangles and drawn heights, along a walk; the full tree has a square per pyramid node.
#[test]
fn the_lossless_sparse_tree_selects_what_the_full_tree_does() {
    for (width, height, seed) in [(65, 65, 1), (97, 41, 5), (33, 33, 8)] {
        let field = stepped_field(width, height, seed);
        let pyramid = Pyramid::build(&field);
        let views = walk(&field, 24);
        let full_tree = tree::build_from_field(&field, &pyramid, -1.0, 0);
        let nodes: usize = (0..pyramid.levels())
            .map(|l| {
                let (nx, nz) = pyramid.nodes(l);
                nx as usize * nz as usize
            })
            .sum();
        assert_eq!(full_tree.squares(), nodes);
        let options = AdaptiveOptions::default();
        let mut full = AdaptiveLod::from_tree(full_tree, LodOptions::default(), options, None);
        let mut sparse = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
        assert!(sparse.squares() < full.squares(), "{width} x {height}");
        assert_eq!(
            selections(&mut sparse, &views),
            selections(&mut full, &views)
        );
        check_invariants(&sparse);
    }
}

/// Larger build tolerances keep fewer squares, down to the root alone once the tolerance
/// exceeds every error; smooth ground costs little even losslessly.
#[test]
fn sparse_trees_shrink_with_the_build_tolerance() {
    // Rough in one corner (a sixteenth of the area, rougher towards its far side), a
    // tilted plane elsewhere.
    let side = 129;
    let noise = lcg_values(side * side, 3, 400);
    let raw = (0..side * side)
        .map(|i| {
            let (c, r) = (i % side, i / side);
            let plane = 1000 + 3 * c as u16 + 2 * r as u16;
            if c < 32 && r < 32 {
                plane + noise[i] * (c + r) as u16 / 64
            } else {
                plane
            }
        })
        .collect();
    let field = Heightfield::new(side as u32, side as u32, Samples::U16(raw)).expect("valid");
    let pyramid = Pyramid::build(&field);
    let full = tree::build_from_field(&field, &pyramid, -1.0, 0).squares();
    let mut last = usize::MAX;
    let mut sizes = Vec::new();
    for tolerance in [0.0, 10.0, 50.0, 100.0, 200.0, 400.0, 1e5] {
        let options = AdaptiveOptions::default().with_build_tolerance(tolerance);
        let lod = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        assert!(lod.squares() <= last, "T {tolerance}: {sizes:?}");
        last = lod.squares();
        sizes.push((tolerance, lod.squares(), lod.static_bytes()));
    }
    assert!(
        sizes[0].1 * 4 < full,
        "{full} squares in the full tree: {sizes:?}"
    );
    assert!(sizes[4].1 * 2 < sizes[0].1, "{sizes:?}");
    assert_eq!(last, 1, "{sizes:?}");
}

#[test]
fn a_flat_terrain_is_two_by_two_fans_and_a_rough_one_refines() {
    let flat = Heightfield::new(33, 33, Samples::U16(vec![7; 33 * 33])).expect("valid");
    let pyramid = Pyramid::build(&flat);
    let mut lod = AdaptiveLod::new(&flat, &pyramid, LodOptions::default());
    let view = View::world_error(1e-3).expect("valid");
    assert_eq!(
        lod.select(&view).triangle_count(),
        4,
        "the root's fan, edges off"
    );
    let rough = rough_field(33, 33, 9);
    let pyramid = Pyramid::build(&rough);
    let mut lod = AdaptiveLod::new(&rough, &pyramid, LodOptions::default());
    assert_eq!(lod.select(&view).triangle_count(), 2 * 32 * 32);
    assert!(lod.enabled_squares() > 256);
}

/// A smooth flight (small steps, a slow turn, fixed τ) where most squares keep their
/// answers: the incremental state skips them and still equals a fresh selection, drawn
/// heights included, with the invariants intact; also with a far plane that changes
/// every frame (`terralod bench` sets it beyond the terrain's farthest corner from the
/// eye: while Update() tested against it, every such frame re-tested every square).
#[test]
fn smooth_flights_skip_squares_and_equal_fresh_selections() {
    let field = rough_field(129, 97, 7);
    let pyramid = Pyramid::build(&field);
    let (w, d) = field.world_size();
    // Far planes: fixed, beyond the farthest corner as the bench's, cutting the terrain.
    for (morph, far_share) in [
        (true, None),
        (false, None),
        (true, Some(1.01)),
        (true, Some(0.8)),
    ] {
        let options = AdaptiveOptions::default().with_morph(morph);
        let mut walker =
            AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        let (mut carried_visits, mut fresh_visits) = (0, 0);
        let (mut replayed, mut walked) = (0, 0);
        for step in 0..60 {
            let t = step as f32;
            let eye = Vec3::new(5.0 + 1.5 * t, 350.0 - 2.0 * t, 10.0 + 0.7 * t);
            let heading = 0.6 + 0.01 * t;
            let target = eye + Vec3::new(heading.cos(), -0.4, heading.sin());
            let camera = match far_share {
                Some(share) => {
                    let far = [(0.0, 0.0), (w, 0.0), (0.0, d), (w, d)]
                        .map(|(x, z)| eye.distance(Vec3::new(x, 0.0, z)))
                        .into_iter()
                        .fold(0.0, f32::max)
                        * share;
                    Camera::new(eye, target, 1.0, (640, 480), 0.5, far).expect("valid camera")
                }
                None => camera(eye, target),
            };
            let view = View::screen(camera, 1.0).expect("valid view");
            let view = view.with_cull(step % 7 != 3);
            let (triangles, morphs) = match walker.select(&view) {
                Selection::Triangles {
                    indices, morphs, ..
                } => (indices.to_vec(), morphs.to_vec()),
                Selection::Patches { .. } | Selection::Listed { .. } => {
                    unreachable!("algorithm A draws triangles by grid index")
                }
            };
            carried_visits += walker.stats().nodes_visited;
            let reuse = walker.render_reuse();
            (replayed, walked) = (replayed + reuse.0, walked + reuse.1);
            let mut carried_boxes = Vec::new();
            walker.drawn_boxes(&mut carried_boxes);
            check_invariants(&walker);
            let mut fresh =
                AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
            match fresh.select(&view) {
                Selection::Triangles {
                    indices,
                    morphs: fresh_morphs,
                    ..
                } => {
                    assert_eq!(triangles, indices, "step {step}");
                    assert_eq!(morphs, fresh_morphs, "step {step}");
                }
                Selection::Patches { .. } | Selection::Listed { .. } => {
                    unreachable!("algorithm A draws triangles by grid index")
                }
            }
            let mut fresh_boxes = Vec::new();
            fresh.drawn_boxes(&mut fresh_boxes);
            assert!(
                carried_boxes == fresh_boxes,
                "step {step}: the drawn boxes differ"
            );
            fresh_visits += fresh.stats().nodes_visited;
            assert_eq!(walker.enabled_squares(), fresh.enabled_squares());
        }
        assert!(
            carried_visits * 2 < fresh_visits,
            "far plane {far_share:?}: {carried_visits} squares evaluated along the flight, \
             {fresh_visits} from scratch"
        );
        // Render() replayed many of its walks (and the output equals the fresh walks'): 43
        // % of the squares drawn on the first flight, which switches culling on and off.
        assert!(
            replayed * 4 > walked,
            "far plane {far_share:?}: {replayed} of {walked} squares drawn from replayed walks"
        );
    }
}

/// A camera flying straight, then turning in place, then flying on: the turn finds
/// deadlines set while the camera only moved; each frame must still equal a fresh
/// selection, and the carried state evaluate fewer squares.
#[test]
fn a_turn_in_place_after_a_straight_flight_equals_fresh_selections() {
    let field = rough_field(129, 97, 11);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default();
    let mut walker = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let (mut carried_visits, mut fresh_visits) = (0, 0);
    let mut eye = Vec3::new(10.0, 250.0, 20.0);
    let mut heading = 0.7f32;
    for step in 0..45 {
        match step / 15 {
            1 => heading += 0.005,
            _ => eye += 2.0 * Vec3::new(heading.cos(), -0.2, heading.sin()),
        }
        let target = eye + Vec3::new(heading.cos(), -0.5, heading.sin());
        let view = View::screen(camera(eye, target), 1.0).expect("valid view");
        let carried = selections(&mut walker, std::slice::from_ref(&view));
        carried_visits += walker.stats().nodes_visited;
        let mut fresh = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
        assert_eq!(carried, selections(&mut fresh, &[view]), "step {step}");
        fresh_visits += fresh.stats().nodes_visited;
    }
    assert!(
        carried_visits * 2 < fresh_visits,
        "{carried_visits} squares evaluated along the flight, {fresh_visits} from scratch"
    );
}

/// Update()'s deadlines, tested directly with its frustum (widened by the guard band, no
/// far plane): a box's frustum class and error test keep their answers for as long as
/// its deadline is not due, and two boxes theirs for as long as the merged (subtree)
/// deadline is not, along paths that move straight (or turn in place) and then move and
/// turn at once.
#[test]
fn deadlines_keep_their_answers_until_due() {
    let field = rough_field(33, 33, 3);
    let pyramid = Pyramid::build(&field);
    let lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut unit = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    let (mut kept, mut merged_kept, mut changed_after_due) = (0, 0, 0);
    for trial in 0..300 {
        let eye0 = Vec3::new(400.0 * unit(), 50.0 + 300.0 * unit(), 400.0 * unit());
        let heading0 = std::f32::consts::TAU * unit();
        let (speed, turn) = (1.0 + 20.0 * unit(), 0.002 + 0.05 * unit());
        // Straight first (even trials), or turning first.
        let turns_first = trial % 2 == 1;
        let view_at = |i: usize| {
            let (mut eye, mut heading) = (eye0, heading0);
            for j in 0..i {
                // The first four steps one kind of motion, then both at once.
                if j >= 4 || turns_first {
                    heading += turn;
                }
                if j >= 4 || !turns_first {
                    eye += speed * Vec3::new(heading.cos(), -0.1, heading.sin());
                }
            }
            let target = eye + Vec3::new(heading.cos(), -0.4, heading.sin());
            View::screen(camera(eye, target), 1.0).expect("valid view")
        };
        let mut motion = Motion {
            last: None,
            moved: 0.0,
            turned: 0.0,
            size: 1e3,
        };
        for i in 0..=4 {
            motion.advance(&view_at(i));
        }
        // The answers of a box and an error now, with the slack and reach of the tests.
        let answers = |view: &View, aabb: &Aabb, error: f32| {
            let camera = view.camera().expect("a screen view has a camera");
            let frustum = lod.guard_frustum(camera);
            let tester = lod.tester(view, Some(&frustum));
            let (containment, seen) = tester.classify_slack(aabb);
            let (fails, tested) = tester.fails_slack(error, aabb);
            ((containment, fails), seen.min(tested), tester.reach(aabb))
        };
        // Boxes anywhere near the camera, and boxes on the frustum's left and right
        // planes, which a turn moves the most.
        let start = view_at(4);
        let eye = start.camera().expect("a screen view").eye;
        let (forward, right) = {
            let c = start.camera().expect("a screen view");
            (c.forward(), c.right())
        };
        // The guard frustum's side planes: the view's half-width angle plus the band.
        let edge = ((640.0 / 480.0) * 0.5f32.tan()).atan() + AdaptiveOptions::DEFAULT_GUARD_ANGLE;
        let edge = edge.tan();
        let boxes: Vec<(Aabb, f32)> = (0..60)
            .map(|k| {
                let size = Vec3::new(
                    1.0 + 30.0 * unit(),
                    1.0 + 20.0 * unit(),
                    1.0 + 30.0 * unit(),
                );
                let min = if k % 2 == 0 {
                    Vec3::new(
                        600.0 * unit() - 100.0,
                        100.0 * unit(),
                        600.0 * unit() - 100.0,
                    )
                } else {
                    let side = if k % 4 == 1 { edge } else { -edge };
                    let along = (forward + right * side * (0.9 + 0.2 * unit())).normalize();
                    eye + along * (20.0 + 400.0 * unit()) - 0.5 * size
                };
                (Aabb::new(min, min + size), 10f32.powf(3.0 * unit() - 2.0))
            })
            .collect();
        let deadlines: Vec<_> = boxes
            .iter()
            .map(|(aabb, error)| {
                let (answer, slack, far) = answers(&start, aabb, *error);
                (answer, motion.deadline(slack, far))
            })
            .collect();
        // Subtree deadlines: pairs of neighbouring boxes merged now, and merged again
        // (with the same deadlines, set earlier) at step 12.
        let merge = |motion: &Motion| -> Vec<Deadline> {
            deadlines
                .windows(2)
                .map(|pair| motion.earlier(pair[0].1, pair[1].1))
                .collect()
        };
        let mut merged = merge(&motion);
        for i in 5..40 {
            let view = view_at(i);
            motion.advance(&view);
            if i == 12 {
                merged = merge(&motion);
            }
            let current: Vec<_> = boxes
                .iter()
                .map(|(aabb, error)| answers(&view, aabb, *error).0)
                .collect();
            for (k, (answer, deadline)) in deadlines.iter().enumerate() {
                if !motion.due(*deadline) {
                    assert_eq!(current[k], *answer, "trial {trial}, step {i}, box {k}");
                    kept += 1;
                } else if current[k] != *answer {
                    changed_after_due += 1;
                }
            }
            for (k, subtree) in merged.iter().enumerate() {
                if !motion.due(*subtree) {
                    assert_eq!(
                        [current[k], current[k + 1]],
                        [deadlines[k].0, deadlines[k + 1].0],
                        "trial {trial}, step {i}, boxes {k} and {}",
                        k + 1
                    );
                    merged_kept += 1;
                }
            }
        }
    }
    // The deadlines skip many tests, and the answers do change once they are due.
    assert!(
        kept > 10_000 && merged_kept > 1_000 && changed_after_due > 1_000,
        "{kept} kept ({merged_kept} by merged deadlines), {changed_after_due} changed"
    );
}

/// Deadlines at the edges: expired, never due, a distance of 0, a box beyond `f32`,
/// merged deadlines (and merged again later) due whenever either input is, and the
/// restart once `moved + size · turned` passes its limit.
#[test]
fn merged_deadlines_at_the_edges() {
    let motion = Motion {
        last: None,
        moved: 3.0,
        turned: 0.01,
        size: 1e3,
    };
    let line = motion.deadline(5.0, 100.0);
    let moving_only = motion.deadline(2.0, 0.0);
    assert!(!motion.due(line) && !motion.due(moving_only));
    assert!(motion.due(motion.earlier(EXPIRED, line)));
    assert!(motion.due(motion.earlier(line, EXPIRED)));
    assert_eq!(motion.earlier(NEVER, NEVER), NEVER);
    assert!(!motion.due(motion.earlier(line, NEVER)));
    for far in [f32::INFINITY, f32::NAN] {
        assert!(motion.due(motion.deadline(1.0, far)), "far {far}");
    }
    assert!(motion.due(motion.earlier([f32::NAN, 10.0], line)));
    let at = |dm: f64, dt: f64| Motion {
        moved: motion.moved + dm,
        turned: motion.turned + dt,
        ..motion
    };
    let later = at(1.0, 0.01);
    for (a, b) in [
        (line, moving_only),
        (line, NEVER),
        (moving_only, NEVER),
        (line, line),
        (moving_only, line),
    ] {
        let merged = motion.earlier(a, b);
        let again = later.earlier(merged, a);
        for i in 0..=40 {
            for j in 0..=40 {
                let m = at(0.25 * f64::from(i), 0.0025 * f64::from(j));
                if m.due(a) || m.due(b) {
                    assert!(m.due(merged), "{a:?} and {b:?} at {i}, {j}");
                    if m.moved >= later.moved && m.turned >= later.turned {
                        assert!(m.due(again), "{a:?} and {b:?} again at {i}, {j}");
                    }
                }
            }
        }
    }
    // Turning in place by 0.5 rad a step adds about 0.7 to `turned`: past 64 · size
    // after about 90 steps, the deadlines restart.
    let mut motion = Motion {
        moved: 0.0,
        turned: 0.0,
        ..motion
    };
    let restarted = (0..200).find(|&step| {
        let heading = 0.5 * step as f32;
        let eye = Vec3::new(0.0, 100.0, 0.0);
        let target = eye + Vec3::new(heading.cos(), -0.3, heading.sin());
        let view = View::screen(camera(eye, target), 1.0).expect("valid view");
        motion.advance(&view) && step > 0
    });
    assert!(
        restarted.is_some_and(|step| (80..100).contains(&step)),
        "restarted at {restarted:?}"
    );
    assert_eq!((motion.moved, motion.turned), (0.0, 0.0));
}

/// The recorded walks link an edge vertex to the square across it exactly when the walk
/// holds that square (checked against a search of the walk's squares).
#[test]
fn recorded_walks_link_the_squares_they_hold() {
    let field = rough_field(129, 97, 5);
    let pyramid = Pyramid::build(&field);
    let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    let mut linked = 0;
    for view in walk(&field, 12) {
        lod.select(&view);
        linked += lod.render_buffers.check_links().0;
    }
    assert!(linked > 0, "no edge vertex linked");
}

/// Subtree walks deeper than [`MAX_LINKED_LEVELS`]: a 2049-wide strip with a detail at the
/// finest subdivision has levels down to 18 (squares of two cells at level 10, then 8
/// levels of detail) and its subtrees start at level 7, so a walk reaches 11 levels below
/// its root. The squares below the cut-off keep their boxes' codes
/// (unlinked, checked against a search of the walk), and every frame equals a fresh
/// selection.
#[test]
fn walks_deeper_than_the_linked_levels_leave_their_deepest_squares_unlinked() {
    let terrain = stepped_field(2049, 3, 4);
    let detail = stepped_field(5, 5, 6);
    let k = detail::MAX_SHIFT;
    let placed = Detail::new(&terrain, &detail, (512.0, 1.0), 1.0 / (1u32 << k) as f32)
        .expect("on the strip");
    let pyramid = Pyramid::build(&terrain);
    let build = || {
        AdaptiveLod::with_detail(
            &terrain,
            &pyramid,
            LodOptions::default(),
            AdaptiveOptions::default(),
            &placed,
        )
        .expect("placed on this terrain")
    };
    let mut lod = build();
    assert!(
        lod.subtree_depth() as usize + (MAX_LINKED_LEVELS as usize) < lod.finest,
        "the walks are not deep enough"
    );
    let near = |dy: f32, dz: f32| {
        let target = Vec3::new(512.008, 1000.0, 1.008);
        let view = View::screen(camera(target + Vec3::new(0.0, dy, dz), target), 0.5);
        view.expect("valid view")
    };
    let views = [
        View::world_error(1e-3).expect("valid"),
        near(2.0, -2.0),
        near(1.9, -2.1),
        View::world_error(1e-3).expect("valid"),
    ];
    let (mut linked, mut deep) = (0, 0);
    for (i, view) in views.iter().enumerate() {
        let carried = triangles(&mut lod, view);
        assert!(!carried.is_empty(), "view {i}");
        assert_eq!(carried, triangles(&mut build(), view), "view {i}");
        let (l, d) = lod.render_buffers.check_links();
        (linked, deep) = (linked + l, deep + d);
    }
    assert!(linked > 0 && deep > 0, "linked {linked}, too deep {deep}");
}

/// A detail's cell size must be the terrain's divided by a power of two, its origin on its
/// lattice, its footprint on the terrain, its grid addressable, and it must be inserted
/// into the terrain it was placed on.
#[test]
fn bad_details_are_refused() {
    let terrain = stepped_field(33, 33, 1);
    let detail = stepped_field(9, 5, 2);
    let place = |origin: (f32, f32), cell: f32| Detail::new(&terrain, &detail, origin, cell);
    for cell in [0.3, 1.0, 2.0, 0.0, -0.5, f32::NAN, f32::INFINITY, 1.0 / 3.0] {
        assert!(
            matches!(place((0.0, 0.0), cell), Err(DetailError::CellSize { .. })),
            "{cell}"
        );
    }
    let fine = place((2.5, 7.25), 0.25).expect("on the lattice");
    assert_eq!((fine.shift(), fine.origin()), (2, (10, 29)));
    assert_eq!(fine.footprint(), [10, 29, 18, 33]);
    assert!(matches!(
        place((0.1, 0.0), 0.25),
        Err(DetailError::Origin { .. })
    ));
    assert!(matches!(
        place((f32::NAN, 0.0), 0.25),
        Err(DetailError::Origin { .. })
    ));
    assert!(matches!(
        place((40.0, 0.0), 0.5),
        Err(DetailError::Outside { .. })
    ));
    assert!(matches!(
        place((-5.0, -3.0), 0.5),
        Err(DetailError::Outside { .. })
    ));
    // Touching at a corner or along a side covers no cell; one fine cell is enough.
    for touching in [(-4.0, -2.0), (-4.0, 0.0), (16.0, 32.0)] {
        assert!(
            matches!(place(touching, 0.5), Err(DetailError::Outside { .. })),
            "{touching:?}"
        );
    }
    let corner = place((-3.5, -1.5), 0.5).expect("one fine cell overlaps");
    assert_eq!(corner.footprint(), [0, 0, 1, 1]);
    assert!(matches!(
        place((0.0, 0.0), 1.0 / 512.0),
        Err(DetailError::CellSize { .. })
    ));
    // Past 32-bit grid indices: refused unless the vertices are listed.
    let big = Heightfield::new(4097, 4097, Samples::U16(vec![0; 4097 * 4097])).expect("valid");
    let too_fine = Detail::new(&big, &detail, (0.0, 0.0), 1.0 / 32.0).expect("placed");
    assert_eq!(too_fine.grid_vertices(), (131_072u64 + 1).pow(2));
    assert!(matches!(
        too_fine.check_indices(false),
        Err(DetailError::TooFine { .. })
    ));
    assert!(too_fine.check_indices(true).is_ok());
    // A strip 2^23 + 1 samples long subdivided 256 times: 2^31 fine cells, the largest
    // root; twice as long is refused even with listed vertices (its root's side would
    // overflow `u32`). Only the placement is made (no samples are read).
    let strip = |width: u32| {
        Heightfield::new(width, 2, Samples::U16(vec![0; 2 * width as usize])).expect("valid")
    };
    for (width, fits) in [((1 << 23) + 1, true), ((1 << 24) + 1, false)] {
        let long = strip(width);
        let placed = Detail::new(&long, &detail, (0.0, 0.0), 1.0 / 256.0).expect("placed");
        let checked = placed.check_indices(true);
        assert_eq!(checked.is_ok(), fits, "{width}: {checked:?}");
        if !fits {
            assert!(matches!(checked, Err(DetailError::TooWide { .. })));
        }
    }
    let other = stepped_field(17, 17, 1);
    let pyramid = Pyramid::build(&other);
    let options = AdaptiveOptions::default();
    assert!(matches!(
        AdaptiveLod::with_detail(&other, &pyramid, LodOptions::default(), options, &fine),
        Err(DetailError::Terrain)
    ));
}

/// A long, thin terrain with a detail at the finest subdivision: the root (65,536 fine
/// cells a side over a 65,537-vertex stride) straddles the data, and its index arithmetic
/// (`size * stride`, its centre's index) overflowed `u32` before Render() noticed that it
/// draws nothing itself. Every selection now draws the extent, with every index in the
/// vertex buffer.
#[test]
fn straddling_squares_of_a_finely_subdivided_terrain_do_not_overflow() {
    let terrain = stepped_field(257, 3, 4);
    let detail = stepped_field(5, 5, 6);
    let k = detail::MAX_SHIFT;
    let fine_cell = 1.0 / (1u32 << k) as f32;
    // Near the middle of the strip, on the detail's lattice.
    let placed = Detail::new(&terrain, &detail, (128.0, 1.0), fine_cell).expect("on the strip");
    assert_eq!(placed.shift(), k);
    let pyramid = Pyramid::build(&terrain);
    let mut lod = AdaptiveLod::with_detail(
        &terrain,
        &pyramid,
        LodOptions::default(),
        AdaptiveOptions::default(),
        &placed,
    )
    .expect("placed on this terrain");
    let vertices = lod.grid_vertices();
    assert_eq!(
        (vertices.stride, vertices.rows),
        ((256 << k) + 1, (2 << k) + 1)
    );
    let eye = Vec3::new(128.0, 3000.0, -20.0);
    let views = [
        View::world_error(1e-3).expect("valid"),
        View::world_error(1e4).expect("valid"),
        View::screen(camera(eye, Vec3::new(128.0, 1000.0, 1.0)), 1.0).expect("valid view"),
    ];
    // The strip's extent, 256 x 2 terrain cells, as twice an area in fine cells.
    let extent2 = 2 * (256u64 << k) * (2u64 << k);
    for (i, view) in views.into_iter().enumerate() {
        let Selection::Triangles {
            vertices, indices, ..
        } = lod.select(&view)
        else {
            unreachable!("algorithm A draws triangles");
        };
        assert!(!indices.is_empty(), "view {i}");
        let len = vertices.len() as u64;
        assert!(indices.iter().all(|&i| u64::from(i) < len));
        // The triangles tile the extent (a culled view draws part of it): none reaches
        // the padding beyond it, none overlaps another.
        let area2 = doubled_area(
            indices
                .chunks_exact(3)
                .map(|t| [0, 1, 2].map(|j| vertices.position(t[j]))),
        );
        if view.cull() {
            assert!(area2 <= extent2, "view {i}: {area2} > {extent2}");
        } else {
            assert_eq!(area2, extent2, "view {i}");
        }
    }
    check_invariants(&lod);
}

/// Twice the plan area of `triangles`, in grid positions (exact).
fn doubled_area(triangles: impl Iterator<Item = [GridPos; 3]>) -> u64 {
    let d = |p: GridPos, q: GridPos| {
        (
            i64::from(q.col) - i64::from(p.col),
            i64::from(q.row) - i64::from(p.row),
        )
    };
    triangles
        .map(|[a, b, c]| {
            let ((ux, uz), (vx, vz)) = (d(a, b), d(a, c));
            (ux * vz - uz * vx).unsigned_abs()
        })
        .sum()
}

/// A detail whose tree does not fit is refused with a typed error, checked before the
/// tables are filled (here with a 1 MiB limit per allocation: the detail's bounds near the
/// footprint at `k = 8` take 4.7 MB at the finest level alone), not an abort; the same
/// detail builds without the limit (above).
#[test]
fn a_detail_too_large_for_memory_is_refused() {
    let terrain = stepped_field(257, 3, 4);
    let detail = stepped_field(5, 5, 6);
    let k = detail::MAX_SHIFT;
    let placed = Detail::new(&terrain, &detail, (128.0, 1.0), 1.0 / (1u32 << k) as f32)
        .expect("on the strip");
    let pyramid = Pyramid::build(&terrain);
    let options = AdaptiveOptions::default();
    let limit = 1 << 20;
    let started = std::time::Instant::now();
    let refused = AdaptiveLod::with_detail_within(
        &terrain,
        &pyramid,
        LodOptions::default(),
        options,
        &placed,
        tree::Budget { limit },
    )
    .expect_err("over the limit");
    let DetailError::TooLarge { bytes } = refused else {
        panic!("{refused}");
    };
    assert!(bytes > limit, "{bytes}");
    assert!(!refused.to_string().contains('\n'), "{refused}");
    // Refused before the bounds were computed.
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    // A limit above every table: the same tree as without one.
    let fits = AdaptiveLod::with_detail_within(
        &terrain,
        &pyramid,
        LodOptions::default(),
        options,
        &placed,
        tree::Budget { limit: 1 << 26 },
    )
    .expect("within 64 MiB per table");
    let unlimited =
        AdaptiveLod::with_detail(&terrain, &pyramid, LodOptions::default(), options, &placed)
            .expect("placed on this terrain");
    assert_eq!(fits.squares(), unlimited.squares());
    assert_eq!(fits.state_bytes(), unlimited.state_bytes());
}

/// Render() walks its subtrees in parallel above `PARALLEL_SQUARES` enabled squares: the
/// triangles, morphs and drawn boxes are the same on one thread and on four, in the same
/// order.
#[test]
fn the_parallel_render_is_the_serial_one() {
    let field = rough_field(257, 257, 5);
    let pyramid = Pyramid::build(&field);
    let view = View::world_error(0.5).expect("valid");
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a thread pool");
        pool.install(|| {
            let mut lod = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
            let (indices, morphs) = match lod.select(&view) {
                Selection::Triangles {
                    indices, morphs, ..
                } => (indices.to_vec(), morphs.to_vec()),
                Selection::Patches { .. } | Selection::Listed { .. } => {
                    unreachable!("adaptive draws triangles by grid index")
                }
            };
            let mut boxes = Vec::new();
            lod.drawn_boxes(&mut boxes);
            (lod.enabled_squares(), indices, morphs, boxes)
        })
    };
    let one = run(1);
    assert!(
        one.0 >= super::render::PARALLEL_SQUARES,
        "{} squares",
        one.0
    );
    let four = run(4);
    assert!(one.1 == four.1, "the triangles differ");
    assert!(one.2 == four.2, "the morphs differ");
    assert!(one.3 == four.3, "the drawn boxes differ");
}

/// Forced coarsening with a still camera after a move: for several frame counts, views
/// of the low flight and across the terrain, each from a fresh start or after another
/// view, the selection settles: `reads().pending` reaches 0 and the mesh stops changing
/// (no page swings between released and kept, none is copied in and dropped forever);
/// a view that settles with ground held back never fits later (so `mesh` and `render`,
/// which stop at the first update without anything pending, refuse only views the
/// frames cannot hold); and a view that fits settles to the unpaged selection. Found by a
/// review: keeping pages whose neighbours were all in frames while others still waited
/// swung forever, and a radius grown back while the frames were crowded swung too.
#[test]
fn a_still_camera_settles_after_a_move() {
    let field = stepped_field(129, 129, 3);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default().with_page_cells(8);
    let mut unpaged = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let (w, d) = field.world_size();
    let across = |from: f32, to: f32, height: f32| {
        let eye = Vec3::new(w * from, height, d * from);
        let target = Vec3::new(w * to, 1000.0, d * to);
        View::screen(camera(eye, target), 0.5).expect("valid view")
    };
    let flight = low_flight(&field);
    let mut views: Vec<View> = flight.iter().take(40).step_by(3).copied().collect();
    views.extend([across(0.9, 0.1, 1150.0), across(0.5, 0.0, 1300.0)]);
    let mut held_back_settled = 0;
    for frames in [14, 20, 40] {
        for (v, view) in views.iter().enumerate() {
            let expected = selections(&mut unpaged, &[*view]);
            for before in [None, Some(views[(v + 3) % views.len()])] {
                let case = format!("{frames} frames, view {v}, after {:?}", before.is_some());
                let mut lod = AdaptiveLod::with_options(
                    &field,
                    &pyramid,
                    LodOptions::default(),
                    options.with_page_frames(frames),
                );
                for view in std::iter::repeat_n(before, 40).flatten() {
                    selections(&mut lod, &[view]);
                }
                let (mut settled, mut last) = (None, Vec::new());
                for i in 0..200 {
                    let got = selections(&mut lod, &[*view]);
                    check_invariants(&lod);
                    let held_back = lod.paging().expect("paged").held_back;
                    if settled.is_none() && lod.reads().pending == 0 {
                        settled = Some(held_back);
                    }
                    if i >= 150 {
                        assert!(got == last, "{case}: the mesh still changes at update {i}");
                    }
                    last = got;
                }
                let stats = lod.paging().expect("paged");
                assert_eq!(lod.reads().pending, 0, "{case}: {stats:?}");
                let settled = settled.expect("pending reached 0");
                if settled > 0 {
                    held_back_settled += 1;
                    assert!(stats.held_back > 0, "{case}: refused, but it fits");
                }
                if stats.held_back == 0 {
                    assert!(last == expected, "{case}: not the unpaged selection");
                }
            }
        }
    }
    assert!(
        held_back_settled > 0,
        "no view needed more pages than the frames hold"
    );
}

/// Through a move, a still camera, a view without an eye and another view, pages on disk
/// (awaited) give what pages in memory give, frame by frame, with pages released.
#[test]
fn pages_on_disk_release_what_pages_in_memory_do() {
    let field = stepped_field(129, 129, 3);
    let pyramid = Pyramid::build(&field);
    let options = AdaptiveOptions::default()
        .with_page_cells(8)
        .with_page_frames(20);
    let build = || AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let (mut memory, mut disk) = (build(), build());
    let dir = tempfile::tempdir().expect("a temporary directory");
    disk.spool_pages(dir.path()).expect("pages written");
    let views = low_flight(&field);
    let eyeless = View::world_error(30.0).expect("valid view");
    let path = std::iter::repeat_n(views[36], 60)
        .chain(std::iter::repeat_n(views[0], 100))
        .chain(std::iter::repeat_n(eyeless, 3))
        .chain(std::iter::repeat_n(views[20], 60));
    let mut released = 0;
    for (i, view) in path.enumerate() {
        disk.await_pages();
        assert!(
            selections(&mut disk, &[view]) == selections(&mut memory, &[view]),
            "update {i}"
        );
        let (d, m) = (
            disk.paging().expect("paged"),
            memory.paging().expect("paged"),
        );
        assert_eq!(
            (d.copied_in, d.dropped, d.held_back, d.released),
            (m.copied_in, m.dropped, m.held_back, m.released),
            "update {i}"
        );
        released = released.max(m.released);
    }
    assert!(released > 0);
}

/// A8 step 4: a listed selection (every vertex with its position and drawn height) draws
/// exactly the mesh of the grid-indexed selection read against the terrain: the same
/// triangles in the same order, every height the same to the bit, and a vertex listed
/// twice (by the two squares of an edge, or by a subtree and the walk above it) at one
/// height. State carried along a walk (recorded walks replayed), with and without
/// morphing, a build tolerance, `f32` samples, local detail, pages in few frames, and the
/// parallel render.
#[test]
fn listed_selections_draw_what_grid_selections_do() {
    let detail_terrain = stepped_field(65, 65, 3);
    let detail_field = stepped_field(9, 9, 7);
    let cell = detail_terrain.mapping().cell_size / 4.0;
    let detail =
        Detail::new(&detail_terrain, &detail_field, (20.0, 24.0), cell).expect("on the terrain");
    let cases: Vec<(&str, Heightfield, AdaptiveOptions, bool)> = vec![
        (
            "stepped 65",
            stepped_field(65, 65, 1),
            AdaptiveOptions::default(),
            false,
        ),
        (
            "rough 97 x 41, no morph",
            rough_field(97, 41, 2),
            AdaptiveOptions::default().with_morph(false),
            false,
        ),
        (
            "f32 40 x 23, T 60",
            stepped_field_as(40, 23, 2, true),
            AdaptiveOptions::default().with_build_tolerance(60.0),
            false,
        ),
        (
            "pages of 8 cells in 12 frames",
            stepped_field(129, 129, 3),
            AdaptiveOptions::default()
                .with_page_cells(8)
                .with_page_frames(12),
            false,
        ),
        (
            "detail",
            detail_terrain.clone(),
            AdaptiveOptions::default(),
            true,
        ),
    ];
    for (case, field, options, with_detail) in &cases {
        let pyramid = Pyramid::build(field);
        let build = |list: bool| {
            let options = options.with_list_vertices(list);
            if *with_detail {
                AdaptiveLod::with_detail(field, &pyramid, LodOptions::default(), options, &detail)
                    .expect("placed")
            } else {
                AdaptiveLod::with_options(field, &pyramid, LodOptions::default(), options)
            }
        };
        let (mut grid, mut listed) = (build(false), build(true));
        let (mut duplicated, mut distinct) = (0, 0);
        for (step, view) in walk(field, 24).iter().enumerate() {
            let expected = grid.select(view).to_mesh(field);
            let selection = listed.select(view);
            assert!(selection.listed_heights_agree(), "{case}, step {step}");
            let Selection::Listed {
                vertices, shift, ..
            } = selection
            else {
                unreachable!("listed")
            };
            assert_eq!(shift, u32::from(*with_detail) * 2, "{case}");
            duplicated += vertices.len();
            let mesh = selection.to_mesh_as_carried().expect("carries its heights");
            distinct += mesh.positions.len();
            assert_eq!(mesh.triangles, expected.triangles, "{case}, step {step}");
            assert_eq!(mesh.positions, expected.positions, "{case}, step {step}");
            let bits = |m: &GridMesh| m.heights.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&mesh) == bits(&expected),
                "{case}, step {step}: heights differ"
            );
            assert_eq!(listed.stats().triangles, grid.stats().triangles);
        }
        // A vertex is listed once per square that adds it (an edge vertex by both its
        // squares) and a subtree's corners once more: 1.55–1.68 listings a vertex here.
        let ratio = duplicated as f64 / distinct as f64;
        assert!(
            (1.2..2.0).contains(&ratio),
            "{case}: {duplicated} listed for {distinct}"
        );
    }
    // Past `PARALLEL_SQUARES`: the subtrees walked in parallel list in order.
    let field = rough_field(257, 257, 5);
    let pyramid = Pyramid::build(&field);
    let view = View::world_error(0.5).expect("valid");
    let mut grid = AdaptiveLod::new(&field, &pyramid, LodOptions::default());
    let options = AdaptiveOptions::default().with_list_vertices(true);
    let mut listed = AdaptiveLod::with_options(&field, &pyramid, LodOptions::default(), options);
    let expected = grid.select(&view).to_mesh(&field);
    assert!(grid.enabled_squares() >= super::render::PARALLEL_SQUARES);
    let mesh = listed.select(&view).to_mesh_as_carried().expect("listed");
    assert!(mesh == expected, "the parallel render lists another mesh");
}

/// A8 step 4 lifts the 32-bit limit of the grid: a detail at 256 positions a cell on a
/// 513² terrain (131,073² positions, 17.2 G, far past `u32` indices) is refused for grid
/// indices, and builds and draws with its vertices listed: the triangles tile the
/// terrain's extent in fine positions (no gap, no overlap, nothing past it), vertices lie
/// beyond any `u32` index, and a vertex listed twice is at one height.
#[test]
fn listed_vertices_reach_past_32_bit_grid_indices() {
    let terrain = stepped_field(513, 513, 8);
    let detail = stepped_field(5, 5, 9);
    let k = detail::MAX_SHIFT;
    let cell = terrain.mapping().cell_size / (1u32 << k) as f32;
    let placed = Detail::new(&terrain, &detail, (60.0, 30.0), cell).expect("on it");
    assert!(placed.grid_vertices() > u64::from(u32::MAX));
    let pyramid = Pyramid::build(&terrain);
    let build = |list: bool| {
        let options = AdaptiveOptions::default().with_list_vertices(list);
        AdaptiveLod::with_detail(&terrain, &pyramid, LodOptions::default(), options, &placed)
    };
    assert!(matches!(build(false), Err(DetailError::TooFine { .. })));
    let mut lod = build(true).expect("listed vertices address any position");
    // Over the detail, close enough for its finest squares.
    let (eye, target) = (Vec3::new(60.0, 1500.0, 20.0), Vec3::new(60.0, 1000.0, 30.0));
    let views = [
        View::world_error(1e-3).expect("valid"),
        View::screen(camera(eye, target), 0.01)
            .expect("valid")
            .with_cull(false),
    ];
    let extent2 = 2 * (512u64 << k).pow(2);
    for (i, view) in views.iter().enumerate() {
        let selection = lod.select(view);
        assert!(selection.listed_heights_agree(), "view {i}");
        let Selection::Listed {
            vertices,
            indices,
            shift,
        } = selection
        else {
            unreachable!("listed")
        };
        assert_eq!(shift, k);
        let index = |p: GridPos| u64::from(p.row) * ((512u64 << k) + 1) + u64::from(p.col);
        assert!(
            vertices.iter().any(|v| index(v.pos) > u64::from(u32::MAX)),
            "view {i}"
        );
        let area2 = doubled_area(
            indices
                .chunks_exact(3)
                .map(|t| [0, 1, 2].map(|j| vertices[t[j] as usize].pos)),
        );
        assert_eq!(area2, extent2, "view {i}");
        // The detail's own samples are drawn where its finest squares are.
        let finest = vertices
            .iter()
            .filter(|v| v.pos.col % (1 << k) != 0 || v.pos.row % (1 << k) != 0)
            .count();
        assert!(
            finest > 0,
            "view {i}: nothing finer than the terrain's samples"
        );
    }
    check_invariants(&lod);
}

/// Built from an imported terrain's tiles, the tree is the one built from the terrain in
/// memory, bit for bit (records, heights, layout, pages, border vertices), for 16-bit and
/// `f32` samples, lossless and sparse trees, with pages or without, on terrains whose
/// pyramid has levels above the tiles and padding beyond the data; so are the selections.
#[test]
fn trees_built_from_tiles_are_the_trees_built_in_memory() {
    use crate::tiles::{ImportOptions, TiledPyramid, TiledTerrain, import};
    let cases = [
        (65, 65, 1, false, 8, 0.0, 0),
        (97, 41, 5, false, 16, 0.0, 16),
        (97, 41, 5, true, 8, 0.0, 0),
        (33, 33, 8, true, 4, 3.0, 8),
        (130, 70, 2, false, 16, 2.0, 32),
    ];
    for (width, height, seed, float, tile_cells, tolerance, page_cells) in cases {
        let field = stepped_field_as(width, height, seed, float);
        let pyramid = Pyramid::build(&field);
        let dir = tempfile::tempdir().expect("a temporary folder");
        let options = ImportOptions::with_tile_cells(tile_cells);
        import(&field, dir.path(), &options, &|_, _| {}).expect("import");
        let terrain = TiledTerrain::open(dir.path()).expect("open");
        let tiles = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let adaptive = AdaptiveOptions::default()
            .with_build_tolerance(tolerance)
            .with_page_cells(page_cells)
            .with_list_vertices(true);
        let lod = LodOptions::default().with_adaptive(adaptive);
        let mut in_memory = AdaptiveLod::with_options(&field, &pyramid, lod, adaptive);
        let mut from_tiles =
            AdaptiveLod::from_tiles(&tiles, lod, adaptive).expect("built from tiles");
        let case = format!("{width} x {height}, f32 {float}, tiles of {tile_cells}, T {tolerance}");
        assert!(in_memory.squares() > 1, "{case}");
        assert!(in_memory.tree == from_tiles.tree, "{case}");
        // Every tile fits in the memory kept: each tile's pyramid was built once.
        let level_0 = terrain.header().levels[0].tiles();
        assert_eq!(tiles.pyramids_built(), level_0, "{case}");
        for view in walk(&field, 6) {
            let a = in_memory.select(&view).to_mesh_as_carried();
            let b = from_tiles.select(&view).to_mesh_as_carried();
            assert_eq!(a, b, "{case}");
        }
    }
}

/// A level-0 tile that cannot be read is stood in for by the coarser level as when the
/// level is assembled whole, so the tree built from the tiles is the tree of that stood-in
/// field, bit for bit, and the tile is named once.
#[test]
fn a_damaged_tile_stands_in_as_in_the_assembled_level() {
    use crate::tiles::{ImportOptions, TiledPyramid, TiledTerrain, import};
    for float in [false, true] {
        let field = stepped_field_as(97, 70, 3, float);
        let dir = tempfile::tempdir().expect("a temporary folder");
        let options = ImportOptions::with_tile_cells(16);
        import(&field, dir.path(), &options, &|_, _| {}).expect("import");
        let damaged = dir.path().join("0/2/1.tile");
        let mut bytes = std::fs::read(&damaged).expect("the tile exists");
        let end = bytes.len() - 1;
        bytes[end - 40] ^= 0x5a;
        std::fs::write(&damaged, bytes).expect("writable");
        let terrain = TiledTerrain::open(dir.path()).expect("open");
        let (stood_in, stand_ins) = terrain
            .to_heightfield_standing_in(0, u64::MAX)
            .expect("the level, stood in");
        assert_eq!(stand_ins.len(), 1);
        assert!(stood_in.samples() != field.samples(), "the damage shows");
        let tiles = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let adaptive = AdaptiveOptions::default().with_list_vertices(true);
        let lod = LodOptions::default().with_adaptive(adaptive);
        let pyramid = Pyramid::build(&stood_in);
        let in_memory = AdaptiveLod::with_options(&stood_in, &pyramid, lod, adaptive);
        let from_tiles = AdaptiveLod::from_tiles(&tiles, lod, adaptive).expect("built");
        assert!(in_memory.tree == from_tiles.tree, "f32 {float}");
        assert_eq!(tiles.stand_ins(), stand_ins, "f32 {float}");
        // Built page by page to disk: the same pages.
        let paged = adaptive.with_page_cells(16).with_page_frames(10);
        let lod_paged = LodOptions::default().with_adaptive(paged);
        let spools = tempfile::tempdir().expect("a temporary folder");
        let whole = AdaptiveLod::from_tiles(&tiles, lod_paged, paged)
            .expect("built")
            .with_pages_in(spools.path())
            .expect("spooled");
        let on_disk = AdaptiveLod::from_tiles_on_disk(&tiles, lod_paged, paged, spools.path())
            .expect("built on disk");
        assert!(whole.tree == on_disk.tree, "f32 {float}");
        assert!(
            page_file_bytes(&whole) == page_file_bytes(&on_disk),
            "f32 {float}"
        );
        assert!(
            stand_ins[0].fault.contains("2/1.tile"),
            "{}",
            stand_ins[0].fault
        );
        // The level-1 tile that stood in damaged too: level 2 stands in for both, and
        // both are named, as when the level is assembled whole.
        // Level-0 tile (1, 2) covers columns 16..=32 and rows 32..=48: level 1's 8..=16
        // and 16..=24, in its tile (0, 1).
        let parent = terrain.tile_path(1, 0, 1);
        std::fs::write(&parent, b"cut short").expect("writable");
        let (stood_in, mut stand_ins) = terrain
            .to_heightfield_standing_in(0, u64::MAX)
            .expect("the level, stood in");
        assert_eq!(stand_ins.len(), 2, "{stand_ins:?}");
        stand_ins.sort_by(|a, b| (a.level, &a.fault).cmp(&(b.level, &b.fault)));
        let tiles = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let pyramid = Pyramid::build(&stood_in);
        let in_memory = AdaptiveLod::with_options(&stood_in, &pyramid, lod, adaptive);
        let from_tiles = AdaptiveLod::from_tiles(&tiles, lod, adaptive).expect("built");
        assert!(in_memory.tree == from_tiles.tree, "f32 {float}");
        assert_eq!(tiles.stand_ins(), stand_ins, "f32 {float}");
    }
}

/// The contents of an unnamed page file.
fn page_file_bytes(lod: &AdaptiveLod<'_>) -> Vec<u8> {
    use std::io::{Read, Seek};
    let mut file = lod.page_file().expect("pages on disk");
    file.rewind().expect("seekable");
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).expect("readable");
    bytes
}

/// Pages written to disk as they are built (the tree never whole in memory) are the
/// pages of the tree built whole and then spooled, byte for byte, and the algorithm
/// selects what that one does, frame by frame, pages read and dropped alike.
#[test]
fn trees_built_on_disk_are_the_trees_built_whole_then_spooled() {
    use crate::tiles::{ImportOptions, TiledPyramid, TiledTerrain, import};
    let cases = [
        // (width, height, seed, f32, tile cells, page cells, frames, tolerance)
        (129, 129, 3, false, 16, 8, 20, 0.0),
        (97, 41, 5, true, 8, 8, 12, 2.0),
        (257, 130, 2, false, 8, 32, 12, 0.0),
        (65, 65, 1, false, 16, 1 << 20, 10, 0.0),
    ];
    for (width, height, seed, float, tile_cells, page_cells, frames, tolerance) in cases {
        let case = format!("{width} x {height}, f32 {float}, pages of {page_cells} cells");
        let field = stepped_field_as(width, height, seed, float);
        let dir = tempfile::tempdir().expect("a temporary folder");
        import(
            &field,
            dir.path(),
            &ImportOptions::with_tile_cells(tile_cells),
            &|_, _| {},
        )
        .expect("import");
        let terrain = TiledTerrain::open(dir.path()).expect("open");
        let tiles = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let adaptive = listed_pages(tolerance, page_cells, frames);
        let lod = LodOptions::default().with_adaptive(adaptive);
        let spools = tempfile::tempdir().expect("a temporary folder");
        let mut whole = AdaptiveLod::from_tiles(&tiles, lod, adaptive)
            .expect("built whole")
            .with_pages_in(spools.path())
            .expect("spooled");
        let mut on_disk = AdaptiveLod::from_tiles_on_disk(&tiles, lod, adaptive, spools.path())
            .expect("built on disk");
        assert!(whole.tree == on_disk.tree, "{case}");
        assert_eq!(whole.state_bytes(), on_disk.state_bytes(), "{case}");
        if page_cells > width {
            assert!(whole.paging.is_none() && on_disk.paging.is_none(), "{case}");
            continue;
        }
        let bytes = page_file_bytes(&on_disk);
        assert!(bytes.len() > 1000, "{case}");
        assert!(bytes == page_file_bytes(&whole), "{case}");
        fly_alike(&mut on_disk, &mut whole, &field, &case);
        let paging = on_disk.paging().expect("paged");
        assert!(
            paging.dropped > 0 && paging.failures == 0,
            "{case}: {paging:?}"
        );
    }
}

/// Options for a tree built from tiles: vertices listed, pages of `page_cells` cells in
/// `frames` frames, build tolerance `tolerance`.
fn listed_pages(tolerance: f32, page_cells: u32, frames: u32) -> AdaptiveOptions {
    AdaptiveOptions::default()
        .with_build_tolerance(tolerance)
        .with_page_cells(page_cells)
        .with_page_frames(frames)
        .with_list_vertices(true)
}

/// Flies `a` and `b` (paged, pages on disk) along the low flight over `field`, each view
/// three times: the same meshes and the same pages copied, dropped, held back, resident and
/// loaded, frame by frame.
fn fly_alike(a: &mut AdaptiveLod<'_>, b: &mut AdaptiveLod<'_>, field: &Heightfield, case: &str) {
    for view in low_flight(field) {
        for _ in 0..3 {
            a.await_pages();
            b.await_pages();
            assert_eq!(
                a.select(&view).to_mesh_as_carried(),
                b.select(&view).to_mesh_as_carried(),
                "{case}"
            );
            let (p, q) = (a.paging().expect("paged"), b.paging().expect("paged"));
            assert_eq!(
                (p.copied_in, p.dropped, p.held_back, p.resident, p.loaded),
                (q.copied_in, q.dropped, q.held_back, q.resident, q.loaded),
                "{case}"
            );
        }
    }
}

/// A page whose build fails (here: over the build's budget) fails the build on disk,
/// after the top was built and while pages were being written, leaving nothing: no spool,
/// and a kept file's path as it was, without the temporary file beside it; a build within
/// the budget gives the pages of the tree built whole.
#[test]
fn a_page_that_cannot_be_built_fails_the_build_on_disk() {
    let field = stepped_field(129, 129, 2);
    let pyramid = Pyramid::build(&field);
    let source = tree::FieldSource::new(&field, &pyramid);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let build = |limit: u64| {
        let builder =
            tree::TreeBuilder::new(&source, 0.0, 64, tree::Budget { limit }).expect("the top fits");
        paging::Paging::build_on_disk(builder, 9, paging::PageTarget::Spool(dir.path()))
    };
    let refused = build(8 << 10).expect_err("a page over the budget");
    assert!(
        matches!(refused, PagedBuildError::Tree(DetailError::TooLarge { .. })),
        "{refused}"
    );
    let (tree, paging, _) = build(u64::MAX).expect("within the budget");
    assert!(paging.is_some() && tree.squares() > 1000);
    assert_eq!(std::fs::read_dir(dir.path()).expect("readable").count(), 0);
    let kept = dir.path().join("pages.tlap");
    std::fs::write(&kept, "what was there").expect("writable");
    let builder = tree::TreeBuilder::new(&source, 0.0, 64, tree::Budget { limit: 8 << 10 })
        .expect("the top fits");
    let key = [7; page_file::KEY_BYTES];
    let target = paging::PageTarget::Kept { path: &kept, key };
    let refused = paging::Paging::build_on_disk(builder, 9, target).err();
    assert!(
        matches!(
            refused,
            Some(PagedBuildError::Tree(DetailError::TooLarge { .. }))
        ),
        "{refused:?}"
    );
    assert_eq!(std::fs::read(&kept).expect("left"), b"what was there");
    assert_eq!(std::fs::read_dir(dir.path()).expect("readable").count(), 1);
}

/// A page file kept at a path (`--page-file`) is read back by the next build of the same
/// tiles and options instead of building: the tree of the build on disk, frame by frame
/// the same meshes and pages. A file of another build (other options), a damaged or a
/// truncated one is built again and replaced; a damaged page is reported when read, as
/// from a spool; nothing is left beside the file.
#[test]
fn kept_page_files_are_read_back_instead_of_building() {
    use crate::tiles::{ImportOptions, TiledPyramid, TiledTerrain, import};
    use page_file::KeptFileError;
    let cases = [
        // (width, height, seed, f32, tile cells, page cells, frames, tolerance)
        (129, 129, 3, false, 16, 8, 20, 0.0),
        (97, 41, 5, true, 8, 8, 12, 2.0),
    ];
    for (width, height, seed, float, tile_cells, page_cells, frames, tolerance) in cases {
        let case = format!("{width} x {height}, f32 {float}");
        let field = stepped_field_as(width, height, seed, float);
        let dir = tempfile::tempdir().expect("a temporary folder");
        let tiles_dir = dir.path().join("tiles");
        let options = ImportOptions::with_tile_cells(tile_cells);
        import(&field, &tiles_dir, &options, &|_, _| {}).expect("import");
        let terrain = TiledTerrain::open(&tiles_dir).expect("open");
        let tiles = TiledPyramid::build(&terrain).expect("the tiled pyramid");
        let adaptive = listed_pages(tolerance, page_cells, frames);
        let lod = LodOptions::default().with_adaptive(adaptive);
        let spools = tempfile::tempdir().expect("a temporary folder");
        let mut on_disk = AdaptiveLod::from_tiles_on_disk(&tiles, lod, adaptive, spools.path())
            .expect("built on disk");
        let kept = dir.path().join("kept").join("pages.tlap");
        std::fs::create_dir(kept.parent().expect("a folder")).expect("writable");
        // What `TiledAdaptive::with_page_file` does: read back, else build and keep.
        let build = |adaptive: AdaptiveOptions| {
            let lod = LodOptions::default().with_adaptive(adaptive);
            let status = if kept.exists() {
                match AdaptiveLod::from_kept(&terrain, lod, adaptive, &kept).expect("frames fit") {
                    Ok(reused) => return (reused, KeptPages::Reused),
                    Err(unusable) => KeptPages::Replaced(unusable),
                }
            } else {
                KeptPages::Written
            };
            AdaptiveLod::from_tiles_kept(&tiles, lod, adaptive, &kept, status).expect("built")
        };
        let (written, status) = build(adaptive);
        assert!(matches!(status, KeptPages::Written), "{case}: {status:?}");
        assert!(written.tree == on_disk.tree, "{case}");
        drop(written);
        let (mut reused, status) = build(adaptive);
        assert!(matches!(status, KeptPages::Reused), "{case}: {status:?}");
        assert!(reused.tree == on_disk.tree, "{case}");
        // As built, before a flight moves pages in and out of the frames.
        let built = on_disk.tree.clone();
        fly_alike(&mut reused, &mut on_disk, &field, &case);
        drop(reused);
        // Another build tolerance is another build: built and kept instead, then the
        // first options build theirs again.
        let other = adaptive.with_build_tolerance(tolerance + 5.0);
        for options in [other, adaptive] {
            let (_, status) = build(options);
            assert!(
                matches!(
                    status,
                    KeptPages::Replaced(KeptFileError::OtherBuild { .. })
                ),
                "{case}: {status:?}"
            );
        }
        // A byte of the top changed, the file cut short: built again, the same tree.
        let bytes = std::fs::read(&kept).expect("kept");
        let footer = bytes.len() - page_file::FOOTER_BYTES;
        let at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let (top, top_len) = (
            at(footer + 8 + page_file::KEY_BYTES),
            at(footer + 16 + page_file::KEY_BYTES),
        );
        let mut flipped = bytes.clone();
        flipped[top as usize + 100] ^= 0x10;
        let cut = bytes[..footer].to_vec();
        for (spoilt, expected) in [
            (flipped, "checksum"),
            (cut, "footer"),
            (Vec::new(), "empty"),
        ] {
            std::fs::write(&kept, spoilt).expect("writable");
            let (rebuilt, status) = build(adaptive);
            let KeptPages::Replaced(error) = &status else {
                panic!("{case}: {status:?}");
            };
            assert!(error.to_string().contains(expected), "{case}: {error}");
            assert!(rebuilt.tree == built, "{case}");
        }
        assert_eq!(std::fs::read(&kept).expect("kept"), bytes, "{case}");
        // A top that lies about a page's length, its checksums made good: a whole number
        // of rank words, so it decodes, but longer than the page's levels can fill.
        // Refused before anything is sized by it, and built again.
        let (top_at, top_end) = (top as usize, (top + top_len) as usize);
        let levels = crate::pyramid::level_nodes(width, height)
            .map(|(size, nx, nz)| tree::LevelShape { size, nx, nz })
            .collect();
        let mut lying =
            SquareTree::decode_top(&bytes[top_at..top_end], levels).expect("the kept top decodes");
        lying.pages_mut()[0].slots = 1 << 20;
        let mut encoded = Vec::new();
        lying.encode_top(&mut encoded);
        assert_eq!(encoded.len(), top_end - top_at, "{case}");
        let mut forged = bytes.clone();
        forged[top_at..top_end].copy_from_slice(&encoded);
        let top_crc = footer + 8 + page_file::KEY_BYTES + 16;
        forged[top_crc..top_crc + 4].copy_from_slice(&crc32fast::hash(&encoded).to_le_bytes());
        let footer_crc = crc32fast::hash(&forged[footer..forged.len() - 4]);
        let end = forged.len();
        forged[end - 4..].copy_from_slice(&footer_crc.to_le_bytes());
        std::fs::write(&kept, &forged).expect("writable");
        let (rebuilt, status) = build(adaptive);
        let KeptPages::Replaced(error) = &status else {
            panic!("{case}: {status:?}");
        };
        assert!(
            error
                .to_string()
                .contains("a page is longer than its levels can fill"),
            "{case}: {error}"
        );
        assert!(rebuilt.tree == built, "{case}");
        assert_eq!(std::fs::read(&kept).expect("kept"), bytes, "{case}");
        // Not a kept page file at all: refused, and left as it is.
        std::fs::write(&kept, "not pages").expect("writable");
        let lod = LodOptions::default().with_adaptive(adaptive);
        let refused = AdaptiveLod::from_kept(&terrain, lod, adaptive, &kept).err();
        assert!(
            matches!(
                refused,
                Some(TilesBuildError::Kept(KeptFileError::NotKept { .. }))
            ),
            "{case}: {refused:?}"
        );
        assert_eq!(std::fs::read(&kept).expect("kept"), b"not pages", "{case}");
        // Every page that may leave the pool changed: the top is read back, and the pages
        // are reported as they are read.
        let (_, _, pinned) = on_disk.paging.as_ref().expect("paged").asked();
        let table = &bytes[(top + top_len) as usize..footer];
        let mut paged = bytes.clone();
        for (entry, _) in table.chunks_exact(16).zip(pinned).filter(|(_, p)| !**p) {
            paged[u64::from_le_bytes(entry[..8].try_into().expect("8")) as usize] ^= 0x01;
        }
        std::fs::write(&kept, &paged).expect("writable");
        let (mut damaged, status) = build(adaptive);
        assert!(matches!(status, KeptPages::Reused), "{case}: {status:?}");
        let mut faults = Vec::new();
        for view in low_flight(&field) {
            damaged.await_pages();
            damaged.select(&view);
            faults.extend(damaged.take_page_faults());
        }
        assert!(
            !faults.is_empty()
                && faults
                    .iter()
                    .all(|f| matches!(f, PageError::Checksum { .. })),
            "{case}: {faults:?}"
        );
        let left: Vec<_> = std::fs::read_dir(kept.parent().expect("a folder"))
            .expect("readable")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(left, ["pages.tlap"], "{case}");
    }
}
