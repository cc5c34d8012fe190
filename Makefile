# lfs: thin wrappers over the `lfs` subcommands. Everything builds in one cargo profile
# (release), so tests, the default job and benchmarks share one compilation.
#
#   make deps      system packages (apt-get: FFmpeg libraries, clang, Mesa EGL, python3-venv)
#   make           set up, build, and run the default job: ingest the embedded sample videos,
#                  inspect them, pre-train with pipelines/tiny.toml and export, into runs/tiny/
#   make test      the whole test suite, as CI runs it (make test-fast: a contributor's loop)
#   make bench     every benchmark (slow; results go to BENCHMARKS.md by hand)
#   make help      the targets a user runs, one line each (the `## ` notes below)
# Targets that run lfs take SET='--set key=value ...' to override their config (pretrain, eval,
# train); tests/readme.rs runs every target `make help` lists, as written, at tiny budgets.
.DEFAULT_GOAL := all
.PHONY: help all deps build setup setup-torch sample test test-fast lint bench bench-ingest pretrain export bench-pretrain
.PHONY: collect bench-env bench-encoder bench-batching bench-sac bench-e2e eval train suite suite-tiny bench-dynamics
.PHONY: check-lerobot bench-dynamics-reference study-mini study-2 study-3 study-4 replay-ablation upstream-drqv2 probe-set probe bench-drqv2 bench-dynamics-drqv2
.PHONY: bench-dynamics-drqv2-reference bench-dynamics-taco bench-dynamics-taco-reference build-cuda
.PHONY: bench-dynamics-explore bench-explore
.PHONY: gpu-pack gpu-check gpu-e2e gpu-pack-drqv2 gpu-session gpu-session-dry

CARGO ?= cargo
LFS := target/release/lfs

# Python used by the dm_control worker (python/dmc_worker.py); `lfs` finds it at .venv/bin/python
# unless LFS_PYTHON says otherwise.
VENV := .venv
PYTHON := $(VENV)/bin/python
# Headless MuJoCo rendering: Mesa's software EGL works without a GPU.
export MUJOCO_GL ?= egl

# Debian 12 packages: FFmpeg's libraries and headers (ffmpeg-next), clang/libclang (bindgen),
# the ffmpeg CLI (test fixtures, reference decoder), Mesa's EGL (headless MuJoCo), venv, and
# SLURM + munge (the suite's test starts a throwaway one-node cluster: eval/slurm/run_suite.sh).
APT_PACKAGES := build-essential pkg-config clang libclang-dev ffmpeg libavcodec-dev \
	libavformat-dev libavutil-dev libswscale-dev libavfilter-dev libavdevice-dev \
	libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6 libglfw3 python3-venv python3-pip curl \
	slurm-wlm munge
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

help:
	@echo "make [TARGET] [VAR=value ...]; the user-facing targets (Makefile comments say more):"
	@awk -F ':.*## ' '/^[a-z0-9-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))

all: setup pretrain ## the default job: ingest the embedded sample, pre-train (tiny), export, contact sheet
	$(LFS) inspect $(RUN_DIR)/dataset --contact-sheet $(RUN_DIR)/contact-sheet.png
	@echo "default job done: $(RUN_DIR)/ (encoder.safetensors, contact-sheet.png, metrics.jsonl)"

deps: ## system packages (apt-get) and Rust via rustup if cargo is missing
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES)
	@command -v cargo >/dev/null || { echo "installing Rust with rustup"; \
		curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy -c rustfmt; \
		echo 'open a new shell (or run: . "$$HOME/.cargo/env") so cargo is on PATH'; }
	@# make lint needs rustfmt and clippy on an existing toolchain too.
	@! command -v rustup >/dev/null || rustup component add clippy rustfmt 2>&1 | grep -v "is up to date" || true

build: ## cargo build --release
	$(CARGO) build --release --locked

# lfs with candle's CUDA backend and cuDNN (cargo feature cuda): NVIDIA's CUDA 13.0 and cuDNN 9
# wheels from PyPI into .venv-cuda, one binary into target-cuda/release/lfs (not target/), the
# libraries it needs beside it in target-cuda/release/cuda-libs/ (found through its RPATH). No
# GPU needed to build; not in CI (tests/readme.rs skips it). CUDA_COMPUTE_CAP=90 (H100, H200)
# unless set. docs/guide/gpu.md.
build-cuda: ## lfs for NVIDIA GPUs (driver >= 580) into target-cuda/release/lfs (CUDA wheels, ~30 min)
	eval/gpu/build-cuda.sh

