//! Pixel plumbing shared by every source: FFmpeg's swscale for colour conversion and
//! resampling, a centre crop, and the quarter-turn rotations that display matrices ask for.

use ff::format::Pixel;
use ff::software::scaling;
use ff::util::frame::video::Video as VideoFrame;
use ffmpeg_next as ff;

use super::{Crop, FrameSize};

/// Where the centre crop sits: the source is scaled to `scaled_w × scaled_h` (covering the
/// output, aspect ratio kept) and the output is the `out_w × out_h` window at (`x`, `y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropWindow {
    pub scaled_w: u32,
    pub scaled_h: u32,
    pub x: u32,
    pub y: u32,
}

/// The scale-then-centre-crop window for a `src_w × src_h` source and an `out_w × out_h`
/// output (torchvision's `Resize(min) + CenterCrop` when the output is square).
pub fn center_crop_window(src_w: u32, src_h: u32, out_w: u32, out_h: u32) -> CropWindow {
    let s = f64::max(out_w as f64 / src_w as f64, out_h as f64 / src_h as f64);
    let scaled_w = ((src_w as f64 * s).round() as u32).max(out_w);
    let scaled_h = ((src_h as f64 * s).round() as u32).max(out_h);
    CropWindow {
        scaled_w,
        scaled_h,
        x: (scaled_w - out_w) / 2,
        y: (scaled_h - out_h) / 2,
    }
}

/// Rotate an RGB (h, w, 3) image clockwise by 0, 90, 180 or 270 degrees.
/// Returns the new pixels; a quarter turn swaps width and height.
pub fn rotate_rgb(src: &[u8], w: usize, h: usize, degrees: u32) -> Vec<u8> {
    debug_assert_eq!(src.len(), w * h * 3);
    let mut dst = vec![0u8; src.len()];
    match degrees % 360 {
        90 => {
            // dst is (w rows, h cols): dst[y][x] = src[h-1-x][y]
            for y in 0..w {
                for x in 0..h {
                    let s = ((h - 1 - x) * w + y) * 3;
                    let d = (y * h + x) * 3;
                    dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
                }
            }
        }
        180 => {
            for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3).rev()) {
                d.copy_from_slice(s);
            }
        }
        270 => {
            // dst is (w rows, h cols): dst[y][x] = src[x][w-1-y]
            for y in 0..w {
                for x in 0..h {
                    let s = (x * w + (w - 1 - y)) * 3;
                    let d = (y * h + x) * 3;
                    dst[d..d + 3].copy_from_slice(&src[s..s + 3]);
                }
            }
        }
        _ => dst.copy_from_slice(src),
    }
    dst
}

/// The swscale context for one input format, rebuilt only when the input changes.
struct Scaler {
    key: (Pixel, u32, u32, ff::util::color::Space, ff::util::color::Range),
    ctx: scaling::Context,
    out: VideoFrame,
}

/// Turns decoded frames of any pixel format and size into `size` RGB24 frames.
pub struct Resampler {
    size: FrameSize,
    crop: Crop,
    /// Clockwise quarter turns applied after scaling (display-matrix rotation).
    rotation: u32,
    scaler: Option<Scaler>,
    window: Vec<u8>,
}

impl Resampler {
    pub fn new(size: FrameSize, crop: Crop, rotation: u32) -> Self {
        Self {
            size,
            crop,
            rotation: rotation % 360,
            scaler: None,
            window: Vec::new(),
        }
    }

    /// The output size before rotation: a quarter turn swaps the axes.
    fn pre_rotation_size(&self) -> (u32, u32) {
        if self.rotation == 90 || self.rotation == 270 {
            (self.size.height, self.size.width)
        } else {
            (self.size.width, self.size.height)
        }
    }

