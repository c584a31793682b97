//! `[[box]] members`: what the daemon puts into each box at start.
//!
//! Members are a runtime concern, so they are not part of the model's `System`; they are a
//! separate output of the config ([`crate::Config`]). Only the form is checked here (types,
//! ranges, absolute paths, non-empty commands, duplicates); whether a pid or a cgroup exists is
//! for the daemon to check when it starts.

use std::collections::HashMap;
use std::path::PathBuf;

use rtbox_model::{ModelError, Subject};
use toml::Value;

use crate::error::ConfigError;
use crate::line_of;
use crate::raw::{Field, RawConfig, RawMembers};

/// Longest process name the kernel keeps (`TASK_COMM_LEN` - 1).
pub const COMM_MAX: usize = 15;

/// The members one box names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Processes to attach (all their threads, and later their children).
    pub pids: Vec<i32>,
    /// Cgroup directories (absolute) whose threads join.
    pub cgroups: Vec<PathBuf>,
    /// Commands to start inside the box, like `rtbox exec` (argv, program first).
    pub commands: Vec<Vec<String>>,
    /// Process names (`/proc/PID/comm`): every process of that name at start is attached.
    pub comms: Vec<String>,
    /// Podman or Docker containers by name or id: each one's cgroup is attached.
    pub containers: Vec<String>,
}

impl Members {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.cgroups.is_empty()
            && self.commands.is_empty()
            && self.comms.is_empty()
            && self.containers.is_empty()
    }
}

/// The members of one box, with the line of its `members` table for later messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxMembers {
    pub box_name: String,
    pub line: usize,
    pub members: Members,
}

/// A user named in a box's `users` list: a uid, or a name the daemon looks up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRef {
    Uid(u32),
    Name(String),
}

/// The users of one box, with the line of its `users` list for later messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxUsers {
    pub box_name: String,
    pub line: usize,
    pub users: Vec<UserRef>,
}

struct Ctx<'a> {
    text: &'a str,
    subject: Subject,
}

impl Ctx<'_> {
    fn error(&self, f: &Field, path: &str, reason: String) -> ConfigError {
        ConfigError::invalid(
            Some(line_of(self.text, f.span().start)),
            ModelError::new(self.subject.clone(), path, reason),
        )
    }

    /// The field as an array, or an error saying what it should be.
    fn array<'f>(&self, f: &'f Field, path: &str, what: &str) -> Result<&'f [Value], ConfigError> {
        match f.get_ref() {
            Value::Array(items) => Ok(items),
            other => Err(self.error(
                f,
                path,
                format!(
                    "= {} must be an array of {what}",
                    crate::convert::show(other)
                ),
            )),
        }
    }

    /// A string without NUL bytes (they cannot reach the kernel).
    fn string<'v>(&self, f: &Field, path: &str, v: &'v Value) -> Result<&'v str, ConfigError> {
        match v {
            Value::String(s) if s.contains('\0') => {
                Err(self.error(f, path, "contains a NUL byte".into()))
            }
            Value::String(s) => Ok(s),
            other => Err(self.error(
                f,
                path,
                format!("= {} is not a string", crate::convert::show(other)),
            )),
        }
    }
}

