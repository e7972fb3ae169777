//! Reading one sample out of a Prometheus text exposition, for tests that
//! check what a service counts.

/// The value of the sample whose name and labels are exactly `series`
/// (`name` or `name{label="value"}`, as the exposition writes it).
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split(' ').next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_exact_series() {
        let text = "# HELP x_total X\nx_total{reason=\"a\"} 3\nx_total{reason=\"ab\"} 5\nx 1.5\n";
        assert_eq!(sample(text, "x_total{reason=\"a\"}"), Some(3.0));
        assert_eq!(sample(text, "x_total{reason=\"ab\"}"), Some(5.0));
        assert_eq!(sample(text, "x"), Some(1.5));
        assert_eq!(sample(text, "x_total"), None);
    }
}
