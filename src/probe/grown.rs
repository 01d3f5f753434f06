//! The false-positive rate and the memory of a growing filter's stages
//! (doc/DESIGN.md, §3 growth), simulated in this process's memory with the
//! real hashing and the real probes, ahead of the shared filter (G5): a
//! stage is added when the newest has taken its capacity of new items, an
//! add goes into the newest stage unless a stage holds the item, a query
//! asks every stage.

use std::sync::atomic::AtomicU64;

use crate::math::geometry::Geometry;
use crate::math::growth::Growth;
use crate::math::hashing::hash_item;
use crate::math::scheme::Layout;
use crate::probe::{Probe, Probing};

struct Stages {
    growth: Growth,
    arrays: Vec<(Probing, Geometry, Vec<AtomicU64>)>,
    /// New items in the newest stage.
    fill: u64,
}

impl Stages {
    fn new(growth: Growth) -> Stages {
        let mut s = Stages {
            growth,
            arrays: Vec::new(),
            fill: 0,
        };
        s.push();
        s
    }

    fn push(&mut self) {
        let g = self
            .growth
            .stage(self.arrays.len() as u32)
            .expect("a stage within the limit");
        let words = (0..g.words()).map(|_| AtomicU64::new(0)).collect();
        self.arrays
            .push((Probing::for_stage(&g, 64, self.arrays.len() as u32), g, words));
        self.fill = 0;
    }

    fn contains(&self, item: &[u8]) -> bool {
        let h = hash_item(0, item);
        self.arrays.iter().rev().any(|(probing, _, bits)| {
            with_probe!(*probing, p => {
                let loc = p.locate(&h);
                p.contains(bits, &loc)
            })
        })
    }

    fn add(&mut self, item: &[u8]) -> bool {
        if self.contains(item) {
            return false;
        }
        if self.fill >= self.arrays.last().unwrap().1.capacity {
            self.push();
        }
        let h = hash_item(0, item);
        let (probing, _, bits) = self.arrays.last().unwrap();
        let new = with_probe!(*probing, p => {
            let loc = p.locate(&h);
            p.set(bits, &loc)
        });
        assert!(new, "an item no stage holds sets a bit of the newest");
        self.fill += 1;
        true
    }

    fn bits(&self) -> u64 {
        self.arrays.iter().map(|(_, g, _)| g.m).sum()
    }
}

fn present(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn absent(i: u64) -> [u8; 9] {
    let mut b = [0xA5; 9];
    b[..8].copy_from_slice(&i.to_le_bytes());
    b
}

/// After 10, 100 and 1000 times the first capacity, grow 2 and 4, fp 0.01
/// and 0.001, both layouts: the rate over a million absent items is at
/// most fp_rate plus three standard errors. The hashing is fixed, so the
/// outcome is too. Prints the figures (`--nocapture`), with the memory
/// against a plain filter sized for all the items added.
#[test]
fn grown_stages_keep_the_rate() {
    const FIRST: u64 = 1000;
    // A tenth in unoptimised builds (coverage runs), where a million
    // queries of ten stages take minutes; the bound is then looser.
    const ABSENT: u64 = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
    for layout in [Layout::Standard, Layout::Blocked] {
        for factor in [2u32, 4] {
            for fp in [0.01, 0.001] {
                let growth = Growth::new(FIRST, fp, layout, factor, None).unwrap();
                let mut s = Stages::new(growth);
                let mut added = 0u64;
                for times in [10u64, 100, 1000] {
                    // Distinct items; one a stage already answers for (a false
                    // positive) is not added, as in the filter.
                    while added < times * FIRST {
                        s.add(&present(added));
                        added += 1;
                    }
                    let fps = (0..ABSENT).filter(|&i| s.contains(&absent(i))).count() as f64 / ABSENT as f64;
                    let se = (fp * (1.0 - fp) / ABSENT as f64).sqrt();
                    let plain = Geometry::for_layout(added, fp, layout).unwrap();
                    eprintln!(
                        "{:8} grow {factor} fp {fp}: {times:4}x, {} stages: fp {fps:.6} (bound {:.6}), bits {:.2}x a plain filter's",
                        layout.name(),
                        s.arrays.len(),
                        growth.bound(s.arrays.len() as u32),
                        s.bits() as f64 / plain.m as f64
                    );
                    assert!(
                        fps <= fp + 3.0 * se,
                        "{layout:?} grow {factor} fp {fp} at {times}x: {fps} over {ABSENT} absent items"
                    );
                    assert!(growth.bound(s.arrays.len() as u32) <= fp);
                }
                // Everything added is still there.
                assert!((0..added).step_by(997).all(|i| s.contains(&present(i))));
            }
        }
    }
}
