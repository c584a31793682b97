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
    let system = convert::to_system(text, raw)?;
    Ok(Config {
        system,
        members: members?,
        users: users?,
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
