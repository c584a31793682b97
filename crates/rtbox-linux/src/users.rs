//! User and group names to ids, from `/etc/passwd` and `/etc/group` (no NSS: the daemon and
//! the CLI accept numeric ids for accounts that live elsewhere, e.g. LDAP).

use std::path::Path;

use crate::LinuxError;

/// The id of `name` in a passwd- or group-format text (`name:x:ID:...`).
pub fn id_in(text: &str, name: &str) -> Option<u32> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.trim().parse().ok()
    })
}

/// A user given as a number or a name in `/etc/passwd`.
pub fn uid(user: &str) -> Result<u32, LinuxError> {
    lookup(user, "/etc/passwd", "user")
}

/// A group given as a number or a name in `/etc/group`.
pub fn gid(group: &str) -> Result<u32, LinuxError> {
    lookup(group, "/etc/group", "group")
}

fn lookup(who: &str, file: &str, what: &str) -> Result<u32, LinuxError> {
    if let Ok(n) = who.parse::<u32>() {
        return Ok(n);
    }
    let text = std::fs::read_to_string(file).map_err(|e| LinuxError::io(Path::new(file), e))?;
    id_in(&text, who).ok_or_else(|| {
        LinuxError::Invalid(format!(
            "{what} \"{who}\" is neither a number nor in {file}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_unknown_ones_do_not() {
        let text = "root:x:0:0:root:/root:/bin/bash\n# comment:x:5\nnobody:x:65534:65534::/:/usr/sbin/nologin\n";
        assert_eq!(id_in(text, "root"), Some(0));
        assert_eq!(id_in(text, "nobody"), Some(65534));
        assert_eq!(id_in(text, "nob"), None);
        assert_eq!(id_in(text, "# comment"), None);
        assert_eq!(uid("1000").unwrap(), 1000);
        assert_eq!(uid("root").unwrap(), 0);
        assert!(uid("no-such-user-rtbox")
            .unwrap_err()
            .to_string()
            .contains("no-such-user-rtbox"));
    }
}
