//! Video files through FFmpeg's libraries (libavformat + libavcodec + libswscale).

use std::ffi::CString;
use std::path::Path;
use std::sync::Once;

use ff::codec::threading;
use ff::format::stream::Disposition;
use ff::media::Type as MediaType;
use ff::util::frame::video::Video as VideoFrame;
use ffmpeg_next as ff;

use super::{Deadline, DecodeOptions, DecodedEpisode, Resampler};
use crate::{fsutil, Error, Result};

static INIT: Once = Once::new();

/// Initialise FFmpeg once per process and silence its log: every failure is reported by us,
/// once, with the file name. `LFS_FFMPEG_LOG=1` brings FFmpeg's own messages back.
pub(crate) fn init() {
    INIT.call_once(|| {
        let _ = ff::init();
        let level = if std::env::var_os("LFS_FFMPEG_LOG").is_some() {
            ff::util::log::Level::Warning
        } else {
            ff::util::log::Level::Quiet
        };
        ff::util::log::set_level(level);
    });
}

/// The clockwise rotation (0, 90, 180, 270) a player applies for a display matrix, as the
/// FFmpeg command line's autorotate does: `-round(av_display_rotation_get(m))` mod 360,
/// snapped to the nearest quarter turn.
fn display_rotation(matrix: &[u8]) -> Option<u32> {
    if matrix.len() < 36 {
        return None;
    }
    let mut m = [0i32; 9];
    for (i, v) in m.iter_mut().enumerate() {
        *v = i32::from_ne_bytes([matrix[4 * i], matrix[4 * i + 1], matrix[4 * i + 2], matrix[4 * i + 3]]);
    }
    // SAFETY: `m` is the 3×3 int32 matrix av_display_rotation_get reads.
    let ccw = unsafe { ff::ffi::av_display_rotation_get(m.as_ptr()) };
    if ccw.is_nan() {
        return None;
    }
    let cw = (-ccw).rem_euclid(360.0);
    Some(((cw / 90.0).round() as u32 % 4) * 90)
}

fn stream_rotation(stream: &ff::format::stream::Stream) -> u32 {
    stream
        .side_data()
        .find(|sd| sd.kind() == ff::codec::packet::side_data::Type::DisplayMatrix)
        .and_then(|sd| display_rotation(sd.data()))
        .unwrap_or(0)
}

/// Human wording for FFmpeg's open errors, which are terse (`Invalid data found…`).
fn open_reason(err: ff::Error) -> String {
    match err {
        ff::Error::InvalidData => "cannot open: invalid data (truncated, corrupt, or not a video)".into(),
        ff::Error::Exit => "timed out while opening (--timeout)".into(),
        // A container with a header and no frame at all (`-frames:v 0`).
        ff::Error::Eof => "no decodable video frame: the file ends before the first one".into(),
        e => format!("cannot open: {e}"),
    }
}

