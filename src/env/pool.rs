//! N dm_control workers stepping in parallel, with dead workers restarted.

use super::{DmcConfig, DmcEnv, Env, EnvSpec, TimeStep};
use crate::{Error, Result};

/// A slot fails this many times in a row (deaths or refusals with no successful reply in
/// between) before the pool gives up: something is wrong beyond one unlucky episode.
const MAX_FAILURES_IN_A_ROW: u32 = 3;

/// What one slot of the pool is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum EnvCommand {
    Reset { seed: u64 },
    Step { action: Vec<f32> },
}

/// What one slot of the pool answered.
#[derive(Debug)]
pub enum PoolReply {
    /// The slot was given no command.
    Idle,
    Ready(TimeStep),
    /// The episode in this slot is lost (the worker died and was restarted, or dm_control
    /// raised, e.g. `PhysicsError`); the slot is ready for a reset. The error says why.
    Broken(Error),
}

struct Slot {
    env: DmcEnv,
    failures_in_a_row: u32,
}

/// Commands sent by [`EnvPool::submit`] whose replies are not read yet: per slot, whether a
/// command went out (and whether sending it failed).
#[must_use = "a worker's reply must be collected before it takes another command"]
pub struct InFlight {
    sent: Vec<Option<Result<()>>>,
}

/// Workers in parallel processes. Every call sends all the commands first and then reads
/// the replies, so the workers simulate and render at the same time.
pub struct EnvPool {
    slots: Vec<Slot>,
    restarts: u32,
}

impl EnvPool {
    /// Starts one worker per config; their start-ups overlap.
    pub fn new(configs: Vec<DmcConfig>) -> Result<Self> {
        let pending = configs.into_iter().map(DmcEnv::start).collect::<Result<Vec<_>>>()?;
        let envs = pending.into_iter().map(|p| p.finish()).collect::<Result<Vec<_>>>()?;
        Ok(Self {
            slots: envs
                .into_iter()
                .map(|env| Slot {
                    env,
                    failures_in_a_row: 0,
                })
                .collect(),
            restarts: 0,
        })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn spec(&self, slot: usize) -> &EnvSpec {
        self.slots[slot].env.spec()
    }

    pub fn config(&self, slot: usize) -> &DmcConfig {
        self.slots[slot].env.config()
    }

    /// The worker in `slot` (tests use it to kill or poison a worker).
    pub fn worker_mut(&mut self, slot: usize) -> &mut DmcEnv {
        &mut self.slots[slot].env
    }

    /// Workers restarted so far because they died.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Replaces the worker in `slot` with a new one for `config` (e.g. another task).
    pub fn replace(&mut self, slot: usize, config: DmcConfig) -> Result<()> {
        self.slots[slot] = Slot {
            env: DmcEnv::spawn(config)?,
            failures_in_a_row: 0,
        };
        Ok(())
    }

    /// Runs `commands[i]` on slot `i` (`None`: leave it idle), all slots at once.
    ///
    /// A lost episode is a [`PoolReply::Broken`] for its slot only; the others carry on. The
    /// call fails as a whole only when a dead worker cannot be restarted, or a slot keeps
    /// failing (`MAX_FAILURES_IN_A_ROW`).
    pub fn execute(&mut self, commands: &[Option<EnvCommand>]) -> Result<Vec<PoolReply>> {
        let in_flight = self.submit(commands)?;
        self.collect(in_flight)
    }

    /// Sends `commands[i]` to slot `i` and returns at once: the workers simulate and render
    /// while the caller works (the RL loop updates the agent meanwhile). [`EnvPool::collect`]
    /// reads the replies; a worker takes no new command before its reply is read.
    pub fn submit(&mut self, commands: &[Option<EnvCommand>]) -> Result<InFlight> {
        if commands.len() != self.slots.len() {
            return Err(Error::Shape(format!(
                "{} commands for a pool of {} environments",
                commands.len(),
                self.slots.len()
            )));
        }
        let sent = self
            .slots
            .iter_mut()
            .zip(commands)
            .map(|(slot, command)| {
                command.as_ref().map(|command| match command {
                    EnvCommand::Reset { seed } => slot.env.send_reset(*seed),
                    EnvCommand::Step { action } => slot.env.send_step(action),
                })
            })
            .collect();
        Ok(InFlight { sent })
    }

    /// The replies to a [`EnvPool::submit`], as [`EnvPool::execute`] gives them.
    pub fn collect(&mut self, in_flight: InFlight) -> Result<Vec<PoolReply>> {
        let mut replies = Vec::with_capacity(in_flight.sent.len());
        for (i, sent) in in_flight.sent.into_iter().enumerate() {
            let outcome = match sent {
                None => {
                    replies.push(PoolReply::Idle);
                    continue;
                }
                Some(Ok(())) => self.slots[i].env.receive(),
                Some(Err(e)) => Err(e),
            };
            replies.push(match outcome {
                Ok(step) => {
                    self.slots[i].failures_in_a_row = 0;
                    PoolReply::Ready(step)
                }
                Err(error) => self.recover(i, error)?,
            });
        }
        Ok(replies)
    }

    /// After a failure in `slot`: restart the worker if it died, count the failure, and hand
    /// the error back as a lost episode.
    fn recover(&mut self, slot: usize, error: Error) -> Result<PoolReply> {
        let failures = self.slots[slot].failures_in_a_row + 1;
        if failures >= MAX_FAILURES_IN_A_ROW {
            return Err(Error::Env {
                task: self.slots[slot].env.config().task.to_string(),
                reason: format!("failed {failures} times in a row, giving up; last failure: {error}"),
            });
        }
        if self.slots[slot].env.is_dead() {
            let config = self.slots[slot].env.config().clone();
            self.slots[slot].env = DmcEnv::spawn(config)?;
            self.restarts += 1;
        }
        self.slots[slot].failures_in_a_row = failures;
        Ok(PoolReply::Broken(error))
    }
}
