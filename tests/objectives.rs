//! Sinkhorn–Knopp, LNC, the LFS clustering loss, InfoNCE and the ATC and CURL losses against
//! independently computed values (by hand, tests/fixtures/pretrain/reference.py, or the float64
//! transcriptions of rlpyt's ATC and MishaLaskin/curl in tests/fixtures/objectives/reference.py).

use std::path::PathBuf;

use candle_core::{Device, Tensor, Var};
use lfs::nn::{Params, Prototypes};
use lfs::objectives::atc::{AtcConfig, AtcHead};
use lfs::objectives::curl::{CurlConfig, CurlHead, CurlLayerNorm};
use lfs::objectives::infonce::{bilinear_info_nce, cosine_info_nce};
use lfs::objectives::lfs::{clustering_loss, ClusteringConfig};
use lfs::objectives::{assignment_entropy, lnc_select, sinkhorn, LncConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use crate::common::values;

fn t2(rows: &[&[f32]]) -> Tensor {
    let n = rows.len();
    let d = rows[0].len();
    Tensor::from_vec(
        rows.iter().flat_map(|r| r.iter().copied()).collect(),
        (n, d),
        &Device::Cpu,
    )
    .unwrap()
}

#[test]
fn sinkhorn_equal_scores_give_uniform_assignments() {
    // By hand: all scores equal → Q = 1/(K·B) everywhere; rows/cols rescale to 1/K, 1/B;
    // the final column normalisation gives 1/K per entry.
    let q = sinkhorn(&Tensor::full(0.3f32, (5, 4), &Device::Cpu).unwrap(), 0.1, 3).unwrap();
    for row in q.to_vec2::<f32>().unwrap() {
        for v in row {
            assert!((v - 0.25).abs() < 1e-7);
        }
    }
    let h = assignment_entropy(&q).unwrap();
    assert!((h - 4f64.ln()).abs() < 1e-6, "{h}");
}

#[test]
fn sinkhorn_rows_sum_to_one_and_clusters_are_balanced() {
    // Random scores in [-1, 1] (cosines), B = 64, K = 16, τ = 0.1, 3 iterations.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let scores: Vec<f32> = (0..64 * 16)
        .map(|_| rand::Rng::random_range(&mut rng, -1.0f32..1.0))
        .collect();
    let q = sinkhorn(&Tensor::from_vec(scores, (64, 16), &Device::Cpu).unwrap(), 0.1, 3)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    for row in &q {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(row.iter().all(|v| *v >= 0.0));
    }
    // After 3 iterations the cluster masses are near equipartition B/K = 4 (not exact: the
    // last step normalises columns); by 30 iterations they are within 1e-3.
    let col = |q: &Vec<Vec<f32>>, k: usize| q.iter().map(|r| r[k]).sum::<f32>();
    assert!(
        (0..16).all(|k| (col(&q, k) - 4.0).abs() < 1.0),
        "{:?}",
        (0..16).map(|k| col(&q, k)).collect::<Vec<_>>()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let scores: Vec<f32> = (0..64 * 16)
        .map(|_| rand::Rng::random_range(&mut rng, -1.0f32..1.0))
        .collect();
    let q30 = sinkhorn(&Tensor::from_vec(scores, (64, 16), &Device::Cpu).unwrap(), 0.1, 30)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert!((0..16).all(|k| (col(&q30, k) - 4.0).abs() < 1e-3));
}

/// The fixed case of tests/fixtures/pretrain/reference.py (B = 3, K = 4, d = 3, τ = 0.5).
const PRED: [[f32; 3]; 3] = [[0.3, -1.2, 0.5], [1.0, 0.2, -0.1], [-0.4, 0.7, 0.9]];
const TARGET: [[f32; 3]; 3] = [[0.8, 0.1, -0.3], [-0.2, 0.9, 0.4], [0.5, -0.5, 1.0]];
const PROTOS: [[f32; 3]; 4] = [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.5], [1.0, 1.0, 1.0]];

#[test]
fn sinkhorn_matches_the_proto_rl_reference() {
    // reference.py: SINKHORN_Q = sinkhorn(normalize(TARGET) · normalize(PROTOS)ᵀ, 0.5, 3)
    let expect = [
        [0.5420783786, 0.1626649884, 0.0558369681, 0.2394196649],
        [0.0389029049, 0.5305424021, 0.1706453052, 0.2599093878],
        [0.1740904689, 0.0519525644, 0.5235043255, 0.2504526412],
    ];
    let norm = |rows: &[[f32; 3]]| -> Vec<Vec<f32>> {
        rows.iter()
            .map(|r| {
                let n = r.iter().map(|v| v * v).sum::<f32>().sqrt();
                r.iter().map(|v| v / n).collect()
            })
            .collect()
    };
    let (t, c) = (norm(&TARGET), norm(&PROTOS));
    let scores: Vec<f32> = t
        .iter()
        .flat_map(|tr| {
            c.iter()
                .map(move |cr| tr.iter().zip(cr).map(|(a, b)| a * b).sum::<f32>())
        })
        .collect();
    let q = sinkhorn(&Tensor::from_vec(scores, (3, 4), &Device::Cpu).unwrap(), 0.5, 3)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    for (row, e) in q.iter().zip(expect) {
        for (v, e) in row.iter().zip(e) {
            assert!((*v as f64 - e).abs() < 1e-6, "{q:?}");
        }
    }
}

#[test]
fn clustering_loss_matches_the_reference_on_a_fixed_batch() {
    // reference.py: LOSS = 1.6650534334858467 (float64; tolerance 1e-5 for float32).
    let mut params = Params::new(&Device::Cpu);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let protos = Prototypes::new(4, 3, "protos", &mut params, &mut rng).unwrap();
    params
        .get("protos.weight")
        .unwrap()
        .set(&t2(&[&PROTOS[0], &PROTOS[1], &PROTOS[2], &PROTOS[3]]))
        .unwrap();
    let pred = Var::from_tensor(&t2(&[&PRED[0], &PRED[1], &PRED[2]])).unwrap();
    let target = t2(&[&TARGET[0], &TARGET[1], &TARGET[2]]);
    let cfg = ClusteringConfig {
        temperature: 0.5,
        sinkhorn_iters: 3,
    };
    let out = clustering_loss(pred.as_tensor(), &target, &protos, &cfg).unwrap();
    let loss = out.loss.to_scalar::<f32>().unwrap() as f64;
    assert!((loss - 1.6650534334858467).abs() < 1e-5, "{loss}");
    // The prototypes were re-normalised in place.
    for row in protos.weight().to_vec2::<f32>().unwrap() {
        assert!((row.iter().map(|v| v * v).sum::<f32>() - 1.0).abs() < 1e-6);
    }
    // Gradients reach both the predictor output and the prototypes, not the target.
    let grads = out.loss.backward().unwrap();
    assert!(grads.get(pred.as_tensor()).is_some());
    assert!(grads.get(protos.weight()).is_some());
}

#[test]
fn lnc_keeps_candidates_inside_the_window() {
    // Constructed 1-d latents, worked by hand. Real: 0, 1, 3, 6; 1-NN distances 1, 1, 2, 3
    // → D = 1.75. c = 0.9, r = 0.1 → window (0.85·D, 0.95·D) = (1.4875, 1.6625).
    // Candidates: 7.5 (→6: 1.5 keep), 4.5 (→3 or 6: 1.5 keep), 1.5 (→1: 0.5 drop),
    // 10 (→6: 4 drop), 4.6 (→6: 1.4 drop), −1.6 (→0: 1.6 keep).
    let real = [0.0f32, 1.0, 3.0, 6.0];
    let syn = [7.5f32, 4.5, 1.5, 10.0, 4.6, -1.6];
    let sel = lnc_select(&real, &syn, 1, &LncConfig { k: 1, c: 0.9, r: 0.1 }).unwrap();
    assert!((sel.d_internal - 1.75).abs() < 1e-12);
    assert!((sel.clip_low - 1.4875).abs() < 1e-12 && (sel.clip_high - 1.6625).abs() < 1e-12);
    assert_eq!(sel.selected, vec![0, 1, 5]);
}

#[test]
fn lnc_window_is_open_and_k_counts_neighbours() {
    // 2-d latents on the x axis: real 0, 2, 4, 6 → 1-NN distances 2, 2, 2, 2, D = 2.
    // c = 1, r = 1 → window (1, 3), open: D_j = 1 or 3 exactly is dropped.
    let real = [0.0f32, 0.0, 2.0, 0.0, 4.0, 0.0, 6.0, 0.0];
    let syn = [-1.0f32, 0.0, 9.0, 0.0, 8.5, 0.0, 3.0, 2.0];
    let sel = lnc_select(&real, &syn, 2, &LncConfig { k: 1, c: 1.0, r: 1.0 }).unwrap();
    assert_eq!(sel.d_internal, 2.0);
    // (3, 2): nearest real (2,0) or (4,0) at √5 ≈ 2.236 → keep.
    assert_eq!(sel.selected, vec![2, 3]);
    // k = 2: second neighbours 4, 2, 2, 4 → D = 3; candidate 8.5 → second nearest (4,0) at 4.5.
    let sel = lnc_select(&real, &syn, 2, &LncConfig { k: 2, c: 1.0, r: 1.0 }).unwrap();
    assert_eq!(sel.d_internal, 3.0);
    assert_eq!(sel.d_synthetic[2], 4.5);
    assert!(lnc_select(&real, &syn, 2, &LncConfig { k: 4, c: 1.0, r: 1.0 }).is_err());
}

#[test]
fn cosine_info_nce_on_a_hand_case() {
    // q = k = identity rows (2×2), τ = 1: logits [[1, 0], [0, 1]];
    // loss = −log(e / (e + 1)) = ln(1 + e⁻¹) = 0.31326168751822286.
    let q = t2(&[&[1.0, 0.0], &[0.0, 1.0]]);
    let loss = cosine_info_nce(&q, &q, 1.0).unwrap().to_scalar::<f32>().unwrap();
    assert!((loss as f64 - 0.31326168751822286).abs() < 1e-6, "{loss}");
}

#[test]
fn cosine_info_nce_with_a_temperature_and_distinct_keys() {
    // By hand: q = [[2, 0], [0, 3]] normalises to the identity; k = [[0.6, 0.8], [1, 0]] is
    // already unit; τ = 0.5: logits = q̂·k̂ᵀ/τ = [[1.2, 2], [1.6, 0]], labels on the diagonal:
    // loss = ½[ln(1 + e^0.8) + ln(1 + e^1.6)] = 1.4775007034180585 (reference.py recomputes it).
    // τ multiplied instead of divided gives 0.8556, logits transposed 1.5200.
    let q = t2(&[&[2.0, 0.0], &[0.0, 3.0]]);
    let k = t2(&[&[0.6, 0.8], &[1.0, 0.0]]);
    let loss = cosine_info_nce(&q, &k, 0.5).unwrap().to_scalar::<f32>().unwrap() as f64;
    assert_close(
        &[loss],
        &[fixture()["cosine_hand"]["loss"].as_f64().unwrap()],
        1e-6,
        "loss",
    );
    assert!((loss - 1.4775007034180585).abs() < 1e-6, "{loss}");
}

#[test]
fn bilinear_info_nce_with_a_non_symmetric_w() {
    // By hand: W = [[1, 2], [0, 1]], k = [[1, 0], [1, 1]]: W·kᵀ = [[1, 3], [0, 1]];
    // q = [[1, 0], [0, 2]]: logits = [[1, 3], [0, 2]], labels on the diagonal:
    // loss = ½[ln(1 + e²) + ln(1 + e⁻²)] = 1 + ln(1 + e⁻²) = 1.1269280110429727.
    // Transposed logits give 0.8133, Wᵀ in place of W 0.4100.
    let q = t2(&[&[1.0, 0.0], &[0.0, 2.0]]);
    let w = t2(&[&[1.0, 2.0], &[0.0, 1.0]]);
    let k = t2(&[&[1.0, 0.0], &[1.0, 1.0]]);
    let loss = bilinear_info_nce(&q, &w, &k).unwrap().to_scalar::<f32>().unwrap() as f64;
    assert!((loss - 1.1269280110429727).abs() < 1e-6, "{loss}");
    assert_close(
        &[loss],
        &[fixture()["bilinear_hand"]["loss"].as_f64().unwrap()],
        1e-6,
        "loss",
    );
}

// ---- ATC and CURL against tests/fixtures/objectives/reference.py (float64 numpy; inputs are
// float32-exact, so the only difference is float32 arithmetic here; tolerance 1e-5 absolute on
// the losses (≈ 2–5) and on every gradient element).

const REF_TOL: f64 = 1e-5;

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/objectives/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A JSON vector (n) or matrix (r, c) as a tensor of that shape.
fn tensor(v: &Value) -> Tensor {
    let rows = v.as_array().unwrap();
    if rows[0].is_array() {
        let data: Vec<f32> = rows
            .iter()
            .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32))
            .collect();
        let c = rows[0].as_array().unwrap().len();
        Tensor::from_vec(data, (rows.len(), c), &Device::Cpu).unwrap()
    } else {
        let data: Vec<f32> = rows.iter().map(|x| x.as_f64().unwrap() as f32).collect();
        Tensor::from_vec(data, rows.len(), &Device::Cpu).unwrap()
    }
}