# On a machine with a GPU: the CUDA build's parity checks (against the CPU kernels), resume
# across devices, and timings beside PyTorch's on the same GPU, from the archive gpu-pack makes
# of make build-cuda's binaries (.gpu-carry/, under the device tool's 64 MiB carry).
# gpu-pack also packs the CUDA lfs, FFmpeg stand-ins, the EGL dispatcher and the worker's Python
# packages for gpu-e2e (lfs eval / lfs train end to end on the lent machine).
gpu-pack:
	eval/gpu/pack.sh
	eval/gpu/pack-e2e.sh
	eval/gpu/kprof/build.sh
gpu-check: ## on a GPU machine: the CUDA build's parity checks and timings against PyTorch
	eval/gpu/gpu-check.sh
gpu-e2e: ## on a GPU machine: mini agent steps/s of lfs eval and lfs train, CUDA and CPU
	eval/gpu/gpu-e2e.sh
# The GPU session script (eval/gpu/README.md): lfs's CUDA build against the strong PyTorch twins
# in ABBA rounds, lfs's split, end-to-end agent steps/s, in one device-tool command (~8 min;
# carry .gpu-carry). gpu-pack-drqv2 fetches upstream DrQ-v2 for its optional drqv2 stage;
# gpu-session-dry runs the session on the CPU at tiny sizes (DRY_PYTHON: a python with torch).
gpu-pack-drqv2:
	eval/gpu/pack-drqv2.sh
gpu-session:
	eval/gpu/gpu-session.sh
gpu-session-dry:
	eval/gpu/gpu-session-dry.sh

# Creates .venv with the pinned worker requirements and the dataset readers the tests use.
# The stamp file makes a second run instant; it is refreshed when a requirements file changes.
setup: $(VENV)/.stamp ## the Python venv .venv (pinned mujoco, dm-control, Parquet readers)
$(VENV)/.stamp: python/requirements.txt python/requirements-data.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r python/requirements.txt -r python/requirements-data.txt
	touch $@

# torch and safetensors in .venv, for loading an export in PyTorch (docs/pytorch.md) and the test that
# does (tests/export.rs). PyPI's Linux
# torch brings NVIDIA's CUDA libraries with it: about 5.3 GB, 1-4 min here (2026-11-26). CI runs
# it (.ci/run); without it that test is skipped, loudly, and under CI=true it fails.
setup-torch: $(VENV)/.stamp-torch ## torch and safetensors in .venv, to load exports in PyTorch (~5.3 GB; CI runs it)
$(VENV)/.stamp-torch: $(VENV)/.stamp python/requirements-torch.txt
	$(VENV)/bin/pip install --disable-pip-version-check -q -r python/requirements-torch.txt
	touch $@

# Ingest only: the embedded sample (datasets/tiny, made by `lfs collect`) and what went in.
SAMPLE_VIDEOS := datasets/tiny/videos
SAMPLE_OUT := runs/sample
sample: build ## ingest and inspect the embedded sample into runs/sample/
	$(LFS) ingest $(SAMPLE_VIDEOS) --out $(SAMPLE_OUT)/dataset
	$(LFS) inspect $(SAMPLE_OUT)/dataset --contact-sheet $(SAMPLE_OUT)/contact-sheet.png

