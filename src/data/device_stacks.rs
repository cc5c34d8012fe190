//! Stacked observations made on the device from frames kept there (issue 52). A GPU run keeps
//! its frames on the device (the videos' for `lfs pretrain`, [`FrameStore`]; the replay's for
//! a frozen encoder, [`DeviceFrames`](crate::rl::DeviceFrames)) and makes a batch by one
//! gather there, instead of stacking, shifting and uploading it on the host (at M = 512 an LFS
//! update stacks 4 × 512 observations, 130 MB).
//!
//! Observation j stacks frames `frames[j]` ([F_{t−2}, F_{t−1}, F_t]); channel k = 3s + c of it
//! is channel c of frame s, and its pixel (y, x) is
//! `frame[clamp(y + sy_j)][clamp(x + sx_j)]` for its shift (sy_j, sx_j) = (dy − pad, dx − pad):
//! the replicate-padded crop of [`RandomShift`] at the offsets (dy, dx) it draws, so the bytes
//! are the host path's. An unshifted observation has shift (0, 0).

use std::borrow::Cow;

use candle_core::{DType, Device, Tensor};
use rand::Rng;

use super::random_shift::RandomShift;
use crate::observation::{StackIndices, FRAME_STACK};
use crate::{Error, Result};

/// `(rows, c·h·w)` u8 frames on a device, (c, h, w) each; cloning shares them.
#[derive(Debug, Clone)]
pub struct FrameStore {
    frames: Tensor,
    frame_shape: (usize, usize, usize),
}

/// Output byte [j, c, y, x] of a gather (n, k, h, w) is the store's flattened byte
/// `channel[j·k + c] + row[j·h + y] + col[j·w + x]`.
pub(crate) struct GatherTables {
    pub channel: Vec<u64>,
    pub row: Vec<u64>,
    pub col: Vec<u64>,
    pub shape: (usize, usize, usize, usize),
}

impl FrameStore {
    /// `frames` (rows, c·h·w) u8 of shape (c, h, w) each.
    pub fn new(frames: Tensor, frame_shape: (usize, usize, usize)) -> Result<Self> {
        let (c, h, w) = frame_shape;
        let (_, width) = frames.dims2()?;
        if width != c * h * w || frames.dtype() != DType::U8 {
            return Err(Error::Shape(format!(
                "frame store: {:?} {:?} frames for frames of {c}x{h}x{w} u8",
                frames.dims(),
                frames.dtype()
            )));
        }
        Ok(Self { frames, frame_shape })
    }

    /// Uploads `parts` (each whole frames of `frame_shape`, channel-first) one after another
    /// into one store on `device`: part i's first frame is row `firsts[i]`.
    pub fn upload(parts: &[&[u8]], frame_shape: (usize, usize, usize), device: &Device) -> Result<(Self, Vec<usize>)> {
        let (c, h, w) = frame_shape;
        let width = c * h * w;
        let mut firsts = Vec::with_capacity(parts.len());
        let mut rows = 0;
        for part in parts {
            if !part.len().is_multiple_of(width) {
                return Err(Error::Shape(format!(
                    "frame store: {} bytes are not whole frames of {c}x{h}x{w}",
                    part.len()
                )));
            }
            firsts.push(rows);
            rows += part.len() / width;
        }
        let frames = Tensor::zeros((rows.max(1), width), DType::U8, device)?;
        for (part, &first) in parts.iter().zip(&firsts) {
            if !part.is_empty() {
                let t = Tensor::from_slice(part, (part.len() / width, width), device)?;
                frames.slice_set(&t, 0, first)?;
            }
        }
        Ok((Self { frames, frame_shape }, firsts))
    }

    /// The frames, (rows, c·h·w).
    pub fn frames(&self) -> &Tensor {
        &self.frames
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.frames.elem_count()
    }

