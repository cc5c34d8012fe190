//! The progress display every long-running subcommand shares: a bar on a terminal, plain lines
//! otherwise (logs, CI, a scheduler's output file).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps drawn with `template` (indicatif's syntax), when stderr is a terminal.
pub fn terminal_bar(len: u64, template: &str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(len);
        bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
        bar
    })
}

/// Prints a line above the bar, or to stderr when there is none.
pub fn say(bar: &Option<ProgressBar>, line: String) {
    match bar {
        Some(bar) => bar.println(line),
        None => eprintln!("{line}"),
    }
}
