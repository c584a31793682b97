//! Configuration errors: one precise message naming the line, the object, the field and why.

use std::fmt;

use rtbox_model::ModelError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io { path: String, message: String },
    /// Not valid TOML, or a field the format does not have.
    Syntax(String),
    /// Well-formed TOML with an invalid value.
    Invalid(ModelError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    pub kind: ConfigErrorKind,
}

impl ConfigError {
    pub(crate) fn invalid(line: Option<usize>, error: ModelError) -> Self {
        ConfigError {
            line,
            kind: ConfigErrorKind::Invalid(error),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        match &self.kind {
            ConfigErrorKind::Io { path, message } => write!(f, "cannot read {path}: {message}"),
            ConfigErrorKind::Syntax(m) => f.write_str(m),
            ConfigErrorKind::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfigError {}
