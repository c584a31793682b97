//! The client side of the socket protocol (used by the `rtbox` CLI).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::protocol::Request;

/// Why a request did not get an answer.
#[derive(Debug)]
pub enum ClientError {
    Connect(String, std::io::Error),
    Io(std::io::Error),
    BadReply(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connect(p, e) => {
                write!(
                    f,
                    "cannot reach the rtbox daemon at {p}: {e} (is `rtbox daemon` running?)"
                )
            }
            ClientError::Io(e) => write!(f, "socket: {e}"),
            ClientError::BadReply(s) => write!(f, "unexpected reply from the daemon: {s}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Send one request and return the reply object (`ok` tells success).
pub fn request(socket: &Path, req: &Request) -> Result<serde_json::Value, ClientError> {
    let line = serde_json::to_string(req).map_err(|e| ClientError::BadReply(e.to_string()))?;
    request_line(socket, &line)
}

/// Send one raw line (for tests of malformed input).
pub fn request_line(socket: &Path, line: &str) -> Result<serde_json::Value, ClientError> {
    let mut s = UnixStream::connect(socket)
        .map_err(|e| ClientError::Connect(socket.display().to_string(), e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(ClientError::Io)?;
    s.write_all(line.as_bytes()).map_err(ClientError::Io)?;
    s.write_all(b"\n").map_err(ClientError::Io)?;
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply).map_err(ClientError::Io)?;
    serde_json::from_str(&reply).map_err(|_| ClientError::BadReply(reply))
}
