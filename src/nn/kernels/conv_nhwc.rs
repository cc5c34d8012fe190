//! 3×3 convolutions (no padding, stride 1 or 2) in channels-last layout, one sample at a
//! time, on a register-tiled kernel (issue #5): the pre-trainer's tape and candle's custom
//! ops ([`super::conv_ops`]) both run on them.
//!
//! Every pass is the same small matrix product: a tile of P ≤ 6 rows of A (output pixels, or
//! input channels for the weight gradient) times 16 (or 32) columns of B (output channels),
//! summed over k. With activations stored (h, w, c) and weights [ky][kx][c][o], the k values
//! of one kernel row (kx, c) are contiguous in both operands, so no im2col copy is made:
//! - forward: A = input pixels, k = (ky, kx, c), B = weights; bias and ReLU are applied at
//!   the store;
//! - input gradient: the forward of the output gradient, spread out by the stride and
//!   zero-padded by 2, with the weights flipped and transposed ([ky][kx][o][c]);
//! - weight gradient: A = input channels, k = output pixels, B = the output gradient, a few
//!   output rows per pass so that their data stay in L1.
//!
//! On x86-64 with AVX2 + FMA the tile lives in 12 ymm registers (6 × 2 × 8 floats: the shape
//! of the `gemm` crate's own f32 kernel); elsewhere a plain-Rust tile computes the same sums in
//! the same order, with separate multiplies and adds instead of fused ones. With AVX-512F,
//! passes over a multiple of 32 output channels take tiles of 6 × 32 in 12 zmm registers:
//! half the loads per FMA, the same fused sums in the same order, so the same bits as AVX2
//! (BENCHMARKS.md, "512-bit conv kernels").

/// Output channels per tile: two 8-float vectors.
pub(crate) const OB: usize = 16;
/// Rows of A per tile.
const P_MAX: usize = 6;
/// Output rows per pass of the weight gradient.
const ROWS_PER_PASS: usize = 4;

/// One run of k values inside a tile: offsets into A and B where it starts, and its length.
#[derive(Debug, Clone, Copy)]
struct Segment {
    a: usize,
    b: usize,
    len: usize,
}

/// Strides of a tile's operands: A row i, step k is `a[i·a_row + k·a_k]`; B step k is the 16
/// floats at `b[k·b_k]`.
#[derive(Debug, Clone, Copy)]
struct Strides {
    a_row: usize,
    a_k: usize,
    b_k: usize,
}

type Acc<const P: usize> = [[f32; OB]; P];

/// acc[i][j] += Σ_segments Σ_k A[i, k] · B[k, j], the plain-Rust tile.
///
/// # Safety
/// Every A and B address the segments and strides reach must be in bounds of `a` / `b`.
unsafe fn tile_plain<const P: usize>(acc: &mut Acc<P>, a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
    for seg in segs {
        for k in 0..seg.len {
            let bk = &b[seg.b + k * s.b_k..][..OB];
            for (i, row) in acc.iter_mut().enumerate() {
                let av = a[seg.a + i * s.a_row + k * s.a_k];
                for (r, bv) in row.iter_mut().zip(bk) {
                    *r += av * *bv;
                }
            }
        }
    }
}

/// The same tile on AVX2 + FMA, accumulators in registers.
///
/// # Safety
/// As [`tile_plain`], and the CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const P: usize>(acc: &mut Acc<P>, a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees the bounds and the CPU features; loads and stores are
    // unaligned.
    unsafe {
        let mut r = [[_mm256_setzero_ps(); 2]; P];
        for (ri, row) in r.iter_mut().zip(acc.iter()) {
            ri[0] = _mm256_loadu_ps(row.as_ptr());
            ri[1] = _mm256_loadu_ps(row.as_ptr().add(8));
        }
        for seg in segs {
            debug_assert!(seg.b + (seg.len.max(1) - 1) * s.b_k + OB <= b.len());
            debug_assert!(seg.a + (P - 1) * s.a_row + (seg.len.max(1) - 1) * s.a_k < a.len());
            let (pa, pb) = (a.as_ptr().add(seg.a), b.as_ptr().add(seg.b));
            for k in 0..seg.len {
                let b0 = _mm256_loadu_ps(pb.add(k * s.b_k));
                let b1 = _mm256_loadu_ps(pb.add(k * s.b_k + 8));
                let ak = pa.add(k * s.a_k);
                for (i, ri) in r.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ak.add(i * s.a_row));
                    ri[0] = _mm256_fmadd_ps(av, b0, ri[0]);
                    ri[1] = _mm256_fmadd_ps(av, b1, ri[1]);
                }
            }
        }
        for (ri, row) in r.iter().zip(acc.iter_mut()) {
            _mm256_storeu_ps(row.as_mut_ptr(), ri[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(8), ri[1]);
        }
    }
}

