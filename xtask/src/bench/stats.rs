//! Small statistics and number formatting for the benchmark tables.

/// Median (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `a / b`, formatted to two decimals; "-" when `b` is zero or either is NaN.
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 || a.is_nan() || b.is_nan() {
        "-".to_string()
    } else {
        format!("{:.2}", a / b)
    }
}

/// Every value with `decimals` decimals, space separated.
pub fn list(values: &[f64], decimals: usize) -> String {
    values
        .iter()
        .map(|v| format!("{v:.decimals$}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn ratio_guards_zero() {
        assert_eq!(ratio(1.0, 2.0), "0.50");
        assert_eq!(ratio(1.0, 0.0), "-");
    }
}
