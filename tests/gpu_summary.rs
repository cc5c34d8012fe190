//! `eval/gpu/session_summary.py`, the GPU session's summary, over the committed dry runs of its
//! `pool` and `drqv2-seeds` stages (`results/gpu-session-dry-2026-11-27b/`), and the rounds'
//! DrQ-v2 pairing on a log made here: the same-round ratios and the returns it reports against
//! what the log's own lines say, recomputed here; and the session's table of stages against the
//! README's list. (The host-vs-device stages, `cache` among them, are gone from the session and
//! their tables from the summary: a GPU keeps those on the device.)

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{repo, temp_dir};

const DRY: &str = "results/gpu-session-dry-2026-11-27b";

/// The lines of `log` under each `== KIND key=value…` marker: (kind, keys, lines).
fn sections(log: &Path) -> Vec<(String, BTreeMap<String, String>, Vec<String>)> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("== ") {
            let mut words = rest.split_whitespace();
            let kind = words.next().unwrap_or_default().to_string();
            let keys = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            out.push((kind, keys, Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.2.push(line.to_string());
        }
    }
    out
}

/// The summary's JSON for `log`.
fn summary(log: &Path) -> serde_json::Value {
    let dir = temp_dir("gpu-summary");
    let json = dir.join("summary.json");
    let out = Command::new("python3")
        .arg(repo().join("eval/gpu/session_summary.py"))
        .arg(log)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn the_pool_ratios_are_same_round_ratios_of_the_logged_windows() {
    let log = repo().join(DRY).join("pool/log.txt");
    // (round, arm) -> (frames, pace) from the JSON line each window wrote.
    let mut windows = BTreeMap::new();
    for (kind, _, lines) in sections(&log) {
        if kind != "pool" {
            continue;
        }
        for line in lines.iter().filter(|l| l.starts_with('{')) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let key = (v["round"].as_u64().unwrap(), v["pool"].as_str().unwrap().to_string());
            windows.insert(key, (v["frames"].as_f64().unwrap(), v["pace_fps"].as_f64().unwrap()));
        }
    }
    let rounds: Vec<u64> = windows
        .keys()
        .map(|(r, _)| *r)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(rounds, [1, 2, 3], "{windows:?}");
    let ratio = |r: u64, which: fn(&(f64, f64)) -> f64| {
        which(&windows[&(r, "default".to_string())]) / which(&windows[&(r, "j1".to_string())])
    };
    let expected_frames: Vec<f64> = rounds.iter().map(|&r| ratio(r, |w| w.0)).collect();
    let expected_pace: Vec<f64> = rounds.iter().map(|&r| ratio(r, |w| w.1)).collect();
    let got = summary(&log);
    let got_list = |key: &str| -> Vec<f64> {
        got["pool"][key]
            .as_array()
            .unwrap_or_else(|| panic!("no pool.{key} in {got}"))
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    for (key, expected) in [("frames_ratio", expected_frames), ("pace_ratio", expected_pace)] {
        let got = got_list(key);
        assert_eq!(got.len(), expected.len(), "{key}");
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() < 1e-9, "{key}: {got:?} against {expected:?}");
        }
    }
}

#[test]
fn the_drqv2_seeds_returns_are_the_logged_evaluations() {
    let log = repo().join(DRY).join("drqv2-seeds/log.txt");
    let mut expected: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (kind, keys, lines) in sections(&log) {
        let Some(name) = keys
            .get("name")
            .filter(|n| kind == "eval.csv" && n.starts_with("drqv2-seeds-"))
        else {
            continue;
        };
        let mut rows = lines.iter().filter(|l| !l.trim().is_empty());
        let Some(header) = rows.next() else {
            expected.insert(name.clone(), BTreeMap::new());
            continue;
        };
        let cols: Vec<&str> = header.split(',').collect();
        let at = |c: &str| cols.iter().position(|x| *x == c).unwrap();
        let (frame, reward) = (at("frame"), at("episode_reward"));
        let evals = rows
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let frame = f[frame].parse::<f64>().unwrap() as u64;
                (frame.to_string(), f[reward].parse::<f64>().unwrap())
            })
            .collect();
        expected.insert(name.clone(), evals);
    }
    // lfs's run evaluated at 0 and at its end; upstream's was stopped after its first.
    assert_eq!(expected["drqv2-seeds-lfs-s1"].len(), 2, "{expected:?}");
    assert_eq!(expected["drqv2-seeds-up-s1"].len(), 1, "{expected:?}");
    let got = summary(&log);
    let got: BTreeMap<String, BTreeMap<String, f64>> =
        serde_json::from_value(got["drqv2_seeds"].clone()).unwrap_or_else(|e| panic!("{e}: {got}"));
    assert_eq!(got.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
    for (name, evals) in &expected {
        assert_eq!(got[name].len(), evals.len(), "{name}");
        for (frame, r) in evals {
            assert!(
                (got[name][frame] - r).abs() < 1e-9,
                "{name} at {frame}: {} against {r}",
                got[name][frame]
            );
        }
    }
}