/// Output channels per tile of the 512-bit kernel: two 16-float vectors.
const OB_WIDE: usize = 32;

/// Where a 32-wide tile's sums start and where they go: row i starts from the 32 floats at
/// `init + i·init_row` (`init_row` 0: every row from the same 32, a bias) and ends in the 32 at
/// `out + i·out_row`, through a ReLU when `relu`.
#[derive(Debug, Clone, Copy)]
struct WideIo {
    init: *const f32,
    init_row: usize,
    out: *mut f32,
    out_row: usize,
    relu: bool,
}

/// out[i][j] = relu?(init[i][j] + Σ_segments Σ_k A[i, k] · B[k, j]) for 32 columns,
/// accumulators in 12 zmm registers (P ≤ 6 rows × 2 × 16 floats). The forward starts them
/// from the bias and stores through the ReLU straight into the layer's output, so no
/// accumulator array goes through memory (BENCHMARKS.md, "The LFS update's parts": 5).
///
/// # Safety
/// As [`tile_plain`] with 32 columns of B; `io`'s P rows must be in bounds, and the CPU must
/// support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<const P: usize>(io: WideIo, a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
    use std::arch::x86_64::*;
    // SAFETY: the caller guarantees the bounds and the CPU features; loads and stores are
    // unaligned.
    unsafe {
        let mut r = [[_mm512_setzero_ps(); 2]; P];
        for (i, ri) in r.iter_mut().enumerate() {
            let row = io.init.add(i * io.init_row);
            ri[0] = _mm512_loadu_ps(row);
            ri[1] = _mm512_loadu_ps(row.add(16));
        }
        for seg in segs {
            let (pa, pb) = (a.as_ptr().add(seg.a), b.as_ptr().add(seg.b));
            for k in 0..seg.len {
                let b0 = _mm512_loadu_ps(pb.add(k * s.b_k));
                let b1 = _mm512_loadu_ps(pb.add(k * s.b_k + 16));
                let ak = pa.add(k * s.a_k);
                for (i, ri) in r.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ak.add(i * s.a_row));
                    ri[0] = _mm512_fmadd_ps(av, b0, ri[0]);
                    ri[1] = _mm512_fmadd_ps(av, b1, ri[1]);
                }
            }
        }
        let zero = _mm512_setzero_ps();
        for (i, ri) in r.iter().enumerate() {
            let row = io.out.add(i * io.out_row);
            // max(v, 0) gives 0 for NaN, as `f32::max(v, 0.0)` does in the narrow path (and +0
            // for −0, where `f32::max` may give either: the same number to every later sum).
            let (v0, v1) = if io.relu {
                (_mm512_max_ps(ri[0], zero), _mm512_max_ps(ri[1], zero))
            } else {
                (ri[0], ri[1])
            };
            _mm512_storeu_ps(row, v0);
            _mm512_storeu_ps(row.add(16), v1);
        }
    }
}

/// Which tile implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512F registers: 32 output channels per tile where a pass has a multiple of 32, the
    /// AVX2 tile elsewhere. Same sums in the same order as AVX2, so the same bits.
    Avx512,
    /// AVX2 + FMA registers (x86-64 CPUs since 2013).
    Avx2,
    /// Plain Rust, any CPU.
    Plain,
}

/// Calls `$body` with the const `$c` set to `$p`, one of the listed tile heights.
macro_rules! by_rows {
    ($p:expr, [$($n:literal),+], |$c:ident| $body:expr) => {
        match $p {
            $($n => {
                const $c: usize = $n;
                $body
            })+
            p => unreachable!("no tile of {p} rows"),
        }
    };
}

/// Panics unless every A and B address a tile of `p` rows and `width` columns reaches over
/// `segs` is in bounds.
fn check_tile_bounds(p: usize, width: usize, a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
    for seg in segs.iter().filter(|seg| seg.len > 0) {
        let last_k = seg.len - 1;
        assert!(seg.b + last_k * s.b_k + width <= b.len(), "conv tile: B out of bounds");
        assert!(
            seg.a + (p - 1) * s.a_row + last_k * s.a_k < a.len(),
            "conv tile: A out of bounds"
        );
    }
}

