//! How many of a suite's cells share one GPU at once (issue 52, goal 4).
//!
//! A cell on a GPU holds its CUDA context, networks, optimiser state and batch activations
//! there; its replay stays in host memory. How much that is depends on the agent, the batch and
//! the encoder, so the pool measures it instead of guessing: it starts **one** cell, waits until
//! that cell is warm (an episode has ended after its seed frames, so its updates have allocated
//! what they need), reads the GPU's used memory with `nvidia-smi`, and then admits as many cells
//! as the free memory holds with [`HEADROOM`] each, keeping [`reserve_mib`] free. Each later
//! reading with every running cell warm refines the per-cell figure (the largest seen wins, and
//! running cells are counted at it, not at what they hold at that moment), so the number can
//! also fall. A cell that dies out of memory is put back in the queue and the
//! number stops growing. The cores still cap it ([`super::runner::PoolShape`]): every cell
//! steps and renders its environment on the CPU.
//!
//! `-j N` overrides all of this (N cells, memory unread); `--gpu-memory-per-cell MiB` skips the
//! measurement. Without a readable `nvidia-smi` the pool runs one cell at a time and says so.

use std::process::Command;

/// A new cell is admitted only when the free memory holds this many times the largest per-cell
/// footprint seen: footprints move by a few percent between readings (evaluation, the
/// allocator's pool).
pub const HEADROOM: f64 = 1.25;

/// Memory left free on the GPU for everything else: 5% of it, at least 1 GiB.
pub fn reserve_mib(total_mib: u64) -> u64 {
    (total_mib / 20).max(1024)
}

/// One reading of one GPU's memory, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemory {
    pub total_mib: u64,
    pub used_mib: u64,
}

impl GpuMemory {
    pub fn free_mib(&self) -> u64 {
        self.total_mib.saturating_sub(self.used_mib)
    }

    /// How many more cells of `per_cell_mib` fit, keeping the reserve and the headroom.
    fn room_for(&self, per_cell_mib: u64) -> usize {
        let usable = self.free_mib().saturating_sub(reserve_mib(self.total_mib)) as f64;
        (usable / (HEADROOM * per_cell_mib.max(1) as f64)).floor() as usize
    }
}

/// Reads GPU `ordinal`'s memory with `nvidia-smi` (device-wide: container PID namespaces hide
/// the per-process view). The error says why it could not.
pub fn read_gpu_memory(ordinal: usize) -> Result<GpuMemory, String> {
    let output = Command::new("nvidia-smi")
        .args([
            "--query-gpu=memory.total,memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            &ordinal.to_string(),
        ])
        .output()
        .map_err(|e| format!("cannot run nvidia-smi: {e}"))?;
    if !output.status.success() {
        let why = String::from_utf8_lossy(&output.stderr);
        let why = why.trim();
        return Err(format!(
            "nvidia-smi -i {ordinal} failed ({}){}",
            output.status,
            if why.is_empty() {
                String::new()
            } else {
                format!(": {why}")
            }
        ));
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&output.stdout))
}

/// Parses `nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits`
/// (`81559, 1234`, MiB).
pub fn parse_nvidia_smi(text: &str) -> Result<GpuMemory, String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let fields: Vec<&str> = line.unwrap_or_default().split(',').map(str::trim).collect();
    let number = |s: &str| s.parse::<u64>().ok();
    match fields[..] {
        [total, used] => match (number(total), number(used)) {
            (Some(total_mib), Some(used_mib)) if total_mib > 0 => Ok(GpuMemory { total_mib, used_mib }),
            _ => Err(format!(
                "nvidia-smi printed {:?}, not two MiB counts",
                line.unwrap_or_default()
            )),
        },
        _ => Err(format!(
            "nvidia-smi printed {:?}, not `total, used`",
            line.unwrap_or_default()
        )),
    }
}

/// How the pool decides the number of cells on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum ShareRule {
    /// `-j`: as many as told, memory unread.
    Fixed,
    /// `--gpu-memory-per-cell`: cells of this many MiB, from the first reading.
    Given { per_cell_mib: u64 },
    /// The default: one cell until it is warm, then what its measured footprint allows.
    Measured,
    /// The memory could not be read (the reason): one cell at a time.
    Unreadable(String),
}

