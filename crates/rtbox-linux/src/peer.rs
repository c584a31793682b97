//! Who is on the other end of a Unix socket.

use std::os::unix::net::UnixStream;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use crate::LinuxError;

/// The uid of the process that connected `s` (SO_PEERCRED, set by the kernel at connect).
pub fn peer_uid(s: &UnixStream) -> Result<u32, LinuxError> {
    getsockopt(s, PeerCredentials)
        .map(|c| c.uid())
        .map_err(|e| LinuxError::Syscall {
            op: "getsockopt(SO_PEERCRED)",
            tid: 0,
            errno: e as i32,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_pair_reports_our_own_uid() {
        let (a, _b) = UnixStream::pair().unwrap();
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert_eq!(peer_uid(&a).unwrap(), me);
    }
}