impl Kernel {
    /// The fastest kernel this CPU supports, or the one `LFS_CONV_KERNEL` names (`avx512`,
    /// `avx2` or `plain`, for side-by-side timings; one this CPU lacks is refused with a
    /// warning). Decided once per process.
    pub fn detect() -> Self {
        static KERNEL: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *KERNEL.get_or_init(|| {
            let requested = std::env::var(crate::switches::CONV_KERNEL)
                .ok()
                .filter(|v| !v.is_empty());
            let (kernel, refused) = Self::choose(requested.as_deref(), &Self::supported());
            if let Some(why) = refused {
                eprintln!("{why}");
            }
            kernel
        })
    }

    /// The kernel `requested` (`LFS_CONV_KERNEL`'s value) names among `supported` (fastest
    /// first), or the fastest, with why the request was refused when it was.
    pub fn choose(requested: Option<&str>, supported: &[Kernel]) -> (Kernel, Option<String>) {
        let fastest = supported[0];
        match requested {
            None => (fastest, None),
            Some(name) => match supported.iter().find(|k| k.name() == name) {
                Some(&k) => (k, None),
                None => {
                    let names: Vec<&str> = supported.iter().map(|k| k.name()).collect();
                    let why = format!(
                        "LFS_CONV_KERNEL={name}: not one of this CPU's conv kernels ({}); using {}",
                        names.join(", "),
                        fastest.name()
                    );
                    (fastest, Some(why))
                }
            },
        }
    }

    /// The kernels this CPU runs, fastest first.
    pub fn supported() -> Vec<Kernel> {
        let mut kernels = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            if std::is_x86_feature_detected!("avx512f") {
                kernels.push(Kernel::Avx512);
            }
            kernels.push(Kernel::Avx2);
        }
        kernels.push(Kernel::Plain);
        kernels
    }

    /// Its name for `LFS_CONV_KERNEL`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Plain => "plain",
        }
    }

    /// Whether a pass over `o` output channels runs on 32-wide tiles ([`Kernel::tile_wide`]).
    fn wide(self, o: usize) -> bool {
        self == Kernel::Avx512 && o.is_multiple_of(OB_WIDE)
    }

    /// acc += A·B over `segs` for a tile of `p` ≤ 6 rows and 16 columns; bounds are checked
    /// here.
    fn tile(self, p: usize, acc: &mut [[f32; OB]], a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
        check_tile_bounds(p, OB, a, b, s, segs);
        by_rows!(p, [1, 2, 3, 4, 5, 6], |P| {
            let acc: &mut Acc<P> = (&mut acc[..P]).try_into().expect("tile rows");
            match self {
                // SAFETY: bounds checked above; Avx2 and Avx512 are only chosen where the CPU
                // has AVX2 and FMA (`supported`).
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx2 | Kernel::Avx512 => unsafe { tile_avx2::<P>(acc, a, b, s, segs) },
                // SAFETY: bounds checked above.
                _ => unsafe { tile_plain::<P>(acc, a, b, s, segs) },
            }
        })
    }

    /// As [`Kernel::tile`] for 32 columns; only where [`Kernel::wide`] said so.
    fn tile_wide(self, p: usize, acc: &mut [[f32; OB_WIDE]], a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
        assert!(acc.len() >= p, "conv tile: {p} rows of accumulators needed");
        // One pointer for reading and writing, so that neither outlives the other's borrow.
        let rows: *mut f32 = acc.as_mut_ptr().cast();
        let io = WideIo {
            init: rows,
            init_row: OB_WIDE,
            out: rows,
            out_row: OB_WIDE,
            relu: false,
        };
        // SAFETY: `io` reaches the first p rows of `acc`, checked above.
        unsafe { self.tile_wide_io(p, io, a, b, s, segs) }
    }

    /// y[at + i·row .. + 32] = relu?(init + A·B) over `segs` for row i of a tile of `p` ≤ 6
    /// rows, `init` the 32 floats every row starts from (a bias block, or zeros); bounds are
    /// checked here. Only where [`Kernel::wide`] said so.
    #[allow(clippy::too_many_arguments)]
    fn forward_tile_wide(
        self,
        p: usize,
        init: &[f32; OB_WIDE],
        relu: bool,
        (y, at, row): (&mut [f32], usize, usize),
        a: &[f32],
        b: &[f32],
        s: Strides,
        segs: &[Segment],
    ) {
        assert!(
            at + (p - 1) * row + OB_WIDE <= y.len(),
            "conv tile: output out of bounds"
        );
        let io = WideIo {
            init: init.as_ptr(),
            init_row: 0,
            out: y[at..].as_mut_ptr(),
            out_row: row,
            relu,
        };
        // SAFETY: `io` reads `init` alone and writes p rows of y from `at`, checked above.
        unsafe { self.tile_wide_io(p, io, a, b, s, segs) }
    }

    /// The 32-wide tile through `io`: A and B bounds are checked here.
    ///
    /// # Safety
    /// `io`'s p rows must be in bounds for reading (`init`) and writing (`out`).
    unsafe fn tile_wide_io(self, p: usize, io: WideIo, a: &[f32], b: &[f32], s: Strides, segs: &[Segment]) {
        assert_eq!(self, Kernel::Avx512, "32-wide conv tiles need the AVX-512 kernel");
        check_tile_bounds(p, OB_WIDE, a, b, s, segs);
        by_rows!(p, [1, 2, 3, 4, 5, 6], |P| {
            // SAFETY: A and B checked above, `io` by the caller; Avx512 is only chosen where the
            // CPU has AVX-512F.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                tile_avx512::<P>(io, a, b, s, segs);
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = io;
        })
    }
}