/// The pool's view of one GPU its cells share.
#[derive(Debug, Clone)]
pub struct GpuShare {
    pub ordinal: usize,
    pub rule: ShareRule,
    /// Cells on this GPU at once now.
    pub cap: usize,
    /// The cores' (or `-j`'s) limit: the cap never exceeds it.
    max_cells: usize,
    /// What the GPU held before the pool's first cell started.
    baseline_used_mib: u64,
    /// The largest footprint of one cell seen so far (measured or given).
    pub per_cell_mib: Option<u64>,
    /// Set by an out-of-memory failure: the cap no longer grows.
    frozen: bool,
}

impl GpuShare {
    /// The share before any cell runs; `first` is a reading taken now (None with
    /// [`ShareRule::Fixed`] or [`ShareRule::Unreadable`]).
    pub fn new(ordinal: usize, max_cells: usize, rule: ShareRule, first: Option<GpuMemory>) -> Self {
        let max_cells = max_cells.max(1);
        let baseline_used_mib = first.map_or(0, |m| m.used_mib);
        let (cap, per_cell_mib) = match (&rule, first) {
            (ShareRule::Fixed, _) => (max_cells, None),
            (ShareRule::Given { per_cell_mib }, Some(m)) => {
                (m.room_for(*per_cell_mib).clamp(1, max_cells), Some(*per_cell_mib))
            }
            _ => (1, None),
        };
        GpuShare {
            ordinal,
            rule,
            cap,
            max_cells,
            baseline_used_mib,
            per_cell_mib,
            frozen: false,
        }
    }

    /// Whether a reading now would be used (the default rule, not frozen, every running cell
    /// warm): the pool reads `nvidia-smi` only then.
    pub fn wants_reading(&self, running: usize, warm: usize) -> bool {
        self.rule == ShareRule::Measured && !self.frozen && running > 0 && warm == running
    }

    /// A reading taken with `running` of the pool's cells on this GPU, all of them warm. Returns
    /// whether the cap changed.
    pub fn observe(&mut self, reading: GpuMemory, running: usize) -> bool {
        if self.rule != ShareRule::Measured || self.frozen || running == 0 {
            return false;
        }
        let ours = reading.used_mib.saturating_sub(self.baseline_used_mib);
        let per_cell = ours.div_ceil(running as u64).max(1);
        let per_cell = self.per_cell_mib.map_or(per_cell, |seen| seen.max(per_cell));
        self.per_cell_mib = Some(per_cell);
        // The running cells counted at their largest footprint, not at what they hold now.
        let projected = GpuMemory {
            used_mib: reading.used_mib.max(self.baseline_used_mib + running as u64 * per_cell),
            ..reading
        };
        let cap = (running + projected.room_for(per_cell)).clamp(1, self.max_cells);
        let changed = cap != self.cap;
        self.cap = cap;
        changed
    }

    /// A cell on this GPU failed out of memory with `running` others still on it: no more
    /// cells than those (at least one), and no growth from now on.
    pub fn out_of_memory(&mut self, running: usize) {
        self.cap = running.max(1);
        self.frozen = true;
    }
}

