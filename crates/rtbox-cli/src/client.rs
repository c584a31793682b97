//! Shared plumbing of the daemon client subcommands: send a request, word the answer, pick the
//! exit code (0 ok, 1 refused, 2 invalid input or no daemon).

use std::path::Path;
use std::process::ExitCode;

use rtbox_daemon::client::request;
use rtbox_daemon::protocol::Request;

/// Send `req`; on success return the reply, else print why and give the exit code.
pub fn call(cmd: &str, socket: &Path, req: &Request) -> Result<serde_json::Value, ExitCode> {
    match request(socket, req) {
        Ok(v) if v["ok"] == true => Ok(v),
        Ok(v) => {
            let e = v["error"].as_str().unwrap_or("unknown error");
            eprintln!("rtbox {cmd}: {e}");
            Err(ExitCode::from(if e.starts_with("refused") { 1 } else { 2 }))
        }
        Err(e) => {
            eprintln!("rtbox {cmd}: {e}");
            Err(ExitCode::from(2))
        }
    }
}
