//! Image-sequence episodes: a folder of numbered PNG/JPEG frames.

use std::path::Path;

use ff::format::Pixel;
use ff::util::frame::video::Video as VideoFrame;
use ffmpeg_next as ff;

use super::discover::sequence_frames;
use super::{Deadline, DecodeOptions, DecodedEpisode, Resampler};
use crate::{Error, Result};

pub(super) fn decode_image_sequence(dir: &Path, opts: &DecodeOptions, deadline: &Deadline) -> Result<DecodedEpisode> {
    let files = sequence_frames(dir).map_err(|e| Error::decode(dir, format!("cannot list frames: {e}")))?;
    if files.is_empty() {
        return Err(Error::decode(dir, "no PNG/JPEG frames in folder"));
    }
    let mut resampler = Resampler::new(opts.size, opts.crop, 0);
    let mut frames = Vec::with_capacity(files.len() * (opts.size.width * opts.size.height * 3) as usize);
    let mut source_size = None;
    let mut rgb = VideoFrame::empty();
    for file in &files {
        if deadline.passed() {
            return Err(deadline.error(dir, "while decoding"));
        }
        let img = image::open(file)
            .map_err(|e| Error::decode(file, format!("cannot decode frame image: {e}")))?
            .into_rgb8();
        let (w, h) = img.dimensions();
        match source_size {
            None => source_size = Some((w, h)),
            Some(size) if size != (w, h) => {
                return Err(Error::decode(
                    file,
                    format!(
                        "frame is {w}x{h} but the sequence's first frame is {}x{}",
                        size.0, size.1
                    ),
                ))
            }
            Some(_) => {}
        }
        if rgb.width() != w || rgb.height() != h {
            rgb = VideoFrame::new(Pixel::RGB24, w, h);
        }
        // Copy rows into the frame's (possibly padded) RGB24 plane.
        let stride = rgb.stride(0);
        let row = (w * 3) as usize;
        let plane = rgb.data_mut(0);
        for (y, src_row) in img.as_raw().chunks_exact(row).enumerate() {
            plane[y * stride..y * stride + row].copy_from_slice(src_row);
        }
        resampler
            .push(&rgb, &mut frames)
            .map_err(|e| Error::decode(file, format!("conversion failed: {e}")))?;
    }
    let n = files.len();
    let step = 1.0 / opts.image_fps;
    let (source_width, source_height) = source_size.unwrap_or((0, 0));
    Ok(DecodedEpisode {
        width: opts.size.width,
        height: opts.size.height,
        frames,
        timestamps: (0..n).map(|i| i as f64 * step).collect(),
        source_width,
        source_height,
        fps: opts.image_fps,
        rotation: 0,
        codec: "image-sequence".into(),
    })
}
