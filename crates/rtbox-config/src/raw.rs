//! The file as written: serde structures that mirror the TOML, with spans kept for messages.
//!
//! Every table denies unknown fields, so a typo such as `budgett` is an error with its line.
//! Values whose meaning depends on units or ranges stay raw (`Field`) and are converted in
//! [`crate::convert`], where the error can name the box and the field path.

use serde::Deserialize;
use toml::Spanned;

/// A raw value with its byte span in the file.
pub type Field = Spanned<toml::Value>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub platform: Option<RawPlatform>,
    #[serde(rename = "box", default)]
    pub boxes: Vec<RawBox>,
    #[serde(rename = "task", default)]
    pub tasks: Vec<RawTask>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlatform {
    pub cpus: Option<Field>,
    pub cap: Option<Field>,
    /// The members' SCHED_FIFO band, `"LOW-HIGH"` (used by the daemon only).
    pub priorities: Option<Field>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBox {
    pub name: Spanned<String>,
    pub parent: Option<Spanned<String>>,
    pub cpus: Option<Field>,
    pub policy: Option<Spanned<String>>,
    pub placement: Option<Spanned<String>>,
    pub mode: Option<Spanned<String>>,
    /// A scheduler plug-in over the box's periodic members (`docs/config.md`, "Plug-ins").
    pub plugin: Option<Spanned<String>>,
    pub interface: Option<RawInterface>,
    /// What the daemon attaches or starts in this box (ignored by analysis and simulation).
    pub members: Option<RawMembers>,
    /// Users besides root who may attach their own processes to this box and its children
    /// through the daemon's socket (ignored by analysis and simulation).
    pub users: Option<Field>,
}

/// `members = { pids, cgroups, commands, comms, containers }`: every list optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMembers {
    pub pids: Option<Field>,
    pub cgroups: Option<Field>,
    pub commands: Option<Field>,
    pub comms: Option<Field>,
    pub containers: Option<Field>,
}

/// Exactly one of these must be given; checked in conversion for a clear message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInterface {
    pub servers: Option<Field>,
    pub per_cpu: Option<Field>,
    pub bdm: Option<RawBdm>,
    pub mpr: Option<RawMpr>,
    pub shared: Option<RawShared>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBdm {
    pub alpha: Field,
    pub delta: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMpr {
    pub theta: Field,
    pub pi: Field,
    pub m: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShared {
    pub weight: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    pub name: Spanned<String>,
    #[serde(rename = "box")]
    pub box_name: Option<Spanned<String>>,
    pub wcet: Field,
    pub bcet: Option<Field>,
    pub period: Field,
    pub deadline: Option<Field>,
    pub priority: Option<Field>,
    pub cpu: Option<Field>,
    pub offset: Option<Field>,
    pub jitter: Option<Field>,
    pub arrival: Option<Spanned<String>>,
    pub after: Option<Spanned<String>>,
}