# Two tiers, both with the build present (the first build takes ~20 min):
#   make test       the whole suite, as CI runs it: 54 min on a fresh 2-core machine (2026-11-28;
#                   the integration tests' binary 3,062 s), each test's time reported and the
#                   binary's time held under TEST_BUDGET_SECONDS (BENCHMARKS.md, "The test suite's
#                   time": the slowest tests and where their time goes).
#   make test-fast  a contributor's loop: every unit and doc test, and the integration tests but
#                   the 28 below. Its integration tests took 475 of those test-seconds (5%); run
#                   on its own at a load of 9-11 it took 1 min 59 s (about 1 min quiet).
# The slow ones run dm_control episodes, suites, a SLURM cluster, the README's walk or training
# runs: each took over 25 s at that load (over ~5 s quiet). A new test that slow goes here
# (cargo test's name filter, `--skip`).
# A test whose dependency is missing (torch: make setup-torch; pandas: make setup; root and SLURM:
# make deps) says SKIPPED on the terminal, and fails under CI=true, where .ci/run installs them.
SLOW_TESTS := \
	readme::the_readme_walk_through_runs_as_written \
	suite::a_killed_suite_and_a_slurm_array_end_as_an_uninterrupted_pool \
	suite::jaco_tasks_train_through_a_suite_and_reach_table_2 \
	suite::train_rows_run_lfs_train_and_reach_the_report \
	env::jaco_reach_tasks_match_dm_control_for_a_whole_episode \
	env::parity_with_dm_control_all_tasks \
	env::whole_episodes_match_dm_control_to_the_time_limit \
	env::killed_worker_is_restarted \
	e2e::a_killed_lfs_train_run_logs_n_per_update_and_resumes_to_the_same_results \
	e2e::a_killed_sac_pixel_run_resumes_to_the_same_results \
	eval::a_killed_run_resumes_to_the_same_results \
	eval::a_killed_run_sampling_as_drqv2s_loader_resumes_to_the_same_results \
	device::the_long_parity_check_reports_every_updates_losses_on_both_sides \
	eval::the_feature_cache_on_the_device_resumes_to_the_host_caches_results \
	eval::replay_frames_on_the_device_resume_to_the_host_replays_results \
	drqv2::a_killed_drqv2_run_resumes_to_the_same_results \
	drqv2::drqv2_runs_on_a_frozen_encoder_and_bad_input_is_refused_by_name \
	taco::a_killed_taco_run_resumes_to_the_same_results \
	device::candles_ops_match_the_cpu_kernels_in_every_check \
	pretrain::issue_10_shipped_tiny_settings_learn_on_the_embedded_sample \
	pretrain::runs_killed_mid_update_and_mid_checkpoint_resume_to_the_uninterrupted_result \
	pretrain::every_method_trains_with_its_batch_composition \
	pretrain::atc_and_curl_log_the_target_spread_every_update \
	pretrain::resume_equals_an_uninterrupted_run \
	pretrain::cli_ingest_pretrain_export_on_the_embedded_sample \
	pretrain::resume_refuses_a_different_config \
	ingest::a_killed_ingest_leaves_a_loadable_dataset_and_a_rerun_completes_it \
	ingest::fps_resamples_every_source_as_ffmpegs_fps_filter_does_and_info_json_never_lies \
	export::an_encoder_only_export_holds_the_same_encoder_without_the_projector \
	export::pytorch_loader_reproduces_the_rust_features \
	probe_command::online_probe_is_logged_and_leaves_training_unchanged \
	probe_command::probe_refuses_what_it_cannot_measure \
	explore::an_exploration_run_resumes_exactly_and_leaves_an_export \
	explore::bad_exploration_input_is_refused_with_nothing_written
# make test reports every test's time and fails when the integration tests' binary runs longer
# than TEST_BUDGET_SECONDS (eval/check/test.sh; the 20 slowest tests are printed either way,
# every test's time is in runs/test-times.tsv). It installs torch into .venv first (make
# setup-torch, ~5.3 GB), so that no test is skipped.
TEST_BUDGET_SECONDS ?= 2400
test: setup setup-torch ## the whole test suite, as CI runs it, each test's time reported and the suite's time budget enforced
	CARGO="$(CARGO)" TEST_BUDGET_SECONDS=$(TEST_BUDGET_SECONDS) eval/check/test.sh

test-fast: setup ## unit tests and the fast integration tests (1-2 min on 2 cores once built)
	$(CARGO) test --release --locked -- $(addprefix --skip ,$(SLOW_TESTS))

lint: ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

# LeRobot itself opening the embedded sample's dataset (eval/check_lerobot.py). Not in CI:
# LeRobot pulls in torch (a few GB). Its own venv, .venv-lerobot, made on first use.
LEROBOT_VENV := .venv-lerobot
# The sample as ingested (sources at 12.5, 20 and 50 fps: info.json's fps is null) and resampled
# to one rate (--fps 20), each opened by LeRobot, whose time queries are checked on the second.
check-lerobot: sample ## LeRobot itself opens the sample dataset, as is and at --fps 20 (its own venv with torch)
	[ -x $(LEROBOT_VENV)/bin/python ] || python3 -m venv $(LEROBOT_VENV)
	$(LEROBOT_VENV)/bin/pip install --disable-pip-version-check -q lerobot==0.4.4
	HF_HUB_OFFLINE=1 $(LEROBOT_VENV)/bin/python eval/check_lerobot.py $(SAMPLE_OUT)/dataset
	$(LFS) ingest $(SAMPLE_VIDEOS) --out $(SAMPLE_OUT)/dataset-20fps --fps 20
	HF_HUB_OFFLINE=1 $(LEROBOT_VENV)/bin/python eval/check_lerobot.py $(SAMPLE_OUT)/dataset-20fps --fps 20

