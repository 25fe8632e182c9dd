//! piperun's text lines (runtime/cli.py), so that a Rust host prints what piperun prints for
//! the same run: the diagnostics line (`loss=0.5 steps=1000`: the first eight labelled values, a
//! float as Python's `{:.4g}`, an integer as itself), the summary line, and how a bundle's GEMM
//! algorithms were chosen. Python's number
//! formats are rebuilt here from Rust's correctly rounded ones.

/// A diagnostic's value as piperun prints it: `{:.4g}` for a finite float, `nan`/`inf` for the
/// others, an integer buffer's value as an integer.
pub fn format_value(value: f64, integer: bool) -> String {
    if integer && value.is_finite() {
        return format!("{}", value as i64);
    }
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    general(value, 4)
}

/// Python's `format(value, ".{precision}g")` for a finite value.
fn general(value: f64, precision: usize) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let scientific = format!("{:.*e}", precision - 1, value); // "-1.235e5": rounded once, correctly
    let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    if exponent < -4 || exponent >= precision as i32 {
        return format!("{}e{}{:02}", trim_zeros(mantissa), if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    let decimals = (precision as i32 - 1 - exponent) as usize;
    trim_zeros(&format!("{value:.decimals$}")).to_string()
}

fn trim_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

/// Python's `repr(round(value, digits))`: the summary's steps per second and GPU time.
pub fn rounded(value: f64, digits: usize) -> String {
    let value: f64 = format!("{value:.digits$}").parse().expect("a formatted f64 parses");
    python_repr(value)
}

/// Python's `repr` of a float: the shortest digits that read back, an exponent from 1e16 on
/// and below 1e-4, and `.0` on an integral value.
fn python_repr(value: f64) -> String {
    if !value.is_finite() {
        return format_value(value, false);
    }
    let magnitude = value.abs();
    if value != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        let shortest = format!("{value:e}"); // "3.3333333333333332e16"
        let (mantissa, exponent) = shortest.split_once('e').expect("`{:e}` writes an exponent");
        let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
        return format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
    let text = format!("{value}");
    if text.contains('.') {
        text
    } else {
        format!("{text}.0")
    }
}

/// One labelled value: its label, value, and whether its buffer holds integers.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub label: String,
    pub value: f64,
    pub integer: bool,
}

/// The pipeline's diagnostics (`Pipeline::diagnostics`) typed by the plan: a label of an
/// integer buffer prints as an integer.
pub fn values(diagnostics: &[(String, f64)], plan: &crate::plan::PlanSummary) -> Vec<Value> {
    let labels = plan.diagnostic_labels();
    diagnostics
        .iter()
        .map(|(label, value)| Value {
            label: label.clone(),
            value: *value,
            integer: labels.iter().any(|(l, integer)| l == label && *integer),
        })
        .collect()
}

