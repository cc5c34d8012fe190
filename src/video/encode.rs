//! Episode videos. The recorded datasets are lossless: FFV1 in Matroska on RGB samples (`bgr0`,
//! FFV1's 8-bit RGB input; it codes them with a reversible colour transform), so every frame
//! decodes back bit for bit: no YUV conversion, no lossy coding. Videos for people to watch
//! (`lfs eval --save-video`) are H.264 in MP4 (yuv420p), which every player opens.

use std::path::Path;

use ffmpeg_next as ff;

use crate::env::{FRAME_BYTES, FRAME_SIZE};
use crate::{Error, Result};

/// Codec name recorded in the sidecar.
pub const VIDEO_CODEC: &str = "ffv1";

/// A container, codec, input pixel format and codec options.
struct Encoding {
    container: &'static str,
    codec: ff::codec::Id,
    pixel: ff::format::Pixel,
    options: &'static [(&'static str, &'static str)],
}

/// FFV1 version 3 with the range coder and the large context model: the smallest lossless
/// files.
const LOSSLESS: Encoding = Encoding {
    container: "matroska",
    codec: ff::codec::Id::FFV1,
    pixel: ff::format::Pixel::BGRZ,
    options: &[("level", "3"), ("coder", "1"), ("context", "1"), ("slicecrc", "1")],
};

/// H.264 at near-transparent quality, for watching.
const PREVIEW: Encoding = Encoding {
    container: "mp4",
    codec: ff::codec::Id::H264,
    pixel: ff::format::Pixel::YUV420P,
    options: &[("crf", "18"), ("preset", "fast")],
};

/// Writes `frames` ((84, 84, 3) HWC RGB each) to `path` as FFV1/Matroska, one frame every
/// `frame_seconds` of simulated time. `path` may have any name (temporary names included):
/// the container is chosen explicitly.
pub fn write_lossless_video(path: &Path, frames: &[Vec<u8>], frame_seconds: f64) -> Result<()> {
    write_video(path, frames, frame_seconds, &LOSSLESS)
}

/// Writes `frames` as H.264/MP4 (lossy, yuv420p): a video for people to watch.
pub fn write_preview_video(path: &Path, frames: &[Vec<u8>], frame_seconds: f64) -> Result<()> {
    write_video(path, frames, frame_seconds, &PREVIEW)
}

fn write_video(path: &Path, frames: &[Vec<u8>], frame_seconds: f64, how: &Encoding) -> Result<()> {
    crate::video::ffmpeg::init();
    encode(path, frames, frame_seconds, how).map_err(|e| Error::Encode {
        path: path.to_path_buf(),
        reason: format!("cannot encode the video: {e}"),
    })
}

fn encode(path: &Path, frames: &[Vec<u8>], frame_seconds: f64, how: &Encoding) -> std::result::Result<(), String> {
    let size = FRAME_SIZE as u32;
    // Microsecond ticks represent every DMControl frame period exactly (e.g. 50 ms, 80 ms).
    let ticks = (frame_seconds * 1e6).round().max(1.0) as i32;
    let time_base = ff::Rational::new(ticks, 1_000_000);
    let mut octx = ff::format::output_as(path, how.container).map_err(|e| e.to_string())?;
    let codec = ff::encoder::find(how.codec).ok_or_else(|| format!("FFmpeg has no {:?} encoder", how.codec))?;
    let global_header = octx.format().flags().contains(ff::format::Flags::GLOBAL_HEADER);
    let mut encoder = open_encoder(codec, how, ticks, global_header)?;
    {
        let mut stream = octx.add_stream(codec).map_err(|e| e.to_string())?;
        stream.set_parameters(&encoder);
        stream.set_time_base(time_base);
    }
    // Bit-exact muxing: no random segment UID or date, so the same frames give the same file.
    let mut mux_options = ff::Dictionary::new();
    mux_options.set("fflags", "+bitexact");
    octx.write_header_with(mux_options)
        .map_err(|e| format!("writing the header: {e}"))?;
    let stream_time_base = octx
        .stream(0)
        .map(|s| s.time_base())
        .ok_or("the output has no stream")?;

    let mut frame = ff::frame::Video::new(how.pixel, size, size);
    // RGB to the codec's format when it is not packed RGB (the preview's yuv420p).
    let mut rgb_frame = ff::frame::Video::new(ff::format::Pixel::RGB24, size, size);
    let mut scaler = rgb_scaler(how)?;
    let mut packet = ff::Packet::empty();
    // MP4 ends its track at the last packet's end: without a duration the last frame is cut.
    // (Matroska needs none; the lossless files stay as they were.)
    let set_duration = how.container == "mp4";
    let mut drain = |encoder: &mut ff::encoder::Video, octx: &mut ff::format::context::Output| {
        while encoder.receive_packet(&mut packet).is_ok() {
            packet.set_stream(0);
            if set_duration {
                packet.set_duration(1); // one frame, in the encoder's time base
            }
            packet.rescale_ts(time_base, stream_time_base);
            packet
                .write_interleaved(octx)
                .map_err(|e| format!("writing a packet: {e}"))?;
        }
        Ok::<(), String>(())
    };
    for (t, rgb) in frames.iter().enumerate() {
        if rgb.len() != FRAME_BYTES {
            return Err(format!("frame {t} has {} bytes, expected {FRAME_BYTES}", rgb.len()));
        }
        match &mut scaler {
            None => fill_bgr0(&mut frame, rgb),
            Some(scaler) => {
                fill_rgb24(&mut rgb_frame, rgb);
                scaler
                    .run(&rgb_frame, &mut frame)
                    .map_err(|e| format!("converting frame {t}: {e}"))?;
            }
        }
        frame.set_pts(Some(t as i64));
        encoder
            .send_frame(&frame)
            .map_err(|e| format!("encoding frame {t}: {e}"))?;
        drain(&mut encoder, &mut octx)?;
    }
    encoder.send_eof().map_err(|e| e.to_string())?;
    drain(&mut encoder, &mut octx)?;
    octx.write_trailer().map_err(|e| format!("writing the trailer: {e}"))?;
    Ok(())
}

