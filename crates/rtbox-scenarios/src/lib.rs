//! Scenario tests: one configuration through every driver (analysis, simulator, runtime), checking
//! that they agree. The tests live in `tests/`; this library only finds the shared examples.

use std::path::PathBuf;

/// The path of a file in the repository's `examples/`.
pub fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Loads an example configuration, panicking with the loader's message (tests only).
pub fn load_example(name: &str) -> rtbox_model::System {
    rtbox_config::load_file(example(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}
