//! Typed validation errors: which object, which field, and why.

use std::fmt;

/// The object an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Platform,
    Box(String),
    Task(String),
}

/// One invalid value. Displays as `box "Y1": interface.bdm.alpha = 1.2 is not in (0, 1)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    pub subject: Subject,
    /// Dotted field path inside the subject, e.g. `interface.bdm.alpha`.
    pub field: String,
    /// The reason, phrased to follow the field (often starting with `= value`).
    pub reason: String,
}

impl ModelError {
    pub fn new(subject: Subject, field: impl Into<String>, reason: impl Into<String>) -> Self {
        ModelError {
            subject,
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Subject::Platform => write!(f, "platform: ")?,
            Subject::Box(name) => write!(f, "box \"{name}\": ")?,
            Subject::Task(name) => write!(f, "task \"{name}\": ")?,
        }
        if self.field.is_empty() {
            write!(f, "{}", self.reason)
        } else if ["=", "is ", "forms ", "lists "]
            .iter()
            .any(|p| self.reason.starts_with(p))
        {
            write!(f, "{} {}", self.field, self.reason)
        } else {
            write!(f, "{}: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for ModelError {}
