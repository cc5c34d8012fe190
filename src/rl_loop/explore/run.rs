//! The `lfs explore` loop: one workspace per domain (environment, replay, agent, RNG, the
//! RL loop's own step), stepped in turn one agent step each, all encoding through the shared
//! explorer ([`DomainRepresentation`]). Each domain logs its episodes to `<task>/train.jsonl`
//! (and TensorBoard there); the checkpoint is a folder written whole and swapped in at moments
//! when every domain is between episodes, so a killed run resumes exactly; the encoder is
//! exported as `encoder.safetensors` with every checkpoint.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Serialize;

use super::apt::Apt;
use super::config::{ExploreConfig, ExploreMethod};
use super::domain::{DomainRepresentation, SharedExplorer, TermSums};
use super::explorer::Explorer;
use super::proto::Proto;
use crate::device::Backend;
use crate::env::{DmcConfig, EnvPool, Task};
use crate::fsutil::write_bytes_atomic;
use crate::log_files::{MetricsLog, Mirror};
use crate::nn::checkpoint as safetensors_file;
use crate::nn::encoder_file::{write_files, Provenance};
use crate::rl::{AgentVisitor, Registered};
use crate::rl_loop::logs::EpisodeLog;
use crate::rl_loop::workspace::{EpisodeState, StepOutcome, Workspace};
use crate::rl_loop::{
    resolve_render_quality, EncoderChoice, EncoderProvenance, Frames, LoopSpec, RepresentationState, Stage, FRAME_FIELD,
};
use crate::run_dir::{self, kind, CONFIG_FILE, TRAIN_LOG};
use crate::tensorboard::EventFile;
use crate::{Error, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The checkpoint folder, and its files: one per domain and the explorer's.
pub const CHECKPOINT_DIR: &str = "checkpoint";
pub const EXPLORER_FILE: &str = "explorer.safetensors";
/// The exported encoder, rewritten at every checkpoint.
pub const ENCODER_FILE: &str = "encoder.safetensors";

/// What the loop reports to its caller.
#[derive(Debug)]
pub enum ExploreEvent<'a> {
    Started {
        /// Each domain's frames done and budget.
        start_frame: u64,
        num_train_frames: u64,
        resumed: bool,
        tasks: Vec<&'static str>,
    },
    /// After every round of agent steps: each domain's frames done.
    Progress {
        frame: u64,
    },
    Episode {
        task: &'static str,
        log: &'a EpisodeLog,
    },
    Checkpoint {
        frame: u64,
        encoder: &'a Path,
    },
    EpisodeLost {
        task: &'static str,
        error: String,
    },
}

/// Where the run ended.
#[derive(Debug, Clone)]
pub struct ExploreSummary {
    /// Each domain's frames.
    pub frames_done: u64,
    pub resumed_from_frame: Option<u64>,
    /// Representation updates, every domain's.
    pub updates: u64,
    pub encoder: PathBuf,
}

/// Validates everything, then explores into `out_dir` (resuming a checkpoint there).
pub fn run(cfg: &ExploreConfig, out_dir: &Path, on_event: &mut dyn FnMut(ExploreEvent)) -> Result<ExploreSummary> {
    use crate::config::StageConfig;
    cfg.validate()?;
    cfg.agent.clone().visit(RunExplore { cfg, out_dir, on_event })
}

struct RunExplore<'a> {
    cfg: &'a ExploreConfig,
    out_dir: &'a Path,
    on_event: &'a mut dyn FnMut(ExploreEvent),
}

impl AgentVisitor for RunExplore<'_> {
    type Output = Result<ExploreSummary>;

    fn visit<A: Registered>(self) -> Self::Output {
        explore::<A>(self.cfg, self.out_dir, self.on_event)
    }
}

/// The exploring method `cfg` names, fresh.
fn build_explorer(cfg: &ExploreConfig, num_domains: usize, backend: &Backend) -> Result<Box<dyn Explorer>> {
    let section = &cfg.explore;
    match section.method {
        ExploreMethod::Proto => Ok(Box::new(Proto::new(
            &section.proto,
            &section.encoder,
            cfg.run.seed,
            cfg.agent.settings().batch_size(),
            cfg.replay.random_shift_pad,
            num_domains,
            backend,
        )?)),
        ExploreMethod::Apt => {
            // One ICM per domain, sized by its action space: asked of the environments.
            let configs = cfg
                .tasks()?
                .into_iter()
                .map(|task| DmcConfig {
                    action_repeat: cfg.env.action_repeat,
                    ..DmcConfig::new(task)
                })
                .collect();
            let pool = EnvPool::new(configs)?;
            let action_dims: Vec<usize> = (0..num_domains).map(|d| pool.spec(d).action_dim).collect();
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.run.seed);
            Ok(Box::new(Apt::new(
                &section.apt,
                &section.encoder,
                &action_dims,
                backend,
                &mut rng,
            )?))
        }
    }
}

