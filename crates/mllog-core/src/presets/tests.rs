//! [`Preset::with_hyperparameter`]: one record replaced in place, unvalidated, all else kept.

use super::{Llama2_70bLora, Preset, PresetError};
use crate::compliance::Ruleset;
use crate::keys::Benchmark;
use crate::record::Value;
use crate::submission::Division;

fn lora() -> Preset {
    Llama2_70bLora::default()
        .preset(Division::Closed, Ruleset::V6_1_0)
        .expect("the default preset builds")
}

#[test]
fn a_replaced_hyperparameter_keeps_its_place_and_everything_else() {
    let before = lora();
    let at = before
        .hyperparameters()
        .iter()
        .position(|(k, _)| *k == "lora_rank")
        .expect("the closed preset logs lora_rank");
    assert_eq!(before.get("lora_rank"), Some(&Value::Int(16)));
    let after = before.clone().with_hyperparameter("lora_rank", 8).unwrap();
    assert_eq!(after.hyperparameters()[at], ("lora_rank", Value::Int(8)));
    assert_eq!(
        after.hyperparameters().len(),
        before.hyperparameters().len()
    );
    for (i, (a, b)) in after
        .hyperparameters()
        .iter()
        .zip(before.hyperparameters())
        .enumerate()
    {
        if i != at {
            assert_eq!(a, b);
        }
    }
    assert_eq!(
        (after.benchmark(), after.division(), after.ruleset()),
        (before.benchmark(), before.division(), before.ruleset())
    );
    assert_eq!(after.target(), before.target());
    assert_eq!(after.eval_schedule(), before.eval_schedule());
    assert_eq!(after.global_batch_size(), before.global_batch_size());
    // The same value back: the preset it was.
    assert_eq!(after.with_hyperparameter("lora_rank", 16).unwrap(), before);
}

#[test]
fn a_replaced_hyperparameter_is_not_validated() {
    // The value the validated way refuses in the closed division...
    let refused = Llama2_70bLora::default()
        .with_value("lora_rank", 8)
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap_err();
    assert!(
        matches!(&refused, PresetError::Invalid { key, .. } if *key == "lora_rank"),
        "{refused}"
    );
    // ...is logged as given.
    let p = lora().with_hyperparameter("lora_rank", 8).unwrap();
    assert_eq!(p.get("lora_rank"), Some(&Value::Int(8)));
}

#[test]
fn a_key_the_preset_does_not_log_is_an_error_naming_its_keys() {
    let p = lora();
    let keys: Vec<&str> = p.hyperparameters().iter().map(|(k, _)| *k).collect();
    let err = p.with_hyperparameter("lora_rnak", 8).unwrap_err();
    match &err {
        PresetError::UnknownKey {
            key,
            benchmark,
            known,
        } => {
            assert_eq!(key, "lora_rnak");
            assert_eq!(*benchmark, Benchmark::Llama2_70bLora);
            assert_eq!(*known, keys);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("lora_rank"), "{err}");
}
