//! Decoding sources into RGB frames at the training resolution, and encoding frames into videos
//! ([`write_lossless_video`] for datasets, [`write_preview_video`] for people).
//!
//! A *source* is one episode: a video file (anything FFmpeg demuxes and decodes) or a folder
//! of numbered PNG/JPEG frames. Every source goes through the same resampler (FFmpeg's
//! swscale), so a video and its frames exported as images give the same pixels.

mod deadline;
mod discover;
mod encode;
pub(crate) mod ffmpeg;
mod frame_ops;
mod images;
pub mod resample;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use deadline::Deadline;
pub use discover::{
    discover, sequence_frames as sequence_files, Discovered, Rejected, Source, SourceKind, VIDEO_EXTENSIONS,
};
pub use encode::{write_lossless_video, write_preview_video, VIDEO_CODEC};
pub use frame_ops::{center_crop_window, rotate_rgb, Resampler};

use crate::Result;

/// Output frame size in pixels (`--size 84` or `--size 96x64`, width first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSize {
    pub width: u32,
    pub height: u32,
}

impl FromStr for FrameSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |v: &str| -> Result<u32, String> {
            match v.trim().parse::<u32>() {
                Ok(n) if (1..=8192).contains(&n) => Ok(n),
                _ => Err(format!(
                    "invalid frame size {s:?}: expected N or WxH with 1 <= N <= 8192"
                )),
            }
        };
        match s.split_once(['x', 'X']) {
            Some((w, h)) => Ok(Self {
                width: parse(w)?,
                height: parse(h)?,
            }),
            None => {
                let n = parse(s)?;
                Ok(Self { width: n, height: n })
            }
        }
    }
}

impl fmt::Display for FrameSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// How the source's aspect ratio is reconciled with the output size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Crop {
    /// Scale so the output is covered, then cut the centre (torchvision Resize + CenterCrop).
    Center,
    /// Stretch the whole frame to the output size.
    None,
}

/// Everything that decides which pixels a source becomes.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    pub size: FrameSize,
    pub crop: Crop,
    /// Wall-clock limit for one source; a source that takes longer is reported and skipped.
    pub timeout: Duration,
    /// Frame rate assigned to image sequences (they carry no timing of their own).
    pub image_fps: f64,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            size: FrameSize { width: 84, height: 84 },
            crop: Crop::Center,
            timeout: Duration::from_secs(300),
            image_fps: 30.0,
        }
    }
}

/// One decoded episode.
#[derive(Debug, Clone)]
pub struct DecodedEpisode {
    pub width: u32,
    pub height: u32,
    /// (num_frames, height, width, 3) uint8 RGB, row-major (HWC per frame).
    pub frames: Vec<u8>,
    /// Presentation time of each frame in seconds, relative to the first frame (f64: `lfs
    /// ingest --fps` rounds them to output slots; the dataset stores float32).
    pub timestamps: Vec<f64>,
    /// Source size as displayed (after rotation), before scaling.
    pub source_width: u32,
    pub source_height: u32,
    /// Nominal frame rate (the stream's average rate; `image_fps` for image sequences).
    pub fps: f64,
    /// Clockwise rotation applied to honour the source's display matrix, in degrees.
    pub rotation: u32,
    /// Decoder name (`h264`, `vp9`, `png`…).
    pub codec: String,
}

impl DecodedEpisode {
    pub fn num_frames(&self) -> usize {
        self.timestamps.len()
    }

    /// Frame `t` as (height, width, 3) uint8.
    pub fn frame(&self, t: usize) -> &[u8] {
        let n = self.frame_len();
        &self.frames[t * n..(t + 1) * n]
    }

    pub fn frame_len(&self) -> usize {
        (self.width * self.height * 3) as usize
    }
}

/// Decode one source into frames at `opts.size`.
///
/// Errors are [`crate::Error::Decode`] naming the source and the reason (unreadable, empty,
/// not a video, no video stream, truncated, timed out).
pub fn decode(source: &Source, opts: &DecodeOptions) -> Result<DecodedEpisode> {
    decode_within(source, opts, &Deadline::after(opts.timeout))
}

/// [`decode`] under a deadline that started earlier (ingest hashes the source first; the
/// `--timeout` covers both).
pub fn decode_within(source: &Source, opts: &DecodeOptions, deadline: &Deadline) -> Result<DecodedEpisode> {
    match source.kind {
        SourceKind::Video => ffmpeg::decode_video(&source.path, opts, deadline),
        SourceKind::ImageSequence => images::decode_image_sequence(&source.path, opts, deadline),
    }
}
