//! Who besides root may use which box through the socket (issue 5, security).
//!
//! A user listed on a box may attach and detach its own processes (those it could signal) to
//! that box and to the boxes below it; creating, changing and deleting boxes, and attaching
//! cgroups, stay root's. The socket's group decides who may connect at all.

use std::collections::{BTreeMap, BTreeSet};

use rtbox_model::BoxSpec;

/// The users of each box that lists some.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    users: BTreeMap<String, BTreeSet<u32>>,
}

impl Access {
    /// Replaces the users of `box_name` (an empty list leaves the box to root).
    pub fn set(&mut self, box_name: &str, users: impl IntoIterator<Item = u32>) {
        let users: BTreeSet<u32> = users.into_iter().collect();
        if users.is_empty() {
            self.users.remove(box_name);
        } else {
            self.users.insert(box_name.to_string(), users);
        }
    }

    /// The users listed on `box_name` itself.
    pub fn users(&self, box_name: &str) -> Vec<u32> {
        self.users
            .get(box_name)
            .map(|u| u.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets boxes that no longer exist (a box created again later starts root-only).
    pub fn retain(&mut self, specs: &[BoxSpec]) {
        self.users
            .retain(|name, _| specs.iter().any(|b| &b.name == name));
    }

    /// Whether `uid` may put processes into `box_name`: root, or a user listed on the box or
    /// on one of its ancestors.
    pub fn may_use(&self, specs: &[BoxSpec], box_name: &str, uid: u32) -> bool {
        if uid == 0 {
            return true;
        }
        let mut name = Some(box_name);
        // The parent chain is acyclic (the model refuses cycles); the bound is a safeguard.
        for _ in 0..=specs.len() {
            let Some(n) = name else { return false };
            if self.users.get(n).is_some_and(|u| u.contains(&uid)) {
                return true;
            }
            name = specs
                .iter()
                .find(|b| b.name == n)
                .and_then(|b| b.parent.as_deref());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtbox_model::Interface;

    fn spec(name: &str, parent: Option<&str>) -> BoxSpec {
        let mut b = BoxSpec::new(name, Interface::Shared { weight: 1 });
        b.parent = parent.map(str::to_string);
        b
    }

    #[test]
    fn listed_users_reach_the_box_and_its_children_only() {
        let specs = vec![
            spec("media", None),
            spec("media/audio", Some("media")),
            spec("ctl", None),
        ];
        let mut a = Access::default();
        a.set("media", [1000]);
        a.set("ctl", [1001, 1002]);
        assert!(a.may_use(&specs, "media", 1000));
        assert!(a.may_use(&specs, "media/audio", 1000));
        assert!(!a.may_use(&specs, "ctl", 1000));
        assert!(!a.may_use(&specs, "media/audio", 1001));
        assert!(a.may_use(&specs, "ctl", 0), "root may use every box");
        assert!(!a.may_use(&specs, "nosuch", 1000));
        assert_eq!(a.users("ctl"), vec![1001, 1002]);
        a.set("ctl", []);
        assert!(!a.may_use(&specs, "ctl", 1001));
        a.retain(&specs[..1]);
        assert!(a.users("media").contains(&1000));
        a.retain(&[]);
        assert!(!a.may_use(&specs, "media", 1000));
    }
}
