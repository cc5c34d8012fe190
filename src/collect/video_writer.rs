//! Lossless episode videos: FFV1 in Matroska on RGB samples (`bgr0`, FFV1's 8-bit RGB input;
//! it codes them with a reversible colour transform), so every frame decodes back bit for bit:
//! no YUV conversion, no lossy coding.

use std::path::Path;
use std::sync::Once;

use ffmpeg_next as ff;

use crate::env::{FRAME_BYTES, FRAME_SIZE};
use crate::{Error, Result};

/// Codec name recorded in the sidecar.
pub const VIDEO_CODEC: &str = "ffv1";

static INIT: Once = Once::new();

fn init() {
    INIT.call_once(|| {
        let _ = ff::init();
    });
}

/// Writes `frames` ((84, 84, 3) HWC RGB each) to `path` as FFV1/Matroska, one frame every
/// `frame_seconds` of simulated time. `path` may have any name (temporary names included):
/// the container is chosen explicitly.
pub fn write_lossless_video(path: &Path, frames: &[Vec<u8>], frame_seconds: f64) -> Result<()> {
    init();
    encode(path, frames, frame_seconds).map_err(|e| Error::Encode {
        path: path.to_path_buf(),
        reason: format!("cannot encode the video: {e}"),
    })
}

fn encode(path: &Path, frames: &[Vec<u8>], frame_seconds: f64) -> std::result::Result<(), String> {
    let size = FRAME_SIZE as u32;
    // Microsecond ticks represent every DMControl frame period exactly (e.g. 50 ms, 80 ms).
    let ticks = (frame_seconds * 1e6).round().max(1.0) as i32;
    let time_base = ff::Rational::new(ticks, 1_000_000);
    let mut octx = ff::format::output_as(path, "matroska").map_err(|e| e.to_string())?;
    let codec = ff::encoder::find(ff::codec::Id::FFV1).ok_or("FFmpeg has no FFV1 encoder")?;
    let global_header = octx.format().flags().contains(ff::format::Flags::GLOBAL_HEADER);
    let mut encoder = ff::codec::context::Context::new_with_codec(codec)
        .encoder()
        .video()
        .map_err(|e| e.to_string())?;
    encoder.set_width(size);
    encoder.set_height(size);
    encoder.set_format(ff::format::Pixel::BGRZ);
    encoder.set_time_base(time_base);
    encoder.set_frame_rate(Some(ff::Rational::new(1_000_000, ticks)));
    if global_header {
        encoder.set_flags(ff::codec::Flags::GLOBAL_HEADER);
    }
    let mut options = ff::Dictionary::new();
    // FFV1 version 3 with the range coder and the large context model: the smallest files.
    options.set("level", "3");
    options.set("coder", "1");
    options.set("context", "1");
    options.set("slicecrc", "1");
    let mut encoder = encoder
        .open_as_with(codec, options)
        .map_err(|e| format!("opening FFV1: {e}"))?;
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

    let mut frame = ff::frame::Video::new(ff::format::Pixel::BGRZ, size, size);
    let mut packet = ff::Packet::empty();
    let mut drain = |encoder: &mut ff::encoder::Video, octx: &mut ff::format::context::Output| {
        while encoder.receive_packet(&mut packet).is_ok() {
            packet.set_stream(0);
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
        fill_bgr0(&mut frame, rgb);
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
