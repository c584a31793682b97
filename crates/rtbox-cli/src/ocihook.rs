//! `rtbox oci-hook`: run by the container runtime (runc, crun) as an OCI hook, the
//! container's state JSON on stdin (contrib/oci/hooks.d/rtbox.json installs it for Podman and
//! CRI-O). At createRuntime the container joins the box its `io.rtbox.*` annotations name
//! before its first instruction runs; at poststop it is released. docs/containers.md.
//!
//! Joining fails closed: a container that asked for a reservation and cannot have one (no
//! daemon, bad annotation, refused by admission) does not start, with the reason on stderr,
//! which the runtime passes on. Releasing never fails the container's teardown: a daemon that
//! is gone released everything when it stopped.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use rtbox_daemon::client::{request, ClientError};
use rtbox_daemon::ocihook::{self, HookAction, JoinTarget};
use rtbox_daemon::protocol::Request;
use rtbox_daemon::DEFAULT_SOCKET;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("rtbox oci-hook: cannot read the OCI state on stdin: {e}");
        return ExitCode::from(2);
    }
    let action = match ocihook::parse_state(&text).and_then(|s| ocihook::plan(&s)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rtbox oci-hook: {e}");
            return ExitCode::from(2);
        }
    };
    match action {
        HookAction::Nothing => ExitCode::SUCCESS,
        HookAction::Join {
            id,
            name,
            pid,
            target,
        } => {
            let (box_name, create) = match target {
                JoinTarget::Box(b) => (Some(b), None),
                JoinTarget::Create(c) => (None, Some(*c)),
            };
            let req = Request::ContainerJoin {
                id: id.clone(),
                name,
                pid,
                box_name,
                create,
            };
            match request(&args.socket, &req) {
                Ok(v) if v["ok"] == true => ExitCode::SUCCESS,
                Ok(v) => {
                    let e = v["error"].as_str().unwrap_or("unknown error");
                    eprintln!("rtbox oci-hook: container {id} cannot join its box: {e}");
                    ExitCode::from(if e.starts_with("refused") { 1 } else { 2 })
                }
                Err(e) => {
                    eprintln!("rtbox oci-hook: container {id} cannot join its box: {e}");
                    ExitCode::from(2)
                }
            }
        }
        HookAction::Leave { id } => {
            match request(&args.socket, &Request::ContainerLeave { id: id.clone() }) {
                Ok(v) if v["ok"] == true => ExitCode::SUCCESS,
                Ok(v) => {
                    let e = v["error"].as_str().unwrap_or("unknown error");
                    eprintln!("rtbox oci-hook: container {id}: release failed: {e}");
                    ExitCode::from(1)
                }
                // No daemon: it released every member when it stopped; nothing is held.
                Err(ClientError::Connect(..)) => {
                    eprintln!("rtbox oci-hook: container {id}: no daemon to release it from (nothing held)");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rtbox oci-hook: container {id}: release failed: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
