//! The package's exceptions. Messages are the library errors' `Display` text, the same words
//! the CLI prints after its `rtbox <command>:` prefix.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    rtbox,
    RtboxError,
    PyException,
    "Base class of every rtbox error."
);
create_exception!(
    rtbox,
    ConfigError,
    RtboxError,
    "Invalid input: the message names the line (for TOML text), the object, the field and why. \
     Attributes: `line` (int or None) and `field` (str or None)."
);
create_exception!(
    rtbox,
    AdmissionError,
    RtboxError,
    "Admission control refused the reservations. Attribute `refusals`: one message per \
     refusal, with its numbers."
);
create_exception!(
    rtbox,
    SynthesisError,
    RtboxError,
    "No interface of the requested kind makes the box schedulable, or the box has no tasks."
);
create_exception!(
    rtbox,
    SimulationError,
    RtboxError,
    "The simulator could not run the system."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RtboxError", py.get_type::<RtboxError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("AdmissionError", py.get_type::<AdmissionError>())?;
    m.add("SynthesisError", py.get_type::<SynthesisError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    Ok(())
}

/// A `ConfigError` with its `line` and `field` attributes set.
pub fn config_error_with(line: Option<usize>, field: Option<String>, message: String) -> PyErr {
    Python::with_gil(|py| {
        let err = ConfigError::new_err(message);
        let value = err.value(py);
        // Attributes on a fresh exception object cannot fail; a failure would only lose them.
        let _ = value.setattr("line", line);
        let _ = value.setattr("field", field);
        err
    })
}

pub fn config_error(line: Option<usize>, message: String) -> PyErr {
    config_error_with(line, None, message)
}

/// A configuration error as the CLI prints it after the file name.
pub fn from_config(e: &rtbox_config::ConfigError) -> PyErr {
    let field = match &e.kind {
        rtbox_config::ConfigErrorKind::Invalid(m) => Some(m.field.clone()),
        _ => None,
    };
    config_error_with(e.line, field, e.to_string())
}

/// A refused admission: the message lists the refusals, `refusals` holds them one by one.
pub fn admission_error(refusals: Vec<String>) -> PyErr {
    Python::with_gil(|py| {
        let err = AdmissionError::new_err(format!("refused: {}", refusals.join("; ")));
        let _ = err.value(py).setattr("refusals", refusals);
        err
    })
}

/// A sweep setting error, named as the CLI names its flag (without the dashes).
pub fn from_sweep(e: rtbox_experiment::sweep::SweepError) -> PyErr {
    match e {
        rtbox_experiment::sweep::SweepError::Setting { field, reason } => {
            config_error_with(None, Some(field.clone()), format!("{field}: {reason}"))
        }
    }
}
