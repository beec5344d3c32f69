//! Go `time.Duration` text: parse and format exactly like Go.
//!
//! Flux and Kubernetes print durations with Go's `time.Duration.String()` (`5m0s`, `9m30s`,
//! `1h2m3.5s`, `1.5ms`) and accept them with `time.ParseDuration` (`10m`, `1h30m`, `90s`,
//! `1.5h`). Source of the rules: Go `src/time/time.go` (`Duration.String`, `fmtFrac`,
//! `fmtInt`) and `src/time/format.go` (`ParseDuration`, `leadingInt`, `leadingFraction`).
//!
//! Why not `kube::core::Duration`: it parses with `f64` arithmetic (not nanosecond-exact,
//! and it accepts `5m0`, which Go rejects) and prints Rust's `Debug` form (`570s`), not Go's.

use std::fmt;
use std::str::FromStr;

/// A signed Go duration: whole nanoseconds in an `i64`, range ±292 years, as Go's
/// `time.Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub i64);

/// Error from [`GoDuration::from_str`]; the message quotes the input like Go
/// (`time: invalid duration "5x"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: {kind} \"{input}\"")]
pub struct ParseDurationError {
    kind: &'static str,
    input: String,
}

const NS: i64 = 1;
const US: i64 = 1_000 * NS;
const MS: i64 = 1_000 * US;
const SEC: i64 = 1_000 * MS;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;

impl GoDuration {
    /// Zero.
    pub const ZERO: GoDuration = GoDuration(0);

    /// From whole seconds.
    pub const fn from_secs(s: i64) -> Self {
        GoDuration(s * SEC)
    }