fn assert_close(ours: &[f64], expected: &[f64], tol: f64, what: &str) {
    assert_eq!(ours.len(), expected.len(), "{what}");
    let err = ours
        .iter()
        .zip(expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        err <= tol,
        "{what}: max |ours − reference| = {err:e} > {tol:e}\nours {ours:?}\nreference {expected:?}"
    );
}

/// Sets `name` in `params` to `value`.
fn set(params: &Params, name: &str, value: &Tensor) {
    params
        .get(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .set(value)
        .unwrap();
}

#[test]
fn atc_loss_and_gradients_match_rlpyt() {
    // reference.py `atc`: rlpyt's ContrastModel (residual anchor MLP, W as a torch Linear) and
    // CrossEntropyLoss over the batch. B = 5, latent 4, hidden 6.
    let fx = &fixture()["atc"];
    let inp = &fx["inputs"];
    let (z0, k) = (tensor(&inp["z"]), tensor(&inp["k"]));
    let mut params = Params::new(&Device::Cpu);
    let cfg = AtcConfig {
        hidden_dim: 6,
        ..AtcConfig::default()
    };
    let head = AtcHead::new(4, &cfg, &mut params, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
    set(&params, "atc_predictor.0.weight", &tensor(&inp["f0w"]));
    set(&params, "atc_predictor.0.bias", &tensor(&inp["f0b"]));
    set(&params, "atc_predictor.2.weight", &tensor(&inp["f2w"]));
    set(&params, "atc_predictor.2.bias", &tensor(&inp["f2b"]));
    // rlpyt's logits are c·Wᵀ·kᵀ; atc_W is used as c·W·kᵀ.
    set(
        &params,
        "atc_W",
        &tensor(&inp["w_rlpyt"]).t().unwrap().contiguous().unwrap(),
    );
    let z = Var::from_tensor(&z0).unwrap();
    let loss = head.loss(z.as_tensor(), &k).unwrap();
    assert_close(
        &[loss.to_scalar::<f32>().unwrap() as f64],
        &[fx["loss"].as_f64().unwrap()],
        REF_TOL,
        "atc loss",
    );
    let grads = loss.backward().unwrap();
    let g = |t: &Tensor| values(grads.get(t).expect("a gradient"));
    let exp = |name: &str| values(&tensor(&fx["grads"][name]));
    let p = |name: &str| params.get(name).unwrap().as_tensor().clone();
    assert_close(&g(z.as_tensor()), &exp("z"), REF_TOL, "d/dz (anchor)");
    assert_close(&g(&p("atc_predictor.0.weight")), &exp("f0w"), REF_TOL, "d/d fc0.weight");
    assert_close(&g(&p("atc_predictor.0.bias")), &exp("f0b"), REF_TOL, "d/d fc0.bias");
    assert_close(&g(&p("atc_predictor.2.weight")), &exp("f2w"), REF_TOL, "d/d fc2.weight");
    assert_close(&g(&p("atc_predictor.2.bias")), &exp("f2b"), REF_TOL, "d/d fc2.bias");
    let dw = grads.get(&p("atc_W")).unwrap().t().unwrap();
    assert_close(&values(&dw), &exp("w"), REF_TOL, "d/dW (transposed to rlpyt's)");
    // The positive comes from the target: no gradient flows into it.
    let kv = Var::from_tensor(&k).unwrap();
    let grads = head.loss(z.as_tensor(), kv.as_tensor()).unwrap().backward().unwrap();
    assert!(grads.get(kv.as_tensor()).is_none());
}

/// CURL's head from the fixture's inputs: W and, with `layer_norm`, both LayerNorms.
fn curl_head(inp: &Value, layer_norm: bool) -> (CurlHead, Params, Params) {
    let (mut params, mut target) = (Params::new(&Device::Cpu), Params::new(&Device::Cpu));
    let cfg = CurlConfig {
        layer_norm,
        ..CurlConfig::default()
    };
    let mut head = CurlHead::new(4, &cfg, &mut params, &mut ChaCha8Rng::seed_from_u64(0)).unwrap();
    head.attach_target(&mut target).unwrap();
    set(&params, "curl_W", &tensor(&inp["w"]));
    if layer_norm {
        set(&params, CurlLayerNorm::WEIGHT, &tensor(&inp["ln_weight"]));
        set(&params, CurlLayerNorm::BIAS, &tensor(&inp["ln_bias"]));
        set(&target, CurlLayerNorm::WEIGHT, &tensor(&inp["target_ln_weight"]));
        set(&target, CurlLayerNorm::BIAS, &tensor(&inp["target_ln_bias"]));
    } else {
        assert!(target.is_empty());
    }
    (head, params, target)
}

/// Our CURL loss on the fixture case `key` (reference.py), checked against its loss and its
/// gradients for q and every parameter named in `grads`; returns the gradients and the
/// target's parameters for further checks.
fn check_curl(key: &str, layer_norm: bool, grads_of: &[(&str, &str)]) -> (candle_core::backprop::GradStore, Params) {
    let fx = &fixture()[key];
    let inp = &fx["inputs"];
    let (head, params, target) = curl_head(inp, layer_norm);
    let q = Var::from_tensor(&tensor(&inp["q"])).unwrap();
    let loss = head.loss(q.as_tensor(), &tensor(&inp["k"])).unwrap();
    assert_close(
        &[loss.to_scalar::<f32>().unwrap() as f64],
        &[fx["loss"].as_f64().unwrap()],
        REF_TOL,
        &format!("{key} loss"),
    );
    let grads = loss.backward().unwrap();
    let exp = |name: &str| values(&tensor(&fx["grads"][name]));
    assert_close(&values(grads.get(q.as_tensor()).unwrap()), &exp("q"), REF_TOL, "d/dq");
    for (param, name) in grads_of {
        let p = params.get(param).unwrap().as_tensor().clone();
        assert_close(
            &values(grads.get(&p).unwrap()),
            &exp(name),
            REF_TOL,
            &format!("d/d{param}"),
        );
    }
    (grads, target)
}

#[test]
fn curl_loss_and_gradients_match_curl_sac() {
    // reference.py `curl`: CURL.compute_logits (W·z_posᵀ, row max subtracted) and
    // CrossEntropyLoss over the batch; our default (no LayerNorm). B = 5, latent 4.
    check_curl("curl", false, &[("curl_W", "w")]);
}

#[test]
fn curl_with_upstream_layer_norm_matches_curl_sac() {
    // objective.curl.layer_norm = true: PixelEncoder's LayerNorm on both projections, the key's
    // with the target's own γ', β' (reference.py `curl_ln`).
    let (grads, target) = check_curl(
        "curl_layer_norm",
        true,
        &[
            ("curl_W", "w"),
            (CurlLayerNorm::WEIGHT, "ln_weight"),
            (CurlLayerNorm::BIAS, "ln_bias"),
        ],
    );
    // The key side's LayerNorm is the target's: no gradient.
    for (name, var) in target.iter() {
        assert!(grads.get(var.as_tensor()).is_none(), "{name}");
    }
}

// ---- the update's statistics on a GPU: candle's ops in f64, against the host's f64 code

/// Uniform(−scale, scale) f32 values from `seed`.
fn uniform(n: usize, scale: f32, seed: u64) -> Vec<f32> {
    use rand::Rng;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

#[test]
fn sinkhorn_and_its_entropy_on_the_device_match_the_host() {
    use lfs::objectives::sinkhorn::{assignment_entropy_on_device, sinkhorn_on_device, sinkhorn_on_host};
    let mut scores = uniform(64 * 16, 1.0, 3);
    // Prototype 5 scores so low that exp underflows to 0 for every sample: its row of Q is all
    // zero and its row factor infinite, which both replace by the largest finite factor.
    (0..64).for_each(|i| scores[i * 16 + 5] = -1e4);
    for (scores, temperature, iters) in [
        (uniform(64 * 16, 1.0, 2), 0.1, 3),
        (scores, 0.1, 3),
        (uniform(64 * 16, 1.0, 4), 0.5, 10),
    ] {
        let s = Tensor::from_vec(scores, (64, 16), &Device::Cpu).unwrap();
        let host = sinkhorn_on_host(&s, temperature, iters).unwrap();
        let device = sinkhorn_on_device(&s, temperature, iters).unwrap();
        assert_eq!(device.dims(), [64, 16]);
        let (h, d) = (values(&host), values(&device));
        let worst = h.iter().zip(&d).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-7, "sinkhorn: worst difference {worst}");
        let entropy = assignment_entropy_on_device(&host).unwrap().to_scalar::<f64>().unwrap();
        let expected = assignment_entropy(&host).unwrap();
        assert!(
            (entropy - expected).abs() < 1e-12 * expected.abs().max(1.0),
            "{entropy} vs {expected}"
        );
    }
}

#[test]
fn spread_sums_on_the_device_match_the_host() {
    use lfs::objectives::spread::{device_sums, host_sums, Spread};
    let mut z = uniform(40 * 12, 2.0, 5);
    z[7 * 12..8 * 12].fill(0.0); // a row of norm 0 counts in the mean norm, not in the cosines
    let z = Tensor::from_vec(z, (40, 12), &Device::Cpu).unwrap();
    let host = host_sums(&z).unwrap();
    let device: Vec<f64> = device_sums(&z).unwrap().to_vec1().unwrap();
    assert_eq!(host[1], 39.0);
    for (h, d) in host.iter().zip(&device) {
        assert!((h - d).abs() <= 1e-12 * h.abs().max(1.0), "{host:?} vs {device:?}");
    }
    let (a, b) = (
        Spread::from_sums(host, 40),
        Spread::from_sums(device.try_into().unwrap(), 40),
    );
    assert!(
        (a.mean_pairwise_cosine - b.mean_pairwise_cosine).abs() < 1e-12,
        "{a:?} vs {b:?}"
    );
}