/// One domain: its workspace, the episode it is playing, its terms and its log.
struct Domain<A: Registered> {
    task: &'static str,
    ws: Workspace<A>,
    episode: Option<EpisodeState<A>>,
    sums: Rc<RefCell<TermSums>>,
    log: MetricsLog,
}

/// A domain's `train.jsonl` line: the episode, the agent's update means and the method's terms
/// (`explore/<term>`).
#[derive(Serialize)]
struct ExploreLine<'a, M: Serialize> {
    task: &'a str,
    #[serde(flatten)]
    episode: &'a EpisodeLog,
    #[serde(flatten)]
    agent: Option<&'a M>,
    #[serde(flatten)]
    terms: std::collections::BTreeMap<String, serde_json::Value>,
}

/// What every domain's workspace is built from.
struct DomainSetup<'a> {
    cfg: &'a ExploreConfig,
    explorer: &'a SharedExplorer,
    provenance: &'a EncoderProvenance,
    backend: &'a Backend,
    toml: &'a str,
    resume_key: &'a str,
    checkpoint_dir: &'a Path,
    out_dir: &'a Path,
}

impl DomainSetup<'_> {
    /// Domain `d`'s workspace, restored from its checkpoint when there is one (then with the
    /// step it stopped at), and its log.
    fn open<A: Registered>(&self, d: usize, task: Task) -> Result<(Domain<A>, Option<u64>)> {
        let sums = Rc::new(RefCell::new(TermSums::default()));
        let representation = DomainRepresentation {
            explorer: self.explorer.clone(),
            domain: d,
            provenance: self.provenance.clone(),
            repr_dim: self.cfg.explore.encoder.repr_dim()?,
            sums: sums.clone(),
        };
        let spec = LoopSpec {
            task,
            encoder: EncoderChoice::Random,
            allow_render_quality_mismatch: false,
            save_video: false,
        };
        let mut rl = self.cfg.rl();
        resolve_render_quality(&mut rl.env, &representation, &spec)?;
        let stage = Stage {
            command: "explore",
            checkpoint_kind: kind::EXPLORE_CHECKPOINT,
            rl,
            toml: self.toml.to_string(),
            resume_key: self.resume_key.to_string(),
            saved_resume_key: |toml| ExploreConfig::from_toml_str(toml, &[])?.resume_key(),
            value_comparison: None,
            backend: self.backend.clone(),
        };
        let path = self.checkpoint_dir.join(format!("{}.safetensors", task.name()));
        let (mut ws, resumed) = crate::rl_loop::workspace::<A>(stage, &spec, Box::new(representation), &path)?;
        // Each episode's state entropy, the run's measure of state coverage.
        ws.record_states = true;
        let resumed_step = resumed.map(|_| ws.step);
        let dir = self.out_dir.join(task.name());
        std::fs::create_dir_all(&dir).map_err(|e| Error::checkpoint(&dir, e.to_string()))?;
        let log = open_log(&dir, &ws, self.cfg.run.tensorboard)?;
        let domain = Domain {
            task: task.name(),
            ws,
            episode: None,
            sums,
            log,
        };
        Ok((domain, resumed_step))
    }

    /// The explorer's state restored when every domain resumed, at one step: the frame the run
    /// resumes at. None for a fresh run; an error for a checkpoint folder lfs explore did not
    /// write.
    fn restore_explorer(&self, resumed_steps: &[Option<u64>], frame: u64) -> Result<Option<u64>> {
        let checkpoint_dir = self.checkpoint_dir;
        if !resumed_steps.iter().all(Option::is_some) {
            return match resumed_steps.iter().any(Option::is_some) {
                true => Err(Error::checkpoint(
                    checkpoint_dir,
                    "it holds some domains' checkpoints and not others': not a checkpoint lfs explore wrote",
                )),
                false => Ok(None),
            };
        }
        let file = checkpoint_dir.join(EXPLORER_FILE);
        let saved = safetensors_file::load(&file)?;
        run_dir::expect_kind(
            &file,
            saved.meta(kind::KEY)?,
            kind::EXPLORER_STATE,
            "an `lfs explore` explorer state",
        )?;
        let state = RepresentationState {
            tensors: saved.tensors.clone(),
            counters: saved.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        self.explorer.borrow_mut().load_state(&state, &file)?;
        if resumed_steps.iter().any(|s| *s != resumed_steps[0]) {
            return Err(Error::checkpoint(
                checkpoint_dir,
                "its domains stopped at different steps",
            ));
        }
        Ok(Some(frame))
    }
}