bench: bench-ingest bench-env bench-encoder bench-pretrain bench-sac bench-e2e bench-drqv2 bench-explore ## every benchmark (slow), for BENCHMARKS.md

# lfs ingest vs the ffmpeg CLI vs PyAV+pyarrow on the same files, interleaved, medians.
bench-ingest: setup build
	$(VENV)/bin/pip install --disable-pip-version-check -q -r eval/requirements-bench.txt
	$(PYTHON) eval/bench/bench_ingest.py --lfs $(LFS)

# ---- Pre-training ---------------------------------------------------------------------------
# make pretrain [VIDEOS=<dir>] [PRETRAIN_CONFIG=pipelines/mini.toml] [SET='--set k=v ...']
#   = lfs ingest (incremental) + lfs pretrain (resumes a killed run) + lfs export, all into
#   runs/<name>/: dataset/, checkpoint.safetensors, metrics.jsonl, config.resolved.toml,
#   datasets.json, encoder.safetensors, encoder.example.safetensors.
# Without VIDEOS: the embedded sample (datasets/tiny/videos) and pipelines/tiny.toml, name `tiny`.
PRETRAIN_CONFIG ?= pipelines/tiny.toml
ifdef VIDEOS
PRETRAIN_NAME ?= $(notdir $(abspath $(VIDEOS)))-$(basename $(notdir $(PRETRAIN_CONFIG)))
else
VIDEOS := datasets/tiny/videos
PRETRAIN_NAME ?= $(basename $(notdir $(PRETRAIN_CONFIG)))
endif
RUN_DIR ?= runs/$(PRETRAIN_NAME)
SET ?=
pretrain: build ## [VIDEOS=dir PRETRAIN_CONFIG=... SET=...] ingest + pretrain + export into runs/<name>/
	$(LFS) ingest $(VIDEOS) --out $(RUN_DIR)/dataset
	$(LFS) pretrain --config $(PRETRAIN_CONFIG) --set 'data.datasets=["$(RUN_DIR)/dataset"]' --out-dir $(RUN_DIR) $(SET)
	$(LFS) export $(RUN_DIR)/checkpoint.safetensors --out $(RUN_DIR)/encoder.safetensors

# make export [RUN_DIR=runs/<name>]: re-export a run's latest checkpoint.
export: build ## [RUN_DIR=runs/<name>] re-export a run's latest checkpoint
	$(LFS) export $(RUN_DIR)/checkpoint.safetensors --out $(RUN_DIR)/encoder.safetensors

# One LFS update at B = 32, 128, 512: candle vs PyTorch CPU, interleaved, medians. PyTorch comes
# from .venv-bench (python3 -m venv .venv-bench && .venv-bench/bin/pip install torch numpy);
# without it only candle is timed. About 6 minutes in all.
BENCH_TORCH_PYTHON ?= .venv-bench/bin/python
BENCH_PRETRAIN_PLAN ?= 32:4,128:3,512:2
bench-pretrain:
	$(CARGO) build --release --locked --example bench_pretrain
	python3 eval/bench/compare.py --suite pretrain --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_PRETRAIN_PLAN) --repeats 3

# The encoder on the CPU, forward and forward+backward at B = 32, 128, 512: our conv ops under
# candle's autograd and the pre-trainer's tape vs PyTorch (interleaved, medians); then candle's
# stock conv2d vs ours in one process (stock forward+backward only up to B=128, ~1 min per
# B=512 pass), and our op alone at the 32→32 layer.
BENCH_ENCODER_PLAN ?= 32:5,128:3,512:3
bench-encoder:
	$(CARGO) build --release --locked --example bench_conv
	python3 eval/bench/compare.py --suite encoder --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_ENCODER_PLAN) --repeats 3
	target/release/examples/bench_conv --batch 32,128,512 --repeats 3 --stock-backward-max 128
	target/release/examples/bench_conv --kernels --batch 32,128 --repeats 5

# Agent steps/s through the worker pool vs dm_control in-process (same run, interleaved), and
# with 2 workers; both render qualities. Results go in BENCHMARKS.md.
bench-env: setup
	$(CARGO) test --release --locked --test integration -- --ignored --nocapture --test-threads 1 env::bench_env
	LFS_BENCH_QUALITY=fast LFS_BENCH_STEPS=300 $(CARGO) test --release --locked --test integration -- --ignored --nocapture --test-threads 1 env::bench_env

