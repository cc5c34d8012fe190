//! The encoders: LNC during pre-training, their linear probes beside their returns, and the
//! online probe over pre-training.

use super::*;

pub(super) fn lnc_during_pretraining(md: &mut String, report: &Report) {
    let pre = &report.pretraining;
    if pre.curves.is_empty() && pre.notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## LNC during pre-training\n");
    let _ = writeln!(
        md,
        "N: the synthetic (frame-mask) pairs LNC kept in each pre-training batch of M pairs (the paper's §3.2; the \
         rest of the batch is real pairs), read from the pre-training log (`metrics.jsonl`) of each encoder made \
         with LNC. Means over bins of updates; D: the mean k-NN distance among the real latents; window: LNC's \
         clip window (c − r/2)·D to (c + r/2)·D, which a synthetic latent's distance to its nearest real one must \
         fall in.\n"
    );
    for c in &pre.curves {
        let _ = writeln!(
            md,
            "### {} (`{}`, M = {})\n",
            report.methods[c.method].method,
            c.log.display(),
            c.batch_size
        );
        let _ = writeln!(md, "| updates | N (mean ± std) | N / M | D | window | loss |");
        let _ = writeln!(md, "|---|---|---|---|---|---|");
        for b in &c.bins {
            let _ = writeln!(
                md,
                "| {}–{} | {:.2} ± {:.2} | {:.3} | {:.4} | {:.4}–{:.4} | {:.4} |",
                b.first,
                b.last,
                b.num_synthetic,
                b.num_synthetic_std,
                b.num_synthetic / c.batch_size.max(1) as f64,
                b.lnc_d,
                b.clip_low,
                b.clip_high,
                b.loss
            );
        }
        let _ = writeln!(md);
    }
    for n in &pre.notes {
        let _ = writeln!(
            md,
            "The pre-training log of {} (`{}`) could not be read: {}.\n",
            n.method,
            n.log.display(),
            n.reason
        );
    }
}

/// "0.710 [0.660, 0.750]", "0.710" without an interval, "–" when undefined.
pub(super) fn fmt_r2(r: &R2) -> String {
    match (r.point.is_finite(), r.low.is_finite() && r.high.is_finite()) {
        (false, _) => "–".to_string(),
        (true, true) => format!("{:.3} [{:.3}, {:.3}]", r.point, r.low, r.high),
        (true, false) => format!("{:.3}", r.point),
    }
}

pub(super) fn fmt_rho(a: Option<RankAgreement>) -> String {
    match a {
        Some(a) if a.rho.is_finite() => format!("{:.3} ({} encoders)", a.rho, a.num_encoders),
        Some(a) => format!("undefined: all tied ({} encoders)", a.num_encoders),
        None => format!("– (fewer than {MIN_ENCODERS} encoders)"),
    }
}

/// "1/6": the chance of ρ = 1 (or of ρ = −1) under a random order of n encoders without ties.
pub(super) fn chance_of_perfect_order(n: usize) -> String {
    match (1..=n as u64).try_fold(1u64, |f, k| f.checked_mul(k)) {
        Some(f) => format!("1/{f}"),
        None => format!("1/{n}!"),
    }
}

/// What the report says of the encoder a probe probed: the random encoder's seed, or its id.
pub(super) fn probed_encoder(f: &ProbeFile) -> String {
    match f.encoder_id.strip_prefix("random:") {
        Some(seed) if f.is_random() => format!(
            "the random encoder of seed {seed} (`{}`; each SAC run draws its own from the run's seed)",
            f.encoder_id
        ),
        _ => match &f.bound_to {
            Some(row) => format!(
                "`{}` (sha256 `{}`), bound to the row `{row}` by `--probe {row}=FILE`: not the export its \
                 runs record, but one said to hold the same encoder",
                f.encoder_source, f.encoder_id
            ),
            None => format!("`{}` (sha256 `{}`)", f.encoder_source, f.encoder_id),
        },
    }
}

pub(super) fn probes_section(md: &mut String, report: &Report) {
    let probes = &report.probes;
    if probes.rows.is_empty() && probes.notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Linear probes beside SAC returns\n");
    if let (Some(budget), false) = (probes.budget, probes.rows.is_empty()) {
        probe_table(md, report, budget);
    }
    if !probes.ranks.is_empty() {
        rank_correlations(md, report);
    }
    for n in &probes.notes {
        let _ = writeln!(
            md,
            "The probe file `{}` was not used: {}.\n",
            n.path.display(),
            n.reason
        );
    }
}