/// `codec` opened with `how`'s pixel format and options for (84, 84) frames, one every `ticks`
/// microseconds, with a global header where the container wants one.
fn open_encoder(
    codec: ff::Codec,
    how: &Encoding,
    ticks: i32,
    global_header: bool,
) -> std::result::Result<ff::encoder::Video, String> {
    let size = FRAME_SIZE as u32;
    let mut encoder = ff::codec::context::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(|e| e.to_string())?;
    encoder.set_width(size);
    encoder.set_height(size);
    encoder.set_format(how.pixel);
    encoder.set_time_base(ff::Rational::new(ticks, 1_000_000));
    encoder.set_frame_rate(Some(ff::Rational::new(1_000_000, ticks)));
    if global_header {
        encoder.set_flags(ff::codec::Flags::GLOBAL_HEADER);
    }
    let mut options = ff::Dictionary::new();
    for (key, value) in how.options {
        options.set(key, value);
    }
    encoder
        .open_as_with(codec, options)
        .map_err(|e| format!("opening {:?}: {e}", how.codec))
}

/// The converter of (84, 84) RGB24 frames to `how`'s pixel format, unless that is packed RGB.
fn rgb_scaler(how: &Encoding) -> std::result::Result<Option<ff::software::scaling::Context>, String> {
    let size = FRAME_SIZE as u32;
    (how.pixel != ff::format::Pixel::BGRZ)
        .then(|| {
            ff::software::scaling::Context::get(
                ff::format::Pixel::RGB24,
                size,
                size,
                how.pixel,
                size,
                size,
                ff::software::scaling::Flags::BILINEAR,
            )
        })
        .transpose()
        .map_err(|e| format!("colour conversion: {e}"))
}

/// Packed RGB (h, w, 3) into FFmpeg's packed `bgr0` (B, G, R, unused; rows padded to stride).
fn fill_bgr0(frame: &mut ff::frame::Video, rgb: &[u8]) {
    let stride = frame.stride(0);
    let data = frame.data_mut(0);
    for (y, src_row) in rgb.chunks_exact(FRAME_SIZE * 3).enumerate() {
        let row = &mut data[y * stride..y * stride + FRAME_SIZE * 4];
        for (dst, src) in row.chunks_exact_mut(4).zip(src_row.chunks_exact(3)) {
            dst.copy_from_slice(&[src[2], src[1], src[0], 0]);
        }
    }
}

/// Packed RGB (h, w, 3) into an RGB24 frame (rows padded to stride).
fn fill_rgb24(frame: &mut ff::frame::Video, rgb: &[u8]) {
    let stride = frame.stride(0);
    let data = frame.data_mut(0);
    for (y, src_row) in rgb.chunks_exact(FRAME_SIZE * 3).enumerate() {
        data[y * stride..y * stride + FRAME_SIZE * 3].copy_from_slice(src_row);
    }
}