impl<A: Registered> Domain<A> {
    /// One agent step of this domain; at an episode's end, its `train.jsonl` line.
    fn step(&mut self, on_event: &mut dyn FnMut(ExploreEvent)) -> Result<()> {
        let state = match self.episode.take() {
            Some(state) => state,
            None => self.ws.start_episode()?,
        };
        match self.ws.agent_step(state, None)? {
            StepOutcome::Continue(state) => self.episode = Some(state),
            StepOutcome::Finished(log, agent, _) => {
                let terms = std::mem::take(&mut *self.sums.borrow_mut())
                    .means()
                    .into_iter()
                    .map(|(k, v)| (format!("explore/{k}"), v))
                    .collect();
                self.log.write(&ExploreLine {
                    task: self.task,
                    episode: &log,
                    agent: (log.num_updates > 0).then_some(&agent),
                    terms,
                })?;
                on_event(ExploreEvent::Episode {
                    task: self.task,
                    log: &log,
                });
            }
            StepOutcome::Lost(error) => on_event(ExploreEvent::EpisodeLost { task: self.task, error }),
        }
        Ok(())
    }
}

fn explore<A: Registered>(
    cfg: &ExploreConfig,
    out_dir: &Path,
    on_event: &mut dyn FnMut(ExploreEvent),
) -> Result<ExploreSummary> {
    let tasks = cfg.tasks()?;
    let backend = Backend::new(&cfg.run.device.open(cfg.run.precision)?);
    let checkpoint_dir = out_dir.join(CHECKPOINT_DIR);
    recover_checkpoint_dir(&checkpoint_dir)?;
    let explorer: SharedExplorer = Rc::new(RefCell::new(build_explorer(cfg, tasks.len(), &backend)?));
    let provenance = EncoderProvenance {
        id: format!("explore:{}:random:{}", cfg.explore.method.name(), cfg.run.seed),
        render_quality: None,
    };
    let toml = cfg.to_toml()?;
    let resume_key = cfg.resume_key()?;
    std::fs::create_dir_all(out_dir).map_err(|e| Error::checkpoint(out_dir, e.to_string()))?;

    // Every domain's workspace, restored from its checkpoint when there is one.
    let setup = DomainSetup {
        cfg,
        explorer: &explorer,
        provenance: &provenance,
        backend: &backend,
        toml: &toml,
        resume_key: &resume_key,
        checkpoint_dir: &checkpoint_dir,
        out_dir,
    };
    let (mut domains, resumed_steps): (Vec<Domain<A>>, Vec<Option<u64>>) = tasks
        .iter()
        .enumerate()
        .map(|(d, task)| setup.open::<A>(d, *task))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let resumed_from_frame = setup.restore_explorer(&resumed_steps, domains[0].ws.frame())?;
    let _claim = crate::fsutil::claim_dir(out_dir, "explore")?;
    write_bytes_atomic(&out_dir.join(CONFIG_FILE), toml.as_bytes())
        .map_err(|e| Error::checkpoint(out_dir, e.to_string()))?;

    let repeat = cfg.env.action_repeat;
    let num_train_frames = cfg.run.num_train_frames.0;
    let total_steps = cfg.run.num_train_frames.to_steps(repeat);
    let checkpoint_every = cfg.run.checkpoint_every_frames.to_steps(repeat);
    on_event(ExploreEvent::Started {
        start_frame: domains[0].ws.frame(),
        num_train_frames,
        resumed: resumed_from_frame.is_some(),
        tasks: domains.iter().map(|d| d.task).collect(),
    });
    let mut last_checkpoint_step = domains[0].ws.step;
    while domains[0].ws.step < total_steps {
        for domain in domains.iter_mut() {
            domain.step(on_event)?;
        }
        let step = domains[0].ws.step;
        on_event(ExploreEvent::Progress {
            frame: domains[0].ws.frame(),
        });
        let between_episodes = domains.iter().all(|d| d.episode.is_none());
        if between_episodes && step - last_checkpoint_step >= checkpoint_every && step < total_steps {
            save_and_report(cfg, &explorer, &domains, out_dir, &toml, on_event)?;
            last_checkpoint_step = step;
        }
    }
    let encoder = save_and_report(cfg, &explorer, &domains, out_dir, &toml, on_event)?;
    let updates = explorer.borrow().updates();
    Ok(ExploreSummary {
        frames_done: Frames::from_steps(domains[0].ws.step, repeat).0,
        resumed_from_frame,
        updates,
        encoder,
    })
}

