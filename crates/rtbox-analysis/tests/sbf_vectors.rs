//! Issue 3: every vector of `tests/data/sbf_vectors.json` (brute-force exact supply-bound values,
//! see `tests/data/README.md`) is checked here.

use std::path::PathBuf;

use rtbox_analysis::supply::{mpr_sbf, oracle, prm_sbf, Edp, Supply};
use serde_json::Value;

/// The vectors, kept in the repository beside this test.
fn vectors() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sbf_vectors.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("field {key} missing in {v}"))
}

fn series(v: &Value, key: &str) -> Vec<f64> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("series {key} missing"))
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

#[test]
fn mpr_vectors_closed_form_and_brute_force() {
    let all = vectors();
    let list = all["mpr"].as_array().expect("mpr list");
    assert!(
        list.len() >= 8,
        "expected the 8 MPR vectors, found {}",
        list.len()
    );
    for v in list {
        let (pi, theta, m) = (u(v, "Pi"), u(v, "Theta"), u(v, "m") as u32);
        let exact = series(v, "exact_discrete");
        let cont = series(v, "continuous");
        assert_eq!(exact.len(), cont.len());
        for (t, (&e, &c)) in exact.iter().zip(&cont).enumerate() {
            let t = t as u64;
            let ours = mpr_sbf(pi, theta, m, t);
            assert_eq!(
                ours as f64,
                c.floor(),
                "MPR({pi},{theta},{m}) closed form at t={t}"
            );
            assert!(
                ours as f64 <= e,
                "MPR({pi},{theta},{m}) above the exact value at t={t}"
            );
            assert_eq!(
                oracle::periodic(pi, theta, pi, u64::from(m), t) as f64,
                e,
                "MPR({pi},{theta},{m}) brute force at t={t}"
            );
        }
    }
}

#[test]
fn prm_vectors() {
    let all = vectors();
    let list = all["prm"].as_array().expect("prm list");
    assert!(list.len() >= 4);
    for v in list {
        let (pi, theta) = (u(v, "Pi"), u(v, "Theta"));
        for (t, &want) in series(v, "sbf").iter().enumerate() {
            let t = t as u64;
            assert_eq!(
                prm_sbf(pi, theta, t) as f64,
                want,
                "PRM({pi},{theta}) at t={t}"
            );
            assert_eq!(oracle::periodic(pi, theta, pi, 1, t) as f64, want);
        }
    }
}

#[test]
fn edp_vectors() {
    let all = vectors();
    let list = all["edp"].as_array().expect("edp list");
    assert!(list.len() >= 3);
    for v in list {
        let e = Edp {
            period: u(v, "Pi"),
            budget: u(v, "Theta"),
            deadline: u(v, "Delta"),
        };
        for (t, &want) in series(v, "sbf").iter().enumerate() {
            let t = t as u64;
            assert_eq!(e.sbf(t) as f64, want, "{} at t={t}", e.describe());
            assert_eq!(
                oracle::periodic(e.period, e.budget, e.deadline, 1, t) as f64,
                want
            );
        }
    }
}