/// Decodes every frame of the video at `path` to `opts.size`, each with its timestamp.
pub(super) fn decode_video(path: &Path, opts: &DecodeOptions, deadline: &Deadline) -> Result<DecodedEpisode> {
    init();
    check_readable(path)?;
    let mut input = open_input(path, deadline.interrupt()).map_err(|e| Error::decode(path, open_reason(e)))?;
    let stream = VideoStream::select(&input, path)?;
    let mut decoder = open_decoder(&stream, path)?;
    let codec = decoder
        .codec()
        .map(|c| c.name().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut state = DecodeState {
        resampler: Resampler::new(opts.size, opts.crop, stream.rotation),
        frame: VideoFrame::empty(),
        frames: Vec::new(),
        pts: Vec::new(),
        source_size: None,
    };
    decode_packets(&mut input, &mut decoder, &stream, deadline, &mut state, path)?;
    let timestamps = complete_timestamps(&state.pts, &stream, path)?;
    let (src_w, src_h) = state.source_size.unwrap_or((0, 0));
    let (source_width, source_height) = if stream.rotation % 180 == 90 {
        (src_h, src_w)
    } else {
        (src_w, src_h)
    };
    Ok(DecodedEpisode {
        width: opts.size.width,
        height: opts.size.height,
        frames: state.frames,
        timestamps,
        source_width,
        source_height,
        fps: stream.fps,
        rotation: stream.rotation,
        codec,
    })
}

/// Plain file checks before FFmpeg sees the file: their errors are clearer than FFmpeg's, and
/// FFmpeg never opens a FIFO or a device (it would block or read forever).
fn check_readable(path: &Path) -> Result<()> {
    let file = fsutil::open_regular(path).map_err(|e| Error::decode(path, format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::decode(path, format!("cannot read: {e}")))?;
    if meta.len() == 0 {
        return Err(Error::decode(path, "empty file (0 bytes)"));
    }
    Ok(())
}

/// `avformat_open_input` + `avformat_find_stream_info` with an interrupt callback, as
/// ffmpeg-next's `input_with_interrupt`, but taking the path's bytes as they are: that one
/// unwraps `to_str()`, so a file name that is not UTF-8 panicked (and aborted the ingest).
fn open_input<F: FnMut() -> bool>(path: &Path, interrupt: F) -> Result<ff::format::context::Input, ff::Error> {
    use std::os::unix::ffi::OsStrExt;
    // A path from the file system holds no NUL byte; a string with one could not name a file.
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| ff::Error::InvalidData)?;
    // SAFETY: the same calls as ffmpeg-next's input_with_interrupt: the context is allocated
    // here, avformat_open_input frees it on failure, and on success it is owned by `Input`.
    // The interrupt closure is leaked into the callback, as there.
    unsafe {
        let mut ps = ff::ffi::avformat_alloc_context();
        (*ps).interrupt_callback = ff::util::interrupt::new(Box::new(interrupt)).interrupt;
        match ff::ffi::avformat_open_input(&mut ps, c_path.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut()) {
            0 => match ff::ffi::avformat_find_stream_info(ps, std::ptr::null_mut()) {
                r if r >= 0 => Ok(ff::format::context::Input::wrap(ps)),
                e => {
                    ff::ffi::avformat_close_input(&mut ps);
                    Err(ff::Error::from(e))
                }
            },
            e => Err(ff::Error::from(e)),
        }
    }
}

/// The video stream of a file (the default one when there are several, never a cover
/// picture) and what the container declares about it.
struct VideoStream {
    index: usize,
    parameters: ff::codec::Parameters,
    /// Seconds per pts unit.
    time_base: f64,
    /// Frames the container declares; 0 when it does not say.
    declared_frames: i64,
    declared_seconds: Option<f64>,
    /// Clockwise rotation from the display matrix, degrees.
    rotation: u32,
    /// Nominal frame rate; 0 when unknown.
    fps: f64,
}

impl VideoStream {
    fn select(input: &ff::format::context::Input, path: &Path) -> Result<Self> {
        let video = input
            .streams()
            .filter(|s| s.parameters().medium() == MediaType::Video)
            .filter(|s| !s.disposition().contains(Disposition::ATTACHED_PIC))
            .max_by_key(|s| s.disposition().contains(Disposition::DEFAULT));
        let Some(stream) = video else {
            let has_audio = input.streams().any(|s| s.parameters().medium() == MediaType::Audio);
            let reason = if has_audio {
                "audio only: no video stream"
            } else {
                "no video stream"
            };
            return Err(Error::decode(path, reason));
        };
        Ok(Self {
            index: stream.index(),
            parameters: stream.parameters(),
            time_base: f64::from(stream.time_base()),
            declared_frames: stream.frames(),
            declared_seconds: declared_duration(input, &stream),
            rotation: stream_rotation(&stream),
            fps: [stream.avg_frame_rate(), stream.rate()]
                .into_iter()
                .map(f64::from)
                .find(|r| r.is_finite() && *r > 0.0)
                .unwrap_or(0.0),
        })
    }
}

/// A decoder for the stream, on one thread: ingest runs many decoders in parallel (one per
/// core).
fn open_decoder(stream: &VideoStream, path: &Path) -> Result<ff::decoder::Video> {
    let mut ctx = ff::codec::context::Context::from_parameters(stream.parameters.clone())
        .map_err(|e| Error::decode(path, format!("unsupported codec parameters: {e}")))?;
    ctx.set_threading(threading::Config {
        kind: threading::Type::Frame,
        count: 1,
        ..Default::default()
    });
    ctx.decoder()
        .video()
        .map_err(|e| Error::decode(path, format!("no decoder for this video codec: {e}")))
}

/// Reads every packet of the stream through the decoder into `state`, then flushes the frames
/// the decoder still holds (B-frame reordering, frame threading). Any packet that fails to
/// decode fails the source.
fn decode_packets(
    input: &mut ff::format::context::Input,
    decoder: &mut ff::decoder::Video,
    stream: &VideoStream,
    deadline: &Deadline,
    state: &mut DecodeState,
    path: &Path,
) -> Result<()> {
    let mut decode_errors = 0usize;
    let mut first_error: Option<ff::Error> = None;
    let mut packet = ff::Packet::empty();
    loop {
        if deadline.passed() {
            return Err(deadline.error(path, "while decoding"));
        }
        match packet.read(input) {
            Ok(()) => {
                if packet.stream() != stream.index {
                    continue;
                }
                if let Err(e) = decoder.send_packet(&packet) {
                    decode_errors += 1;
                    first_error.get_or_insert(e);
                }
                state
                    .drain(decoder)
                    .map_err(|e| Error::decode(path, format!("conversion failed: {e}")))?;
            }
            Err(ff::Error::Eof) => break,
            Err(ff::Error::Other { errno }) if errno == ff::util::error::EAGAIN => continue,
            Err(ff::Error::Exit) => return Err(deadline.error(path, "while decoding")),
            Err(e) => {
                return Err(Error::decode(
                    path,
                    format!("truncated or corrupt: read error after {} frames: {e}", state.pts.len()),
                ))
            }
        }
    }
    let _ = decoder.send_eof();
    state
        .drain(decoder)
        .map_err(|e| Error::decode(path, format!("conversion failed: {e}")))?;
    match first_error {
        Some(e) => Err(Error::decode(
            path,
            format!("truncated or corrupt: {decode_errors} packet(s) failed to decode ({e})"),
        )),
        None => Ok(()),
    }
}

/// Seconds since the first frame for every decoded frame, once the frames are known to be the
/// whole video: none decoded, or many fewer frames or seconds than the container declares,
/// means the file lost its end.
fn complete_timestamps(pts: &[Option<i64>], stream: &VideoStream, path: &Path) -> Result<Vec<f64>> {
    if pts.is_empty() {
        return Err(Error::decode(path, "truncated or corrupt: no decodable video frame"));
    }
    // A small shortfall is legitimate (an MP4 edit list that trims the start keeps the samples
    // in its index).
    let (decoded, declared_frames) = (pts.len() as i64, stream.declared_frames);
    if declared_frames > 0 && decoded < declared_frames * 9 / 10 && declared_frames - decoded >= 3 {
        return Err(Error::decode(
            path,
            format!("truncated: decoded {decoded} of the {declared_frames} frames the container declares"),
        ));
    }
    let timestamps = timestamps_from_pts(pts, stream.time_base, stream.fps);
    if let Some(declared) = stream.declared_seconds {
        // The decoded frames cover [0, last + one interval); a container that promises much
        // more lost its end (Matroska and WebM demuxers just stop at the cut).
        let interval = if stream.fps > 0.0 { 1.0 / stream.fps } else { 0.0 };
        let covered = *timestamps.last().unwrap_or(&0.0) + interval;
        if covered < 0.9 * declared && declared - covered > 2.0 * interval {
            return Err(Error::decode(
                path,
                format!(
                    "truncated: {} frames cover {covered:.2} s of the {declared:.2} s the container declares",
                    timestamps.len()
                ),
            ));
        }
    }
    Ok(timestamps)
}

/// The video's duration as the container declares it, in seconds: the stream's own duration,
/// else its `DURATION` tag (Matroska), else the file's duration when the video is its only
/// stream (with audio, the file may rightly last longer than the video).
fn declared_duration(input: &ff::format::context::Input, stream: &ff::format::stream::Stream) -> Option<f64> {
    let positive = |d: f64| (d.is_finite() && d > 0.0).then_some(d);
    if stream.duration() > 0 {
        return positive(stream.duration() as f64 * f64::from(stream.time_base()));
    }
    if let Some(tag) = stream.metadata().get("DURATION") {
        // "HH:MM:SS.nnnnnnnnn"
        let mut secs = 0.0;
        for part in tag.split(':') {
            secs = secs * 60.0 + part.trim().parse::<f64>().ok()?;
        }
        return positive(secs);
    }
    if input.streams().count() == 1 && input.duration() > 0 {
        return positive(input.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE));
    }
    None
}

