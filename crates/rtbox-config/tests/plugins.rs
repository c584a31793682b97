//! A box's `plugin` field (seed 001 plug-ins): accepted names, the placement it implies, and
//! precise errors for names, policies and placements that cannot run it.

use rtbox_config::parse_str;
use rtbox_model::{Placement, PluginKind};

const PLATFORM: &str = "[platform]\ncpus = 2\n";
const BOX: &str = "[[box]]\nname = \"g\"\ninterface.per_cpu = \"9000 10000\"\n";

fn error_of(extra: &str) -> String {
    let text = format!("{PLATFORM}{BOX}{extra}");
    match parse_str(&text) {
        Ok(_) => panic!("accepted invalid input:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_builtin_name_parses_and_implies_its_placement() {
    for kind in PluginKind::ALL {
        let text = format!("{PLATFORM}{BOX}plugin = \"{}\"\n", kind.name());
        let sys = parse_str(&text).expect("valid plugin box");
        let b = &sys.get("g").expect("box g").spec;
        assert_eq!(b.plugin, Some(kind));
        assert_eq!(b.placement, kind.placement());
    }
    let sys = parse_str(&format!("{PLATFORM}{BOX}")).expect("plain box");
    assert_eq!(sys.get("g").expect("box g").spec.plugin, None);
}

#[test]
fn unknown_plugin_is_named_with_the_choices() {
    let msg = error_of("plugin = \"dm-pm\"\n");
    assert!(
        msg.contains(
            "line 6: box \"g\": plugin = \"dm-pm\" is not one of fp, fp-ff, fp-pm, g-fp, fp-us"
        ),
        "{msg}"
    );
}

#[test]
fn plugin_needs_fifo_policy() {
    let msg = error_of("plugin = \"fp-pm\"\npolicy = \"edf\"\n");
    assert!(
        msg.contains("box \"g\": policy = \"edf\" cannot run plugin \"fp-pm\""),
        "{msg}"
    );
    let ok = parse_str(&format!(
        "{PLATFORM}{BOX}plugin = \"fp-pm\"\npolicy = \"fifo\"\n"
    ));
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn explicit_placement_must_match_the_plugin() {
    let msg = error_of("plugin = \"fp-ff\"\nplacement = \"global\"\n");
    assert!(
        msg.contains("placement = \"global\" conflicts with plugin \"fp-ff\", which needs placement = \"pinned\""),
        "{msg}"
    );
    let msg = error_of("plugin = \"fp\"\nplacement = \"pinned\"\n");
    assert!(msg.contains("needs placement = \"global\""), "{msg}");
    let sys = parse_str(&format!(
        "{PLATFORM}{BOX}plugin = \"g-fp\"\nplacement = \"pinned\"\n"
    ))
    .expect("matching placement");
    assert_eq!(sys.get("g").unwrap().spec.placement, Placement::Pinned);
}
