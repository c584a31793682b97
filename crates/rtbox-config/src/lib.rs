//! rtbox configuration files.
//!
//! One TOML file describes the platform, the boxes and the tasks (see `docs/config.md`). Loading
//! is two steps: serde reads the file into the raw structures of [`raw`] (unknown fields are
//! errors), then [`convert`] turns raw values into the model, naming the line, the object and
//! the field of the first invalid value. The result is a validated [`rtbox_model::System`].

mod convert;
mod error;
pub mod raw;

use std::path::Path;

pub use error::{ConfigError, ConfigErrorKind};
use rtbox_model::System;

/// Parses a configuration from text.
pub fn parse_str(text: &str) -> Result<System, ConfigError> {
    let raw: raw::RawConfig = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
    convert::to_system(text, raw)
}

/// Reads and parses a configuration file.
pub fn load_file(path: impl AsRef<Path>) -> Result<System, ConfigError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        line: None,
        kind: ConfigErrorKind::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        },
    })?;
    parse_str(&text)
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