/// Members of every box that names some, in file order.
pub(crate) fn members(text: &str, raw: &RawConfig) -> Result<Vec<BoxMembers>, ConfigError> {
    let mut out = Vec::new();
    // A pid or cgroup may be named once in the whole file: a thread has one box.
    let mut pid_seen: HashMap<i32, String> = HashMap::new();
    let mut cg_seen: HashMap<PathBuf, String> = HashMap::new();
    let mut container_seen: HashMap<String, String> = HashMap::new();
    for b in &raw.boxes {
        let Some(m) = &b.members else { continue };
        let ctx = Ctx {
            text,
            subject: Subject::Box(b.name.get_ref().clone()),
        };
        let members = box_members(&ctx, m)?;
        for (i, &pid) in members.pids.iter().enumerate() {
            if let Some(other) = pid_seen.insert(pid, b.name.get_ref().clone()) {
                let f = m.pids.as_ref().expect("pids parsed");
                return Err(ctx.error(
                    f,
                    &format!("members.pids[{i}]"),
                    format!("= {pid} is already a member of box \"{other}\""),
                ));
            }
        }
        for (i, cg) in members.cgroups.iter().enumerate() {
            if let Some(other) = cg_seen.insert(cg.clone(), b.name.get_ref().clone()) {
                let f = m.cgroups.as_ref().expect("cgroups parsed");
                return Err(ctx.error(
                    f,
                    &format!("members.cgroups[{i}]"),
                    format!(
                        "= \"{}\" is already a member of box \"{other}\"",
                        cg.display()
                    ),
                ));
            }
        }
        for (i, c) in members.containers.iter().enumerate() {
            if let Some(other) = container_seen.insert(c.clone(), b.name.get_ref().clone()) {
                let f = m.containers.as_ref().expect("containers parsed");
                return Err(ctx.error(
                    f,
                    &format!("members.containers[{i}]"),
                    format!("= \"{c}\" is already a member of box \"{other}\""),
                ));
            }
        }
        let line = [&m.pids, &m.cgroups, &m.commands, &m.comms, &m.containers]
            .into_iter()
            .flatten()
            .map(|f| line_of(text, f.span().start))
            .min()
            .unwrap_or_else(|| line_of(text, b.name.span().start));
        out.push(BoxMembers {
            box_name: b.name.get_ref().clone(),
            line,
            members,
        });
    }
    Ok(out)
}

/// `users` of every box that names some, in file order.
pub(crate) fn users(text: &str, raw: &RawConfig) -> Result<Vec<BoxUsers>, ConfigError> {
    let mut out = Vec::new();
    for b in &raw.boxes {
        let Some(f) = &b.users else { continue };
        let ctx = Ctx {
            text,
            subject: Subject::Box(b.name.get_ref().clone()),
        };
        let mut users = Vec::new();
        for (i, v) in ctx
            .array(f, "users", "user ids or names")?
            .iter()
            .enumerate()
        {
            let path = format!("users[{i}]");
            let u = match v {
                Value::Integer(n) => u32::try_from(*n)
                    .ok()
                    .filter(|&n| n != u32::MAX)
                    .map(UserRef::Uid)
                    .ok_or_else(|| {
                        ctx.error(
                            f,
                            &path,
                            format!("= {n} is not a user id (0..{})", u32::MAX),
                        )
                    })?,
                Value::String(_) => {
                    let s = ctx.string(f, &path, v)?;
                    let valid = !s.is_empty()
                        && !s.contains(':')
                        && !s.chars().any(|c| c.is_whitespace() || c.is_control());
                    if !valid {
                        return Err(ctx.error(f, &path, format!("= \"{s}\" is not a user name")));
                    }
                    UserRef::Name(s.to_string())
                }
                other => {
                    return Err(ctx.error(
                        f,
                        &path,
                        format!("= {} is not a user id or name", crate::convert::show(other)),
                    ))
                }
            };
            users.push(u);
        }
        out.push(BoxUsers {
            box_name: b.name.get_ref().clone(),
            line: line_of(text, f.span().start),
            users,
        });
    }
    Ok(out)
}

fn box_members(ctx: &Ctx, m: &RawMembers) -> Result<Members, ConfigError> {
    let mut out = Members::default();
    if let Some(f) = &m.pids {
        for (i, v) in ctx
            .array(f, "members.pids", "process ids")?
            .iter()
            .enumerate()
        {
            out.pids
                .push(pid(ctx, f, &format!("members.pids[{i}]"), v)?);
        }
    }
    if let Some(f) = &m.cgroups {
        let items = ctx.array(f, "members.cgroups", "absolute cgroup directories")?;
        for (i, v) in items.iter().enumerate() {
            out.cgroups
                .push(cgroup(ctx, f, &format!("members.cgroups[{i}]"), v)?);
        }
    }
    if let Some(f) = &m.commands {
        let items = ctx.array(
            f,
            "members.commands",
            "commands such as [\"prog\", \"arg\"]",
        )?;
        for (i, v) in items.iter().enumerate() {
            out.commands
                .push(command(ctx, f, &format!("members.commands[{i}]"), v)?);
        }
    }
    if let Some(f) = &m.containers {
        for (i, v) in ctx
            .array(f, "members.containers", "container names or ids")?
            .iter()
            .enumerate()
        {
            out.containers
                .push(container(ctx, f, &format!("members.containers[{i}]"), v)?);
        }
    }
    if let Some(f) = &m.comms {
        for (i, v) in ctx
            .array(f, "members.comms", "process names")?
            .iter()
            .enumerate()
        {
            out.comms
                .push(comm(ctx, f, &format!("members.comms[{i}]"), v)?);
        }
    }
    Ok(out)
}