/// Whether a cell's error says the GPU ran out of memory (cudarc's `CUDA_ERROR_OUT_OF_MEMORY`,
/// cuBLAS's and cuDNN's allocation failures).
pub fn is_out_of_memory(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    error.contains("out_of_memory") || error.contains("out of memory") || error.contains("alloc_failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: u64 = 81_559;

    fn reading(used_mib: u64) -> GpuMemory {
        GpuMemory {
            total_mib: H100,
            used_mib,
        }
    }

    #[test]
    fn nvidia_smi_output_parses_and_nonsense_is_an_error() {
        assert_eq!(
            parse_nvidia_smi("81559, 4\n"),
            Ok(GpuMemory {
                total_mib: 81_559,
                used_mib: 4
            })
        );
        assert!(parse_nvidia_smi("").unwrap_err().contains("not `total, used`"));
        assert!(parse_nvidia_smi("[N/A], 3").unwrap_err().contains("not two MiB counts"));
        assert!(parse_nvidia_smi("No devices were found").is_err());
    }

    #[test]
    fn the_default_measures_one_warm_cell_then_fills_the_free_memory() {
        // 500 MiB held by someone else before the pool starts; 16 cores.
        let mut share = GpuShare::new(0, 16, ShareRule::Measured, Some(reading(500)));
        assert_eq!(share.cap, 1);
        assert!(!share.wants_reading(1, 0), "a cell that is not warm is not measured");
        assert!(share.wants_reading(1, 1));
        // One warm cell holds 2,500 MiB: (81,559 - 3,000 - 4,077 reserve) / (1.25 * 2,500) = 23
        // more, capped by the cores.
        assert!(share.observe(reading(3_000), 1));
        assert_eq!((share.cap, share.per_cell_mib), (16, Some(2_500)));
        // Cells of 20 GiB: (81,559 - 20,980 - 4,077) / (1.25 * 20,480) = 2.2, so 1 + 2.
        let mut big = GpuShare::new(0, 16, ShareRule::Measured, Some(reading(500)));
        big.observe(reading(20_980), 1);
        assert_eq!(big.cap, 3);
        // Three warm cells that grew to 24 GiB each: the footprint rises and no fourth fits.
        assert!(!big.observe(reading(500 + 3 * 24_576), 3));
        assert_eq!((big.cap, big.per_cell_mib), (3, Some(24_576)));
        // A later smaller reading does not lower the footprint: the largest seen wins.
        big.observe(reading(500 + 3 * 10_000), 3);
        assert_eq!((big.cap, big.per_cell_mib), (3, Some(24_576)));
        // With one of them gone, its slot is not refilled while 24 GiB do not fit.
        let mut two_left = big.clone();
        assert!(two_left.observe(reading(500 + 2 * 24_576), 2));
        assert_eq!(two_left.cap, 2);
    }

    #[test]
    fn a_cell_that_does_not_fit_beside_the_first_keeps_the_pool_at_one() {
        let mut share = GpuShare::new(0, 16, ShareRule::Measured, Some(reading(0)));
        share.observe(reading(60_000), 1);
        assert_eq!(share.cap, 1);
    }

    #[test]
    fn out_of_memory_freezes_the_cap_at_the_cells_still_running() {
        let mut share = GpuShare::new(0, 16, ShareRule::Measured, Some(reading(0)));
        share.observe(reading(2_000), 1);
        assert_eq!(share.cap, 16);
        share.out_of_memory(5);
        assert_eq!(share.cap, 5);
        assert!(!share.wants_reading(5, 5));
        assert!(!share.observe(reading(2_000), 5));
        share.out_of_memory(0);
        assert_eq!(share.cap, 1, "at least one cell");
    }

    #[test]
    fn a_given_footprint_sizes_the_pool_at_once_and_j_is_taken_as_given() {
        // (81,559 - 1,000 - 4,077) / (1.25 * 8,192) = 7.5.
        let given = GpuShare::new(0, 16, ShareRule::Given { per_cell_mib: 8_192 }, Some(reading(1_000)));
        assert_eq!(given.cap, 7);
        assert!(!given.wants_reading(7, 7));
        // Larger than the GPU: still one.
        let huge = GpuShare::new(0, 16, ShareRule::Given { per_cell_mib: 200_000 }, Some(reading(0)));
        assert_eq!(huge.cap, 1);
        let fixed = GpuShare::new(0, 6, ShareRule::Fixed, None);
        assert_eq!(fixed.cap, 6);
        let blind = GpuShare::new(0, 16, ShareRule::Unreadable("no nvidia-smi".into()), None);
        assert_eq!(blind.cap, 1);
    }

    #[test]
    fn out_of_memory_errors_are_recognised() {
        assert!(is_out_of_memory(
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"
        ));
        assert!(is_out_of_memory("cublas: CUBLAS_STATUS_ALLOC_FAILED"));
        assert!(!is_out_of_memory(
            "run.device = \"cuda\": this lfs was built without CUDA"
        ));
    }
}
