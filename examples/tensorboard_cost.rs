//! What one metrics line costs written to JSONL alone and with its TensorBoard copy (issue 33:
//! TensorBoard is on by default, so it must be cheap). A line of `lfs pretrain`'s metrics.jsonl,
//! 20,000 times each way, three rounds:
//!     cargo run --release --locked --example tensorboard_cost
use std::time::Instant;
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let line = serde_json::json!({"step":1,"pretrain/task":"mixed","pretrain/loss":5.788302421569824,"pretrain/num_synthetic":4,"pretrain/num_real":60,"pretrain/lnc_d":6.415592946074284,"pretrain/clip_low":3.5285761203408557,"pretrain/clip_high":4.170135414948285,"pretrain/sinkhorn_entropy":5.718503767471409,"pretrain/target_cosine":0.0873209071307968,"pretrain/target_norm":11.928923515361948,"pretrain/grad_norm":null,"pretrain/seconds_data":0.121402818,"pretrain/seconds_forward":0.045514183,"pretrain/seconds_backward":0.109050587,"pretrain/seconds_optimizer":0.004691946,"pretrain/update_seconds":0.280659534,"pretrain/updates_per_s":3.5630359166776073});
    let n = 20_000u64;
    for round in 0..3 {
        for tb in [false, true] {
            let sub = dir.path().join(format!("{round}-{tb}"));
            std::fs::create_dir_all(&sub).unwrap();
            let events = tb.then(|| lfs::tensorboard::EventFile::open_shared(&sub, |_| false).unwrap());
            let mut log = lfs::log_files::MetricsLog::open(&sub.join("m.jsonl"), 0)
                .unwrap()
                .mirrored(events.map(|events| lfs::log_files::Mirror { events, x: "step" }));
            let t = Instant::now();
            let mut l = line.clone();
            for s in 1..=n {
                l["step"] = s.into();
                log.write(&l).unwrap();
            }
            println!(
                "tensorboard={tb}: {:.1} us per line",
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            );
        }
    }
}