/// The rounds' DrQ-v2 update (device_check's "drqv2 update" bench beside strong_torch.py's
/// "drqv2" suite) paired round by round, as the LFS and SAC benches are: each round's ratio
/// is that round's lfs seconds over PyTorch's median, the summary's ratio the medians' ratio.
/// A session now has the one lfs arm; an older log's second one (the cuDNN build, `lfs-cudnn`,
/// in `results/gpu-h200-2026-11-2x/`) is still read, under its own key.
#[test]
fn the_rounds_pair_the_drqv2_update_with_pytorchs_in_each_round() {
    let dir = temp_dir("gpu-summary-drqv2");
    let log = dir.join("log.txt");
    let torch = |median: f64| {
        format!(
            r#"{{"impl": "torch-strong", "suite": "drqv2", "batch": 256, "precision": "fp32", "summary": true, "updates": 10, "warmup": 5, "median_s": {median}, "min_s": {median}, "max_s": {median}, "q1_s": {median}, "q3_s": {median}}}"#
        )
    };
    let lfs = |seconds: f64| format!(r#"{{"bench":"drqv2 update","batch":256,"seconds":{seconds},"updates":10}}"#);
    let text = [
        "== session device=cuda stages=[rounds] t=x at=0s".to_string(),
        "== bench arm=lfs round=1 precision=fp32 t=x at=1s".into(),
        lfs(0.007),
        // an older log's second lfs arm, in the same rounds
        "== bench arm=lfs-cudnn round=1 precision=fp32 t=x at=1s".into(),
        lfs(0.008),
        "== bench arm=torch-strong round=1 precision=fp32 t=x at=2s".into(),
        torch(0.009),
        "== bench arm=torch-strong round=2 precision=fp32 t=x at=3s".into(),
        torch(0.010),
        "== bench arm=lfs-cudnn round=2 precision=fp32 t=x at=3s".into(),
        lfs(0.0085),
        "== bench arm=lfs round=2 precision=fp32 t=x at=4s".into(),
        lfs(0.006),
        "== done t=x at=5s".into(),
    ]
    .join("\n");
    std::fs::write(&log, text).unwrap();
    let rounds = &summary(&log)["rounds"]["fp32"]["drqv2/256"];
    let ratios: Vec<f64> = rounds["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(ratios.len(), 2, "{rounds}");
    for (got, want) in ratios.iter().zip([0.007 / 0.009, 0.006 / 0.010]) {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // statistics.median of two: their mean, on both sides
    let want = 0.0065 / 0.0095;
    assert!(
        (rounds["ratio_of_medians"].as_f64().unwrap() - want).abs() < 1e-12,
        "{rounds}"
    );
    // the older log's second arm against the same rounds' PyTorch, under its own key
    let alt = &summary(&log)["rounds"]["fp32"]["lfs-cudnn:drqv2/256"];
    let want = 0.00825 / 0.0095;
    assert!(
        (alt["ratio_of_medians"].as_f64().unwrap() - want).abs() < 1e-12,
        "{alt}"
    );
}

#[test]
fn the_training_batch_check_is_listed_with_its_own_forward_note() {
    // device_check's "encoder at a training batch" on a GPU: its note (the gradients against the
    // CPU's own forward) printed before its check line; the summary pairs them per section.
    let dir = temp_dir("gpu-summary-trainbatch");
    let log = dir.join("log.txt");
    let note = |batch: usize, rel: f64| {
        format!(
            r#"{{"batch":{batch},"note":"gradients against the reference's own forward (ReLU masks may differ)","rel_err":{rel},"worst":"encoder.convnet.2.weight"}}"#
        )
    };
    let check = |rel: f64, ok: bool| {
        format!(
            r#"{{"check":"encoder at a training batch","device":"cuda:0","worst":"encoder.convnet.0.bias","rel_err":{rel},"limit":1e-4,"ok":{ok}}}"#
        )
    };
    let text = [
        "== session device=cuda stages=[trainbatch] t=x at=0s".to_string(),
        "== trainbatch arm=lfs batch=64 t=x at=1s".into(),
        note(64, 1.0e-6),
        check(2.0e-6, true),
        // parity's run: the small checks' notes come first
        "== parity t=x at=2s".into(),
        note(6, 1.0e-6),
        r#"{"check":"encoder offset=0","device":"cuda:0","worst":"h","rel_err":1e-7,"limit":1e-4,"ok":true}"#.into(),
        note(256, 4.08e-4),
        check(3.0e-6, true),
        "== done t=x at=3s".into(),
    ]
    .join("\n");
    std::fs::write(&log, text).unwrap();
    let rows = summary(&log)["training_batch"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1]["batch"], 256);
    assert_eq!(rows[1]["own_forward"].as_f64().unwrap(), 4.08e-4);
    assert_eq!(rows[1]["check"].as_f64().unwrap(), 3.0e-6);
    assert_eq!(rows[1]["ok"], true);
}

/// `eval/gpu/gpu-session.sh`'s stages are one table (`STAGE_TABLE`, printed by `--stages`):
/// `eval/gpu/README.md` numbers the same stages 1..N in the table's order, and names the
/// table's default list.
#[test]
fn the_readme_lists_the_session_stages_as_the_scripts_table() {
    let out = Command::new("bash")
        .arg(repo().join("eval/gpu/gpu-session.sh"))
        .arg("--stages")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<String>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    let table: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert!(table.len() > 10, "{table:?}");
    let default: Vec<&str> = rows.iter().filter(|r| r[1] == "yes").map(|r| r[0].as_str()).collect();
    let readme = std::fs::read_to_string(repo().join("eval/gpu/README.md")).unwrap();
    let start = readme.find("## The session").unwrap();
    let end = start + readme[start..].find("Expected duration").unwrap();
    let section = &readme[start..end];
    // "N. `name`" at a line's start
    let listed: Vec<(usize, &str)> = section
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.split_once(". `")?;
            Some((n.parse::<usize>().ok()?, rest.split('`').next()?))
        })
        .collect();
    let numbers: Vec<usize> = listed.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, (1..=listed.len()).collect::<Vec<_>>(), "{listed:?}");
    let names: Vec<&str> = listed.iter().map(|(_, name)| *name).collect();
    assert_eq!(names, table);
    let words = section.split_whitespace().collect::<Vec<_>>().join(" ");
    let quoted = format!("The default list is `{}`", default.join(" "));
    assert!(words.contains(&quoted), "the README's section does not say {quoted:?}");
}
