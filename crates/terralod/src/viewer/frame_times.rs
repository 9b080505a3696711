//! The last few hundred frame times, for the HUD's graph and its summary figures.

use std::collections::VecDeque;

/// A window of the most recent frame times, in milliseconds, oldest first.
#[derive(Clone, Debug)]
pub struct FrameTimes {
    times: VecDeque<f32>,
    capacity: usize,
}

impl FrameTimes {
    /// Keeps the last `capacity` frames (at least one).
    pub fn new(capacity: usize) -> FrameTimes {
        let capacity = capacity.max(1);
        FrameTimes {
            times: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Records a frame; non-finite or negative times are ignored.
    pub fn push(&mut self, ms: f32) {
        if !(ms.is_finite() && ms >= 0.0) {
            return;
        }
        if self.times.len() == self.capacity {
            self.times.pop_front();
        }
        self.times.push_back(ms);
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn iter(&self) -> impl Iterator<Item = f32> + '_ {
        self.times.iter().copied()
    }

    pub fn latest(&self) -> Option<f32> {
        self.times.back().copied()
    }

    /// Mean of the last `frames` frames (fewer when fewer were recorded).
    pub fn recent_mean(&self, frames: usize) -> Option<f32> {
        let count = frames.min(self.times.len());
        if count == 0 {
            return None;
        }
        let sum: f32 = self.times.iter().rev().take(count).sum();
        Some(sum / count as f32)
    }

    pub fn max(&self) -> Option<f32> {
        self.times.iter().copied().reduce(f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::FrameTimes;

    #[test]
    fn keeps_the_latest_frames_and_summarises_them() {
        let mut times = FrameTimes::new(3);
        assert_eq!(times.latest(), None);
        assert_eq!(times.recent_mean(10), None);
        for ms in [10.0, 20.0, f32::NAN, -1.0, 30.0, 40.0] {
            times.push(ms);
        }
        assert_eq!(times.iter().collect::<Vec<_>>(), [20.0, 30.0, 40.0]);
        assert_eq!(times.latest(), Some(40.0));
        assert_eq!(times.recent_mean(2), Some(35.0));
        assert_eq!(times.recent_mean(99), Some(30.0));
        assert_eq!(times.max(), Some(40.0));
        assert_eq!(FrameTimes::new(0).capacity(), 1);
    }
}
