//! The host's CPUs. A config may describe another machine (`rtbox check` analyses it as
//! written), but the daemon enforces on this one: a box on a CPU the host does not have could
//! never run there, and the backstop thread for that CPU could not be placed. So admission
//! refuses any CPU outside the host's online set, naming the box, the CPU and the host's CPUs.

use rtbox_linux::LinuxError;
use rtbox_model::{BoxSpec, CpuSet, Interface, Platform, System};

/// A CPU the host does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownCpu {
    /// A box names it (its `cpus`, a server's `cpu`) or inherits it from the platform.
    Box {
        name: String,
        cpu: u32,
        host: CpuSet,
    },
    /// The platform's `cpus` names it.
    Platform { cpu: u32, host: CpuSet },
}

impl std::fmt::Display for UnknownCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnknownCpu::Box { name, cpu, host } => write!(
                f,
                "box \"{name}\": CPU {cpu} is not online on this host (online CPUs: {host})"
            ),
            UnknownCpu::Platform { cpu, host } => write!(
                f,
                "platform: cpus names CPU {cpu}, which is not online on this host (online CPUs: {host})"
            ),
        }
    }
}

impl std::error::Error for UnknownCpu {}

/// The CPUs online now (`/sys/devices/system/cpu/online`).
pub fn online() -> Result<CpuSet, LinuxError> {
    let text = rtbox_linux::sched::online_cpu_list()?;
    CpuSet::parse(&text).map_err(|e| LinuxError::Parse {
        path: rtbox_linux::sched::ONLINE_CPUS.into(),
        what: format!("the CPU list \"{text}\" ({e})"),
    })
}

/// Rule: every CPU a validated system's boxes use, and every platform CPU, is online.
/// Boxes are checked first so that the error names the box that would run there.
pub fn check_system(system: &System, host: &CpuSet) -> Result<(), UnknownCpu> {
    for b in system.boxes() {
        if let Some(cpu) = first_outside(b.cpus.iter(), host) {
            return Err(UnknownCpu::Box {
                name: b.name().to_string(),
                cpu,
                host: host.clone(),
            });
        }
    }
    check_platform(&system.platform, host)
}

/// Rule: every platform CPU is online.
pub fn check_platform(platform: &Platform, host: &CpuSet) -> Result<(), UnknownCpu> {
    match first_outside(platform.cpus.iter(), host) {
        Some(cpu) => Err(UnknownCpu::Platform {
            cpu,
            host: host.clone(),
        }),
        None => Ok(()),
    }
}

/// Rule: every CPU a box request names itself (`cpus`, explicit servers) is online; what it
/// inherits comes from the running platform, checked when the daemon started.
pub fn check_spec(spec: &BoxSpec, host: &CpuSet) -> Result<(), UnknownCpu> {
    let servers: Vec<u32> = match &spec.interface {
        Interface::Servers(s) => s.iter().map(|s| s.cpu).collect(),
        _ => Vec::new(),
    };
    let named = spec.cpus.iter().flat_map(|c| c.iter()).chain(servers);
    match first_outside(named, host) {
        Some(cpu) => Err(UnknownCpu::Box {
            name: spec.name.clone(),
            cpu,
            host: host.clone(),
        }),
        None => Ok(()),
    }
}

fn first_outside(cpus: impl Iterator<Item = u32>, host: &CpuSet) -> Option<u32> {
    cpus.into_iter().find(|&c| !host.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> System {
        rtbox_config::parse_str(text).expect("valid config")
    }

    #[test]
    fn a_box_on_a_missing_cpu_is_named_with_the_hosts_cpus() {
        let host = CpuSet::parse("0-1").unwrap();
        let sys = config(
            "[platform]\ncpus = 4\n[[box]]\nname = \"a\"\ncpus = \"0\"\ninterface = { per_cpu = { budget = \"1ms\", period = \"10ms\" } }\n[[box]]\nname = \"b\"\ncpus = \"1,3\"\ninterface = { per_cpu = { budget = \"1ms\", period = \"10ms\" } }\n",
        );
        let e = check_system(&sys, &host).unwrap_err();
        assert_eq!(
            e,
            UnknownCpu::Box {
                name: "b".into(),
                cpu: 3,
                host: host.clone()
            }
        );
        assert_eq!(
            e.to_string(),
            "box \"b\": CPU 3 is not online on this host (online CPUs: 0-1)"
        );
        // Boxes that stay on the host's CPUs still leave the platform's extra CPUs refused.
        let sys = config(
            "[platform]\ncpus = 4\n[[box]]\nname = \"a\"\ncpus = \"0\"\ninterface = { per_cpu = { budget = \"1ms\", period = \"10ms\" } }\n",
        );
        assert_eq!(
            check_system(&sys, &host).unwrap_err(),
            UnknownCpu::Platform {
                cpu: 2,
                host: host.clone()
            }
        );
        let sys = config("[platform]\ncpus = \"0-1\"\n[[box]]\nname = \"a\"\ninterface = { per_cpu = { budget = \"1ms\", period = \"10ms\" } }\n");
        assert_eq!(check_system(&sys, &host), Ok(()));
    }

    #[test]
    fn a_request_is_checked_on_the_cpus_it_names() {
        use rtbox_model::ServerSpec;
        let host = CpuSet::parse("0-1").unwrap();
        let mut spec = BoxSpec::new(
            "s",
            Interface::Servers(vec![ServerSpec {
                cpu: 5,
                budget: 1_000_000,
                period: 10_000_000,
            }]),
        );
        assert_eq!(
            check_spec(&spec, &host).unwrap_err(),
            UnknownCpu::Box {
                name: "s".into(),
                cpu: 5,
                host: host.clone()
            }
        );
        spec.interface = Interface::PerCpu {
            budget: 1_000_000,
            period: 10_000_000,
        };
        assert_eq!(check_spec(&spec, &host), Ok(()));
        spec.cpus = Some(CpuSet::parse("1-2").unwrap());
        assert!(matches!(
            check_spec(&spec, &host),
            Err(UnknownCpu::Box { cpu: 2, .. })
        ));
    }

    #[test]
    fn the_online_list_matches_the_online_count() {
        let host = online().expect("online CPUs");
        assert_eq!(host.len() as u32, rtbox_linux::sched::online_cpus());
    }
}