/// Shape of one sample's convolution: input (h, w, c), output (ho, wo, o), NHWC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub o: usize,
    pub stride: usize,
}

impl Shape {
    pub fn ho(&self) -> usize {
        (self.h - 3) / self.stride + 1
    }

    pub fn wo(&self) -> usize {
        (self.w - 3) / self.stride + 1
    }

    pub fn in_len(&self) -> usize {
        self.h * self.w * self.c
    }

    pub fn out_len(&self) -> usize {
        self.ho() * self.wo() * self.o
    }
}

/// Channels rounded up to a whole number of 16-wide tiles.
pub fn padded(channels: usize) -> usize {
    channels.div_ceil(OB) * OB
}

/// PyTorch weights (o, c, 3, 3) -> the forward layout [ky][kx][c][o_pad], output channels
/// o..o_pad zero.
pub fn weights_forward(w: &[f32], o: usize, c: usize, o_pad: usize) -> Vec<f32> {
    let mut out = vec![0f32; 9 * c * o_pad];
    for oo in 0..o {
        for cc in 0..c {
            for k in 0..9 {
                out[(k * c + cc) * o_pad + oo] = w[(oo * c + cc) * 9 + k];
            }
        }
    }
    out
}

/// PyTorch weights (o, c, 3, 3) -> the input-gradient layout [ky][kx][o][c_pad], flipped:
/// entry (ky, kx) holds w[·, ·, 2 − ky, 2 − kx]; input channels c..c_pad zero.
pub fn weights_input_grad(w: &[f32], o: usize, c: usize, c_pad: usize) -> Vec<f32> {
    let mut out = vec![0f32; 9 * o * c_pad];
    for oo in 0..o {
        for cc in 0..c {
            for k in 0..9 {
                out[((8 - k) * o + oo) * c_pad + cc] = w[(oo * c + cc) * 9 + k];
            }
        }
    }
    out
}

/// A gradient in the layout [ky][kx][c][o_pad] -> PyTorch's (o, c, 3, 3), added into `dst`.
pub fn add_weight_grad_to_torch(g: &[f32], o: usize, c: usize, o_pad: usize, dst: &mut [f32]) {
    for oo in 0..o {
        for cc in 0..c {
            for k in 0..9 {
                dst[(oo * c + cc) * 9 + k] += g[(k * c + cc) * o_pad + oo];
            }
        }
    }
}

