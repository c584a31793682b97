//! Issue 4, scenario 4 (CI size): seed 004's JACK pipeline. One group reservation with
//! Q = sum C_i, P = D meets every deadline at about 22 %; per-thread deadline reservations
//! (Eq. 1) rescaled to the seed's 31 % miss, and need the full Eq. 1 bandwidth (about 66 %).
//! The full sweep is `experiments/jack-sweep.sh`.

use rtbox_sim::jack::{dl_bandwidth, dl_misses, dl_params, group_misses, sum_c, PERIOD};

const SECOND: u64 = 1_000_000_000;

fn system() -> rtbox_model::System {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/jack-pipeline.toml");
    rtbox_config::load_file(path).unwrap()
}

#[test]
fn issue4_scenario4_group_reservation_at_22_percent() {
    let s = system();
    assert_eq!(
        group_misses(&s, sum_c(), SECOND).unwrap(),
        0,
        "Q = sum C works"
    );
    assert!((sum_c() as f64 / PERIOD as f64 - 0.2198).abs() < 0.0005);
    assert!(
        group_misses(&s, PERIOD * 21 / 100, SECOND).unwrap() > 0,
        "21 % is too little with exact WCETs"
    );
}

#[test]
fn issue4_scenario4_per_thread_deadline_needs_clearly_more() {
    let s = system();
    // Rescaled so the three reservations add up to the seed's 31 %.
    let scale = 0.31 / dl_bandwidth(&dl_params(1.0));
    assert!((dl_bandwidth(&dl_params(scale)) - 0.31).abs() < 0.001);
    assert!(dl_misses(&s, scale, SECOND).unwrap() > 0);
    // Eq. 1 unscaled: n * sum C / D, about 66 %, works.
    let full = dl_bandwidth(&dl_params(1.0));
    assert!(
        (full - 3.0 * sum_c() as f64 / PERIOD as f64).abs() < 0.001,
        "{full}"
    );
    assert_eq!(dl_misses(&s, 1.0, SECOND).unwrap(), 0);
}