# The paper's video set (docs/design.md §8): 320 random-policy episodes of up to 250 frames per seen task,
# action repeat 2, dm_control's default rendering. Resumable: run it again after an interruption.
COLLECT_EPISODES ?= 320
collect: setup build ## [COLLECT_EPISODES=320] the paper's demonstration videos into videos/
	$(LFS) collect --tasks reach_duplo,walker_run,cartpole_swingup --episodes $(COLLECT_EPISODES) --video-frames 250 --out videos/

# ---- The probe: is an encoder any good, in minutes and without RL ----------------------------
# make probe-set [PROBE_RENDER_QUALITY=fast|default PROBE_EPISODES=40]: the held-out probe set,
# built once so that every encoder is probed on the same frames: all nine tasks, PROBE_EPISODES
# random-policy episodes each of up to 250 frames (action repeat 2), every frame's state and
# reward recorded. Environment seeds: collect resets episode i with --seed + i (+ episodes per
# retry), so each task's seeds start at its PROBE_SEEDS entry, from 1000000 on: disjoint from
# every pre-training set (which start at 0). Tasks of one domain with the same seeds would give
# the same frames (walker_run, walker_stand and walker_walk differ only in reward), so those
# three get seeds of their own. About 15 minutes at fast quality, 5x that at default. Into
# runs/probe-set-<quality>/dataset; rerun to resume.
# make probe ENCODER=file|random [PROBE_RENDER_QUALITY=...]: the probe's report beside the
# encoder (random: runs/probe/random-1.json) and its table.
PROBE_SEEDS ?= reach_duplo:1000000 cartpole_swingup:1000000 walker_run:1000000 reacher_hard:1000000 \
	cheetah_run:1000000 walker_stand:1001000 ball_in_cup_catch:1000000 walker_walk:1002000 finger_spin:1000000