    /// Nanoseconds (may be negative).
    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// As a `std::time::Duration`; `None` when negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0)
            .ok()
            .map(std::time::Duration::from_nanos)
    }

    /// From a `std::time::Duration`, saturating at `i64::MAX` nanoseconds.
    pub fn from_std(d: std::time::Duration) -> Self {
        GoDuration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// Format a `std::time::Duration` as Go's `Duration.String()` (e.g. 570s -> `9m30s`).
pub fn format_go_duration(d: std::time::Duration) -> String {
    GoDuration::from_std(d).to_string()
}

/// Parse Go duration text (e.g. `10m`, `1h2m3.5s`) into a non-negative
/// `std::time::Duration`. Errors: invalid syntax, unknown unit, overflow, or a negative value.
pub fn parse_go_duration(s: &str) -> Result<std::time::Duration, ParseDurationError> {
    let d: GoDuration = s.parse()?;
    d.to_std().ok_or_else(|| ParseDurationError {
        kind: "negative duration",
        input: s.to_string(),
    })
}

/// [`parse_go_duration`] of a JSON value, for callers that read raw objects
/// (`serde_json::Value`), e.g. `status.history[0].lastReconciledDuration` of a Kustomization
/// (fluxcd/pkg apis/meta `History`: a `metav1.Duration`, serialized as Go duration text such as
/// `5m0.012s`). `None` when the value is absent (`Null`), not a string, or not a valid
/// non-negative Go duration.
pub fn from_json(v: &serde_json::Value) -> Option<std::time::Duration> {
    parse_go_duration(v.as_str()?).ok()
}

/// Writes digits of `v` into the front of `buf` end; Go's `fmtFrac`: the fraction of `v`
/// with `prec` digits, trailing zeros (and the dot) omitted.
fn fmt_frac(out: &mut Vec<u8>, mut v: u64, prec: u32) -> u64 {
    let mut print = false;
    for _ in 0..prec {
        let digit = v % 10;
        print = print || digit != 0;
        if print {
            out.push(b'0' + digit as u8);
        }
        v /= 10;
    }
    if print {
        out.push(b'.');
    }
    v
}

fn fmt_int(out: &mut Vec<u8>, mut v: u64) {
    if v == 0 {
        out.push(b'0');
    } else {
        while v > 0 {
            out.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
    }
}

impl fmt::Display for GoDuration {
    /// Go's `time.Duration.String()`: `0s`, `1ns`, `1.5µs`, `300ms`, `9m30s`, `1h0m0s`,
    /// `-1m30s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let neg = self.0 < 0;
        let mut u = self.0.unsigned_abs();
        // Built reversed, like Go's buffer filled from the end.
        let mut rev: Vec<u8> = Vec::with_capacity(32);
        if u < SEC as u64 {
            if u == 0 {
                return f.write_str("0s");
            }
            rev.push(b's');
            let prec = if u < US as u64 {
                rev.push(b'n');
                0
            } else if u < MS as u64 {
                // U+00B5 MICRO SIGN, UTF-8 0xC2 0xB5 (reversed)
                rev.push(0xB5);
                rev.push(0xC2);
                3
            } else {
                rev.push(b'm');
                6
            };
            u = fmt_frac(&mut rev, u, prec);
            fmt_int(&mut rev, u);
        } else {
            rev.push(b's');
            u = fmt_frac(&mut rev, u, 9);
            fmt_int(&mut rev, u % 60);
            u /= 60;
            if u > 0 {
                rev.push(b'm');
                fmt_int(&mut rev, u % 60);
                u /= 60;
                if u > 0 {
                    rev.push(b'h');
                    fmt_int(&mut rev, u);
                }
            }
        }
        if neg {
            rev.push(b'-');
        }
        rev.reverse();
        f.write_str(std::str::from_utf8(&rev).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for GoDuration {
    type Err = ParseDurationError;

    /// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, units `ns`, `us`/`µs`/`μs`,
    /// `ms`, `s`, `m`, `h`; `0` alone is allowed without unit. Fractions use Go's float
    /// scaling so results match Go to the nanosecond.
    fn from_str(orig: &str) -> Result<Self, Self::Err> {
        let err = |kind: &'static str| ParseDurationError {
            kind,
            input: orig.to_string(),
        };
        let mut s = orig.as_bytes();
        let mut neg = false;
        if let Some(&c) = s.first()
            && (c == b'-' || c == b'+')
        {
            neg = c == b'-';
            s = &s[1..];
        }
        if s == b"0" {
            return Ok(GoDuration(0));
        }
        if s.is_empty() {
            return Err(err("invalid duration"));
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            if !(s[0] == b'.' || s[0].is_ascii_digit()) {
                return Err(err("invalid duration"));
            }
            // leadingInt
            let pl = s.len();
            let mut v: u64 = 0;
            let mut i = 0;
            while i < s.len() && s[i].is_ascii_digit() {
                if v > (1u64 << 63) / 10 {
                    return Err(err("invalid duration"));
                }
                v = v * 10 + u64::from(s[i] - b'0');
                if v > 1u64 << 63 {
                    return Err(err("invalid duration"));
                }
                i += 1;
            }
            s = &s[i..];
            let pre = pl != s.len();
            // leadingFraction
            let mut post = false;
            let mut f: u64 = 0;
            let mut scale: f64 = 1.0;
            if !s.is_empty() && s[0] == b'.' {
                s = &s[1..];
                let pl = s.len();
                let mut overflow = false;
                let mut j = 0;
                while j < s.len() && s[j].is_ascii_digit() {
                    if !overflow {
                        if f > (i64::MAX as u64) / 10 {
                            overflow = true;
                        } else {
                            let y = f * 10 + u64::from(s[j] - b'0');
                            if y > 1u64 << 63 {
                                overflow = true;
                            } else {
                                f = y;
                                scale *= 10.0;
                            }
                        }
                    }
                    j += 1;
                }
                s = &s[j..];
                post = pl != s.len();
            }
            if !pre && !post {
                return Err(err("invalid duration"));
            }
            // unit
            let mut k = 0;
            while k < s.len() && s[k] != b'.' && !s[k].is_ascii_digit() {
                k += 1;
            }
            if k == 0 {
                return Err(err("missing unit in duration"));
            }
            // The unit ends at an ASCII '.' or digit, so this slice is valid UTF-8.
            let unit = match std::str::from_utf8(&s[..k]).unwrap_or("") {
                "ns" => NS,
                "us" | "\u{00b5}s" | "\u{03bc}s" => US,
                "ms" => MS,
                "s" => SEC,
                "m" => MIN,
                "h" => HOUR,
                _ => return Err(err("unknown unit in duration")),
            } as u64;
            s = &s[k..];
            if v > (1u64 << 63) / unit {
                return Err(err("invalid duration"));
            }
            v *= unit;
            if f > 0 {
                v += (f as f64 * (unit as f64 / scale)) as u64;
                if v > 1u64 << 63 {
                    return Err(err("invalid duration"));
                }
            }
            total = total
                .checked_add(v)
                .ok_or_else(|| err("invalid duration"))?;
            if total > 1u64 << 63 {
                return Err(err("invalid duration"));
            }
        }
        if neg {
            return Ok(GoDuration((total as i128).wrapping_neg() as i64));
        }
        if total > (1u64 << 63) - 1 {
            return Err(err("invalid duration"));
        }
        Ok(GoDuration(total as i64))
    }
}

impl serde::Serialize for GoDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for GoDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `HH:MM:SSZ` of a timestamp (UTC).
pub fn short_time(t: jiff::Timestamp) -> String {
    t.strftime("%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> i64 {
        s.parse::<GoDuration>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .0
    }

    #[test]
    fn from_json_reads_go_duration_strings_only() {
        use serde_json::json;
        let secs = |v: serde_json::Value| from_json(&v).map(|d| d.as_secs_f64());
        assert_eq!(secs(json!("5m0s")), Some(300.0));
        assert_eq!(secs(json!("9m30s")), Some(570.0));
        assert!((secs(json!("5m0.012s")).unwrap() - 300.012).abs() < 1e-9);
        // Go rejects a number without a unit (except 0), a negative value is no duration here
        assert_eq!(secs(json!("10")), None);
        assert_eq!(secs(json!("-1s")), None);
        assert_eq!(secs(json!(300)), None);
        assert_eq!(secs(json!(null)), None);
        // an absent field indexes as Null
        let history = json!({"lastReconciledDuration": "1.5s"});
        assert_eq!(
            from_json(&history["lastReconciledDuration"]).map(|d| d.as_millis()),
            Some(1500)
        );
        assert_eq!(from_json(&history["lastHandledReconcileAt"]), None);
    }

    #[test]
    fn format_like_go() {
        // Expected strings are Go's documented outputs (time_test.go durationTests).
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200 * US, "2.2ms"),
            (3_300 * MS, "3.3s"),
            (4 * MIN + 5 * SEC, "4m5s"),
            (4 * MIN + 5_001 * MS, "4m5.001s"),
            (5 * HOUR + 6 * MIN + 7_001 * MS, "5h6m7.001s"),
            (8 * MIN + 1, "8m0.000000001s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (5 * MIN, "5m0s"),
            (570 * SEC, "9m30s"),
            (HOUR, "1h0m0s"),
            (HOUR + 2 * MIN + 3_500 * MS, "1h2m3.5s"),
            (-90 * SEC, "-1m30s"),
            (300 * MS, "300ms"),
        ];
        for (ns, want) in cases {
            assert_eq!(GoDuration(*ns).to_string(), *want, "{ns}");
        }
    }

    #[test]
    fn parse_like_go() {
        // From Go's time_test.go parseDurationTests.
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * SEC),
            ("30s", 30 * SEC),
            ("1478s", 1478 * SEC),
            ("-5s", -5 * SEC),
            ("+5s", 5 * SEC),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * SEC),
            ("5.6s", 5 * SEC + 600 * MS),
            ("5.s", 5 * SEC),
            (".5s", 500 * MS),
            ("1.0s", SEC),
            ("1.00s", SEC),
            ("1.004s", SEC + 4 * MS),
            ("1.0040s", SEC + 4 * MS),
            ("100.00100s", 100 * SEC + MS),
            ("10ns", 10),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * SEC),
            ("15m", 15 * MIN),
            ("16h", 16 * HOUR),
            ("3h30m", 3 * HOUR + 30 * MIN),
            ("10.5s4m", 4 * MIN + 10 * SEC + 500 * MS),
            ("-2m3.4s", -(2 * MIN + 3 * SEC + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                HOUR + 2 * MIN + 3 * SEC + 4 * MS + 5 * US + 6,
            ),
            ("39h9m14.425s", 39 * HOUR + 9 * MIN + 14 * SEC + 425 * MS),
            ("52763797000ns", 52763797000),
            ("0.3333333333333333333h", 20 * MIN),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("0.100000000000000000000h", 6 * MIN),
            (
                "0.830103483285477580700h",
                49 * MIN + 48 * SEC + 372_539_827,
            ),
        ];
        for (s, want) in cases {
            assert_eq!(p(s), *want, "{s}");
        }
    }

    #[test]
    fn parse_rejects_like_go() {
        for s in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{85}\u{85}",
            "\u{FFFD}",
            "5m0",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "9223372036854ms775us808ns",
            "-9223372036854775809ns",
            "10 m",
        ] {
            assert!(s.parse::<GoDuration>().is_err(), "{s:?} should be rejected");
        }
        assert_eq!(
            "5x".parse::<GoDuration>().unwrap_err().to_string(),
            "time: unknown unit in duration \"5x\""
        );
        assert_eq!(
            "3".parse::<GoDuration>().unwrap_err().to_string(),
            "time: missing unit in duration \"3\""
        );
    }

    #[test]
    fn std_helpers() {
        assert_eq!(
            parse_go_duration("1m30s").unwrap(),
            std::time::Duration::from_secs(90)
        );
        assert!(parse_go_duration("-1s").is_err());
        assert_eq!(
            format_go_duration(std::time::Duration::from_millis(300_012)),
            "5m0.012s"
        );
    }
}