/// A domain's `train.jsonl`, cut back to its checkpoint, mirrored to TensorBoard in its folder.
fn open_log<A: Registered>(dir: &Path, ws: &Workspace<A>, tensorboard: bool) -> Result<MetricsLog> {
    let frame = ws.frame();
    let log = MetricsLog::open(&dir.join(TRAIN_LOG), ws.step)?;
    Ok(match tensorboard {
        true => log.mirrored(Some(Mirror {
            events: EventFile::open_shared(dir, |p| p.x <= frame)?,
            x: FRAME_FIELD,
        })),
        false => log,
    })
}

/// A crash between the swap's two renames leaves only `checkpoint.old`: it is the checkpoint.
/// A half-written `checkpoint.tmp` is dropped.
fn recover_checkpoint_dir(dir: &Path) -> Result<()> {
    let (old, tmp) = (dir.with_extension("old"), dir.with_extension("tmp"));
    let io = |p: &Path, e: std::io::Error| Error::checkpoint(p, e.to_string());
    if !dir.exists() && old.exists() {
        std::fs::rename(&old, dir).map_err(|e| io(&old, e))?;
    }
    for stale in [old, tmp] {
        if stale.exists() {
            std::fs::remove_dir_all(&stale).map_err(|e| io(&stale, e))?;
        }
    }
    Ok(())
}

/// [`save`], then the checkpoint's event; returns the encoder export's path.
fn save_and_report<A: Registered>(
    cfg: &ExploreConfig,
    explorer: &SharedExplorer,
    domains: &[Domain<A>],
    out_dir: &Path,
    toml: &str,
    on_event: &mut dyn FnMut(ExploreEvent),
) -> Result<PathBuf> {
    let encoder = save(cfg, explorer, domains, out_dir, toml)?;
    on_event(ExploreEvent::Checkpoint {
        frame: domains[0].ws.frame(),
        encoder: &encoder,
    });
    Ok(encoder)
}

/// Writes every domain's checkpoint and the explorer's state into `checkpoint.tmp`, swaps it
/// in for `checkpoint`, then exports the encoder; returns the export's path.
fn save<A: Registered>(
    cfg: &ExploreConfig,
    explorer: &SharedExplorer,
    domains: &[Domain<A>],
    out_dir: &Path,
    toml: &str,
) -> Result<PathBuf> {
    let dir = out_dir.join(CHECKPOINT_DIR);
    let (old, tmp) = (dir.with_extension("old"), dir.with_extension("tmp"));
    let io = |p: &Path, e: std::io::Error| Error::checkpoint(p, e.to_string());
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    for d in domains {
        d.ws.save_checkpoint(&tmp.join(format!("{}.safetensors", d.task)))?;
    }
    let state = explorer.borrow().state()?;
    let mut meta: std::collections::HashMap<String, String> = state.counters.into_iter().collect();
    meta.insert(kind::KEY.into(), kind::EXPLORER_STATE.into());
    meta.insert(run_dir::meta::CONFIG.into(), toml.to_string());
    safetensors_file::save_atomic(&tmp.join(EXPLORER_FILE), &state.tensors, &meta)?;
    if dir.exists() {
        std::fs::rename(&dir, &old).map_err(|e| io(&dir, e))?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| io(&tmp, e))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| io(&old, e))?;
    }
    let encoder = out_dir.join(ENCODER_FILE);
    let explorer = explorer.borrow();
    let provenance = Provenance {
        method: cfg.explore.method.name().to_string(),
        step: explorer.updates(),
        source: dir,
        config: toml.to_string(),
        // What the encoder saw, as `lfs collect`'s datasets record it: `lfs eval` and suites
        // render at this quality (`env.render_quality = "encoder"`) and refuse another.
        datasets: Some(
            serde_json::json!([{
                "source": "lfs explore",
                "tasks": domains.iter().map(|d| d.task).collect::<Vec<_>>(),
                "render_quality": domains[0].ws.render_quality.name(),
            }])
            .to_string(),
        ),
    };
    let mut enc = cfg.explore.encoder.clone();
    enc.input_offset = 0.0; // folded into the export (`Explorer::export_tensors`)
    write_files(&encoder, &explorer.export_tensors()?, &enc, None, false, &provenance)?;
    Ok(encoder)
}
