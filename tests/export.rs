//! `lfs export`: PyTorch state_dict names, metadata, file mode, the example file, the
//! numpy forward pass (python/load_encoder_numpy.py, always), and the PyTorch loader
//! (python/load_encoder_torch.py) when a Python with torch is available.

use std::path::PathBuf;

use candle_core::DType;
use lfs::nn::checkpoint::load;
use lfs::nn::encoder_file::example_path;
use lfs::pretrain::export::{export, ExportContents};
use lfs::pretrain::run::CHECKPOINT_FILE;

use crate::pretrain::{one_update_run, two_task_data};

/// max |a − b| over all elements.
fn max_abs_diff(a: &candle_core::Tensor, b: &candle_core::Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

fn exported() -> (tempfile::TempDir, PathBuf) {
    let (eps, info) = two_task_data();
    let dir = one_update_run(&eps, &info);
    let out = dir.path().join("encoder.safetensors");
    let summary = export(
        &dir.path().join(CHECKPOINT_FILE),
        &out,
        ExportContents::EncoderAndProjector,
    )
    .unwrap();
    assert_eq!((summary.step, summary.method.as_str()), (1, "lfs"));
    (dir, out)
}

#[test]
fn export_writes_pytorch_names_metadata_and_an_example() {
    let (dir, out) = exported();
    let file = load(&out).unwrap();
    let mut names: Vec<&str> = file.tensors.keys().map(String::as_str).collect();
    names.sort();
    let mut expect: Vec<String> = [0, 2, 4, 6]
        .iter()
        .flat_map(|i| {
            [
                format!("encoder.convnet.{i}.bias"),
                format!("encoder.convnet.{i}.weight"),
            ]
        })
        .collect();
    expect.extend(["projector.bias".to_string(), "projector.weight".to_string()]);
    expect.sort();
    assert_eq!(names, expect.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(file.tensors["projector.weight"].dims(), &[128, 39200]);
    assert_eq!(file.metadata["format"], "pt");
    let arch: serde_json::Value = serde_json::from_str(&file.metadata["lfs.architecture"]).unwrap();
    assert_eq!(arch["repr_dim"], 39200);
    assert!(file.metadata["lfs.input"].contains("oldest first") && file.metadata["lfs.input"].contains("255"));
    assert!(file.metadata["lfs.datasets"].contains("test-id"));
    // The exported weights are the checkpoint's online ones.
    let ck = load(&dir.path().join(CHECKPOINT_FILE)).unwrap();
    let a = ck.tensors["online.encoder.convnet.0.weight"]
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let b = file.tensors["encoder.convnet.0.weight"]
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(a, b);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o644);
    }
    // The example: uint8 input and the features the Rust encoder computes.
    let ex = load(&example_path(&out)).unwrap();
    assert_eq!(ex.tensors["obs"].dtype(), DType::U8);
    assert_eq!(ex.tensors["obs"].dims(), &[4, 9, 84, 84]);
    assert_eq!(ex.tensors["features"].dims(), &[4, 39200]);
    assert_eq!(ex.tensors["projection"].dims(), &[4, 128]);
    // Recompute the projection from the exported tensors by hand: z = W·h + b.
    let h = &ex.tensors["features"];
    let z = h
        .matmul(&file.tensors["projector.weight"].t().unwrap())
        .unwrap()
        .broadcast_add(&file.tensors["projector.bias"])
        .unwrap();
    let diff = max_abs_diff(&z, &ex.tensors["projection"]);
    assert!(diff < 1e-4, "{diff}");
}

#[test]
fn export_rejects_a_file_that_is_not_a_checkpoint() {
    let (dir, out) = exported();
    let err = export(
        &out,
        &dir.path().join("again.safetensors"),
        ExportContents::EncoderAndProjector,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("encoder.safetensors") && err.contains("not an `lfs pretrain` checkpoint"),
        "{err}"
    );
    let err = export(
        &dir.path().join("nope.safetensors"),
        &dir.path().join("x.safetensors"),
        ExportContents::EncoderOnly,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("nope.safetensors"), "{err}");
}

/// The python with torch: $LFS_TORCH_PYTHON, else .venv-bench/bin/python (the benchmarks'), else
/// the project venv's (`make setup-torch` puts torch there; CI does).
fn torch_python() -> Option<PathBuf> {
    let candidates = match std::env::var_os("LFS_TORCH_PYTHON") {
        Some(python) => vec![PathBuf::from(python)],
        None => vec![
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-bench/bin/python"),
            lfs::env::default_python(),
        ],
    };
    candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import torch"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn pytorch_loader_reproduces_the_rust_features() {
    let Some(python) = torch_python() else {
        return crate::common::missing(
            "a Python with torch",
            "`make setup-torch` installs it into .venv (or set LFS_TORCH_PYTHON)",
        );
    };
    let (_dir, out) = exported();
    let (ok, said) = run_loader(&python, "python/load_encoder_torch.py", &out);
    assert!(ok && said.contains("OK"), "{said}");
}

/// Runs a loader script of eval/ on an export: (exit status success, stdout then stderr).
fn run_loader(python: &std::path::Path, script: &str, export: &std::path::Path) -> (bool, String) {
    let o = std::process::Command::new(python)
        .arg(crate::common::repo().join(script))
        .arg(export)
        .output()
        .unwrap();
    (o.status.success(), crate::common::output_text(&o))
}