/// A pid is a whole number in 1..=i32::MAX (0 would mean "the caller" to the kernel).
fn pid(ctx: &Ctx, f: &Field, path: &str, v: &Value) -> Result<i32, ConfigError> {
    match v {
        Value::Integer(n) if *n >= 1 && *n <= i64::from(i32::MAX) => Ok(*n as i32),
        Value::Integer(n) => Err(ctx.error(
            f,
            path,
            format!("= {n} is not a process id (1..={})", i32::MAX),
        )),
        other => Err(ctx.error(
            f,
            path,
            format!(
                "= {} is not a process id (a whole number)",
                crate::convert::show(other)
            ),
        )),
    }
}

/// A cgroup is an absolute directory: a relative one would depend on the daemon's cwd.
fn cgroup(ctx: &Ctx, f: &Field, path: &str, v: &Value) -> Result<PathBuf, ConfigError> {
    let s = ctx.string(f, path, v)?;
    if !s.starts_with('/') {
        return Err(ctx.error(
            f,
            path,
            format!("= \"{s}\" is not an absolute path (e.g. \"/sys/fs/cgroup/app.slice\")"),
        ));
    }
    if s.split('/').any(|c| c == "..") {
        return Err(ctx.error(f, path, format!("= \"{s}\" must not contain \"..\"")));
    }
    Ok(PathBuf::from(s))
}

/// A command is a non-empty array of strings whose first (the program) is not empty.
fn command(ctx: &Ctx, f: &Field, path: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    let Value::Array(words) = v else {
        return Err(ctx.error(
            f,
            path,
            format!(
                "= {} must be an array of strings, program first (e.g. [\"rt-app\", \"a.json\"])",
                crate::convert::show(v)
            ),
        ));
    };
    if words.is_empty() {
        return Err(ctx.error(f, path, "is an empty command".into()));
    }
    let mut argv = Vec::with_capacity(words.len());
    for (j, w) in words.iter().enumerate() {
        argv.push(ctx.string(f, &format!("{path}[{j}]"), w)?.to_string());
    }
    if argv[0].is_empty() {
        return Err(ctx.error(f, &format!("{path}[0]"), "is an empty program name".into()));
    }
    Ok(argv)
}

/// A container name or id as Podman and Docker accept them: a letter or digit, then letters,
/// digits, `_`, `.` or `-`.
fn container(ctx: &Ctx, f: &Field, path: &str, v: &Value) -> Result<String, ConfigError> {
    let s = ctx.string(f, path, v)?;
    let mut chars = s.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !ok {
        return Err(ctx.error(
            f,
            path,
            format!(
                "= \"{s}\" is not a container name or id (a letter or digit, then letters, \
                 digits, '_', '.' or '-')"
            ),
        ));
    }
    Ok(s.to_string())
}