/// piperun's `_short`: the first eight values, `label=value`, separated by spaces.
pub fn short(values: &[Value]) -> String {
    values
        .iter()
        .take(8)
        .map(|v| format!("{}={}", v.label, format_value(v.value, v.integer)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// piperun's summary line for `steps` graph replays (or eager steps) that took `wall_s`
/// seconds on the host and `gpu_ms` between the first and last event.
pub fn summary(prog: &str, steps: u64, wall_s: f64, gpu_ms: f64, mode: &str) -> String {
    let per_s = if wall_s > 0.0 { rounded(steps as f64 / wall_s, 2) } else { "None".to_string() };
    let gpu_us = if steps > 0 { rounded(gpu_ms * 1000.0 / steps as f64, 3) } else { "None".to_string() };
    format!("{prog}: ran {steps} steps in {wall_s:.3} s: {per_s} steps/s, {gpu_us} us of GPU time per step ({mode})")
}

/// piperun's `GEMM algorithms: ...` (runtime/cli_reports.py `gemm_summary`): the nodes grouped
/// by how their algorithm was chosen, in order of first appearance: `stored (tune): all 14
/// nodes`, or `stored (tune): 12 of 14 nodes; heuristic: <why>: `a`, `b``.
pub fn gemm_summary(choices: &[crate::GemmChoice]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for choice in choices {
        match groups.iter_mut().find(|(why, _)| *why == choice.why) {
            Some((_, nodes)) => nodes.push(&choice.node),
            None => groups.push((&choice.why, vec![&choice.node])),
        }
    }
    let total = choices.len();
    let nodes = |names: &[&str]| {
        if names.len() == total && total > 1 {
            format!("all {total} nodes")
        } else if names.len() <= 3 {
            names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
        } else {
            format!("{} of {total} nodes", names.len())
        }
    };
    groups.iter().map(|(why, names)| format!("{why}: {}", nodes(names))).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_choices_group_as_piperun_groups_them() {
        // tests/test_gemm_algorithms.py's cases of `gemm_summary`
        let choice = |node: &str, stored: bool, why: &str| crate::GemmChoice {
            node: node.to_string(),
            stored,
            why: why.to_string(),
        };
        let stored: Vec<_> = (0..5).map(|i| choice(&format!("n{i}"), true, "stored (tune)")).collect();
        assert_eq!(gemm_summary(&stored), "stored (tune): all 5 nodes");
        assert_eq!(gemm_summary(&stored[..1]), "stored (tune): `n0`");
        let mut mixed = stored.clone();
        mixed.push(choice("m0", false, "heuristic: none"));
        mixed.push(choice("m1", false, "heuristic: none"));
        assert_eq!(gemm_summary(&mixed), "stored (tune): 5 of 7 nodes; heuristic: none: `m0`, `m1`");
    }

    #[test]
    fn floats_print_as_pythons_4g() {
        // (value, f"{value:.4g}") from CPython 3
        let cases = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (1000.0, "1000"),
            (10000.0, "1e+04"),
            (123456.0, "1.235e+05"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.23456, "1.235"),
            (-2.5e-7, "-2.5e-07"),
            (99995.0, "1e+05"),
            (9999.5, "1e+04"),
            (0.5, "0.5"),
            (1e100, "1e+100"),
            (-123.456, "-123.5"),
            (0.00012345, "0.0001234"),
            (1.0005, "1"),
        ];
        for (value, python) in cases {
            assert_eq!(format_value(value, false), python, "{value}");
        }
        assert_eq!(format_value(f64::NAN, false), "nan");
        assert_eq!(format_value(f64::NEG_INFINITY, true), "-inf");
    }

    #[test]
    fn integers_print_whole() {
        assert_eq!(format_value(123456.0, true), "123456");
        assert_eq!(format_value(-3.0, true), "-3");
    }

    #[test]
    fn rounding_matches_pythons_repr_of_round() {
        // (value, digits, repr(round(value, digits))) from CPython 3
        let cases = [
            (29411.764705, 2, "29411.76"),
            (29411.764705, 3, "29411.765"),
            (1000.0, 2, "1000.0"),
            (0.125, 2, "0.12"),
            (2.675, 2, "2.67"),
            (1e17 / 3.0, 2, "3.3333333333333332e+16"),
        ];
        for (value, digits, python) in cases {
            assert_eq!(rounded(value, digits), python, "{value} to {digits}");
        }
    }

    #[test]
    fn the_short_line_keeps_eight_values() {
        let values: Vec<Value> =
            (0..10).map(|i| Value { label: format!("d[{i}]"), value: i as f64 / 4.0, integer: i == 9 }).collect();
        assert_eq!(short(&values), "d[0]=0 d[1]=0.25 d[2]=0.5 d[3]=0.75 d[4]=1 d[5]=1.25 d[6]=1.5 d[7]=1.75");
    }

    #[test]
    fn values_are_typed_by_their_buffer() {
        let plan = crate::plan::PlanSummary::from_json(
            r#"{"pipe": "p.pipe", "buffers": [
            {"name": "diag", "dtype": "f32", "memory": "mapped", "shape": [1], "labels": ["loss"]},
            {"name": "n", "dtype": "i64", "memory": "mapped", "shape": [1], "labels": ["episodes"]}]}"#,
        )
        .unwrap();
        let typed = values(&[("loss".into(), 123456.0), ("episodes".into(), 123456.0)], &plan);
        assert_eq!(short(&typed), "loss=1.235e+05 episodes=123456");
    }

    #[test]
    fn the_summary_reads_as_piperuns() {
        assert_eq!(
            summary("piperun", 1000, 0.034, 34.0, "graph"),
            "piperun: ran 1000 steps in 0.034 s: 29411.76 steps/s, 34.0 us of GPU time per step (graph)"
        );
        assert_eq!(
            summary("piperun", 0, 0.0, 0.0, "graph"),
            "piperun: ran 0 steps in 0.000 s: None steps/s, None us of GPU time per step (graph)"
        );
    }
}