    /// Where each output byte of [`FrameStore::gather`] comes from, as three small tables.
    pub(crate) fn tables(&self, frames: &[StackIndices], shifts: &[(isize, isize)]) -> Result<GatherTables> {
        let n = frames.len();
        if shifts.len() != n {
            return Err(Error::Shape(format!(
                "frame store: {} shifts for {n} observations",
                shifts.len()
            )));
        }
        let (c, h, w) = self.frame_shape;
        let (rows, width) = self.frames.dims2()?;
        let k = FRAME_STACK * c;
        // Per observation: where each of its k channels starts, and the offsets of its rows and
        // columns within a channel, clamped (replicate padding).
        let mut channel = Vec::with_capacity(n * k);
        let mut row = Vec::with_capacity(n * h);
        let mut col = Vec::with_capacity(n * w);
        let clamp = |v: usize, s: isize, size: usize| (v as isize + s).clamp(0, size as isize - 1) as u64;
        for (stack, &(sy, sx)) in frames.iter().zip(shifts) {
            for &f in stack {
                if f >= rows {
                    return Err(Error::Shape(format!("frame store: frame {f} of {rows}")));
                }
                let first = (f * width) as u64;
                channel.extend((0..c).map(|ch| first + (ch * h * w) as u64));
            }
            row.extend((0..h).map(|y| clamp(y, sy, h) * w as u64));
            col.extend((0..w).map(|x| clamp(x, sx, w)));
        }
        Ok(GatherTables {
            channel,
            row,
            col,
            shape: (n, k, h, w),
        })
    }

    /// Observation j of frames `frames[j]` at shift `shifts[j]` ((sy, sx), each in
    /// [−h, h] × [−w, w]): (n, FRAME_STACK·c, h, w) u8 on the store's device, one gather.
    pub fn gather(&self, frames: &[StackIndices], shifts: &[(isize, isize)]) -> Result<Tensor> {
        let GatherTables {
            channel,
            row,
            col,
            shape: (n, k, h, w),
        } = self.tables(frames, shifts)?;
        #[cfg(feature = "cuda")]
        if self.frames.device().is_cuda() && crate::cuda::gather::fits(n * k * h * w) {
            return crate::cuda::gather::gather(&self.frames, &channel, &row, &col, (n, k, h, w));
        }
        self.gather_with_candle(channel, row, col, (n, k, h, w))
    }

    /// [`FrameStore::gather`] into the encoder's input: (n, FRAME_STACK·c, h, w) f32 =
    /// `scale_pixels(bytes, offset)` (`crate::nn::encoder`), on CUDA in the gather's own kernel
    /// (one pass where the bytes, their cast and their scaling took three).
    pub fn gather_input(&self, frames: &[StackIndices], shifts: &[(isize, isize)], offset: f32) -> Result<Tensor> {
        let tables = self.tables(frames, shifts)?;
        let (n, k, h, w) = tables.shape;
        #[cfg(feature = "cuda")]
        if self.frames.device().is_cuda() && crate::cuda::gather::fits(n * k * h * w) {
            let GatherTables { channel, row, col, .. } = tables;
            return crate::cuda::gather::gather_input(&self.frames, &channel, &row, &col, (n, k, h, w), offset);
        }
        let bytes = self.gather_with_candle(tables.channel, tables.row, tables.col, (n, k, h, w))?; // u8
        crate::nn::encoder::scale_pixels(&bytes.to_dtype(candle_core::DType::F32)?, offset)
    }

    /// [`FrameStore::gather`] by candle's ops: the full index tensor, then one index_select.
    fn gather_with_candle(
        &self,
        channel: Vec<u64>,
        row: Vec<u64>,
        col: Vec<u64>,
        (n, k, h, w): (usize, usize, usize, usize),
    ) -> Result<Tensor> {
        let (rows, width) = self.frames.dims2()?;
        let device = self.frames.device();
        // u32 indices while the store's bytes fit them, i64 beyond.
        let wide = (rows * width) as u64 > u64::from(u32::MAX);
        let upload = |values: Vec<u64>, shape: (usize, usize, usize, usize)| -> Result<Tensor> {
            Ok(match wide {
                true => Tensor::from_vec(values.into_iter().map(|v| v as i64).collect::<Vec<_>>(), shape, device)?,
                false => Tensor::from_vec(values.into_iter().map(|v| v as u32).collect::<Vec<_>>(), shape, device)?,
            })
        };
        // (n, k, h, w): every output byte's position in the store's flattened rows.
        let index = upload(channel, (n, k, 1, 1))?
            .broadcast_add(&upload(row, (n, 1, h, 1))?)?
            .broadcast_add(&upload(col, (n, 1, 1, w))?)?
            .flatten_all()?;
        Ok(self
            .frames
            .flatten_all()?
            .index_select(&index, 0)?
            .reshape((n, k, h, w))?)
    }
}

/// Observations as frames of a [`FrameStore`] and their shifts, gathered when they are read.
#[derive(Debug, Clone)]
pub struct FrameStacks {
    store: FrameStore,
    frames: Vec<StackIndices>,
    /// (sy, sx) per observation; all (0, 0) until shifted.
    shifts: Vec<(isize, isize)>,
    shifted: bool,
}