PROBE_RENDER_QUALITY ?= fast
PROBE_EPISODES ?= 40
PROBE_FRAMES ?= 250
PROBE_DIR ?= runs/probe-set-$(PROBE_RENDER_QUALITY)
PROBE_SET ?= $(PROBE_DIR)/dataset
probe-set: setup build ## [PROBE_RENDER_QUALITY=fast|default PROBE_EPISODES=40] the held-out probe set (9 tasks) into runs/probe-set-<quality>/
	for entry in $(PROBE_SEEDS); do \
		$(LFS) collect --tasks $${entry%%:*} --episodes $(PROBE_EPISODES) --video-frames $(PROBE_FRAMES) \
			--render-quality $(PROBE_RENDER_QUALITY) --seed $${entry##*:} --out $(PROBE_DIR)/videos || exit 1; \
	done
	$(LFS) ingest $(PROBE_DIR)/videos --out $(PROBE_SET)

probe: build ## ENCODER=file|random [PROBE_RENDER_QUALITY=fast|default] held-out R2 of state and reward from frozen features
	$(LFS) probe --encoder $(ENCODER) --dataset $(PROBE_SET)

# Round-robin vs mixed task batches at batch 16/64/512, on the embedded sample and a
# collected 36-episode set (about 75 minutes); the summary table goes in BENCHMARKS.md.
bench-batching: setup build
	eval/bench/task_batching.sh

# ATC and CURL loss curves (lfs pretrain) against PyTorch transcriptions of rlpyt's ATC
# and MishaLaskin/curl on the embedded sample, batch 64; window means within seed-spread bands.
# Our side is run (~10 min) and compared with the stored torch curves; results: BENCHMARKS.md,
# "ATC and CURL dynamics".
bench-dynamics: setup build
	SIDES=lfs eval/bench/contrastive_dynamics.sh
	python3 eval/bench/contrastive_dynamics.py bench-out/dynamics --reference eval/bench/dynamics_reference.json

# Reruns the PyTorch side (needs torch: BENCH_TORCH_PYTHON) and stores its curves in the repo.
bench-dynamics-reference: setup build
	SIDES=torch TORCH_PYTHON=$(BENCH_TORCH_PYTHON) eval/bench/contrastive_dynamics.sh
	python3 eval/bench/contrastive_dynamics.py bench-out/dynamics --store eval/bench/dynamics_reference.json

# DrQ-v2's updates (examples/bench_drqv2.rs --frames) against the PyTorch
# transcription of DrQ-v2's (eval/bench/drqv2_torch.py) on one fixed replay of cartpole_swingup
# episodes, batch 64, 300 updates, seeds 1-3; window means within seed-spread bands. Our side is
# run (~5 min) and compared with the stored torch curves; results: BENCHMARKS.md, "DrQ-v2".
bench-dynamics-drqv2: setup build
	$(CARGO) build --release --locked --example bench_drqv2
	SIDES=ours eval/bench/drqv2_dynamics.sh
	python3 eval/bench/drqv2_dynamics.py bench-out/drqv2-dynamics --reference eval/bench/drqv2_dynamics_reference.json

# Reruns the PyTorch side (needs torch: BENCH_TORCH_PYTHON) and stores its curves in the repo.
bench-dynamics-drqv2-reference: setup build
	$(CARGO) build --release --locked --example bench_drqv2
	SIDES=torch TORCH_PYTHON=$(BENCH_TORCH_PYTHON) eval/bench/drqv2_dynamics.sh
	python3 eval/bench/drqv2_dynamics.py bench-out/drqv2-dynamics --store eval/bench/drqv2_dynamics_reference.json

# Proto-RL's and APT's exploration updates (examples/bench_explore.rs) against the
# PyTorch transcriptions of denisyarats/proto and URLB's icm_apt (eval/bench/explore_torch.py)
# on the same replay, batch 64, 300 updates, seeds 1-3; our side is run (~15 min) and compared
# with the stored torch curves (eval/bench/{proto,apt}_dynamics_reference.json).
bench-dynamics-explore: setup build
	$(CARGO) build --release --locked --example bench_explore
	SIDES=ours eval/bench/explore_dynamics.sh
	python3 eval/bench/explore_dynamics.py proto --reference eval/bench/proto_dynamics_reference.json
	python3 eval/bench/explore_dynamics.py apt --reference eval/bench/apt_dynamics_reference.json

# Exploration speed: one exploration update of each method, ours against the same PyTorch
# transcriptions (explore_torch.py, its random shift one gather), interleaved rounds in ABBA
# order, same-round ratios (eval/bench/explore_speed.py; needs torch: make setup-torch).
bench-explore: setup build
	$(CARGO) build --release --locked --example bench_explore
	[ -f bench-out/drqv2-dynamics/frames/episodes.json ] || SIDES=none eval/bench/explore_dynamics.sh
	python3 eval/bench/explore_speed.py --plan $(EXPLORE_SPEED_PLAN) --rounds 3 --torch-python $(VENV)/bin/python

EXPLORE_SPEED_PLAN ?= proto:64:40,apt:64:40,proto:512:8,apt:256:12

# The same for TACO (its loss's terms compared too), against FrankZheng2022/TACO's update.
bench-dynamics-taco: setup build
	$(CARGO) build --release --locked --example bench_drqv2
	AGENT=taco SIDES=ours eval/bench/drqv2_dynamics.sh
	python3 eval/bench/drqv2_dynamics.py bench-out/taco-dynamics --reference eval/bench/taco_dynamics_reference.json

bench-dynamics-taco-reference: setup build
	$(CARGO) build --release --locked --example bench_drqv2
	AGENT=taco SIDES=torch TORCH_PYTHON=$(BENCH_TORCH_PYTHON) eval/bench/drqv2_dynamics.sh
	python3 eval/bench/drqv2_dynamics.py bench-out/taco-dynamics --store eval/bench/taco_dynamics_reference.json

# ---- Frozen-encoder SAC ---------------------------------------------------------------------
# make eval TASK=cartpole_swingup [ENCODER=runs/tiny/encoder.safetensors|random]
#           [EVAL_CONFIG=pipelines/sac/mini.toml] [SEED=1] [SET='--set k=v ...']
#   into runs/eval/<config>/<task>/<encoder name>/<seed>/; the encoder's name is `random`, the
#   folder an `encoder.safetensors` sits in (runs/tiny/encoder.safetensors: tiny), or the file's
#   stem.
TASK ?= cartpole_swingup
ENCODER ?= $(RUN_DIR)/encoder.safetensors
ENCODER_NAME ?= $(if $(filter random,$(ENCODER)),random,$(if $(filter encoder.safetensors,$(notdir $(ENCODER))),$(notdir $(patsubst %/,%,$(dir $(ENCODER)))),$(basename $(notdir $(ENCODER)))))
EVAL_CONFIG ?= pipelines/sac/tiny.toml
SEED ?= 1
eval: setup build ## TASK=... [ENCODER=file|random EVAL_CONFIG=... SEED=1 SET=...] frozen-encoder SAC
	$(LFS) eval --config $(EVAL_CONFIG) --encoder $(ENCODER) --task $(TASK) --seed $(SEED) \
		--out-dir runs/eval/$(basename $(notdir $(EVAL_CONFIG)))/$(TASK)/$(ENCODER_NAME)/$(SEED) $(SET)

# make train TASK=walker_stand [AUX=lfs|lfs-no-lnc|lfs-no-fm|lfs-cl|atc|curl|none]
#            [TRAIN_CONFIG=pipelines/e2e/mini.toml] [SEED=1] [SET='--set k=v ...']: end-to-end
#            SAC + objective
AUX ?= lfs
TRAIN_CONFIG ?= pipelines/e2e/tiny.toml
train: setup build ## TASK=... [AUX=lfs|atc|curl|none|... TRAIN_CONFIG=... SEED=1 SET=...] SAC + objective end to end
	$(LFS) train --config $(TRAIN_CONFIG) --task $(TASK) --seed $(SEED) --set aux.method=$(AUX) \
		--out-dir runs/train/$(basename $(notdir $(TRAIN_CONFIG)))/$(TASK)/$(AUX)/$(SEED) $(SET)

# One full SAC update (critic, actor, alpha, target) on pixels: candle (examples/bench_sac.rs,
# shift + two frozen-encoder passes) vs PyTorch (eval/bench/sac_torch.py, Proto-RL's update),
# interleaved, medians; then the same update on cached features (sac/mini.toml's feature
# cache), candle vs PyTorch.
BENCH_SAC_PLAN ?= 128:4,512:2
BENCH_SAC_FEATURES_PLAN ?= 128:8,512:4
bench-sac:
	$(CARGO) build --release --locked --example bench_sac
	python3 eval/bench/compare.py --suite sac --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_SAC_PLAN) --repeats 3
	python3 eval/bench/compare.py --suite sac-features --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_SAC_FEATURES_PLAN) --repeats 3

