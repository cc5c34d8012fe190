//! The queue of Algorithm 1 (the paper's appendix, "Utilizing LFS for end-to-end RL"): the last
//! five stacked observations O_{t-4} … O_t of the current episode. Once it holds five, each new
//! observation yields the frame-mask synthetic pair ending at t, built as the appendix's
//! "PyTorch-style pseudo code for frame mask" builds it from the queued observations, with that
//! code's three asserts checked: the five must be consecutive observations of one episode.
//! Equal to `lfs::data::frame_mask_pair` on the episode's frames (tests/data.rs checks it): the
//! paper's own construction, kept here as the independent reference the library's is tested
//! against.

use std::collections::VecDeque;

use lfs::observation::FRAME_STACK;
use lfs::{Error, Result};

/// Observations the queue holds (the pseudo-code's `obs_quene`).
pub const QUEUE_LEN: usize = 5;

/// A synthetic pair as stacked observations (3 frames each, oldest first): `prev` goes through
/// the online branch, `cur` through the target branch (docs/design.md §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticObservations {
    pub prev: Vec<u8>,
    pub cur: Vec<u8>,
}

/// The last [`QUEUE_LEN`] observations of one episode.
#[derive(Debug, Clone)]
pub struct ObservationQueue {
    /// Bytes of one frame (3 × h × w); an observation is FRAME_STACK of them.
    frame_len: usize,
    observations: VecDeque<Vec<u8>>,
}

impl ObservationQueue {
    pub fn new(frame_len: usize) -> Self {
        Self {
            frame_len,
            observations: VecDeque::with_capacity(QUEUE_LEN),
        }
    }

    /// Empties the queue: a new episode starts (pairs never cross an episode boundary).
    pub fn reset(&mut self) {
        self.observations.clear();
    }

    /// Queues O_t (FRAME_STACK × frame_len bytes, oldest frame first); from the fifth
    /// observation of an episode on, returns the synthetic pair ending at t.
    pub fn push(&mut self, observation: &[u8]) -> Result<Option<SyntheticObservations>> {
        if observation.len() != FRAME_STACK * self.frame_len {
            return Err(Error::Shape(format!(
                "observation queue: an observation of {} bytes, expected {}",
                observation.len(),
                FRAME_STACK * self.frame_len
            )));
        }
        if self.observations.len() == QUEUE_LEN {
            self.observations.pop_front();
        }
        self.observations.push_back(observation.to_vec());
        if self.observations.len() < QUEUE_LEN {
            return Ok(None);
        }
        self.frame_mask().map(Some)
    }

    /// Frame `k` (0 oldest) of queued observation `i` (0 = O_{t-4}, 4 = O_t).
    fn frame(&self, i: usize, k: usize) -> &[u8] {
        &self.observations[i][k * self.frame_len..(k + 1) * self.frame_len]
    }

    /// The pseudo-code's `frame_mask`: its asserts, then syn_obs = [F_{t-4}, F_{t-3}, F_{t-1}]
    /// and syn_next_obs = [F_{t-3}, F_{t-1}, F_t].
    fn frame_mask(&self) -> Result<SyntheticObservations> {
        // assert obs_quene[0][6:] == obs_quene[2][:3]   (F_{t-4} in O_{t-4} and O_{t-2})
        // assert obs_quene[2][6:] == obs_quene[4][:3]   (F_{t-2} in O_{t-2} and O_t)
        // assert obs_quene[2][6:] == obs_quene[3][3:6]  (F_{t-2} in O_{t-2} and O_{t-1})
        let checks = [((0, 2), (2, 0)), ((2, 2), (4, 0)), ((2, 2), (3, 1))];
        for ((i, k), (j, l)) in checks {
            if self.frame(i, k) != self.frame(j, l) {
                return Err(Error::Shape(format!(
                    "observation queue: queued observations {i} and {j} are not consecutive observations of one episode (frame {k} of one differs from frame {l} of the other)"
                )));
            }
        }
        let (f1, f2) = (self.frame(2, 0), self.frame(2, 1)); // F_{t-4}, F_{t-3}
        let (f4, f5) = (self.frame(4, 1), self.frame(4, 2)); // F_{t-1}, F_t
        Ok(SyntheticObservations {
            prev: [f1, f2, f4].concat(),
            cur: [f2, f4, f5].concat(),
        })
    }
}