impl FrameStacks {
    /// Unshifted observations of `frames` (store rows).
    pub fn new(store: &FrameStore, frames: Vec<StackIndices>) -> Self {
        let shifts = vec![(0, 0); frames.len()];
        Self {
            store: store.clone(),
            frames,
            shifts,
            shifted: false,
        }
    }

    /// Observations held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// (n, 9, h, w) u8 on the store's device.
    pub fn gather(&self) -> Result<Tensor> {
        self.store.gather(&self.frames, &self.shifts)
    }

    /// (n, 9, h, w) f32 on the store's device: the encoder's input, pixels / 255 + `offset`
    /// ([`FrameStore::gather_input`]).
    pub fn gather_input(&self, offset: f32) -> Result<Tensor> {
        self.store.gather_input(&self.frames, &self.shifts, offset)
    }
}

/// A batch's stacked observations, (len, 9, h, w) u8: bytes in host memory, or frames on the
/// device gathered when the encoder reads them.
#[derive(Debug, Clone)]
pub enum Stacks {
    Host(Vec<u8>),
    Frames(FrameStacks),
}

impl PartialEq for Stacks {
    /// Host bytes compare by value; frame stacks by their frames and shifts in the same store.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Stacks::Host(a), Stacks::Host(b)) => a == b,
            (Stacks::Frames(a), Stacks::Frames(b)) => {
                a.store.frames.id() == b.store.frames.id() && a.frames == b.frames && a.shifts == b.shifts
            }
            _ => false,
        }
    }
}

impl Stacks {
    /// The observations at `indices`, in that order (`obs_len` bytes each).
    pub fn select(&self, indices: &[usize], obs_len: usize) -> Stacks {
        match self {
            Stacks::Host(bytes) => {
                let mut out = Vec::with_capacity(indices.len() * obs_len);
                for &i in indices {
                    out.extend_from_slice(&bytes[i * obs_len..(i + 1) * obs_len]);
                }
                Stacks::Host(out)
            }
            Stacks::Frames(f) => Stacks::Frames(FrameStacks {
                store: f.store.clone(),
                frames: indices.iter().map(|&i| f.frames[i]).collect(),
                shifts: indices.iter().map(|&i| f.shifts[i]).collect(),
                shifted: f.shifted,
            }),
        }
    }

    /// `self` followed by `other`: both in host memory, or both of one store.
    pub fn concat(self, other: &Stacks) -> Result<Stacks> {
        match (self, other) {
            (Stacks::Host(mut a), Stacks::Host(b)) => {
                a.extend_from_slice(b);
                Ok(Stacks::Host(a))
            }
            (Stacks::Frames(mut a), Stacks::Frames(b)) if a.store.frames.id() == b.store.frames.id() => {
                a.frames.extend_from_slice(&b.frames);
                a.shifts.extend_from_slice(&b.shifts);
                a.shifted |= b.shifted;
                Ok(Stacks::Frames(a))
            }
            _ => Err(Error::Shape(
                "observations in host memory and on a device, or of two stores, cannot be joined".to_string(),
            )),
        }
    }

    /// A random shift of every observation (n, c, h, w), each by its own offset, drawn as
    /// [`RandomShift::apply_batch`] draws them. Observations on the device are shifted once
    /// (a second clamped crop is not a sum of shifts).
    pub fn shift<R: Rng + ?Sized>(
        &mut self,
        shift: &RandomShift,
        dims: (usize, usize, usize, usize),
        rng: &mut R,
    ) -> Result<()> {
        match self {
            Stacks::Host(bytes) => shift.apply_batch(bytes, dims, rng),
            Stacks::Frames(f) => {
                if f.shifted {
                    return Err(Error::Shape("observations on the device shifted twice".to_string()));
                }
                if dims.0 != f.len() {
                    return Err(Error::Shape(format!("{} observations shifted as {}", f.len(), dims.0)));
                }
                f.shifts = shift.shifts_of(&shift.draw_offsets(dims.0, rng));
                f.shifted = shift.pad > 0;
            }
        }
        Ok(())
    }

    /// The bytes, (len, 9, h, w) u8 (frames on the device are gathered and read back).
    pub fn to_host(&self) -> Result<Cow<'_, [u8]>> {
        Ok(match self {
            Stacks::Host(bytes) => Cow::Borrowed(bytes),
            Stacks::Frames(f) => Cow::Owned(f.gather()?.flatten_all()?.to_vec1::<u8>()?),
        })
    }
}

