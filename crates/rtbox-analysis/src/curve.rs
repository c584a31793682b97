//! A box's supply bound function next to its tasks' demand, as numbers (`rtbox analyze --sbf`):
//! researchers plot sbf against dbf.

use rtbox_model::Nanos;

use crate::demand::dbf_total;
use crate::supply::{Supply, Work};
use crate::system::Reservation;
use crate::task::Task;

/// Most points returned; beyond it the curve is sampled on an even grid plus its corners.
const MAX_POINTS: usize = 5_000;

/// One sample: window length, least supply, total demand bound (EDF dbf with jitter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurvePoint {
    pub t: Nanos,
    pub sbf: Work,
    pub dbf: Work,
}

impl Reservation {
    /// The reservation as one supply (BDM: Y_m; servers: their summed bound).
    pub fn supply(&self) -> &dyn Supply {
        match self {
            Reservation::Bdm(b) => b,
            Reservation::Mpr(m) => m,
            Reservation::Servers(s) => s,
        }
    }
}

/// A default horizon: four times the longest task or server period.
pub fn default_until(reservation: &Reservation, tasks: &[Task]) -> Nanos {
    let server = reservation
        .vcpus()
        .iter()
        .map(|p| p.period)
        .max()
        .unwrap_or(0);
    let task = tasks
        .iter()
        .map(|t| t.period.max(t.deadline))
        .max()
        .unwrap_or(0);
    4 * server.max(task).max(1)
}

/// sbf and dbf at 0, `until`, the supply's corners and the demand's steps (each step as the
/// two integers around it, so straight lines between points draw both exactly); with more than
/// 5,000 such points, an even grid of 2,000 plus the supply's corners up to the cap.
pub fn supply_and_demand(
    reservation: &Reservation,
    tasks: &[Task],
    until: Nanos,
) -> Vec<CurvePoint> {
    let supply = reservation.supply();
    let mut pts = vec![0, until];
    let mut exact = supply.corners(0, until, &mut pts);
    for t in tasks {
        let Some(first) = t.deadline.checked_sub(t.jitter) else {
            continue;
        };
        let mut x = first;
        while x <= until && pts.len() <= MAX_POINTS {
            pts.extend([x.saturating_sub(1), x]);
            x = x.saturating_add(t.period.max(1));
        }
        exact &= x > until;
    }
    if !exact || pts.len() > MAX_POINTS {
        pts.truncate(MAX_POINTS / 2);
        pts.extend((0..=2_000u64).map(|i| (u128::from(until) * u128::from(i) / 2_000) as Nanos));
    }
    pts.retain(|&t| t <= until);
    pts.sort_unstable();
    pts.dedup();
    pts.into_iter()
        .map(|t| CurvePoint {
            t,
            sbf: supply.sbf(t),
            dbf: dbf_total(tasks, t),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::{Prm, ServerSet};

    #[test]
    fn points_cover_corners_and_steps_with_exact_values() {
        let r = Reservation::Servers(ServerSet::new(vec![Prm::new(10, 4)]));
        let tasks = [Task::new(2, 15)];
        let c = supply_and_demand(&r, &tasks, 40);
        assert_eq!(c.first().map(|p| p.t), Some(0));
        assert_eq!(c.last().map(|p| p.t), Some(40));
        // PRM(10, 4): blackout 12, then slope 1 up to 16; dbf steps by 2 at 15 and 30.
        let at = |t| *c.iter().find(|p| p.t == t).unwrap();
        assert_eq!((at(12).sbf, at(16).sbf, at(22).sbf), (0, 4, 4));
        assert_eq!((at(14).dbf, at(15).dbf, at(30).dbf), (0, 2, 4));
        assert!(c
            .windows(2)
            .all(|w| w[0].t < w[1].t && w[0].sbf <= w[1].sbf));
        assert_eq!(default_until(&r, &tasks), 60);
    }
}
