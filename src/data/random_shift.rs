//! Random shift augmentation (DrQ / Proto-RL `RandomShiftsAug`, SPEC §1): replicate-pad `pad`
//! pixels on each side, then crop back to the original size at an integer offset drawn
//! uniformly in 0..=2·pad on each axis, independently per image. Done on uint8 before the
//! conversion to f32: `out[y][x] = in[clamp(y + dy − pad)][clamp(x + dx − pad)]`.

use rand::Rng;

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
        for ch in 0..c {
            let plane = &src[ch * h * w..(ch + 1) * h * w];
            let dst = &mut out[ch * h * w..(ch + 1) * h * w];
            for y in 0..h {
                let sy = clamp(y as isize + dy as isize - pad, h);
                let src_row = &plane[sy * w..(sy + 1) * w];
                let dst_row = &mut dst[y * w..(y + 1) * w];
                for (x, d) in dst_row.iter_mut().enumerate() {
                    *d = src_row[clamp(x as isize + dx as isize - pad, w)];
                }
            }
        }
    }

    /// Shifts every image of a batch (n, c, h, w) in place, each by its own random offset.
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
        let mut tmp = vec![0u8; size];
        for i in 0..n {
            let offset = (rng.random_range(0..=2 * self.pad), rng.random_range(0..=2 * self.pad));
            let img = &mut batch[i * size..(i + 1) * size];
            self.shift_image(img, (c, h, w), offset, &mut tmp);
            img.copy_from_slice(&tmp);
        }
    }
}