/// The probes' table beside the SAC returns at `budget` frames, and which probe file each row
/// read.
fn probe_table(md: &mut String, report: &Report, budget: u64) {
    let probes = &report.probes;
    let label = frames_label(budget as f64);
    let _ = writeln!(
        md,
        "Held-out R² of `lfs probe`'s linear (ridge) probes from each encoder's frozen features to the task's \
         state and to its reward (mean over the target's dimensions; brackets: the interval probe.json gives, a \
         bootstrap over held-out episodes), beside the SAC return of the same encoder row at {label} frames \
         (mean ± std over seeds, runs in brackets, as in \"Scores at {label} frames\"). Every encoder row and \
         task that has both. Also in [{PROBE_CSV}]({PROBE_CSV}).\n"
    );
    let _ = writeln!(
        md,
        "| encoder | task | SAC return at {label} | state R² [low, high] | reward R² [low, high] |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for r in &probes.rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            report.methods[r.method].method,
            r.task,
            fmt_stats(Some(r.sac), 1),
            fmt_r2(&r.r2.state),
            fmt_r2(&r.r2.reward)
        );
    }
    let _ = writeln!(md, "\nThe probes:\n");
    let mut used: Vec<(usize, usize)> = Vec::new();
    for r in &probes.rows {
        if !used.contains(&(r.method, r.file)) {
            used.push((r.method, r.file));
        }
    }
    for (method, file) in used {
        let f = &probes.files[file];
        let _ = writeln!(
            md,
            "- {}: `{}`, {}; probe set `{}`{}",
            report.methods[method].method,
            f.path.display(),
            probed_encoder(f),
            f.dataset,
            f.dataset_render_quality
                .as_deref()
                .map_or(String::new(), |q| format!(" (render quality {q})"))
        );
    }
    let _ = writeln!(md);
}

/// Spearman's ρ between the probes' R² and the SAC returns, per task, with its caveat.
fn rank_correlations(md: &mut String, report: &Report) {
    let probes = &report.probes;
    let _ = writeln!(md, "### Do the probes order the encoders as SAC does?\n");
    let _ = writeln!(
        md,
        "Spearman's rank correlation ρ across encoder rows, per task, between the probe's held-out R² and the \
         mean SAC return above (average ranks for ties; 1: the same order, −1: the reverse), on tasks where at \
         least {MIN_ENCODERS} encoder rows have both.\n"
    );
    let _ = writeln!(md, "| task | ρ(state R², return) | ρ(reward R², return) |");
    let _ = writeln!(md, "|---|---|---|");
    for t in &probes.ranks {
        let _ = writeln!(md, "| {} | {} | {} |", t.task, fmt_rho(t.state), fmt_rho(t.reward));
    }
    let counts: BTreeSet<usize> = probes
        .ranks
        .iter()
        .flat_map(|t| [t.state, t.reward])
        .flatten()
        .map(|a| a.num_encoders)
        .collect();
    let chances: Vec<String> = counts
        .iter()
        .map(|&n| format!("{} at n = {n}", chance_of_perfect_order(n)))
        .collect();
    let _ = writeln!(
        md,
        "\n**Caveat.** Each ρ is over only {} encoders (n per cell above), each encoder's return a mean over few \
         seeds: with n encoders in a random order, ρ = 1 happens by chance with probability 1/n! ({}), and no \
         test or interval is given here. Read ρ as a description of these encoders, not as evidence that the \
         probe predicts SAC.\n",
        distinct(counts.iter()),
        chances.join(", ")
    );
}

pub(super) fn online_probe(md: &mut String, report: &Report) {
    let pre = &report.pretraining;
    if pre.probes.is_empty() && pre.probe_notes.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Online probe during pre-training\n");
    if !pre.probes.is_empty() {
        let _ = writeln!(
            md,
            "Held-out R² of linear (ridge) probes from the encoder's features to the state and to the reward, fitted \
         while pre-training ran (`[probe]` of the pre-training config), means over the probe set's tasks, read \
         from the `probe/*` lines of each encoder's `metrics.jsonl`. Update 0 is the initial encoder; – : R² \
         undefined (logged as null). Drawn beside the pre-training loss in the pretrain_probe picture.\n"
        );
    }
    for c in &pre.probes {
        let rows = c.table_rows();
        let _ = writeln!(md, "### {} (`{}`)\n", report.methods[c.method].method, c.log.display());
        if rows.len() < c.probes.points.len() {
            let _ = writeln!(
                md,
                "{} probes; {} shown, evenly spaced (the first and the last among them).\n",
                c.probes.points.len(),
                rows.len()
            );
        }
        let _ = writeln!(md, "| update | state R² | reward R² |");
        let _ = writeln!(md, "|---|---|---|");
        let fmt = |x: f64| {
            if x.is_finite() {
                format!("{x:.3}")
            } else {
                "–".to_string()
            }
        };
        for p in rows {
            let _ = writeln!(md, "| {} | {} | {} |", p.step, fmt(p.state_r2), fmt(p.reward_r2));
        }
        let _ = writeln!(md);
    }
    for n in &pre.probe_notes {
        let _ = writeln!(
            md,
            "The online probe in the pre-training log of {} (`{}`) could not be read: {}.\n",
            n.method,
            n.log.display(),
            n.reason
        );
    }
}
