//! Members at rest: asleep, placed, and unchanged since the step that last decided them. Such
//! a member costs the step nothing:
//! - its charge is nothing and its readiness stays: the BPF sensor marks every member whose
//!   figures it writes (`rtbox_bpf::Sensor::take_dirty`), and an unmarked one reads as before;
//!   with perf, a resting member is one whose switches are watched (`sensor::PerfClock`), and
//!   one not switched in since its watch was armed reads as before;
//! - its decision changes nothing: a placed member asleep keeps its state and the server it
//!   is charged to until it wakes (`Runtime::decide`, `keeps_server`). One charged to no
//!   server (a reclaim member asleep while its box was spent) is decided again when its box's
//!   live servers change, as the decision may then give it one.
//!
//! Its local priority still counts in its box's local ranks (kept here, over every member):
//! a sleeper left out of the ranks let lower members take its SCHED_FIFO priority (seed 002's
//! tau1 missed 27-61 of 500 jobs). Everything that changes members in other ways (joins,
//! leaves, drift, priorities, box changes, plug-ins) makes the table stale, and the next step
//! visits every member; debug builds check each shortcut against the full computation
//! (`check_rest`, `Members::check_resting_unchanged`).

use std::collections::{BTreeMap, BTreeSet};

use rtbox_core::ServerId;

/// Which members the step visits, and the rest's shared facts.
#[derive(Debug)]
pub struct Rest {
    /// Resting members, with the server each is charged to.
    resting: BTreeMap<i32, Option<ServerId>>,
    /// Resting members charged to no server, by box: the decision gives them a server when
    /// one of their box's becomes live, so they are decided again when the live ones change.
    unbound: BTreeMap<String, BTreeSet<i32>>,
    /// Members not at rest: with a fresh table, every member is here or in `resting`.
    active: BTreeSet<i32>,
    /// How many resting members are charged to each server (the backstop's plan lists such a
    /// server, with no ready member).
    servers: BTreeMap<ServerId, usize>,
    /// The next step visits every member (and rebuilds the table).
    stale: bool,
    /// Per box the distinct local priorities of all its members, highest first
    /// ([`super::bands::local_ranks`]), as of the last full visit.
    ranks: BTreeMap<String, Vec<u32>>,
    /// Per box its live servers (not throttled) at the last decision, in the box's order.
    live: BTreeMap<String, Vec<ServerId>>,
}

impl Default for Rest {
    fn default() -> Self {
        Rest {
            resting: BTreeMap::new(),
            unbound: BTreeMap::new(),
            active: BTreeSet::new(),
            servers: BTreeMap::new(),
            stale: true,
            ranks: BTreeMap::new(),
            live: BTreeMap::new(),
        }
    }
}

impl Rest {
    /// Members changed in a way the table does not follow: the next step visits all.
    pub fn stale(&mut self) {
        self.stale = true;
    }

    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// A full visit: every member of `tids` is active until the decision puts it to rest;
    /// `ranks` are the local ranks over all of them.
    pub fn reset(&mut self, tids: impl Iterator<Item = i32>, ranks: BTreeMap<String, Vec<u32>>) {
        self.resting.clear();
        self.unbound.clear();
        self.servers.clear();
        self.active = tids.collect();
        self.ranks = ranks;
        self.stale = false;
    }

    /// The local ranks of every box over every member, resting or not.
    pub fn ranks(&self) -> &BTreeMap<String, Vec<u32>> {
        &self.ranks
    }

    /// The members the step visits (with a fresh table).
    pub fn active(&self) -> &BTreeSet<i32> {
        &self.active
    }

    pub fn is_resting(&self, tid: i32) -> bool {
        self.resting.contains_key(&tid)
    }

    /// Puts `tid` of `box_name`, charged to `server`, to rest.
    pub fn rest(&mut self, tid: i32, box_name: &str, server: Option<ServerId>) {
        if !self.active.remove(&tid) {
            return;
        }
        self.resting.insert(tid, server);
        match server {
            Some(s) => *self.servers.entry(s).or_default() += 1,
            None => {
                if let Some(u) = self.unbound.get_mut(box_name) {
                    u.insert(tid);
                } else {
                    self.unbound
                        .insert(box_name.to_string(), BTreeSet::from([tid]));
                }
            }
        }
    }

