//! Go `time.Duration` text: parsing (`time.ParseDuration`) and printing (`Duration.String`).
//!
//! Flux prints every duration in its conditions and events with Go's `Duration.String()`
//! (`5m0s`, `9m30s`, `1h0m0s`, `5m0.012s`, `500ms`), and the CRDs carry durations in the
//! `metav1.Duration` text form parsed by `time.ParseDuration` (`10m`, `1m30s`, `250ms`).
//! Source: Go standard library `time/time.go` (`Duration.String`, `ParseDuration`).

use std::time::Duration;

/// Formats `d` exactly like Go's `time.Duration.String()`.
///
/// Shapes: `0s`; below one second the largest unit among `ms`, `µs`, `ns` with a
/// fractional part (`1.5ms`); otherwise `[<h>h][<m>m]<s>[.<frac>]s` where hours and minutes
/// appear once a larger unit is present (`1h0m0s`, `5m0.012s`, `30s`).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (unit, div) = if nanos < 1_000 {
            ("ns", 1u128)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", frac(nanos, div));
    }
    let total_secs = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let h = total_secs / 3600;
    let m = (total_secs % 3600) / 60;
    let s = total_secs % 60;
    let secs = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    if h > 0 {
        format!("{h}h{m}m{secs}s")
    } else if m > 0 {
        format!("{m}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// `value / div` with the fractional digits Go prints (trailing zeros trimmed).
fn frac(value: u128, div: u128) -> String {
    let int = value / div;
    let rem = value % div;
    if rem == 0 {
        return int.to_string();
    }
    let width = div.ilog10() as usize;
    let digits = format!("{rem:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

/// Parses a Go duration string (`time.ParseDuration`): a sequence of decimal numbers with
/// optional fraction and a unit among `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (`1h30m`,
/// `2.5s`, `0`). Negative durations are rejected.
///
/// Errors: a message naming the input, like Go's `time: invalid duration "x"`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let err = || format!("time: invalid duration \"{s}\"");
    let mut rest = s.trim();
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return Err(err());
    }
    rest = rest.strip_prefix('+').unwrap_or(rest);
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_end == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| err())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let mult = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * mult;
    }
    Ok(Duration::from_nanos((total * 1e9).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_go() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(570)), "9m30s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_millis(300_012)), "5m0.012s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(go_duration(Duration::from_nanos(12)), "12ns");
    }

    #[test]
    fn parses_like_go() {
        assert_eq!(parse_go_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_go_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse_go_duration("2.5s").unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("abc").is_err());
        assert!(parse_go_duration("-1s").is_err());
    }
}
