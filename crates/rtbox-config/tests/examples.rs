//! The example configurations load, and the seed-000 control string round-trips through the
//! model (issue 2 acceptance).

use rtbox_model::{format_control_string, Interface, ServerSpec};

fn load(name: &str) -> rtbox_model::System {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    rtbox_config::load_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn control_string_round_trips_through_a_config() {
    let s = load("oxc-control.toml");
    let cg = s.get("cg").expect("box cg");
    assert!(matches!(cg.spec.interface, Interface::Servers(_)));
    let specs: Vec<ServerSpec> = cg
        .servers
        .iter()
        .map(|v| ServerSpec {
            cpu: v.cpu,
            budget: v.budget,
            period: v.period,
        })
        .collect();
    assert_eq!(
        format_control_string(&specs),
        "0 100000/1000000 1 20000/500000"
    );
    let child = s.get("cg/cg_0").expect("child box");
    assert_eq!(child.parent.as_deref(), Some("cg"));
}

#[test]
fn bdm_validation_has_the_seed_tables() {
    let s = load("bdm-validation.toml");
    assert_eq!(s.boxes().len(), 2);
    assert_eq!(s.tasks_of("Y1").count(), 3);
    assert_eq!(s.tasks_of("Y2").count(), 2);
    assert_eq!(s.tasks.iter().filter(|t| t.box_name.is_none()).count(), 3);
    let tau2 = s.tasks.iter().find(|t| t.name == "tau2").unwrap();
    assert_eq!(
        (tau2.wcet, tau2.deadline, tau2.period, tau2.priority),
        (140_000_000, 270_000_000, 270_000_000, Some(12))
    );
}

#[test]
fn jack_pipeline_is_a_chain() {
    let s = load("jack-pipeline.toml");
    let c2 = s.tasks.iter().find(|t| t.name == "client2").unwrap();
    assert_eq!(c2.after.as_deref(), Some("client1"));
    assert_eq!(c2.period, 2_902_500);
    let jack = s.get("jack").unwrap();
    assert_eq!(
        (jack.servers[0].budget, jack.servers[0].period),
        (638_050, 2_902_500)
    );
}
