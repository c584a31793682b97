//! rtbox configuration files.
//!
//! One TOML file describes the platform, the boxes and the tasks (see `docs/config.md`). Loading
//! is two steps: serde reads the file into the raw structures of [`raw`] (unknown fields are
//! errors), then [`convert`] turns raw values into the model, naming the line, the object and
//! the field of the first invalid value. The result is a validated [`rtbox_model::System`].
//!
//! Boxes may also name their members (`members = { pids, cgroups, commands, comms }`), which
//! only the daemon uses: [`parse_str_with_members`] / [`load_file_with_members`] return them
//! beside the system in a [`Config`]; [`parse_str`] / [`load_file`] validate and drop them.
//! The same holds for a box's `users`, who besides root may attach to it through the daemon.

mod convert;
mod error;
mod members;
pub mod raw;

use std::path::Path;

pub use error::{ConfigError, ConfigErrorKind};
pub use members::{BoxMembers, BoxUsers, Members, UserRef, COMM_MAX};
use rtbox_model::System;

/// A whole configuration: the validated system and the members its boxes name.
#[derive(Debug, Clone)]
pub struct Config {
    pub system: System,
    /// One entry per box with a `members` table, in file order.
    pub members: Vec<BoxMembers>,
    /// One entry per box with a `users` list, in file order.
    pub users: Vec<BoxUsers>,
    /// `[platform] priorities`: the daemon's members' SCHED_FIFO band, if written.
    pub priorities: Option<rtbox_model::PrioRange>,
}

/// Parses a configuration from text (members are validated, then dropped).
pub fn parse_str(text: &str) -> Result<System, ConfigError> {
    parse_str_with_members(text).map(|c| c.system)
}

/// Parses a configuration from text, keeping the boxes' members.
pub fn parse_str_with_members(text: &str) -> Result<Config, ConfigError> {
    let raw: raw::RawConfig = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    // Box errors first: a member list of a broken box is the lesser news.
    let members = members::members(text, &raw);
    let users = members::users(text, &raw);
    let priorities = convert::priorities(text, raw.platform.as_ref());
    let system = convert::to_system(text, raw)?;
    Ok(Config {
        system,
        members: members?,
        users: users?,
        priorities: priorities?,
    })
}

/// Reads and parses a configuration file (members are validated, then dropped).
pub fn load_file(path: impl AsRef<Path>) -> Result<System, ConfigError> {
    load_file_with_members(path).map(|c| c.system)
}

/// Reads and parses a configuration file, keeping the boxes' members.
pub fn load_file_with_members(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        line: None,
        kind: ConfigErrorKind::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        },
    })?;
    parse_str_with_members(&text)
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn syntax_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim().replace('`', "\"");
    ConfigError {
        line: e.span().map(|s| line_of(text, s.start)),
        kind: ConfigErrorKind::Syntax(message),
    }
}

#[cfg(test)]
mod band_tests {
    use super::*;

    /// Issue 19: the members' band in `[platform]`, with precise errors naming line and field.
    #[test]
    fn the_members_band_is_read_from_the_platform() {
        let base = "[platform]\ncpus = 2\n";
        assert_eq!(parse_str_with_members(base).unwrap().priorities, None);
        let c = parse_str_with_members(&format!("{base}priorities = \"10-49\"\n")).unwrap();
        assert_eq!(c.priorities, rtbox_model::PrioRange::new(10, 49).ok());
        let e = parse_str_with_members(&format!("{base}priorities = \"10-98\"\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: platform: priorities = \"10-98\": priority 98 is outside 1-96 (97 is the backstop's and the watchdog's, 98 the enforcement loop's)"
        );
        let e = parse_str_with_members(&format!("{base}priorities = 40\n")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 3: platform: priorities = 40 must be a string"),
            "{e}"
        );
    }
}
