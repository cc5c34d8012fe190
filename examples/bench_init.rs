//! The orthogonal init's cost, and what a Householder QR would change: `nn::init::orthogonal`
//! (two passes of modified Gram–Schmidt in f64, rounded to f32) against faer's blocked
//! Householder QR of the same normal draw (the sign of each column fixed by R's diagonal, as
//! torch's `orthogonal_` does), timed on the same matrix, and the f32 entries whose bits differ.
//! Evidence for a decision, not a path of lfs: a QR would make inits several times faster but
//! change a few entries' last bit in some draws, and so those runs' numbers.
//!
//!     RAYON_NUM_THREADS=1 cargo run --release --example bench_init [-- big]
//!
//! Shapes: SAC's and DrQ-v2's 1024² hidden layer, a 256-wide one and a 50-wide head; `big`: APT's
//! ICM trunk (512 × 39,200). Seeds 1–6 (1–2 with `big`).
use std::time::Instant;

use faer::Mat;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn main() -> anyhow::Result<()> {
    let big = std::env::args().nth(1).as_deref() == Some("big");
    let shapes: &[(usize, usize)] = if big {
        &[(512, 39_200)]
    } else {
        &[(1024, 1024), (256, 1024), (1024, 50)]
    };
    let seeds: &[u64] = if big { &[1, 2] } else { &[1, 2, 3, 4, 5, 6] };
    println!("| (rows, cols) | seed | ours (s) | QR (s) | ours / QR | f32 entries that differ |");
    println!("|---|---|---|---|---|---|");
    for &(rows, cols) in shapes {
        for &seed in seeds {
            let started = Instant::now();
            let ours = lfs::nn::init::orthogonal(rows, cols, 1.0, &mut ChaCha8Rng::seed_from_u64(seed))?;
            let ours_s = started.elapsed().as_secs_f64();
            // The same draw as orthogonal's: column j of the tall (len, n) matrix, column by column.
            let (n, len) = if rows < cols { (rows, cols) } else { (cols, rows) };
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut a = Mat::<f64>::zeros(len, n);
            for j in 0..n {
                for i in 0..len {
                    a[(i, j)] = lfs::nn::init::standard_normal(&mut rng);
                }
            }
            let started = Instant::now();
            let qr = a.qr();
            let (q, r) = (qr.compute_thin_Q(), qr.thin_R());
            let qr_s = started.elapsed().as_secs_f64();
            let mut differ = 0usize;
            for j in 0..n {
                let sign = if r[(j, j)] < 0.0 { -1.0 } else { 1.0 };
                for i in 0..len {
                    // rows < cols: W = Qᵀ, W[j, i] = Q[i, j]; else W = Q, W[i, j] = Q[i, j].
                    let w = if rows < cols {
                        ours[j * cols + i]
                    } else {
                        ours[i * cols + j]
                    };
                    differ += usize::from(((sign * q[(i, j)]) as f32).to_bits() != w.to_bits());
                }
            }
            println!(
                "| ({rows}, {cols}) | {seed} | {ours_s:.3} | {qr_s:.3} | {:.1} | {differ} of {} |",
                ours_s / qr_s,
                n * len
            );
        }
    }
    Ok(())
}