    /// `tid` of `box_name` changed (woke, stopped, thawed): the step visits it again.
    pub fn stir(&mut self, tid: i32, box_name: &str) {
        let Some(server) = self.resting.remove(&tid) else {
            return;
        };
        match server {
            Some(s) => self.uncount(s),
            None => {
                if let Some(u) = self.unbound.get_mut(box_name) {
                    u.remove(&tid);
                }
            }
        }
        self.active.insert(tid);
    }

    fn uncount(&mut self, s: ServerId) {
        if let Some(n) = self.servers.get_mut(&s) {
            *n -= 1;
            if *n == 0 {
                self.servers.remove(&s);
            }
        }
    }

    /// Records `box_name`'s live servers now; when they changed since the last decision, its
    /// resting members charged to no server are visited again (the decision may give them
    /// one). Returns how many woke.
    /// Compared in place, stored in place: every throttle and replenishment of a global box
    /// changes them, and a new vector and name each time were a step's allocations.
    pub fn live_servers(
        &mut self,
        box_name: &str,
        live: impl Iterator<Item = ServerId> + Clone,
    ) -> usize {
        match self.live.get_mut(box_name) {
            Some(l) if l.iter().copied().eq(live.clone()) => return 0,
            Some(l) => {
                l.clear();
                l.extend(live);
            }
            None => {
                self.live.insert(box_name.to_string(), live.collect());
            }
        }
        let Some(unbound) = self.unbound.remove(box_name) else {
            return 0;
        };
        for tid in &unbound {
            self.resting.remove(tid);
            self.active.insert(*tid);
        }
        unbound.len()
    }

    /// The servers resting members are charged to.
    pub fn servers(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.servers.keys().copied()
    }

    /// Every resting member.
    pub fn resting(&self) -> impl Iterator<Item = i32> + '_ {
        self.resting.keys().copied()
    }

    /// Every resting member, in turn from `from` (the first at or after it, then around).
    pub fn resting_from(&self, from: i32) -> impl Iterator<Item = i32> + '_ {
        self.resting
            .range(from..)
            .chain(self.resting.range(..from))
            .map(|(t, _)| *t)
    }

    /// Members in the table (active and resting).
    pub fn len(&self) -> usize {
        self.active.len() + self.resting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resting_members_wake_when_stirred_and_unbound_ones_when_their_box_changes_servers() {
        let mut r = Rest::default();
        assert!(r.is_stale(), "a new table visits everyone");
        r.reset([1, 2, 3, 4].into_iter(), BTreeMap::new());
        assert!(!r.is_stale());
        r.live_servers("a", [ServerId(0), ServerId(1)].into_iter());
        r.live_servers("b", [ServerId(2)].into_iter());
        r.rest(1, "a", None);
        r.rest(2, "a", Some(ServerId(1)));
        r.rest(3, "b", Some(ServerId(2)));
        assert_eq!(r.active().iter().copied().collect::<Vec<_>>(), vec![4]);
        assert_eq!(
            r.servers().collect::<Vec<_>>(),
            vec![ServerId(1), ServerId(2)]
        );
        assert_eq!(r.len(), 4);
        r.stir(3, "b");
        assert!(r.active().contains(&3) && !r.is_resting(3));
        assert_eq!(r.servers().collect::<Vec<_>>(), vec![ServerId(1)]);
        assert_eq!(
            r.live_servers("a", [ServerId(0), ServerId(1)].into_iter()),
            0,
            "unchanged"
        );
        assert_eq!(
            r.live_servers("a", [ServerId(1)].into_iter()),
            1,
            "the unbound member wakes, the bound one rests on"
        );
        assert!(r.is_resting(2) && !r.is_resting(1));
        assert_eq!(r.resting().collect::<Vec<_>>(), vec![2]);
        r.stale();
        assert!(r.is_stale());
    }
}
