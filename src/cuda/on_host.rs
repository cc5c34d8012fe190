//! lfs's own CUDA kernels compiled for the host (tests only): the kernel source with CUDA's
//! qualifiers and thread indices shimmed so that one thread strides over everything (every lfs
//! kernel is a grid-stride loop), and a `main` that runs one kernel on raw bytes from stdin and
//! writes its output to stdout. It lets the CPU-only build check what the NVRTC-compiled kernels
//! compute (their indexing, argument order and formulas) against the CPU's code, before a GPU
//! ever runs them. Compiled without contraction into fused multiply-adds, as NVRTC's
//! `--fmad=false`.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// What stands in for CUDA around the kernels: one block of one thread.
const SHIM: &str = r#"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string>
#include <vector>
struct Dim { unsigned int x; };
static const Dim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
#define __global__
#define __device__
template <typename T> static std::vector<T> in(size_t n) {
    std::vector<T> v(n);
    if (fread(v.data(), sizeof(T), n, stdin) != n) { fprintf(stderr, "short input\n"); exit(2); }
    return v;
}
template <typename T> static void out(const std::vector<T>& v) { fwrite(v.data(), sizeof(T), v.size(), stdout); }
"#;

/// The program of `source` and `main` (a C++ `int main(int argc, char** argv)` that may call
/// `in<T>(n)` and `out(vector)`), built once per `tag` and test process with the host's C++
/// compiler (`$CXX`, else `c++`).
pub(crate) fn build(tag: &str, source: &str, main: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap();
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(exe) = built.get(tag) {
        return exe.clone();
    }
    let dir = std::env::temp_dir().join(format!("lfs-cuda-on-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cpp, exe) = (dir.join(format!("{tag}.cpp")), dir.join(tag));
    std::fs::write(&cpp, format!("{SHIM}\n{source}\n{main}\n")).unwrap();
    let status = Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
        .args(["-O1", "-ffp-contract=off", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .status()
        .expect("a C++ compiler (build-essential's c++, or $CXX) for the CUDA kernels' host test");
    assert!(
        status.success(),
        "{tag}: the kernels do not compile for the host ({cpp:?})"
    );
    built.insert(tag.into(), exe.clone());
    exe
}

/// Runs `exe` with `args`, `input` on its stdin; its stdout.
pub(crate) fn run(exe: &PathBuf, args: &[String], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{exe:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