#[test]
fn a_numpy_forward_pass_reproduces_the_rust_features() {
    // Issue 15: the one independent check of an export that CI always runs (no torch there):
    // python/load_encoder_numpy.py, a float64 numpy forward pass written from docs/pytorch.md's
    // module, must reproduce the example file's features and projections.
    let (dir, out) = exported();
    let numpy = |out: &std::path::Path| run_loader(&crate::common::python(), "python/load_encoder_numpy.py", out);
    let (ok, said) = numpy(&out);
    assert!(ok && said.contains("OK"), "{said}");
    // It can fail: one layer's kernels flipped top to bottom is caught.
    let mut file = load(&out).unwrap();
    let w = file.tensors["encoder.convnet.2.weight"].clone();
    let swapped = w.flip(&[2]).unwrap(); // kernel rows reversed
    file.tensors.insert("encoder.convnet.2.weight".into(), swapped);
    lfs::nn::checkpoint::save_atomic(&out, &file.tensors, &file.metadata).unwrap();
    let (ok, said) = numpy(&out);
    assert!(!ok && said.contains("MISMATCH"), "{said}");
    // A training checkpoint is refused by name, not with a KeyError.
    let checkpoint = dir.path().join(CHECKPOINT_FILE);
    let (ok, said) = numpy(&checkpoint);
    assert!(!ok && said.contains("not an encoder written by `lfs export`"), "{said}");
    assert!(said.contains(CHECKPOINT_FILE) && !said.contains("KeyError"), "{said}");
}

#[test]
fn an_exported_encoder_loads_as_constants_in_one_call() {
    // What downstream RL does with an export: its features must be the ones `lfs export`
    // wrote beside it (the example file, computed by the exporting run's own encoder), and
    // none of its tensors may be a trainable variable.
    let (dir, out) = exported();
    let frozen = lfs::nn::encoder_file::load_frozen_encoder(&out).unwrap();
    assert_eq!(frozen.config.num_layers, 4);
    assert_eq!(frozen.encoder.repr_dim(), 39200);
    assert_eq!(frozen.metadata["lfs.method"], "lfs");
    assert!(frozen.encoder.param_tensors().iter().all(|t| !t.is_variable()));
    let example = load(&example_path(&out)).unwrap();
    let obs = example.tensors["obs"].to_dtype(DType::F32).unwrap();
    let h = frozen.encoder.forward(&obs).unwrap();
    assert_eq!(max_abs_diff(&h, &example.tensors["features"]), 0.0);
    // A training checkpoint is not an export; a tensor of another shape is named.
    let err = lfs::nn::encoder_file::load_frozen_encoder(&dir.path().join(CHECKPOINT_FILE))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an encoder written by `lfs export`"), "{err}");
    let mut tensors = load(&out).unwrap().tensors;
    tensors.insert(
        "encoder.convnet.2.weight".into(),
        candle_core::Tensor::zeros((32, 16, 3, 3), DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    let bad = dir.path().join("bad.safetensors");
    lfs::nn::checkpoint::save_atomic(&bad, &tensors, &load(&out).unwrap().metadata).unwrap();
    let err = lfs::nn::encoder_file::load_frozen_encoder(&bad)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("encoder.convnet.2.weight") && err.contains("[32, 32, 3, 3]"),
        "{err}"
    );
}

#[test]
fn an_encoder_only_export_holds_the_same_encoder_without_the_projector() {
    // `--encoder-only`: the conv tensors of the full export, bit for bit, and no projector, in
    // a file ~1/150 of the size; downstream RL loads it the same way and computes the same
    // features; the numpy and PyTorch loaders accept it.
    let (dir, full) = exported();
    let small = dir.path().join("encoder-only.safetensors");
    let summary = export(&dir.path().join(CHECKPOINT_FILE), &small, ExportContents::EncoderOnly).unwrap();
    assert_eq!(summary.contents, ExportContents::EncoderOnly);
    let (a, b) = (load(&full).unwrap(), load(&small).unwrap());
    let mut names: Vec<&String> = b.tensors.keys().collect();
    names.sort();
    let mut conv: Vec<&String> = a.tensors.keys().filter(|n| n.starts_with("encoder.")).collect();
    conv.sort();
    assert_eq!(names, conv);
    assert_eq!(names.len(), 8);
    for name in names {
        assert_eq!(max_abs_diff(&a.tensors[name], &b.tensors[name]), 0.0, "{name}");
    }
    let arch: serde_json::Value = serde_json::from_str(&b.metadata["lfs.architecture"]).unwrap();
    assert!(arch["projector"].is_null(), "{arch}");
    assert_eq!(b.metadata["lfs.config"], a.metadata["lfs.config"]);
    let (full_len, small_len) = (
        std::fs::metadata(&full).unwrap().len(),
        std::fs::metadata(&small).unwrap().len(),
    );
    assert!(small_len * 100 < full_len, "{small_len} bytes against {full_len}");

    let example = load(&example_path(&small)).unwrap();
    assert!(!example.tensors.contains_key("projection"));
    let obs = example.tensors["obs"].to_dtype(DType::F32).unwrap();
    let h = lfs::nn::encoder_file::load_frozen_encoder(&small)
        .unwrap()
        .encoder
        .forward(&obs)
        .unwrap();
    let h_full = lfs::nn::encoder_file::load_frozen_encoder(&full)
        .unwrap()
        .encoder
        .forward(&obs)
        .unwrap();
    assert_eq!(max_abs_diff(&h, &h_full), 0.0);
    assert_eq!(max_abs_diff(&h, &example.tensors["features"]), 0.0);

    let (ok, said) = run_loader(&crate::common::python(), "python/load_encoder_numpy.py", &small);
    assert!(ok && said.contains("no projector"), "{said}");
    if let Some(python) = torch_python() {
        let (ok, said) = run_loader(&python, "python/load_encoder_torch.py", &small);
        assert!(ok && said.contains("no projector"), "{said}");
    }
}