    /// Convert one frame and append its (height, width, 3) RGB pixels to `dst`.
    pub fn push(&mut self, frame: &VideoFrame, dst: &mut Vec<u8>) -> Result<(), ff::Error> {
        let (out_w, out_h) = self.pre_rotation_size();
        let (src_w, src_h) = (frame.width(), frame.height());
        let window = match self.crop {
            Crop::Center => center_crop_window(src_w, src_h, out_w, out_h),
            Crop::None => CropWindow {
                scaled_w: out_w,
                scaled_h: out_h,
                x: 0,
                y: 0,
            },
        };
        let key = (frame.format(), src_w, src_h, frame.color_space(), frame.color_range());
        if self.scaler.as_ref().is_none_or(|s| s.key != key) {
            let mut ctx = scaling::Context::get(
                frame.format(),
                src_w,
                src_h,
                Pixel::RGB24,
                window.scaled_w,
                window.scaled_h,
                scaling::Flags::BILINEAR,
            )?;
            set_colorspace(&mut ctx, frame);
            let out = VideoFrame::empty();
            self.scaler = Some(Scaler { key, ctx, out });
        }
        // Invariant: set just above when missing.
        let scaler = self.scaler.as_mut().expect("scaler initialised");
        scaler.ctx.run(frame, &mut scaler.out)?;

        // Copy the crop window out of the (possibly padded) RGB24 rows.
        let stride = scaler.out.stride(0);
        let data = scaler.out.data(0);
        let row = (out_w * 3) as usize;
        self.window.clear();
        for y in window.y..window.y + out_h {
            let start = y as usize * stride + window.x as usize * 3;
            self.window.extend_from_slice(&data[start..start + row]);
        }
        if self.rotation == 0 {
            dst.extend_from_slice(&self.window);
        } else {
            dst.extend_from_slice(&rotate_rgb(&self.window, out_w as usize, out_h as usize, self.rotation));
        }
        Ok(())
    }
}

/// Tell swscale which YUV matrix and range the input uses, as FFmpeg's `scale` filter does
/// (frame colour space when tagged, BT.601 otherwise), with full-range RGB out.
fn set_colorspace(ctx: &mut scaling::Context, frame: &VideoFrame) {
    use ff::ffi;
    use ff::util::color::{Range, Space};
    let cs = match frame.color_space() {
        Space::BT709 => ffi::SWS_CS_ITU709,
        Space::FCC => ffi::SWS_CS_FCC,
        Space::SMPTE240M => ffi::SWS_CS_SMPTE240M,
        Space::BT2020NCL | Space::BT2020CL => ffi::SWS_CS_BT2020,
        _ => ffi::SWS_CS_DEFAULT,
    };
    let src_range = i32::from(frame.color_range() == Range::JPEG);
    // SAFETY: the context is valid for the duration of the call; sws_getCoefficients returns
    // a pointer into a static table. A failure (non-YUV input) leaves the defaults in place,
    // which is right for RGB and palette inputs.
    unsafe {
        let table = ffi::sws_getCoefficients(cs);
        ffi::sws_setColorspaceDetails(
            ctx.as_mut_ptr(),
            table,
            src_range,
            ffi::sws_getCoefficients(ffi::SWS_CS_DEFAULT),
            1,
            0,
            1 << 16,
            1 << 16,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×2 image whose pixels carry their own (row, col) so moves are easy to read.
    fn labelled(w: usize, h: usize) -> Vec<u8> {
        (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| [y as u8, x as u8, 0]))
            .collect()
    }

    #[test]
    fn quarter_turn_clockwise_moves_top_left_to_top_right() {
        let (w, h) = (3, 2);
        let src = labelled(w, h);
        let dst = rotate_rgb(&src, w, h, 90);
        // Output is 2 wide, 3 tall. Top-right of the output is the source's top-left.
        let px = |x: usize, y: usize| &dst[(y * h + x) * 3..(y * h + x) * 3 + 2];
        assert_eq!(px(1, 0), &[0, 0]);
        assert_eq!(px(0, 0), &[1, 0]); // bottom-left of the source
        assert_eq!(px(0, 2), &[1, 2]); // bottom-right of the source
    }

    #[test]
    fn rotations_compose_to_identity() {
        let (w, h) = (5, 3);
        let src = labelled(w, h);
        let r90 = rotate_rgb(&src, w, h, 90);
        let r180 = rotate_rgb(&r90, h, w, 90);
        assert_eq!(r180, rotate_rgb(&src, w, h, 180));
        let r270 = rotate_rgb(&r180, w, h, 90);
        assert_eq!(r270, rotate_rgb(&src, w, h, 270));
        assert_eq!(rotate_rgb(&r270, h, w, 90), src);
    }

    #[test]
    fn center_crop_window_covers_the_output() {
        // 16:9 source to 84×84: scale the short side to 84, cut the middle.
        let w = center_crop_window(1920, 1080, 84, 84);
        assert_eq!((w.scaled_w, w.scaled_h), (149, 84));
        assert_eq!((w.x, w.y), (32, 0));
        // Portrait source.
        let w = center_crop_window(480, 640, 84, 84);
        assert_eq!((w.scaled_w, w.scaled_h, w.x, w.y), (84, 112, 0, 14));
        // Already the right size: nothing to cut.
        assert_eq!(
            center_crop_window(84, 84, 84, 84),
            CropWindow {
                scaled_w: 84,
                scaled_h: 84,
                x: 0,
                y: 0
            }
        );
    }
}