/// y (ho, wo, o) = x (h, w, c) ⊛ w, plus `bias` and a ReLU when given; `wf` is
/// [`weights_forward`]'s layout. Requires o to be a multiple of 16.
pub fn forward(kernel: Kernel, s: &Shape, x: &[f32], wf: &[f32], bias: Option<&[f32]>, relu: bool, y: &mut [f32]) {
    let (o, c) = (s.o, s.c);
    assert!(o % OB == 0, "conv: {o} output channels is not a multiple of {OB}");
    assert_eq!((x.len(), wf.len(), y.len()), (s.in_len(), 9 * c * o, s.out_len()));
    // k = (kx, c) is contiguous in x along a row and in wf; one segment per kernel row ky.
    let segs: [Segment; 3] = std::array::from_fn(|ky| Segment {
        a: ky * s.w * c,
        b: ky * 3 * c * o,
        len: 3 * c,
    });
    let strides = Strides {
        a_row: s.stride * c,
        a_k: 1,
        b_k: o,
    };
    if kernel.wide(o) {
        let zeros = [0f32; OB_WIDE];
        forward_tiles::<OB_WIDE>(s, &segs, y, |p, tile_segs, ob, y, at| {
            let init: &[f32; OB_WIDE] = match bias {
                Some(bias) => bias[ob..ob + OB_WIDE].try_into().expect("a bias block"),
                None => &zeros,
            };
            kernel.forward_tile_wide(p, init, relu, (y, at, o), x, wf, strides, tile_segs)
        });
    } else {
        let mut acc = [[0f32; OB]; P_MAX];
        forward_tiles::<OB>(s, &segs, y, |p, tile_segs, ob, y, at| {
            for row in acc[..p].iter_mut() {
                match bias {
                    Some(bias) => row.copy_from_slice(&bias[ob..ob + OB]),
                    None => row.fill(0.0),
                }
            }
            kernel.tile(p, &mut acc, x, wf, strides, tile_segs);
            for (i, row) in acc[..p].iter().enumerate() {
                let dst = &mut y[at + i * o..][..OB];
                if relu {
                    dst.iter_mut().zip(row).for_each(|(d, v)| *d = v.max(0.0));
                } else {
                    dst.copy_from_slice(row);
                }
            }
        });
    }
}

/// [`forward`]'s loop over tiles of ≤ 6 output pixels × W output channels: `tile(p, segs, ob,
/// y, at)` computes one (`segs` moved to it) and writes its output pixel i, channels ob..ob +
/// W, at `y[at + i·o..]`.
fn forward_tiles<const W: usize>(
    s: &Shape,
    segs: &[Segment; 3],
    y: &mut [f32],
    mut tile: impl FnMut(usize, &[Segment], usize, &mut [f32], usize),
) {
    let (ho, wo, o, c) = (s.ho(), s.wo(), s.o, s.c);
    // One W-channel block of the weights (9·c·W floats at c = 32: 18 KB at W = 16, which L1
    // holds while every output pixel uses it; 36 KB at W = 32, which mostly stays there).
    for ob in (0..o).step_by(W) {
        for yo in 0..ho {
            for x0 in (0..wo).step_by(P_MAX) {
                let p = P_MAX.min(wo - x0);
                let a_base = (yo * s.stride * s.w + x0 * s.stride) * c;
                let tile_segs: [Segment; 3] = std::array::from_fn(|ky| Segment {
                    a: segs[ky].a + a_base,
                    b: segs[ky].b + ob,
                    len: segs[ky].len,
                });
                tile(p, &tile_segs, ob, y, (yo * wo + x0) * o + ob);
            }
        }
    }
}

/// dx (h, w, c_pad) = the input gradient for dy (ho, wo, o) of the conv `s` (stride 1 or 2;
/// s.o may be any number); `wg` is [`weights_input_grad`]'s layout for c_pad, a multiple of
/// 16, and `pad` scratch (resized here).
pub fn input_grad(kernel: Kernel, s: &Shape, c_pad: usize, dy: &[f32], wg: &[f32], pad: &mut Vec<f32>, dx: &mut [f32]) {
    let (ho, wo, o, st) = (s.ho(), s.wo(), s.o, s.stride);
    assert_eq!(
        (dy.len(), wg.len(), dx.len()),
        (ho * wo * o, 9 * o * c_pad, s.h * s.w * c_pad)
    );
    // dy spread out by the stride and zero-padded by 2 on every side; a stride-1 conv of it
    // with the flipped weights gives dx over rows 0..(ho − 1)·s + 3, the rest get nothing.
    let (hf, wf) = ((ho - 1) * st + 3, (wo - 1) * st + 3);
    let (ph, pw) = (hf + 2, wf + 2);
    // `pad` holds whatever its last use left: every element the copy below does not write is
    // set to zero here. At stride 1 those are the border of 2 alone, not the whole buffer.
    pad.resize(ph * pw * o, 0.0);
    if st == 1 {
        let row = pw * o;
        pad[..2 * row].fill(0.0);
        pad[(ph - 2) * row..].fill(0.0);
        for y in 2..ph - 2 {
            let r = &mut pad[y * row..][..row];
            r[..2 * o].fill(0.0);
            r[(pw - 2) * o..].fill(0.0);
        }
    } else {
        pad.fill(0.0);
    }
    for yo in 0..ho {
        for xo in 0..wo {
            let at = ((yo * st + 2) * pw + xo * st + 2) * o;
            pad[at..at + o].copy_from_slice(&dy[(yo * wo + xo) * o..][..o]);
        }
    }
    let full = Shape {
        h: ph,
        w: pw,
        c: o,
        o: c_pad,
        stride: 1,
    };
    if (hf, wf) == (s.h, s.w) {
        forward(kernel, &full, pad, wg, None, false, dx);
    } else {
        let mut part = vec![0f32; hf * wf * c_pad];
        forward(kernel, &full, pad, wg, None, false, &mut part);
        dx.fill(0.0);
        for y in 0..hf {
            dx[y * s.w * c_pad..][..wf * c_pad].copy_from_slice(&part[y * wf * c_pad..][..wf * c_pad]);
        }
    }
}