/// Frames pulled out of the decoder so far.
struct DecodeState {
    resampler: Resampler,
    frame: VideoFrame,
    /// (n, h, w, 3) RGB.
    frames: Vec<u8>,
    /// Best-effort presentation timestamp of each frame, in stream time-base units.
    pts: Vec<Option<i64>>,
    source_size: Option<(u32, u32)>,
}

impl DecodeState {
    fn drain(&mut self, decoder: &mut ff::decoder::Video) -> Result<(), ff::Error> {
        while decoder.receive_frame(&mut self.frame).is_ok() {
            self.source_size
                .get_or_insert((self.frame.width(), self.frame.height()));
            self.resampler.push(&self.frame, &mut self.frames)?;
            self.pts.push(self.frame.timestamp());
        }
        Ok(())
    }
}

/// Seconds since the first frame. A frame without a timestamp gets the previous one plus a
/// nominal frame interval (1/fps), so every frame keeps a strictly usable time.
fn timestamps_from_pts(pts: &[Option<i64>], time_base: f64, fps: f64) -> Vec<f64> {
    let step = if fps > 0.0 { 1.0 / fps } else { 0.0 };
    let origin = pts.iter().flatten().next().copied();
    let mut out = Vec::with_capacity(pts.len());
    let mut prev: Option<f64> = None;
    for p in pts {
        let t = match (p, origin) {
            (Some(p), Some(o)) => (p - o) as f64 * time_base,
            _ => prev.map_or(0.0, |t| t + step),
        };
        out.push(t);
        prev = Some(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix_bytes(m: [i32; 9]) -> Vec<u8> {
        m.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn display_matrix_rotation_matches_ffmpeg_autorotate() {
        // Expected values follow the FFmpeg command line (fftools get_rotation):
        // cw = -round(av_display_rotation_get(m)) mod 360, and av_display_rotation_get(m) =
        // -atan2(m[1], m[0]) in degrees. 16.16 fixed point; m[8] is 2.30.
        let one = 1 << 16;
        // atan2(-1, 0) = -90° -> get = 90 -> cw = 270 (ffmpeg: transpose=cclock)
        let a = matrix_bytes([0, -one, 0, one, 0, 0, 0, 0, 1 << 30]);
        assert_eq!(display_rotation(&a), Some(270));
        // atan2(1, 0) = 90° -> get = -90 -> cw = 90 (ffmpeg: transpose=clock)
        let b = matrix_bytes([0, one, 0, -one, 0, 0, 0, 0, 1 << 30]);
        assert_eq!(display_rotation(&b), Some(90));
        // atan2(0, -1) = 180° -> cw = 180 (ffmpeg: hflip,vflip)
        let half = matrix_bytes([-one, 0, 0, 0, -one, 0, 0, 0, 1 << 30]);
        assert_eq!(display_rotation(&half), Some(180));
        let identity = matrix_bytes([one, 0, 0, 0, one, 0, 0, 0, 1 << 30]);
        assert_eq!(display_rotation(&identity), Some(0));
    }

    #[test]
    fn missing_timestamps_are_filled_with_the_nominal_interval() {
        let ts = timestamps_from_pts(&[Some(100), Some(103), None, Some(109)], 1.0 / 30.0, 10.0);
        assert_eq!(ts.len(), 4);
        assert!((ts[1] - 0.1).abs() < 1e-6);
        assert!((ts[2] - 0.2).abs() < 1e-6);
        assert!((ts[3] - 0.3).abs() < 1e-6);
    }
}