# One agent step of `lfs train` after the seed frames (docs/design.md §7, the paper's Algorithm
# 1: sample B transitions, one LFS update with M = B, one SAC update on pixels encoded by the
# updated encoder): candle (examples/bench_e2e.rs) vs PyTorch (eval/bench/e2e_torch.py:
# pretrain_torch.py's update, then sac_torch.py's), interleaved, medians, with the step's LFS
# and SAC halves. About 4 minutes.
BENCH_E2E_PLAN ?= 128:3,512:2
bench-e2e:
	$(CARGO) build --release --locked --example bench_e2e
	python3 eval/bench/compare.py --suite e2e --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_E2E_PLAN) --repeats 3

# One DrQ-v2 update as `lfs train` runs it (shift, encoder with its tape, critic, actor,
# target, the encoder's step): candle (examples/bench_drqv2.rs) vs PyTorch (eval/bench/
# drqv2_torch.py --bench: DrQ-v2's update, facebookresearch/drqv2 @c0c650b), interleaved, medians;
# then TACO's update (DrQ-v2's and its loss's) at batch 256 likewise.
BENCH_DRQV2_PLAN ?= 256:3,512:2
BENCH_TACO_PLAN ?= 256:3
bench-drqv2:
	$(CARGO) build --release --locked --example bench_drqv2
	python3 eval/bench/compare.py --suite drqv2 --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_DRQV2_PLAN) --repeats 3
	python3 eval/bench/compare.py --suite taco --torch-python $(BENCH_TORCH_PYTHON) --plan $(BENCH_TACO_PLAN) --repeats 3

# ---- Benchmark suite ---------------------------------------------------------------------
# make suite [SUITE=eval/suites/mini.toml] [JOBS=N]: every unfinished cell of the suite in a
# local pool (resumes, retries failed cells), then the report, into runs/suite-<name>/.
# On a SLURM cluster: lfs suite sbatch $(SUITE) --out <dir> ... (eval/suites/README.md).
SUITE ?= eval/suites/tiny.toml
SUITE_OUT ?= runs/suite-$(basename $(notdir $(SUITE)))
# JOBS unset: lfs picks (one cell per core, one thread each; BENCHMARKS.md).
JOBS ?=
suite: setup build ## [SUITE=eval/suites/tiny.toml JOBS=N] a benchmark suite and its report
	$(LFS) suite run $(SUITE) --out $(SUITE_OUT) $(if $(JOBS),-j $(JOBS))
	$(LFS) report $(SUITE_OUT) --out $(SUITE_OUT)/report

# ---- The reduced-scale study (docs/study-mini.md) -------------------------------------------
# Collect 300 fast-rendered videos of the seen tasks, pre-train lfs, atc and curl on them
# (pipelines/mini.toml), run eval/suites/study-mini.toml (24 cells, -j 2), write the report and
# copy the results into results/study-mini/. About 6.5 hours on 2 cores; rerun to resume.
study-mini: setup build ## the reduced-scale study (about 6.5 hours)
	eval/study/study_mini.sh $(LFS)

