//! Random shift augmentation (DrQ / Proto-RL `RandomShiftsAug`, docs/design.md §1): replicate-pad `pad`
//! pixels on each side, then crop back to the original size at an integer offset drawn
//! uniformly in 0..=2·pad on each axis, independently per image. Done on uint8 before the
//! conversion to f32: `out[y][x] = in[clamp(y + dy − pad)][clamp(x + dx − pad)]`.

use rand::Rng;
use rayon::prelude::*;

/// The augmentation; `pad` = 4 in the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomShift {
    pub pad: usize,
}

impl RandomShift {
    /// Shifts one image (c, h, w) by the crop offset (dy, dx) ∈ [0, 2·pad]² into `out`.
    pub fn shift_image(&self, src: &[u8], (c, h, w): (usize, usize, usize), (dy, dx): (usize, usize), out: &mut [u8]) {
        let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;
        let pad = self.pad as isize;
        // Along a row, out[x] = in[clamp(x + sx)]: in[0] for x < lo, a straight copy for
        // lo <= x < hi, in[w − 1] from hi on.
        let sx = dx as isize - pad;
        let lo = (-sx).clamp(0, w as isize) as usize;
        let hi = (w as isize - sx).clamp(lo as isize, w as isize) as usize;
        for ch in 0..c {
            let plane = &src[ch * h * w..(ch + 1) * h * w];
            let dst = &mut out[ch * h * w..(ch + 1) * h * w];
            for y in 0..h {
                let sy = clamp(y as isize + dy as isize - pad, h);
                let src_row = &plane[sy * w..(sy + 1) * w];
                let dst_row = &mut dst[y * w..(y + 1) * w];
                dst_row[..lo].fill(src_row[0]);
                if lo < hi {
                    let start = (lo as isize + sx) as usize;
                    dst_row[lo..hi].copy_from_slice(&src_row[start..start + (hi - lo)]);
                }
                dst_row[hi..].fill(src_row[w - 1]);
            }
        }
    }

    /// The crop offsets (dy, dx) of `n` images, as [`RandomShift::apply_batch`] draws them:
    /// in image order, dy then dx; none drawn with `pad` = 0 (every offset (0, 0)).
    pub fn draw_offsets<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> Vec<(usize, usize)> {
        if self.pad == 0 {
            return vec![(0, 0); n];
        }
        (0..n)
            .map(|_| (rng.random_range(0..=2 * self.pad), rng.random_range(0..=2 * self.pad)))
            .collect()
    }

    /// Crop offsets (dy, dx) in [0, 2·pad]² as the crop's shifts (dy − pad, dx − pad): out[y][x]
    /// = in[clamp(y + sy)][clamp(x + sx)] ([`crate::data::FrameStore::gather`]'s form).
    pub fn shifts_of(&self, offsets: &[(usize, usize)]) -> Vec<(isize, isize)> {
        let pad = self.pad as isize;
        offsets
            .iter()
            .map(|&(dy, dx)| (dy as isize - pad, dx as isize - pad))
            .collect()
    }

    /// Shifts every image of a batch (n, c, h, w) in place, each by its own random offset
    /// (drawn in image order, dy then dx; the images are then shifted in parallel).
    pub fn apply_batch<R: Rng + ?Sized>(
        &self,
        batch: &mut [u8],
        (n, c, h, w): (usize, usize, usize, usize),
        rng: &mut R,
    ) {
        if self.pad == 0 {
            return;
        }
        let size = c * h * w;
        let offsets = self.draw_offsets(n, rng);
        batch[..n * size].par_chunks_mut(size).zip(offsets).for_each_init(
            || vec![0u8; size],
            |tmp, (img, offset)| {
                self.shift_image(img, (c, h, w), offset, tmp);
                img.copy_from_slice(tmp);
            },
        );
    }
}
