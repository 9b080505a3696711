//! Progress display on stderr for anything that may take over a second.

use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// A spinner for work whose progress cannot be measured (loading a file). indicatif draws
/// nothing when stderr is not a terminal, so scripted use stays clean.
pub fn spinner(message: impl Into<String>) -> ProgressBar {
    let bar = ProgressBar::new_spinner().with_message(message.into());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A bar from 0 to 100 % for work that reports its progress.
pub fn percent_bar(message: impl Into<String>) -> ProgressBar {
    let bar = ProgressBar::new(1000).with_message(message.into());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {percent:>3}% ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// A bar counting `total` steps (frames, files).
pub fn bar(total: u64, message: impl Into<String>) -> ProgressBar {
    let bar = ProgressBar::new(total).with_message(message.into());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}