/// dw [ky][kx][c][o] += the weight gradient for input x (h, w, c) and output gradient
/// dy (ho, wo, o). Requires o to be a multiple of 16.
pub fn weight_grad(kernel: Kernel, s: &Shape, x: &[f32], dy: &[f32], dw: &mut [f32]) {
    let (o, c) = (s.o, s.c);
    assert!(o % OB == 0, "conv: {o} output channels is not a multiple of {OB}");
    assert_eq!((x.len(), dy.len(), dw.len()), (s.in_len(), s.out_len(), 9 * c * o));
    // k = output pixels of one row: x steps by stride·c, dy by o; one segment per row.
    let strides = Strides {
        a_row: 1,
        a_k: s.stride * c,
        b_k: o,
    };
    if kernel.wide(o) {
        weight_grad_tiles::<OB_WIDE>(s, dw, |p, acc, segs| kernel.tile_wide(p, acc, x, dy, strides, segs));
    } else {
        weight_grad_tiles::<OB>(s, dw, |p, acc, segs| kernel.tile(p, acc, x, dy, strides, segs));
    }
}

/// [`weight_grad`]'s loop over tiles of ≤ 6 input channels × W output channels; `tile` adds
/// one tile's sums over the segments it is given.
fn weight_grad_tiles<const W: usize>(s: &Shape, dw: &mut [f32], tile: impl Fn(usize, &mut [[f32; W]], &[Segment])) {
    let (ho, wo, o, c) = (s.ho(), s.wo(), s.o, s.c);
    let mut acc = [[0f32; W]; P_MAX];
    let mut segs = Vec::with_capacity(ROWS_PER_PASS);
    // A few output rows at a time, so that their input rows and output gradient stay in L1
    // while all 9·⌈c/6⌉·o/W tiles sum over them.
    for y0 in (0..ho).step_by(ROWS_PER_PASS) {
        let rows = y0..(y0 + ROWS_PER_PASS).min(ho);
        for ky in 0..3 {
            for kx in 0..3 {
                for c0 in (0..c).step_by(P_MAX) {
                    let p = P_MAX.min(c - c0);
                    for ob in (0..o).step_by(W) {
                        segs.clear();
                        segs.extend(rows.clone().map(|yo| Segment {
                            a: ((yo * s.stride + ky) * s.w + kx) * c + c0,
                            b: yo * wo * o + ob,
                            len: wo,
                        }));
                        let at = |i: usize| ((ky * 3 + kx) * c + c0 + i) * o + ob;
                        for (i, row) in acc[..p].iter_mut().enumerate() {
                            row.copy_from_slice(&dw[at(i)..][..W]);
                        }
                        tile(p, &mut acc, &segs);
                        for (i, row) in acc[..p].iter().enumerate() {
                            dw[at(i)..][..W].copy_from_slice(row);
                        }
                    }
                }
            }
        }
    }
}

/// x (c, h, w) -> (h, w, c_pad), channels c..c_pad zero.
pub fn chw_to_hwc(x: &[f32], c: usize, hw: usize, c_pad: usize, out: &mut [f32]) {
    if c_pad > c {
        out.fill(0.0);
    }
    for (ch, plane) in x.chunks_exact(hw).enumerate().take(c) {
        for (p, v) in plane.iter().enumerate() {
            out[p * c_pad + ch] = *v;
        }
    }
}

/// The first c channels of x (h, w, c_pad) -> (c, h, w).
pub fn hwc_to_chw(x: &[f32], c: usize, hw: usize, c_pad: usize, out: &mut [f32]) {
    for (p, px) in x.chunks_exact(c_pad).enumerate().take(hw) {
        for (ch, v) in px[..c].iter().enumerate() {
            out[ch * hw + p] = *v;
        }
    }
}
