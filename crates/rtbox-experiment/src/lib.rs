//! Schedulability experiments on random task sets.
//!
//! - [`sweep`]: N random task sets per utilization point, each judged by the analysis and/or
//!   simulated, giving success ratios (CSV and an SVG line plot, [`plot`]); all cores used, and
//!   the results do not depend on the number of threads.
//! - [`settings`]: a sweep written as text (the CLI's flags, the Python binding's arguments)
//!   turned into a [`sweep::SweepSpec`], with errors naming the setting.
//! - [`agreement`]: issue 4 scenario 5, random boxes that the analysis declares schedulable
//!   must show no deadline miss in simulation (synchronous WCET releases and a random sporadic
//!   variant), and no response time above the analysis bound.
//!
//! - [`exsched`]: seed 001's Figure 11, the success ratio of the plug-ins (fp, fp-ff, fp-pm,
//!   g-fp, fp-us) on random task sets drawn as the seed draws them.
//! - [`report`]: admission, analysis and synthesis results as JSON, one shape for the CLI's
//!   `--json` and the Python binding.
//!
//! No I/O: callers get strings and numbers back.

pub mod agreement;
pub mod carry_in;
pub mod exsched;
pub mod plot;
pub mod pool;
pub mod report;
pub mod settings;
pub mod sweep;
