//! `lfs ingest --fps N`: a source at any frame rate becomes frames at N per second, chosen as
//! FFmpeg's `fps` filter chooses them with its defaults (`round=near`, `eof_action=round`, no
//! `start_time`; libavfilter/vf_fps.c). Read from FFmpeg 5.1's filter, not transcribed:
//! - each source frame's time is rounded to the nearest output slot (halves away from zero);
//! - output slot k (time k / N after the first frame) shows the last source frame whose slot is
//!   at or before k: frames that share a slot are dropped but the last, a gap repeats the frame
//!   before it;
//! - the output ends before the slot of the end of the source (its last frame's time plus one
//!   source frame interval), rounded the same way.
//!
//! The per-frame columns follow their frames: the state of an output frame is its source
//! frame's, and its reward sums the source rewards since the previous output frame (0 on a
//! repeated frame), so the rewards of the dropped frames are not lost.

/// The source frame of each output frame at `fps` frames per second, from the source frames'
/// times in seconds since the first frame and the source's nominal rate (the last frame's
/// duration).
pub fn fps_filter_indices(times: &[f64], source_fps: f64, fps: u32) -> Vec<usize> {
    let Some(&last) = times.last() else {
        return Vec::new();
    };
    let n = f64::from(fps);
    // Rounding to the nearest slot, halves away from zero; the tolerance absorbs the binary
    // representation of times like 0.02 s (a half slot at 25 fps must round up, as FFmpeg's
    // integer arithmetic does).
    let slot = |t: f64| (t * n + 0.5 + 1e-9).floor() as i64;
    let interval = if source_fps > 0.0 { 1.0 / source_fps } else { 0.0 };
    let end = slot(last + interval).max(1);
    let mut out = Vec::with_capacity(end as usize);
    let mut source = 0;
    for k in 0..end {
        while source + 1 < times.len() && slot(times[source + 1]) <= k {
            source += 1;
        }
        out.push(source);
    }
    out
}

/// Rewards of the resampled frames: output frame k (k ≥ 1) gets the sum of the rewards of the
/// source frames after output frame k − 1's source frame up to its own (source frame t's reward
/// is `rewards[t - 1]`, one per agent step). One fewer than `indices`.
pub fn resampled_rewards(rewards: &[f32], indices: &[usize]) -> Vec<f32> {
    indices
        .windows(2)
        .map(|w| {
            // f64 sums, stored as f32 like the source's
            (w[0] + 1..=w[1]).map(|t| f64::from(rewards[t - 1])).sum::<f64>() as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(n: usize, fps: f64) -> Vec<f64> {
        (0..n).map(|i| i as f64 / fps).collect()
    }

    #[test]
    fn downsampling_keeps_the_last_frame_of_each_slot() {
        // 50 fps to 20: frame i has slot round(0.4 i) = 0,0,1,1,2,2,2,3,3,4,… (halves never
        // occur); one second of 50 frames gives 20.
        let idx = fps_filter_indices(&times(50, 50.0), 50.0, 20);
        assert_eq!(idx.len(), 20);
        assert_eq!(&idx[..6], &[1, 3, 6, 8, 11, 13]);
    }

    #[test]
    fn upsampling_repeats_frames_and_a_half_slot_rounds_up() {
        // 20 fps to 50: slot(i) = round(2.5 i) = 0, 3 (2.5 up), 5, 8 (7.5 up), 10, …
        let idx = fps_filter_indices(&times(4, 20.0), 20.0, 50);
        // ends at slot round(4 / 20 · 50) = 10
        assert_eq!(idx, vec![0, 0, 0, 1, 1, 2, 2, 2, 3, 3]);
        // 50 to 25: slot(i) = round(0.5 i) = 0, 1, 1, 2, 2, … (halves up)
        let idx = fps_filter_indices(&times(6, 50.0), 50.0, 25);
        assert_eq!(idx, vec![0, 2, 4]);
    }

    #[test]
    fn rewards_since_the_previous_output_frame_are_summed() {
        // source rewards r1..r5 on frames 1..5; output frames are source 0, 2, 2, 5
        let rewards = [1.0, 2.0, 4.0, 8.0, 16.0];
        assert_eq!(resampled_rewards(&rewards, &[0, 2, 2, 5]), vec![3.0, 0.0, 28.0]);
    }
}
