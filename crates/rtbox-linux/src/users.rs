//! User and group names to ids through the system's name service (`getpwnam_r` /
//! `getgrnam_r`), so accounts from LDAP, SSSD or any NSS module resolve like local ones.

use nix::unistd::{Group, User};

use crate::error::NameKind;
use crate::LinuxError;

/// A user given as a number or a name the name service knows.
pub fn uid(user: &str) -> Result<u32, LinuxError> {
    if let Ok(n) = user.parse::<u32>() {
        return Ok(n);
    }
    match User::from_name(user) {
        Ok(Some(u)) => Ok(u.uid.as_raw()),
        Ok(None) => Err(unknown(NameKind::User, user)),
        Err(e) => Err(LinuxError::Syscall {
            op: "getpwnam_r",
            tid: 0,
            errno: e as i32,
        }),
    }
}

/// A group given as a number or a name the name service knows.
pub fn gid(group: &str) -> Result<u32, LinuxError> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(n);
    }
    match Group::from_name(group) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(unknown(NameKind::Group, group)),
        Err(e) => Err(LinuxError::Syscall {
            op: "getgrnam_r",
            tid: 0,
            errno: e as i32,
        }),
    }
}

fn unknown(kind: NameKind, name: &str) -> LinuxError {
    LinuxError::UnknownName {
        kind,
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_through_the_name_service_and_unknown_ones_do_not() {
        assert_eq!(uid("1000").unwrap(), 1000);
        assert_eq!(uid("root").unwrap(), 0);
        assert_eq!(gid("root").unwrap(), 0);
        // `nobody` exists on every Linux system we run on, with the overflow id.
        assert_eq!(uid("nobody").unwrap(), 65534);
        let e = uid("no-such-user-rtbox").unwrap_err();
        assert!(
            matches!(&e, LinuxError::UnknownName { kind: NameKind::User, name } if name == "no-such-user-rtbox"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "user \"no-such-user-rtbox\" is neither a number nor known to the system (getpwnam)"
        );
        let e = gid("no-such-group-rtbox").unwrap_err();
        assert!(matches!(
            e,
            LinuxError::UnknownName {
                kind: NameKind::Group,
                ..
            }
        ));
    }
}
