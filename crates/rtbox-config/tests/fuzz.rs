//! No input makes the parser panic: random bytes, and random mutations of the example files
//! (issue 2, "Bad input").

use proptest::prelude::*;

fn examples() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("examples/ exists") {
        let path = entry.expect("readable dir").path();
        if path.extension().is_some_and(|e| e == "toml") {
            out.push(std::fs::read_to_string(&path).expect("readable example"));
        }
    }
    assert!(out.len() >= 6, "expected the example configurations");
    out
}

/// One edit: delete, duplicate or replace a byte range, or splice in a token.
fn mutate(text: &str, edits: &[(u8, usize, usize, usize)]) -> String {
    const TOKENS: &[&str] = &[
        "\"",
        "=",
        "[",
        "]",
        "{",
        "}",
        ",",
        "-",
        "0",
        "1.2",
        "-1",
        "\"0ms\"",
        "1e400",
        "ms",
        "/",
        "\n",
        "[[box]]",
        "[[task]]",
        "interface.",
        "alpha",
        "\"x\"",
        "nan",
        "inf",
        "99999999999999999999",
    ];
    let mut bytes = text.as_bytes().to_vec();
    for &(kind, a, b, t) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = a % bytes.len();
        let j = (i + b % 16).min(bytes.len());
        match kind % 4 {
            0 => {
                bytes.drain(i..j);
            }
            1 => {
                let copy = bytes[i..j].to_vec();
                bytes.splice(i..i, copy);
            }
            2 => {
                bytes.splice(i..j, TOKENS[t % TOKENS.len()].bytes());
            }
            _ => bytes.insert(i, (t % 256) as u8),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = rtbox_config::parse_str(&text);
    }

    #[test]
    fn mutated_examples_never_panic(
        which in 0usize..64,
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<usize>()), 1..6),
    ) {
        let all = examples();
        let text = mutate(&all[which % all.len()], &edits);
        if let Err(e) = rtbox_config::parse_str(&text) {
            // Every refusal is a one-line message.
            prop_assert!(!e.to_string().is_empty());
        }
    }
}
