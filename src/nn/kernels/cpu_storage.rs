//! The f32 slices behind candle CPU storages, for our custom and in-place ops (conv, encoder,
//! Adam, EMA): one place that checks the dtype and the layout and names the op in its error.

use candle_core::{CpuStorage, Layout, Storage, StorageRef};

use crate::{Error, Result};

/// Elements per rayon task of an elementwise pass over parameters: large enough that the split
/// costs nothing, small enough that both cores share the projector's 5M elements.
pub(crate) const PAR_CHUNK: usize = 1 << 16;

/// The contiguous f32 slice behind a storage + layout, or an error naming the op.
pub(crate) fn contiguous_f32<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&v[start..end]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// [`contiguous_f32`] for the destination of an in-place op.
pub(crate) fn contiguous_f32_mut<'a>(
    s: &'a mut CpuStorage,
    l: &Layout,
    op: &str,
) -> candle_core::Result<&'a mut [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: only f32 is supported")
    };
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&mut v[start..end]),
        None => candle_core::bail!("{op}: the destination must be contiguous"),
    }
}

/// The f32 data behind a contiguous CPU tensor's storage, without a copy (a parameter, the SAC
/// batch's (b, repr) features, the encoder's dh), checked to hold `len` values; errors name
/// `op` and the tensor, `what`.
pub(crate) fn host_f32<'t>(
    op: &str,
    storage: &'t StorageRef<'_>,
    layout: &Layout,
    what: &str,
    len: usize,
) -> Result<&'t [f32]> {
    let Storage::Cpu(cpu) = &**storage else {
        return Err(Error::Shape(format!("{op}: {what} is not on the CPU")));
    };
    let data = contiguous_f32(cpu, layout, op)?;
    if data.len() != len {
        return Err(Error::Shape(format!(
            "{op}: {what} holds {} values, expected {len}",
            data.len()
        )));
    }
    Ok(data)
}