# ---- Study 2 (docs/study-2.md) -----------------------------------------------------------------
# study-mini's videos again; six LFS pre-training runs (LNC r = 0.2), one per SAC seed, through
# the plan's calibration gate; eval/suites/study-2.toml (lfs vs random, 24 cells, two at a time;
# its [primary] is decided by lfs report); three atc and three curl runs; the probe of every
# encoder and the secondary comparisons. Commits results/study-2/ as each piece finishes. About
# 10.6 hours on 2 cores, in several runs; rerun to resume.
study-2: setup build ## study 2 (about 10.6 hours; resumable, commits results/study-2/ as it goes)
	eval/study/study_2.sh $(LFS)

# ---- Study 3 (docs/study-3.md) -----------------------------------------------------------------
# Does the frame mask (and LNC's choice) make LFS's features better? The probe of lfs against
# lfs-no-fm (P1) and lfs-no-lnc (P2), ten pre-training runs per arm (lfs reuses study 2's six when
# its reuse check passes), on study 2's videos and probe set; then, if the plan's budget rule
# allows, SAC on cartpole_swingup, lfs vs random, seeds 7-12 (eval/suites/study-3-sac.toml).
# Commits results/study-3/ as each piece finishes. About 12-14 hours on 2 cores, in several runs;
# rerun to resume. The study keeps one binary: STUDY3_LFS=/path/to/lfs.
STUDY3_LFS ?= $(LFS)
study-3: setup ## study 3 (about 12-14 hours; resumable, commits results/study-3/ as it goes)
	eval/study/study_3.sh $(STUDY3_LFS)

# ---- Study 4 (docs/study-4.md) -----------------------------------------------------------------
# Does a frozen LFS encoder beat a random one, and an ATC one, in SAC return at 100K frames?
# cartpole_swingup, committed mini encoders (study 2's and study 3's, checked by sha256),
# eval/suites/study-4.toml (lfs, random, atc; seeds per the plan's power analysis), two cells at
# a time; lfs report decides both comparisons (Holm). Commits results/study-4/ after every cell.
# Tens of hours on 2 cores over several sessions: run it niced; rerun to resume. One binary:
# STUDY4_LFS=/path/to/lfs.
STUDY4_LFS ?= $(LFS)
study-4: setup ## study 4 (tens of hours on 2 cores; resumable, commits results/study-4/ as it goes)
	eval/study/study_4.sh $(STUDY4_LFS)

# make replay-ablation ABLATION_LFS=<binary>: the replay ablation, DrQ-v2 on
# cartpole_swingup at 20K frames, upstream's replay loader against lfs's uniform sampling, seeds
# 1-3 (eval/suites/replay_ablation.toml; an hour or more per cell). Resumable; commits
# results/replay-ablation/ after every cell. Run it niced beside other work.
ABLATION_LFS ?= target/release/lfs
replay-ablation: setup ## DrQ-v2's replay loader against uniform sampling (6 cells, 6+ hours; resumable, commits as it goes)
	eval/study/replay_ablation.sh $(ABLATION_LFS)

# make upstream-drqv2 UPSTREAM_PYTHON=<python>: a sanity check, upstream DrQ-v2's own
# train.py (@c0c650b, eval/gpu/pack-drqv2.sh) on the CPU beside the ablation's drqv2 arm:
# cartpole_swingup, 20K frames, one thread, seeds UPSTREAM_SEEDS (hours per seed; make
# gpu-pack-drqv2 first). Resumable at episode ends; commits results/upstream-drqv2/ after every
# evaluation. UPSTREAM_PYTHON needs eval/study/requirements-upstream-drqv2.txt.
UPSTREAM_PYTHON ?= .venv-upstream/bin/python
UPSTREAM_SEEDS ?= 1
upstream-drqv2: ## upstream DrQ-v2's own train.py on the CPU, beside lfs's DrQ-v2 (hours per seed; resumable)
	eval/study/upstream_drqv2.sh $(UPSTREAM_PYTHON) $(UPSTREAM_SEEDS)

# The tiny suite end to end (the make-pretrain encoder and `random`, two tasks, two seeds) to a
# report in runs/suite-tiny/report/: a few minutes; make test's README walk runs it. make suite
# in this make (not a second one), so that the walk's `make -o build` holds for it too.
suite-tiny: SUITE = eval/suites/tiny.toml
suite-tiny: pretrain suite ## make pretrain, then the tiny suite (a cell per core) and its report