/// A process name as the kernel keeps it: 1 to 15 bytes, no '/'.
fn comm(ctx: &Ctx, f: &Field, path: &str, v: &Value) -> Result<String, ConfigError> {
    let s = ctx.string(f, path, v)?;
    if s.is_empty() || s.len() > COMM_MAX {
        return Err(ctx.error(
            f,
            path,
            format!(
                "= \"{s}\" is not a process name (1 to {COMM_MAX} bytes, as in /proc/PID/comm)"
            ),
        ));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    //! Issue 5: a config file names what goes into each box; bad member lists are refused with
    //! the line, the box and the field.
    use super::UserRef;
    use crate::{parse_str, parse_str_with_members};

    const HEAD: &str = "[platform]\ncpus = 2\n\n[[box]]\nname = \"audio\"\ninterface.per_cpu = { budget = \"10ms\", period = \"100ms\" }\n";

    fn with(members: &str) -> String {
        format!("{HEAD}members = {members}\n")
    }

    fn err(members: &str) -> String {
        parse_str_with_members(&with(members))
            .expect_err("should be refused")
            .to_string()
    }

    #[test]
    fn all_four_kinds_parse_in_order() {
        let c = parse_str_with_members(&with(
            r#"{ pids = [1234, 7], cgroups = ["/sys/fs/cgroup/system.slice/foo.service"], commands = [["rt-app", "/etc/rt-app/audio.json"], ["sleep", "1"]], comms = ["jackd"] }"#,
        ))
        .unwrap();
        assert_eq!(c.members.len(), 1);
        let b = &c.members[0];
        assert_eq!(b.box_name, "audio");
        assert_eq!(b.line, 7);
        assert_eq!(b.members.pids, vec![1234, 7]);
        assert_eq!(
            b.members.cgroups,
            vec![std::path::PathBuf::from(
                "/sys/fs/cgroup/system.slice/foo.service"
            )]
        );
        assert_eq!(
            b.members.commands[0],
            vec!["rt-app", "/etc/rt-app/audio.json"]
        );
        assert_eq!(b.members.commands[1], vec!["sleep", "1"]);
        assert_eq!(b.members.comms, vec!["jackd"]);
        assert_eq!(c.system.boxes().len(), 1);
    }

    #[test]
    fn users_are_ids_or_names_and_bad_ones_are_named() {
        // Issue 5 (security): which users may put their processes into a box.
        let text = format!("{HEAD}users = [1000, \"alice\"]\n");
        let c = parse_str_with_members(&text).unwrap();
        assert_eq!(c.users.len(), 1);
        assert_eq!(c.users[0].box_name, "audio");
        assert_eq!(c.users[0].line, 7);
        assert_eq!(
            c.users[0].users,
            vec![UserRef::Uid(1000), UserRef::Name("alice".into())]
        );
        let e = |u: &str| {
            parse_str_with_members(&format!("{HEAD}users = {u}\n"))
                .expect_err("should be refused")
                .to_string()
        };
        assert!(
            e("[-1]").contains("users[0] = -1 is not a user id"),
            "{}",
            e("[-1]")
        );
        assert!(e("[1, \"a:b\"]").contains("users[1] = \"a:b\" is not a user name"));
        assert!(e("[1.5]").contains("users[0]"));
        assert!(
            e("1000").contains("users = 1000 must be an array"),
            "{}",
            e("1000")
        );
    }

    #[test]
    fn members_are_optional_and_dropped_by_parse_str() {
        let c = parse_str_with_members(HEAD).unwrap();
        assert!(c.members.is_empty());
        let s = parse_str(&with("{ pids = [42] }")).unwrap();
        assert_eq!(s.boxes().len(), 1);
        let c = parse_str_with_members(&with("{}")).unwrap();
        assert!(c.members[0].members.is_empty());
    }

    #[test]
    fn table_form_with_line_of_the_list() {
        let text = format!("{HEAD}\n[box.members]\ncgroups = [\"/sys/fs/cgroup/a\"]\npids = [5]\n");
        let c = parse_str_with_members(&text).unwrap();
        assert_eq!(c.members[0].members.pids, vec![5]);
        assert_eq!(c.members[0].line, 9);
    }

    #[test]
    fn unknown_key_is_refused_with_its_line() {
        let e = err("{ pid = [1] }");
        assert!(e.starts_with("line 7: "), "{e}");
        assert!(e.contains("unknown field \"pid\""), "{e}");
        assert!(e.contains("pids"), "{e}");
    }

    #[test]
    fn pid_zero_negative_and_wrong_types() {
        assert_eq!(
            err("{ pids = [12, 0] }"),
            "line 7: box \"audio\": members.pids[1] = 0 is not a process id (1..=2147483647)"
        );
        assert!(err("{ pids = [-3] }").contains("members.pids[0] = -3 is not a process id"));
        assert!(err("{ pids = [4294967296] }").contains("is not a process id"));
        assert_eq!(
            err("{ pids = [\"12\"] }"),
            "line 7: box \"audio\": members.pids[0] = \"12\" is not a process id (a whole number)"
        );
        assert!(err("{ pids = 12 }").contains("members.pids = 12 must be an array of process ids"));
    }

    #[test]
    fn cgroups_must_be_absolute_strings() {
        assert_eq!(
            err("{ cgroups = [\"system.slice/foo\"] }"),
            "line 7: box \"audio\": members.cgroups[0] = \"system.slice/foo\" is not an absolute path (e.g. \"/sys/fs/cgroup/app.slice\")"
        );
        assert!(
            err("{ cgroups = [\"/sys/fs/cgroup/../etc\"] }").contains("must not contain \"..\"")
        );
        assert!(err("{ cgroups = [3] }").contains("members.cgroups[0] = 3 is not a string"));
        assert!(err("{ cgroups = \"/a\" }").contains("must be an array of absolute cgroup"));
    }

    #[test]
    fn commands_must_be_non_empty_argv() {
        assert_eq!(
            err("{ commands = [[]] }"),
            "line 7: box \"audio\": members.commands[0] is an empty command"
        );
        assert!(err("{ commands = [[\"\"]] }")
            .contains("members.commands[0][0] is an empty program name"));
        assert!(err("{ commands = [\"rt-app a.json\"] }")
            .contains("members.commands[0] = \"rt-app a.json\" must be an array of strings"));
        assert!(err("{ commands = [[\"x\", 1]] }")
            .contains("members.commands[0][1] = 1 is not a string"));
        assert!(err("{ commands = [[\"x\\u0000\"]] }").contains("contains a NUL byte"));
    }

    #[test]
    fn containers_are_names_or_ids_once() {
        assert!(err("{ containers = [\"web app\"] }").contains(
            "members.containers[0] = \"web app\" is not a container name or id (a letter or digit"
        ));
        assert!(err("{ containers = [\"-x\"] }").contains("is not a container name or id"));
        assert!(err("{ containers = [7] }").contains("members.containers[0] = 7 is not a string"));
        assert!(err("{ containers = \"web\" }")
            .contains("members.containers = \"web\" must be an array of container names or ids"));
        let text = format!(
            "{HEAD}members = {{ containers = [\"web\", \"3f2a9c\"] }}\n\n[[box]]\nname = \"video\"\ninterface.per_cpu = \"10000 100000\"\nmembers = {{ containers = [\"web\"] }}\n"
        );
        let e = crate::parse_str_with_members(&text)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("members.containers[0] = \"web\" is already a member of box \"audio\""),
            "{e}"
        );
    }

    #[test]
    fn comms_are_kernel_names() {
        assert!(err("{ comms = [\"\"] }").contains("members.comms[0] = \"\" is not a process name"));
        assert!(err("{ comms = [\"a-very-long-process-name\"] }").contains("1 to 15 bytes"));
    }

    #[test]
    fn a_pid_or_cgroup_belongs_to_one_box() {
        let text = format!(
            "{HEAD}members = {{ pids = [9], cgroups = [\"/sys/fs/cgroup/x\"] }}\n\n[[box]]\nname = \"video\"\ninterface.per_cpu = \"10000 100000\"\nmembers = {{ cgroups = [\"/sys/fs/cgroup/y\"], pids = [8, 9] }}\n"
        );
        let e = parse_str_with_members(&text).unwrap_err().to_string();
        assert_eq!(
            e,
            "line 12: box \"video\": members.pids[1] = 9 is already a member of box \"audio\""
        );
        let text = text.replace("[8, 9]", "[8]").replace("/y", "/x");
        let e = parse_str_with_members(&text).unwrap_err().to_string();
        assert!(
            e.contains(
                "members.cgroups[0] = \"/sys/fs/cgroup/x\" is already a member of box \"audio\""
            ),
            "{e}"
        );
    }

    #[test]
    fn box_errors_come_before_member_errors() {
        let text = with("{ pids = [0] }").replace("10ms", "10xs");
        let e = parse_str_with_members(&text).unwrap_err().to_string();
        assert!(e.contains("interface.per_cpu.budget"), "{e}");
    }
}