/// The frames' gather kernels (`crate::cuda::gather`), compiled for the host, against this
/// file's gather.
#[cfg(test)]
mod cuda_kernels {
    use candle_core::{DType, Device, Tensor};
    use rand::{Rng, SeedableRng};

    use super::GatherTables;
    use crate::cuda::gather::{PIXEL_SCALE, SOURCE};
    use crate::cuda::on_host as cuda_on_host;
    use crate::data::FrameStore;
    use crate::nn::encoder::scale_pixels;
    use crate::observation::StackIndices;

    /// argv: n k h w and the store's bytes; stdin: the store's bytes, then the tables as i64.
    const MAIN: &str = r#"
int main(int argc, char** argv) {
    unsigned int n = atoi(argv[1]), k = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    size_t bytes = atol(argv[5]);
    auto frames = in<unsigned char>(bytes);
    auto tables = in<long long>((size_t)n * (k + h + w));
    std::vector<unsigned char> o((size_t)n * k * h * w);
    lfs_gather_stacks(frames.data(), tables.data(), o.data(), n, k, h, w);
    out(o);
    return 0;
}
"#;

    /// argv: n k h w, the store's bytes, the offset; stdin as [`MAIN`]'s.
    const MAIN_INPUT: &str = r#"
int main(int argc, char** argv) {
    unsigned int n = atoi(argv[1]), k = atoi(argv[2]), h = atoi(argv[3]), w = atoi(argv[4]);
    size_t bytes = atol(argv[5]);
    float scale = strtof(argv[6], nullptr), offset = strtof(argv[7], nullptr);
    auto frames = in<unsigned char>(bytes);
    auto tables = in<long long>((size_t)n * (k + h + w));
    std::vector<float> o((size_t)n * k * h * w);
    lfs_gather_input(frames.data(), tables.data(), o.data(), n, k, h, w, scale, offset);
    out(o);
    return 0;
}
"#;

    /// The kernel, compiled for the host, against [`FrameStore::gather`]'s CPU path (candle's
    /// broadcast adds and index_select) on the same tables: every byte, for shifted and
    /// unshifted stacks, a frame shape that is not square, and shifts past the edges.
    #[test]
    fn the_cuda_kernel_gathers_what_the_cpu_gathers() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let (c, h, w, rows) = (3, 7, 9, 11);
        let bytes: Vec<u8> = (0..rows * c * h * w).map(|_| rng.random()).collect();
        let frames = Tensor::from_slice(&bytes, (rows, c * h * w), &Device::Cpu).unwrap();
        let store = FrameStore::new(frames, (c, h, w)).unwrap();
        let n = 5;
        let stacks: Vec<StackIndices> = (0..n)
            .map(|_| std::array::from_fn(|_| rng.random_range(0..rows)))
            .collect();
        let shifts: Vec<(isize, isize)> = (0..n)
            .map(|j| match j {
                0 => (0, 0),
                1 => (-(h as isize), w as isize),
                _ => (
                    rng.random_range(-4i32..=4) as isize,
                    rng.random_range(-4i32..=4) as isize,
                ),
            })
            .collect();
        let cpu = store.gather(&stacks, &shifts).unwrap(); // (n, k, h, w)
        let GatherTables {
            channel,
            row,
            col,
            shape: (n, k, h, w),
        } = store.tables(&stacks, &shifts).unwrap();
        let mut input = bytes.clone();
        for v in channel.iter().chain(&row).chain(&col) {
            input.extend((*v as i64).to_le_bytes());
        }
        let exe = cuda_on_host::build("gather_stacks", SOURCE, MAIN);
        let args = [n, k, h, w, bytes.len()].map(|v| v.to_string());
        let kernel = cuda_on_host::run(&exe, &args, &input);
        assert_eq!(kernel, cpu.flatten_all().unwrap().to_vec1::<u8>().unwrap());

        // The gather into the encoder's input: the floats of the encoder's own scaling of the
        // CPU's bytes, bit for bit, without and with DrQ-v2's offset. The scale travels as
        // text: Rust's shortest round-trip digits, which strtof reads back to the same float.
        let exe = cuda_on_host::build("gather_input", SOURCE, MAIN_INPUT);
        for offset in [0.0f32, -0.5] {
            let mut args = args.to_vec();
            args.extend([PIXEL_SCALE.to_string(), offset.to_string()]);
            let kernel: Vec<u32> = cuda_on_host::run(&exe, &args, &input)
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let scaled = scale_pixels(&cpu.to_dtype(DType::F32).unwrap(), offset).unwrap();
            let expected: Vec<u32> = scaled
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(kernel, expected, "offset {offset}");
        }
    }
}
